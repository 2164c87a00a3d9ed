# rfuse demo: plain R code and a small model, traced, fused, compiled and run; compared with base
# R for the answers and the time. Run by scripts/demo.sh (the README's main-job command).
suppressPackageStartupMessages(library(rfuse))
set.seed(42)
cat("rfuse demo - device:", rf_default_device(), "\n\n")

# Seconds per call, from a loop long enough for the clock's resolution.
time_it <- function(f, min_seconds = 0.2) {
  f() # warm up (and compile)
  reps <- 1
  repeat {
    t <- system.time(for (i in seq_len(reps)) f())[["elapsed"]]
    if (t >= min_seconds) return(t / reps)
    reps <- reps * 4
  }
}
report <- function(name, f, jf, args, dtype) {
  ref <- do.call(f, args); got <- do.call(jf, args)
  err <- sqrt(sum((got - ref)^2)) / sqrt(sum(ref^2))
  ex <- do.call(rf_explain, c(list(jf), args))
  cat(sprintf("== %s (%s)\n", name, dtype))
  cat(sprintf("   kernels after fusion: %d (cost model: %.0f bytes moved)\n", ex$kernel_count, ex$bytes_moved))
  cat(sprintf("   relative error vs base R: %.2e -> %s\n", err,
              if (err < if (dtype == "float64") 1e-12 else 1e-5) "answers match" else "MISMATCH"))
  tb <- time_it(function() do.call(f, args)); tj <- time_it(function() do.call(jf, args))
  cat(sprintf("   base R %.3f ms, rfuse %.3f ms on %s\n", 1e3 * tb, 1e3 * tj, rf_default_device()))
  if (rf_default_device() == "cpu")
    cat(sprintf("   CPU steps: %s\n", paste(ex$cpu_steps, collapse = "; ")))
  cat("\n")
  invisible(err)
}

# 1. An elementwise chain (the shape of workload W1).
chain <- function(x, a, b) pmax(x * a + b, 0) * (1 / (1 + exp(-x))) + tanh(b) * 0.5
n <- 2^12
x <- rnorm(n); a <- rnorm(n); b <- rnorm(n)
jchain <- rf_jit(chain, dtype = "float64")
report("elementwise chain", chain, jchain, list(x, a, b), "float64")

# 2. Row softmax, traced through a helper function of the user's.
softmax_rows <- function(z) { e <- exp(z - max(z)); e / rowSums(e) }
scores <- function(x, w) softmax_rows(x %*% w)
X <- matrix(rnorm(64 * 32), 64); W <- matrix(rnorm(32 * 10) / 4, 32)
jscores <- rf_jit(scores, dtype = "float64")
report("linear layer + row softmax", scores, jscores, list(X, W), "float64")
cat("   fused IR:\n")
cat(paste0("     ", strsplit(rf_explain(jscores, X, W)$fused, "\n")[[1]]), sep = "\n")
cat("\n")

# 3. A small MLP forward pass at rf_jit's default dtype (float64 on the CPU, float32 on a GPU):
#    layer norm + GELU-like tanh + residual.
mlp <- function(x, w1, b1, w2, b2) {
  h <- sweep(x %*% w1, 2, b1, "+")
  h <- sweep(h, 1, rowMeans(h), "-")
  h <- h / sqrt(rowMeans(h^2) + 1e-5)
  h <- 0.5 * h * (1 + tanh(0.7978845608 * (h + 0.044715 * h^3)))
  sweep(h %*% w2, 2, b2, "+") + x
}
X <- matrix(rnorm(128 * 16), 128)
w1 <- matrix(rnorm(16 * 32) / 4, 16); b1 <- rnorm(32) / 10
w2 <- matrix(rnorm(32 * 16) / 6, 32); b2 <- rnorm(16) / 10
jmlp <- rf_jit(mlp)
report("MLP block", mlp, jmlp, list(X, w1, b1, w2, b2), if (rf_default_device() == "cpu") "float64" else "float32")
ex <- rf_explain(jmlp, X, w1, b1, w2, b2)
cat("   kernels:", paste(sprintf("%s (%s)", ex$kernel_names, names(ex$kernel_names)), collapse = ", "), "\n")
cat("   library calls:", paste(ex$library_calls, collapse = "; "), "\n\n")

# 4. The seed CNN (CNN-2), torch-for-R style, traced whole; weights are inputs.
set.seed(3)
Net <- nn_module("CNN2",
  initialize = function() {
    self$conv1 <- nn_conv2d(1, 8, 3); self$conv2 <- nn_conv2d(8, 16, 3)
    self$fc <- nn_linear(400, 10)
  },
  forward = function(x) {
    x <- nnf_max_pool2d(nnf_relu(self$conv1(x)), 2)
    x <- nnf_max_pool2d(nnf_relu(self$conv2(x)), 2)
    self$fc(nnf_flatten(x))
  })
net <- Net(); net$eval()
imgs <- array(rnorm(16 * 28 * 28), c(16, 1, 28, 28))
jnet <- rf_jit(net, dtype = "float64")
err <- max(abs(jnet(imgs) - net(imgs))) / max(abs(net(imgs)))
ex <- rf_explain(jnet, imgs)
cat(sprintf("== CNN-2 forward, batch 16: %d kernels, relative difference to the unjitted model %.1e\n",
            ex$kernel_count, err))
if (length(ex$gpu_fallbacks)) cat("   on a GPU these run on the host:", paste(ex$gpu_fallbacks, collapse = "; "), "\n")
cat("\n")

# 5. Lazy tensors: eager-looking code, recorded and fused when a value is needed.
old <- options(gpu.kernel.fusion = TRUE)
a <- rf_tensor(matrix(rnorm(1000), 100))
b <- tanh(a * 2 + 1) / 3 - a
cat("== lazy tensors: recorded", if (is.null(b@env$buf)) "(not yet run)" else "(ran)", "\n")
cat(sprintf("   max |lazy - base R| = %.1e\n\n", max(abs(as.array(b) - (tanh(as.array(a) * 2 + 1) / 3 - as.array(a))))))
options(old)
# Tensors stay where they are (device memory on a GPU); rf_profile() shows each step of the run.
p <- rf_profile(rf_jit(function(x) exp(x) / rowSums(exp(x)))(a))
cat(sprintf("== rf_profile: %d step(s), %.3f ms on the %s, %.0f bytes crossed the host\n\n", nrow(p$steps),
            p$summary[["device_ms"]], a$device, p$transfers[["host_to_device_bytes"]] + p$transfers[["device_to_host_bytes"]]))

# 6. Gradients and training: rfuse differentiates the traced program (rfuse-autodiff) and
# compiles forward + backward + SGD as one program per step.
f <- function(x, w) sum(tanh(x %*% w)^2)
x6 <- matrix(rnorm(12), 3); w6 <- matrix(rnorm(8), 4)
g6 <- rf_grad(f, wrt = "w", dtype = "float64")(x6, w6)
num <- w6 * 0
for (i in seq_along(w6)) {
  up <- w6; dn <- w6; up[i] <- up[i] + 1e-6; dn[i] <- dn[i] - 1e-6
  num[i] <- (f(x6, up) - f(x6, dn)) / 2e-6
}
cat(sprintf("== rf_grad: max |rfuse - central differences| = %.1e\n", max(abs(g6 - num))))
set.seed(7)
xs <- matrix(runif(800, -1, 1), 400); ys <- ifelse(rowSums(xs^2) < 0.45, 1, 2)
net_loss <- function(w1, b1, w2, b2, x, t)
  nnf_cross_entropy(sweep(tanh(sweep(x %*% w1, 2, b1, "+")) %*% w2, 2, b2, "+"), t)
fit <- rf_train(net_loss, list(w1 = matrix(rnorm(32), 2), b1 = rnorm(16, sd = 0.1),
                               w2 = matrix(rnorm(32, sd = 0.3), 16), b2 = c(0, 0)),
                data = list(x = xs, t = rf_one_hot(ys, 2)), steps = 300, lr = 0.5, momentum = 0.9,
                progress = FALSE)
pred <- with(fit$params, max.col(sweep(tanh(sweep(xs %*% w1, 2, b1, "+")) %*% w2, 2, b2, "+")))
cat(sprintf("== rf_train: a 2-16-2 MLP on a disc-in-a-square task, loss %.3f -> %.3f, accuracy %.1f%%\n",
            fit$history[1], fit$history[300], 100 * mean(pred == ys)))

# 7. A small ResNet (strided convolutions, batch norm, residual blocks) trained with rf_fit():
# which quadrant of a 12x12 image holds a bright block.
set.seed(3)
n7 <- 64; y7 <- rep(1:4, length.out = n7)
img <- array(rnorm(n7 * 144, sd = 0.3), c(n7, 1, 12, 12))
for (i in seq_len(n7)) {
  r <- if (y7[i] <= 2) 1:5 else 8:12; cc <- if (y7[i] %% 2 == 1) 1:5 else 8:12
  img[i, 1, r, cc] <- img[i, 1, r, cc] + 1
}
resnet <- nn_resnet(blocks = c(1, 1), widths = c(4, 8), num_classes = 4, in_channels = 1)
fit7 <- rf_fit(resnet, img, y7, steps = 30, optimizer = "adam", lr = 0.01, progress = FALSE)
resnet$eval()
cat(sprintf("== rf_fit: a ResNet (%d parameters), loss %.3f -> %.3f, accuracy %.1f%%\n\n",
            sum(vapply(resnet$parameters, length, integer(1))), fit7$history[1], fit7$history[30],
            100 * mean(max.col(resnet(img)) == y7)))

info <- rf_cache_info()
cat(sprintf("cache: %d programs, %d compiles, %d hits\n", info$programs, info$compiles, info$hits))
