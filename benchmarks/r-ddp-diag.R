# Where a data-parallel step's time goes on one GPU (issue 19): W5 with strategy "none" and "ddp"
# (a group of one), the step time with CUDA graphs and without, and a per-step profile of each
# (rf_profile; graphs off while profiling), the profile's kinds side by side.
suppressPackageStartupMessages(library(rfuse))
set.seed(1)
b <- 256L
x <- array(rnorm(b * 3 * 32 * 32), c(b, 3, 32, 32)); y <- rf_one_hot(sample.int(10, b, replace = TRUE), 10)
for (graphs in c(TRUE, FALSE)) {
  rf_options(cuda_graphs = graphs)
  for (strategy in c("none", "ddp")) {
    net <- nn_resnet18(num_classes = 10)
    fit <- rf_fit(net, x, y, steps = 21, lr = 0.1, momentum = 0.9, progress = FALSE, strategy = strategy)
    cat(sprintf("W5 %-4s cuda_graphs = %-5s %.3f ms/step\n", strategy, graphs, 1000 * fit$step_seconds))
  }
}
rf_options(cuda_graphs = TRUE)
for (strategy in c("none", "ddp")) {
  net <- nn_resnet18(num_classes = 10)
  rf_fit(net, x, y, steps = 3, lr = 0.1, momentum = 0.9, progress = FALSE, strategy = strategy)
  p <- rf_profile(rf_fit(net, x, y, steps = 3, lr = 0.1, momentum = 0.9, progress = FALSE, strategy = strategy))
  s <- p$steps
  kind <- sub(" .*", "", sub("^cuda ", "", s$how))
  cat(sprintf("== %s: %d steps, device %.3f ms for 3 training steps\n", strategy, nrow(s), sum(s$ms)))
  print(round(tapply(s$ms, kind, sum) / 3, 3))
  print(table(kind) / 3)
}
