# Writes the compiled (fused) module of an rf_fit training step, traced as r-bench.R traces it:
# a diagnostic of the plan R runs (for rfuse-step-profile, benchmarks/step-profile.cpp, or
# `rfusec --arch sm_90 --sources`). Traces and compiles only (the capture stops rf_fit before its
# first step). Rscript benchmarks/r-step-dump.R [out.mlir] (default .bundle/diag/rstep.mlir);
# RFUSE_WORKLOAD=W5 (ResNet-18, default), W7 (the transformer encoder layer) or W7causal (the same
# with a causal attn_mask);
# RFUSE_PRECISION=bf16-mixed for the mixed-precision step; RFUSE_DUMP_TRACED=1 writes the traced
# module (before the pass pipeline) instead.
suppressPackageStartupMessages(library(rfuse))
set.seed(1)
out <- commandArgs(TRUE)[1]
if (is.na(out)) out <- ".bundle/diag/rstep.mlir"
workload <- Sys.getenv("RFUSE_WORKLOAD", "W5")
precision <- Sys.getenv("RFUSE_PRECISION", "32")
fit_two_steps <- switch(workload,
  W5 = {
    b <- 256
    net <- nn_resnet18(num_classes = 10)
    x <- array(rnorm(b * 3 * 32 * 32), c(b, 3, 32, 32)); y <- rf_one_hot(sample.int(10, b, replace = TRUE), 10)
    function() rf_fit(net, x, y, steps = 2, lr = 0.1, momentum = 0.9, progress = FALSE, precision = precision)
  },
  W7 = , W7causal = {
    B <- 32; L <- 256; d <- 512
    layer <- nn_transformer_encoder_layer(d, 8, 2048, dropout = 0, batch_first = TRUE, norm_first = TRUE,
                                          activation = "gelu")
    if (workload == "W7causal") { # the same layer with a causal attn_mask (a decoder's self-attention)
      causal <- upper.tri(matrix(0, L, L))
      inner <- layer
      layer <- nn_module(initialize = function() self$inner <- inner,
                         forward = function(x) self$inner(x, src_mask = causal))()
    }
    x <- array(rnorm(B * L * d), c(B, L, d)); y <- array(rnorm(B * L * d), c(B, L, d))
    function() rf_fit(layer, x, y, loss = nnf_mse_loss, steps = 2, batch_size = B, optimizer = "adamw",
                      lr = 1e-4, weight_decay = 0.01, progress = FALSE, precision = precision)
  },
  stop("RFUSE_WORKLOAD must be W5, W7 or W7causal, not ", workload))
captured <- NULL
trace(rfuse:::grad_entry, exit = quote({ captured <<- returnValue(); stop("rfuse-step-dump: captured") }),
      where = asNamespace("rfuse"), print = FALSE)
try(fit_two_steps(), silent = TRUE)
untrace(rfuse:::grad_entry, where = asNamespace("rfuse"))
if (is.null(captured)) stop("the training step was not traced")
info <- rfuse:::.rf_program_info(captured$entry$program)
dir.create(dirname(out), showWarnings = FALSE, recursive = TRUE)
writeLines(if (nzchar(Sys.getenv("RFUSE_DUMP_TRACED"))) info$traced else info$fused, out)
cat(sprintf("%s: %d kernels, %.0f bytes moved (cost model)\n", out, info$kernel_count, info$bytes_moved))
