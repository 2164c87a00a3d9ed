# The product's benchmarks, measured from R (issue 13): W1-W7 as an R user runs them, with default
# settings, timed by the wall clock of the R call (the device synchronized after each call, so R's
# overhead, the launch and the device time all count). Shapes as ../shared/device/torch_best.py.
#   Rscript benchmarks/r-bench.R            (after scripts/install-r-package.sh)
# On a machine without a GPU (CI) it runs the same code on the CPU with small shapes, briefly.
# With RFUSE_TORCH_JSON (torch_best.py's output) and RFUSE_BENCH_JSON (rfuse-bench's) it prints
# PyTorch's best setting and rfuse from C++ beside each row; scripts/gpu-run.sh r-bench runs all
# three in one call. Writes $OUT/r_bench.json.
suppressPackageStartupMessages(library(rfuse))
set.seed(1)
gpu <- as.vector(rf_default_device()) == "cuda"
small <- !gpu || nzchar(Sys.getenv("RFUSE_BENCH_SMALL"))
only <- strsplit(Sys.getenv("RFUSE_BENCH_ONLY", ""), ",")[[1]]
iters <- as.integer(Sys.getenv("RFUSE_BENCH_ITERS", if (small) "5" else "30"))
dev <- as.vector(rf_default_device())
res <- list()
want <- function(name) !length(only) || name %in% only

# Median wall time of one call (ms), synchronized after each; warmed first (the first call traces,
# compiles and caches).
per_call_ms <- function(f, n = iters) {
  for (w in 1:2) rf_sync(f())
  t <- vapply(seq_len(n), function(i) {
    t0 <- proc.time()[["elapsed"]]
    rf_sync(f())
    proc.time()[["elapsed"]] - t0
  }, 0)
  1000 * stats::median(t)
}
# For sub-millisecond calls: the mean over a batch of calls, best of three batches, by
# Sys.time() (microseconds; proc.time()'s elapsed counts whole milliseconds, which quantized
# these rows to 0.02 ms steps).
batch_ms <- function(f, n = max(iters, 50)) {
  for (w in 1:3) rf_sync(f())
  best <- Inf
  for (round in 1:3) {
    t0 <- Sys.time()
    for (i in seq_len(n)) r <- f()
    rf_sync(r)
    best <- min(best, as.double(difftime(Sys.time(), t0, units = "secs")) / n)
  }
  1000 * best
}
record <- function(name, key, ms, note = "") {
  res[[name]][[key]] <<- ms
  cat(sprintf("%-6s %-34s %10.4f ms  %s\n", name, key, ms, note))
}
# With RFUSE_BENCH_PROFILE set: where a training step's device time goes (rf_profile of a short
# fit; a diagnostic printed beside the rows, not a result): the time by kind of step, and the
# steps that take the most, summed over the fit's steps.
profile_fit <- function(name, steps, fit_call) {
  if (!nzchar(Sys.getenv("RFUSE_BENCH_PROFILE"))) return(invisible())
  p <- rf_profile(fit_call(steps))
  st <- p$steps
  # Each program step's smallest time over the profiled steps: a fit's first step (plans chosen,
  # graphs captured) does not count.
  best <- tapply(st$ms, st$step, min)
  how <- st$how[match(names(best), st$step)]
  cat(sprintf("%s profile (%d steps): %d program steps a step, device %.3f ms a step (each step's fastest)\n",
              name, steps, length(best), sum(best)))
  by_how <- sort(tapply(best, how, sum), decreasing = TRUE)
  for (h in names(by_how)) cat(sprintf("  %-40s %8.4f ms  (%d)\n", h, by_how[[h]], sum(how == h)))
  top <- sort(best, decreasing = TRUE)
  for (k in head(names(top), 25))
    cat(sprintf("  %8.4f ms  %-44s %s\n", top[[k]], k, substr(st$source[match(k, st$step)], 1, 70)))
  utils::write.csv(st, file.path(Sys.getenv("OUT", "."), sprintf("profile-%s.csv", name)), row.names = FALSE)
}
check <- function(name, got, ref, tol) {
  err <- max(abs(got - ref)) / max(abs(ref))
  if (!(err <= tol)) stop(sprintf("%s: rfuse differs from base R (relative error %g)", name, err))
}

cat(sprintf("rfuse from R, %s, R %s, device %s%s, %d timed calls\n", Sys.Date(), getRversion(),
            attr(rf_default_device(), "description"), if (small) " (small shapes)" else "", iters))

# ---- W1 elementwise chain --------------------------------------------------------------------
chain <- function(x, a, b) pmax(x * a + b, 0) * (1 / (1 + exp(-x))) + tanh(b) * 0.5
if (want("W1")) {
  n <- if (small) 2^20 else 2^26
  xr <- rnorm(n); ar <- rnorm(n); br <- rnorm(n)
  jf <- rf_jit(chain)
  xt <- rf_tensor(xr, device = dev); at <- rf_tensor(ar, device = dev); bt <- rf_tensor(br, device = dev)
  check("W1", as.vector(jf(xt, at, bt)), chain(xr, ar, br), 1e-5)
  record("W1", "rf_jit on device tensors (f32)", batch_ms(function() jf(xt, at, bt)))
  old <- options(gpu.kernel.fusion = TRUE)
  record("W1", "lazy tensor code, fusion on", batch_ms(function() rf_sync(chain(xt, at, bt))))
  options(gpu.kernel.fusion = FALSE)
  record("W1", "eager tensor code (op by op)", batch_ms(function() chain(xt, at, bt), 10))
  options(old)
  # Plain R vectors in and out, 2^24 doubles (default dtype), next to base R and a host copy.
  n2 <- if (small) 2^20 else 2^24
  x2 <- rnorm(n2); a2 <- rnorm(n2); b2 <- rnorm(n2)
  check("W1 plain", jf(x2, a2, b2), chain(x2, a2, b2), if (gpu) 1e-5 else 1e-12)
  plain <- per_call_ms(function() jf(x2, a2, b2))
  base <- per_call_ms(function() chain(x2, a2, b2), max(3, iters %/% 5))
  copy <- 1000 * rfuse:::.rf_host_copy_seconds(4 * n2 * 8)
  record("W1", sprintf("plain R vectors, 2^%d doubles", log2(n2)), plain,
         sprintf("(base R %.1f ms; one host copy of in+out %.1f ms: %.2fx of it)", base, copy, plain / copy))
  res$W1$base_r_ms <- base
  res$W1$host_copy_ms <- copy
  rm(xt, at, bt, x2, a2, b2); invisible(gc())
}

# ---- W4 layer norm + GELU + residual ----------------------------------------------------------
if (want("W4")) {
  r <- if (small) 512 else 8192; cc <- if (small) 256 else 4096
  w4 <- function(x, g, b) nnf_gelu(nnf_layer_norm(x, ncol(x), g, b)) * 1.5 + x
  xr <- matrix(rnorm(r * cc), r); gr <- rnorm(cc); br <- rnorm(cc)
  jf <- rf_jit(w4)
  xt <- rf_tensor(xr, device = dev); gt <- rf_tensor(gr, device = dev); bt <- rf_tensor(br, device = dev)
  check("W4", as.array(jf(xt, gt, bt)), w4(xr, gr, br), 1e-4)
  record("W4", "rf_jit on device tensors (f32)", batch_ms(function() jf(xt, gt, bt)))
  rm(xt); invisible(gc())
}

# ---- W3 CNN-2 forward -------------------------------------------------------------------------
if (want("W3")) {
  cnn <- nn_sequential(nn_conv2d(1, 8, 3), nn_relu(), nn_max_pool2d(2), nn_conv2d(8, 16, 3), nn_relu(),
                       nn_max_pool2d(2), nn_flatten(), nn_linear(400, 10))
  cnn$eval()
  xr <- array(rnorm(128 * 28 * 28), c(128, 1, 28, 28))
  jm <- rf_jit(cnn)
  xt <- rf_tensor(xr, device = dev)
  check("W3", as.array(jm(xt)), cnn(xr), 1e-4)
  record("W3", "jitted model on a device tensor", batch_ms(function() jm(xt)))
}

# ---- W2 MLP training step ---------------------------------------------------------------------
if (want("W2") || want("W2bf16")) {
  d <- if (small) c(256, 64, 128) else c(4096, 1024, 4096)
  mlp <- nn_sequential(nn_linear(d[2], d[3]), nn_gelu(), nn_linear(d[3], d[3]), nn_gelu(), nn_linear(d[3], d[2]))
  X <- matrix(rnorm(d[1] * d[2]), d[1]); Y <- matrix(rnorm(d[1] * d[2]), d[1])
  if (want("W2")) {
    fit <- rf_fit(mlp, X, Y, loss = nnf_mse_loss, steps = iters + 1, lr = 1e-3, progress = FALSE)
    record("W2", "rf_fit step, data on the device", 1000 * fit$step_seconds,
           "(default: TF32 products, PyTorch's best setting's too)")
    profile_fit("W2", 3, function(n) rf_fit(mlp, X, Y, loss = nnf_mse_loss, steps = n, lr = 1e-3, progress = FALSE))
    if (gpu) {
      fit <- rf_fit(mlp, X, Y, loss = nnf_mse_loss, steps = iters + 1, lr = 1e-3, progress = FALSE, tf32 = FALSE)
      record("W2", "rf_fit step, tf32 = FALSE", 1000 * fit$step_seconds, "(exact float32 products)")
    }
  }
  if (want("W2bf16")) {
    fit <- rf_fit(mlp, X, Y, loss = nnf_mse_loss, steps = iters + 1, lr = 1e-3, progress = FALSE,
                  precision = "bf16-mixed")
    record("W2bf16", "rf_fit step, precision = \"bf16-mixed\"", 1000 * fit$step_seconds,
           "(bfloat16 products, float32 master weights)")
  }
}

# ---- W5 ResNet-18 training step ---------------------------------------------------------------
if (want("W5") || want("W5bf16")) {
  b <- if (small) 8 else 256
  net <- nn_resnet18(num_classes = 10)
  x <- array(rnorm(b * 3 * 32 * 32), c(b, 3, 32, 32)); y <- rf_one_hot(sample.int(10, b, replace = TRUE), 10)
  if (want("W5")) {
    fit <- rf_fit(net, x, y, steps = if (small) 3 else 2 * iters + 1, lr = 0.1, momentum = 0.9, progress = FALSE)
    record("W5", sprintf("rf_fit step, batch %d, data on the device", b), 1000 * fit$step_seconds,
           "(default: TF32 products, PyTorch's best setting's too)")
    if (!small) { # a longer fit: the loop's one-time work (the second set's graph capture) amortized
      fit <- rf_fit(net, x, y, steps = 301, lr = 0.1, momentum = 0.9, progress = FALSE)
      record("W5", "rf_fit step, 301 steps", 1000 * fit$step_seconds, "(default settings)")
      profile_fit("W5", 3, function(n) rf_fit(net, x, y, steps = n, lr = 0.1, momentum = 0.9, progress = FALSE))
    }
    if (gpu) {
      fit <- rf_fit(net, x, y, steps = iters + 1, lr = 0.1, momentum = 0.9, progress = FALSE, tf32 = FALSE)
      record("W5", "rf_fit step, tf32 = FALSE", 1000 * fit$step_seconds, "(exact float32 products)")
    }
  }
  if (want("W5bf16")) {
    fit <- rf_fit(net, x, y, steps = if (small) 3 else 2 * iters + 1, lr = 0.1, momentum = 0.9, progress = FALSE,
                  precision = "bf16-mixed")
    record("W5bf16", "rf_fit step, precision = \"bf16-mixed\"", 1000 * fit$step_seconds,
           "(bfloat16 products, float32 master weights)")
    if (!small) {
      fit <- rf_fit(net, x, y, steps = 301, lr = 0.1, momentum = 0.9, progress = FALSE, precision = "bf16-mixed")
      record("W5bf16", "rf_fit step, bf16-mixed, 301 steps", 1000 * fit$step_seconds, "")
    }
  }
}

# ---- W6 LSTM-128 (torch_best.py's LSTMNet): forward, and an SGD-momentum training step ---------
if (want("W6") || want("W6bf16")) {
  B <- if (small) 8 else 128; steps <- if (small) 6 else 64
  lstm_net <- nn_module("LSTMNet",
    initialize = function() {
      self$lstm <- nn_lstm(128, 128, batch_first = TRUE)
      self$fc <- nn_linear(128, 10)
    },
    forward = function(x) {
      out <- self$lstm(x)[[1]]
      self$fc(out[, dim(out)[2], ]) # the last step (torch's out[:, -1])
    })
  net <- lstm_net()
  xr <- array(rnorm(B * steps * 128), c(B, steps, 128)); y <- sample.int(10, B, replace = TRUE)
  jm <- rf_jit(net)
  xt <- rf_tensor(xr, device = dev)
  if (want("W6")) {
    check("W6", as.array(jm(xt)), as.array(net(rf_tensor(xr))), 1e-3)
    record("W6", "forward, jitted model on a device tensor", batch_ms(function() jm(xt)))
    profile_fit("W6", 3, function(n) for (i in seq_len(n)) jm(xt))
    profile_fit("W6step", 3, function(n)
      rf_fit(net, xr, y, loss = nnf_cross_entropy, steps = n, lr = 0.01, momentum = 0.9, progress = FALSE))
    fit <- rf_fit(net, xr, y, loss = nnf_cross_entropy, steps = iters + 1, lr = 0.01, momentum = 0.9, progress = FALSE)
    record("W6step", "rf_fit step, SGD momentum", 1000 * fit$step_seconds, "(default: TF32 products)")
  }
  if (want("W6bf16")) {
    record("W6bf16", "forward, with_autocast(bfloat16)",
           batch_ms(function() with_autocast(device_type = dev, dtype = "bfloat16", jm(xt))))
    fit <- rf_fit(net, xr, y, loss = nnf_cross_entropy, steps = iters + 1, lr = 0.01, momentum = 0.9, progress = FALSE,
                  precision = "bf16-mixed")
    record("W6stepbf16", "rf_fit step, precision = \"bf16-mixed\"", 1000 * fit$step_seconds, "")
  }
}

# ---- W7 pre-norm transformer encoder layer (torch_best.py's): an AdamW step, MSE loss ---------
if (want("W7") || want("W7bf16") || want("W7drop")) {
  B <- if (small) 4 else 32; L <- if (small) 32 else 256; d <- if (small) 64 else 512
  ff <- if (small) 256 else 2048
  layer <- nn_transformer_encoder_layer(d, 8, ff, dropout = 0, batch_first = TRUE, norm_first = TRUE,
                                        activation = "gelu")
  xr <- array(rnorm(B * L * d), c(B, L, d)); yr <- array(rnorm(B * L * d), c(B, L, d))
  fit7 <- function(precision, steps = iters + 1)
    rf_fit(layer, xr, yr, loss = nnf_mse_loss, steps = steps, batch_size = B, optimizer = "adamw",
           lr = 1e-4, weight_decay = 0.01, progress = FALSE, precision = precision)
  if (want("W7")) {
    profile_fit("W7", 3, function(n) fit7("32", n))
    fit <- fit7("32")
    record("W7", "rf_fit AdamW step, data on the device", 1000 * fit$step_seconds,
           "(default: TF32 products, PyTorch's best setting's too)")
  }
  if (want("W7bf16")) {
    profile_fit("W7bf16", 3, function(n) fit7("bf16-mixed", n))
    fit <- fit7("bf16-mixed")
    record("W7bf16", "rf_fit step, precision = \"bf16-mixed\"", 1000 * fit$step_seconds,
           "(bfloat16 products, float32 master weights)")
  }
}
# W7drop: the same layer with the constructor's default dropout (0.1: attention, feed-forward and
# residual dropout, masks drawn by the program each step; attention's inside its fused kernels).
# PyTorch's counterpart: benchmarks/torch_w7drop.py (scripts/gpu-run.sh w7drop).
if (want("W7drop")) {
  layer <- nn_transformer_encoder_layer(d, 8, ff, batch_first = TRUE, norm_first = TRUE, activation = "gelu")
  fit7drop <- function(steps = iters + 1)
    rf_fit(layer, xr, yr, loss = nnf_mse_loss, steps = steps, batch_size = B, optimizer = "adamw",
           lr = 1e-4, weight_decay = 0.01, progress = FALSE, precision = "bf16-mixed")
  profile_fit("W7drop", 3, fit7drop)
  fit <- fit7drop()
  record("W7drop", "rf_fit step, bf16-mixed, dropout = 0.1", 1000 * fit$step_seconds, "(the layer's default dropout)")
}

# ---- The R cost of a call of a cached program (issue 13: <= 20 us) ---------------------------
if (want("W0")) {
  jf <- rf_jit(function(x, a) x * a + 1)
  v <- rf_tensor(rnorm(10), device = dev); a <- rf_tensor(2, device = dev)
  record("W0", "jitted call on 10-element tensors", batch_ms(function() jf(v, a), 2000),
         "(R's call, the lookup, the program's run and the result tensor)")
}

# ---- Side by side with PyTorch's best and rfuse from C++ ---------------------------------------
read_json <- function(var) {
  p <- Sys.getenv(var)
  if (!nzchar(p) || !file.exists(p)) return(NULL)
  if (!requireNamespace("jsonlite", quietly = TRUE)) return(NULL)
  jsonlite::fromJSON(p, simplifyVector = FALSE)
}
torch <- read_json("RFUSE_TORCH_JSON")
cpp <- read_json("RFUSE_BENCH_JSON")
if (!is.null(torch) || !is.null(cpp)) {
  best <- function(e) { v <- unlist(e[!grepl("_first_s$", names(e))]); if (length(v)) min(v) else NA }
  tkey <- c(W1 = "W1", W4 = "W4", W3 = "W3", W2 = "W2_f32", W5 = "W5_f32", W2bf16 = "W2_bf16", W5bf16 = "W5_bf16",
            W6 = "W6_lstm128_fwd_f32", W6step = "W6_lstm128_step_f32", W6bf16 = "W6_lstm128_fwd_bf16",
            W6stepbf16 = "W6_lstm128_step_bf16", W7 = "W7_encoder_step_f32", W7bf16 = "W7_encoder_step_bf16")
  ckey <- c(W1 = "^W1", W4 = "^W4", W3 = "^W3", W2 = "^W2_mlp_train_step_f32", W5 = "^W5_resnet18_train_step_f32",
            W2bf16 = "^W2_mlp_train_step_bf16", W5bf16 = "^W5_resnet18_train_step_bf16",
            W6 = "^W6_lstm_fwd_f32", W6step = "^W6_lstm_step_f32", W6bf16 = "^W6_lstm_fwd_bf16",
            W6stepbf16 = "^W6_lstm_step_bf16", W7 = "^W7_encoder_step_f32", W7bf16 = "^W7_encoder_step_bf16")
  # The memory floor: the bytes rfuse-bench's cost model says a workload must move, at the
  # H200's 4.19 TB/s (what W1's 0.256 ms floor in the issue assumes).
  cat(sprintf("\n%-8s %24s %18s %14s %14s\n", "workload", "rfuse from R (best row)", "rfuse-bench (C++)",
              "PyTorch best", "memory floor"))
  for (w in intersect(names(res), names(tkey))) {
    r <- min(unlist(res[[w]][!names(res[[w]]) %in% c("base_r_ms", "host_copy_ms")]))
    tb <- if (!is.null(torch[[tkey[[w]]]])) best(torch[[tkey[[w]]]]) else NA
    cb <- NA; fl <- NA
    for (nm in names(cpp)) if (grepl(ckey[[w]], nm) && is.list(cpp[[nm]])) {
      cb <- cpp[[nm]]$ms; fl <- cpp[[nm]]$bytes / 4.19e9; break
    }
    cat(sprintf("%-8s %24.4f %18.4f %14.4f %14.4f\n", w, r, cb, tb, fl))
    res[[w]]$cpp_ms <- cb; res[[w]]$torch_best_ms <- tb; res[[w]]$floor_ms <- fl
  }
}
out <- Sys.getenv("OUT", ".")
if (requireNamespace("jsonlite", quietly = TRUE))
  writeLines(jsonlite::toJSON(res, auto_unbox = TRUE, digits = 6), file.path(out, "r_bench.json"))
