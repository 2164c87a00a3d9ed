# Where the time of the R-level benchmarks goes (a diagnostic, not a result): R's sampling
# profiler over rf_fit's training loop (W5, W2) and over repeated calls of a jitted model (W3),
# and rf_profile() of one W4 call. Shapes as r-bench.R; RFUSE_DIAG_ONLY=W5,W3 picks workloads.
#   Rscript benchmarks/r-diag.R      (scripts/gpu-run.sh r-diag on the GPU box)
suppressPackageStartupMessages(library(rfuse))
set.seed(1)
dev <- as.vector(rf_default_device())
small <- dev != "cuda"
only <- strsplit(Sys.getenv("RFUSE_DIAG_ONLY", ""), ",")[[1]]
want <- function(name) !length(only) || name %in% only
out_dir <- Sys.getenv("OUT", tempdir())
# RFUSE_DIAG_TF32=1: TF32 products (PyTorch's best setting), so the device is fast and R's share shows.
if (nzchar(Sys.getenv("RFUSE_DIAG_TF32"))) invisible(rf_allow_tf32(TRUE))

# Runs `expr` under Rprof and prints the functions holding the most time (total and self).
profiled <- function(label, expr) {
  file <- file.path(out_dir, paste0("rprof-", label, ".out"))
  Rprof(file, interval = 0.002)
  t0 <- proc.time()[["elapsed"]]
  force(expr)
  wall <- proc.time()[["elapsed"]] - t0
  Rprof(NULL)
  s <- summaryRprof(file)
  cat(sprintf("== %s: %.3f s wall, %.3f s sampled\n", label, wall, s$sampling.time))
  print(utils::head(s$by.total[, c("total.time", "total.pct", "self.time")], 25))
  print(utils::head(s$by.self[, c("self.time", "self.pct")], 12))
  invisible(expr)
}

# The host's share of a call: 100 calls queued without waiting for the device (a launch queue
# holds them), timed by the µs clock; against the per-call time with the device waited for.
host_us <- function(label, call) {
  rf_sync(call())
  best <- Inf
  for (round in 1:5) {
    t0 <- Sys.time()
    for (i in 1:100) r <- call()
    best <- min(best, as.double(difftime(Sys.time(), t0, units = "secs")) / 100)
    rf_sync(r)
  }
  cat(sprintf("%s: host %.1f us per call (queued, not waited for)\n", label, 1e6 * best))
}

if (want("W5")) {
  b <- if (small) 8 else 256
  net <- nn_resnet18(num_classes = 10)
  x <- array(rnorm(b * 3 * 32 * 32), c(b, 3, 32, 32)); y <- rf_one_hot(sample.int(10, b, replace = TRUE), 10)
  for (steps in c(31, 61, 95)) {
    fit <- rf_fit(net, x, y, steps = steps, lr = 0.1, momentum = 0.9, progress = FALSE)
    cat(sprintf("W5 steps %d: %.3f ms per step\n", steps, 1000 * fit$step_seconds))
  }
  profiled("W5", rf_fit(net, x, y, steps = 61, lr = 0.1, momentum = 0.9, progress = FALSE))
}

if (want("W2")) {
  d <- if (small) c(256, 64, 128) else c(4096, 1024, 4096)
  mlp <- nn_sequential(nn_linear(d[2], d[3]), nn_gelu(), nn_linear(d[3], d[3]), nn_gelu(), nn_linear(d[3], d[2]))
  X <- matrix(rnorm(d[1] * d[2]), d[1]); Y <- matrix(rnorm(d[1] * d[2]), d[1])
  fit <- rf_fit(mlp, X, Y, loss = nnf_mse_loss, steps = 31, lr = 1e-3, progress = FALSE)
  cat(sprintf("W2: %.3f ms per step\n", 1000 * fit$step_seconds))
  profiled("W2", rf_fit(mlp, X, Y, loss = nnf_mse_loss, steps = 61, lr = 1e-3, progress = FALSE))
}

if (want("W3")) {
  cnn <- nn_sequential(nn_conv2d(1, 8, 3), nn_relu(), nn_max_pool2d(2), nn_conv2d(8, 16, 3), nn_relu(),
                       nn_max_pool2d(2), nn_flatten(), nn_linear(400, 10))
  cnn$eval()
  jm <- rf_jit(cnn)
  xt <- rf_tensor(array(rnorm(128 * 28 * 28), c(128, 1, 28, 28)), device = dev)
  for (i in 1:5) r <- jm(xt)
  rf_sync(r)
  n <- 2000
  t0 <- proc.time()[["elapsed"]]
  for (i in seq_len(n)) r <- jm(xt)
  rf_sync(r)
  cat(sprintf("W3: %.1f us per call\n", 1e6 * (proc.time()[["elapsed"]] - t0) / n))
  host_us("W3", function() jm(xt))
  print(rf_profile(jm(xt)), n = 15)
  profiled("W3", { for (i in seq_len(n)) r <- jm(xt); rf_sync(r) })
  # The same program called with a plain function of tensors (no module parameter walk).
  f <- function(x, a) x * a + 1
  jf <- rf_jit(f)
  a <- rf_tensor(2, device = dev); v <- rf_tensor(rnorm(10), device = dev)
  for (i in 1:5) r <- jf(v, a)
  t0 <- proc.time()[["elapsed"]]
  for (i in seq_len(n)) r <- jf(v, a)
  rf_sync(r)
  cat(sprintf("small jitted call on tensors: %.1f us per call\n", 1e6 * (proc.time()[["elapsed"]] - t0) / n))
  profiled("call", { for (i in seq_len(n)) r <- jf(v, a); rf_sync(r) })
  # The call's parts alone: the program run on handles, the lookup, a result tensor.
  st <- attr(jf, "rfuse")
  je <- rfuse:::jit_entry(st, list(v, a))
  ci <- rfuse:::call_inputs(je$entry$trace, je$args)
  vals <- lapply(ci$values, rfuse:::tensor_buffer)
  us <- function(label, expr) {
    e <- substitute(expr); env <- parent.frame()
    t0 <- proc.time()[["elapsed"]]
    for (i in seq_len(n)) r <- eval(e, env)
    rf_sync()
    cat(sprintf("  %-40s %8.1f us\n", label, 1e6 * (proc.time()[["elapsed"]] - t0) / n))
    r
  }
  us(".rf_run_tensors alone", rfuse:::.rf_run_tensors(je$entry$program, vals, ci$dtypes, dev, NULL))
  outs <- rfuse:::.rf_run_tensors(je$entry$program, vals, ci$dtypes, dev, NULL)
  us(".rf_run_tensors into outputs", rfuse:::.rf_run_tensors(je$entry$program, vals, ci$dtypes, dev, outs))
  us("jit_entry (key + lookup)", rfuse:::jit_entry(st, list(v, a)))
  us("make_tensor", rfuse:::make_tensor(buf = outs[[1]], dtype = "float32", device = dev, len = 10))
  us("an empty .Call (.rf_tensor_valid)", rfuse:::.rf_tensor_valid(vals[[1]]))
  us("rf_sync()", rf_sync())
}

if (want("W4")) {
  r <- if (small) 512 else 8192; cc <- if (small) 256 else 4096
  w4 <- function(x, g, b) nnf_gelu(nnf_layer_norm(x, ncol(x), g, b)) * 1.5 + x
  jf <- rf_jit(w4)
  xt <- rf_tensor(matrix(rnorm(r * cc), r), device = dev)
  gt <- rf_tensor(rnorm(cc), device = dev); bt <- rf_tensor(rnorm(cc), device = dev)
  rf_sync(jf(xt, gt, bt))
  host_us("W4", function() jf(xt, gt, bt))
  print(rf_profile(jf(xt, gt, bt)), n = 10)
}
