# W5 from R, per step over a short and a long rf_fit (61 and 301 steps): how much the loop's
# one-time work (the second parameter set's CUDA graph capture, ...) adds to r-bench.R's 61-step
# figure. RFUSE_PRECISION=bf16-mixed for mixed precision. A diagnostic beside r-bench.R.
suppressPackageStartupMessages(library(rfuse))
set.seed(1)
precision <- Sys.getenv("RFUSE_PRECISION", "32")
b <- 256
net <- nn_resnet18(num_classes = 10)
x <- array(rnorm(b * 3 * 32 * 32), c(b, 3, 32, 32)); y <- rf_one_hot(sample.int(10, b, replace = TRUE), 10)
for (steps in c(61, 301, 61)) {
  t0 <- proc.time()[["elapsed"]]
  fit <- rf_fit(net, x, y, steps = steps, lr = 0.1, momentum = 0.9, progress = FALSE, precision = precision)
  cat(sprintf("W5 (precision %s) rf_fit %d steps: %.4f ms per step after the first; call %.2f s\n", precision, steps,
              1000 * fit$step_seconds, proc.time()[["elapsed"]] - t0))
}
