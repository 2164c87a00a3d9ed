# The CPU backend's benchmarks (issue 6): rfuse's JIT next to base R evaluating the same function
# on the same data in the same process, and rfuse's reference interpreter beside them.
# Run: Rscript benchmarks/cpu-bench.R   (after scripts/install-r-package.sh)
suppressPackageStartupMessages(library(rfuse))
set.seed(1)
reps <- as.integer(Sys.getenv("RFUSE_BENCH_REPS", "7"))

median_ms <- function(f, reps) {
  f() # warm: traces, compiles and caches on the first call
  t <- vapply(seq_len(reps), function(i) system.time(f(), gcFirst = FALSE)[["elapsed"]], 0)
  1000 * median(t)
}

# Per call over a loop of n calls whose results are dropped (best of three loops): the steady
# state, where dropped results come back to the allocator at R's collections. A single call's
# median (median_ms) mostly gets fresh memory for its result instead (page faults).
loop_ms <- function(f, n = 50) {
  for (w in 1:3) f()
  best <- Inf
  for (round in 1:3) {
    t0 <- proc.time()[["elapsed"]]
    for (i in seq_len(n)) r <- f()
    best <- min(best, (proc.time()[["elapsed"]] - t0) / n)
  }
  1000 * best
}

with_options <- function(opts, code) {
  old <- rf_options(opts)
  on.exit(rf_options(old))
  code
}

workloads <- list(
  chain = list(
    label = "pmax(x*a+b,0) * (1/(1+exp(-x))) + tanh(b)*0.5, 2^22",
    f = function(x, a, b) pmax(x * a + b, 0) * (1 / (1 + exp(-x))) + tanh(b) * 0.5,
    args = function() { n <- 2^22; list(x = rnorm(n), a = rnorm(n), b = rnorm(n)) },
    target = 3),
  softmax = list(
    label = "row softmax e <- exp(x); e / rowSums(e), 4096x512",
    f = function(x) { e <- exp(x); e / rowSums(e) },
    args = function() list(x = matrix(rnorm(4096 * 512), 4096)),
    target = 2),
  w4 = list(
    label = "W4 layernorm + GELU + residual, 2048x1024",
    f = function(x, gamma, beta, eps) {
      mu <- rowMeans(x)
      xc <- x - mu
      v <- rowMeans(xc * xc)
      y <- sweep(sweep(xc / sqrt(v + eps), 2, gamma, "*"), 2, beta, "+")
      0.5 * y * (1 + tanh(0.7978845608028654 * (y + 0.044715 * y^3))) + x
    },
    args = function() list(x = matrix(rnorm(2048 * 1024), 2048), gamma = rnorm(1024),
                           beta = rnorm(1024), eps = 1e-5),
    target = 3))

only <- Sys.getenv("RFUSE_BENCH_ONLY", "")
cat(sprintf("rfuse CPU benchmarks, %s, R %s, %d cores, median of %d, default settings\n", Sys.Date(),
            getRversion(), parallel::detectCores(), reps))
cat(sprintf("%-52s %9s %11s %7s %11s %11s %11s %11s\n", "workload", "base R", "rf_jit", "ratio",
            "f32 tensors", "(in a loop)", "eager f32", "lazy f32"))
for (name in names(workloads)) {
  if (nzchar(only) && !name %in% strsplit(only, ",")[[1]]) next
  w <- workloads[[name]]
  a <- w$args()
  jf <- rf_jit(w$f) # the default: float64 on the CPU, reading R's doubles in place
  ref <- do.call(w$f, a)
  got <- do.call(jf, a)
  err <- max(abs(got - ref)) / max(abs(ref))
  if (!(err <= 1e-10)) stop(sprintf("%s: rfuse differs from base R (relative error %g)", name, err))
  base_ms <- median_ms(function() do.call(w$f, a), reps)
  jit_ms <- median_ms(function() do.call(jf, a), reps)
  # Resident float32 tensors (what libtorch computes on): the jitted function, then the same R
  # code on tensors op by op (eager) and recorded then fused (lazy).
  ta <- lapply(a, function(v) if (length(v) > 1) rf_tensor(v, device = "cpu") else v)
  tensor_ms <- median_ms(function() rf_sync(do.call(jf, ta)), reps)
  tensor_loop_ms <- loop_ms(function() rf_sync(do.call(jf, ta)))
  eager_ms <- median_ms(function() rf_sync(do.call(w$f, ta)), reps)
  old <- options(gpu.kernel.fusion = TRUE)
  lazy_ms <- median_ms(function() rf_sync(do.call(w$f, ta)), reps)
  options(old)
  ratio <- base_ms / jit_ms
  cat(sprintf("%-52s %6.1f ms %8.1f ms %6.2fx %8.1f ms %8.2f ms %8.1f ms %8.1f ms  target %gx %s\n", w$label, base_ms, jit_ms,
              ratio, tensor_ms, tensor_loop_ms, eager_ms, lazy_ms, w$target, if (ratio >= w$target) "met" else "NOT met"))
  if (eager_ms > base_ms) cat(sprintf("  note: eager tensor code is slower than base R here (%.1f vs %.1f ms)\n", eager_ms, base_ms))
}
