# Dynamic batch sizes, from R (issue 18): an MLP forward with W2's shapes (1024-4096-4096-1024,
# ReLU) called with every batch size from 1 to 256 under rf_jit's defaults (one program for every
# size once two have been compiled), against a program compiled for each size alone
# (dynamic = FALSE): compiles, first-call latency, time per call and the results, size by size.
#   Rscript benchmarks/r-dynamic.R     (after scripts/install-r-package.sh)
# Without a GPU it runs on the CPU with small shapes (64-256-256-64, sizes 1 to 40). Writes
# $OUT/r_dynamic.json.
suppressPackageStartupMessages(library(rfuse))
set.seed(1)
dev <- as.vector(rf_default_device())
gpu <- dev == "cuda"
d <- if (gpu) c(1024, 4096, 4096, 1024) else c(64, 256, 256, 64)
sizes <- seq_len(if (gpu) 256 else 40)
timed <- intersect(if (gpu) c(1, 2, 3, 7, 16, 33, 64, 100, 127, 128, 200, 255, 256) else c(1, 2, 7, 33, 40), sizes)
model <- nn_sequential(nn_linear(d[1], d[2]), nn_relu(), nn_linear(d[2], d[3]), nn_relu(), nn_linear(d[3], d[4]))
xs <- lapply(sizes, function(n) rf_tensor(matrix(rnorm(n * d[1]), n, d[1]), device = dev))

# Best of three rounds of `n` calls, synchronized at the end of each round (ms per call).
batch_ms <- function(f, n = 200) {
  for (w in 1:3) rf_sync(f())
  best <- Inf
  for (round in 1:3) {
    t0 <- proc.time()[["elapsed"]]
    for (i in seq_len(n)) r <- f()
    rf_sync(r)
    best <- min(best, (proc.time()[["elapsed"]] - t0) / n)
  }
  1000 * best
}
counts <- function() unlist(rf_cache_info()[c("compiles", "pass_runs", "disk_hits", "specializations", "nvrtc_compiles", "llvm_compiles")])

jd <- rf_jit(model)
before <- counts()
first_ms <- numeric(length(sizes))
for (i in seq_along(sizes)) {
  t0 <- proc.time()[["elapsed"]]
  rf_sync(jd(xs[[i]]))
  first_ms[i] <- 1000 * (proc.time()[["elapsed"]] - t0)
}
dyn <- counts() - before
cat(sprintf("device: %s\nMLP %s forward, batch sizes %d..%d, rf_jit(model) (defaults): %s\n",
            attr(rf_default_device(), "description"), paste(d, collapse = "-"), min(sizes), max(sizes),
            paste(names(dyn), dyn, sep = " ", collapse = ", ")))
cat(sprintf("first call: sizes 1-2 (compiled) %.0f / %.0f ms; later sizes (made) median %.1f ms, max %.1f ms\n",
            first_ms[1], first_ms[2], stats::median(first_ms[-(1:2)]), max(first_ms[-(1:2)])))

rows <- list()
cat(sprintf("%6s %12s %12s %7s %14s\n", "batch", "dynamic ms", "static ms", "ratio", "max |diff|"))
for (n in timed) {
  x <- xs[[n]]
  js <- rf_jit(model, dynamic = FALSE)
  ys <- as.array(js(x)); yd <- as.array(jd(x))
  diff <- max(abs(ys - yd))
  td <- batch_ms(function() jd(x)); ts <- batch_ms(function() js(x))
  td <- min(td, batch_ms(function() jd(x))) # interleaved twice: the host's drift hits both
  ts <- min(ts, batch_ms(function() js(x)))
  cat(sprintf("%6d %12.4f %12.4f %7.3f %14.3g\n", n, td, ts, td / ts, diff))
  rows[[length(rows) + 1]] <- list(batch = n, dynamic_ms = td, static_ms = ts, ratio = td / ts, max_abs_diff = diff,
                                   identical = identical(ys, yd))
}
out <- Sys.getenv("OUT", ".")
if (requireNamespace("jsonlite", quietly = TRUE))
  writeLines(jsonlite::toJSON(list(device = attr(rf_default_device(), "description"), dims = d,
                                   counts = as.list(dyn), first_call_ms = first_ms, rows = rows),
                              auto_unbox = TRUE, digits = 6, pretty = TRUE),
             file.path(out, "r_dynamic.json"))
