# Writes the compiled (fused) module of rf_fit's ResNet-18 training step, as r-bench.R's W5 traces
# it, for rfuse-step-profile (benchmarks/step-profile.cpp): a diagnostic of where the step traced
# from R differs from rfuse-bench's. Traces and compiles only (the capture stops rf_fit before its
# first step). Rscript benchmarks/r-step-dump.R [out.mlir] (default .bundle/diag/rstep.mlir);
# RFUSE_PRECISION=bf16-mixed for the mixed-precision step.
suppressPackageStartupMessages(library(rfuse))
set.seed(1)
out <- commandArgs(TRUE)[1]
if (is.na(out)) out <- ".bundle/diag/rstep.mlir"
b <- 256
net <- nn_resnet18(num_classes = 10)
x <- array(rnorm(b * 3 * 32 * 32), c(b, 3, 32, 32)); y <- rf_one_hot(sample.int(10, b, replace = TRUE), 10)
captured <- NULL
trace(rfuse:::grad_entry, exit = quote({ captured <<- returnValue(); stop("rfuse-step-dump: captured") }),
      where = asNamespace("rfuse"), print = FALSE)
try(rf_fit(net, x, y, steps = 2, lr = 0.1, momentum = 0.9, progress = FALSE,
           precision = Sys.getenv("RFUSE_PRECISION", "32")), silent = TRUE)
untrace(rfuse:::grad_entry, where = asNamespace("rfuse"))
if (is.null(captured)) stop("the training step was not traced")
info <- rfuse:::.rf_program_info(captured$entry$program)
dir.create(dirname(out), showWarnings = FALSE, recursive = TRUE)
writeLines(info$fused, out)
cat(sprintf("%s: %d kernels, %.0f bytes moved (cost model)\n", out, info$kernel_count, info$bytes_moved))
