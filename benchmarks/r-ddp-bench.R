# Data-parallel training from R (issue 19): W5 ResNet-18 (32x32, batch 256 per GPU, SGD momentum)
# and W2 MLP (4096 per GPU), rf_fit(strategy = "ddp") with the data on the device, as a user runs
# them; the peer is benchmarks/torch_ddp.py (PyTorch DDP, same shapes).
#   Rscript benchmarks/r-ddp-bench.R 1,2,4,8     (the world sizes; those above the GPUs seen are skipped)
# For each world size the script launches itself with rf_launch(); each rank trains its shard and
# rank 0 writes $OUT/r_ddp_<N>.json. Then it prints, per workload, the step time, the throughput
# and the scaling efficiency (throughput on N GPUs / N x one GPU's with strategy = "ddp") beside
# one GPU without ddp (strategy = "none": what the all-reduce path costs on one GPU).
suppressPackageStartupMessages(library(rfuse))
out <- Sys.getenv("OUT", ".")
steps <- as.integer(Sys.getenv("RFUSE_BENCH_ITERS", "30"))

workloads <- function(strategy) {
  world <- as.integer(Sys.getenv("WORLD_SIZE", "1"))
  set.seed(1)
  res <- list()
  net <- nn_resnet18(num_classes = 10)
  b <- 256L * world # each rank trains on its 256 of the global batch
  x <- array(rnorm(b * 3 * 32 * 32), c(b, 3, 32, 32)); y <- rf_one_hot(sample.int(10, b, replace = TRUE), 10)
  fit <- rf_fit(net, x, y, batch_size = 256, steps = steps + 1, lr = 0.1, momentum = 0.9, progress = FALSE,
                strategy = strategy)
  res$W5 <- list(step_ms = 1000 * fit$step_seconds, samples_per_s = world * 256 / fit$step_seconds)
  d <- c(4096L * world, 1024L, 4096L)
  mlp <- nn_sequential(nn_linear(d[2], d[3]), nn_gelu(), nn_linear(d[3], d[3]), nn_gelu(), nn_linear(d[3], d[2]))
  X <- matrix(rnorm(d[1] * d[2]), d[1]); Y <- matrix(rnorm(d[1] * d[2]), d[1])
  fit <- rf_fit(mlp, X, Y, loss = nnf_mse_loss, batch_size = 4096, steps = steps + 1, lr = 1e-3, progress = FALSE,
                strategy = strategy)
  res$W2 <- list(step_ms = 1000 * fit$step_seconds, samples_per_s = world * 4096 / fit$step_seconds)
  res
}

if (nzchar(Sys.getenv("RFUSE_DDP_RANK_MODE"))) { # a launched rank
  res <- workloads("ddp")
  # With one rank, the same steps without ddp in this process too: what the launch itself costs.
  if (Sys.getenv("WORLD_SIZE") == "1") res$plain_in_rank <- lapply(workloads("none"), `[[`, "step_ms")
  if (Sys.getenv("RANK") == "0")
    jsonlite::write_json(res, file.path(out, sprintf("r_ddp_%s.json", Sys.getenv("WORLD_SIZE"))), auto_unbox = TRUE, digits = 6)
  quit(status = 0)
}

arg <- commandArgs(TRUE)
sizes <- as.integer(strsplit(if (length(arg)) arg[1] else "1", ",")[[1]])
gpus <- if (as.vector(rf_default_device()) == "cuda") {
  v <- Sys.getenv("CUDA_VISIBLE_DEVICES", "")
  if (nzchar(v)) length(strsplit(v, ",")[[1]]) else
    length(suppressWarnings(system2("nvidia-smi", c("--query-gpu=index", "--format=csv,noheader"), stdout = TRUE)))
} else 0L
if (!gpus) { cat("r-ddp-bench: no GPU; nothing to measure\n"); quit(status = 0) }
plain <- workloads("none")
self <- normalizePath(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
Sys.setenv(RFUSE_DDP_RANK_MODE = "1")
rows <- list()
for (n in sizes[sizes <= gpus]) {
  rf_launch(self, devices = n, master_port = 29600L + n)
  r <- jsonlite::read_json(file.path(out, sprintf("r_ddp_%d.json", n)))
  for (w in c("W5", "W2")) rows[[length(rows) + 1]] <- data.frame(
    workload = w, world = n, step_ms = r[[w]]$step_ms, samples_per_s = r[[w]]$samples_per_s,
    one_gpu_plain_ms = plain[[w]]$step_ms)
}
tab <- do.call(rbind, rows)
one <- tab[tab$world == 1, c("workload", "samples_per_s")]
tab$efficiency <- if (nrow(one)) tab$samples_per_s / (tab$world * one$samples_per_s[match(tab$workload, one$workload)]) else NA
print(tab, digits = 4, row.names = FALSE)
one_rank <- file.path(out, "r_ddp_1.json")
if (file.exists(one_rank) && !is.null(jsonlite::read_json(one_rank)$plain_in_rank))
  cat("the launched rank without ddp (ms/step):",
      paste(names(jsonlite::read_json(one_rank)$plain_in_rank), round(unlist(jsonlite::read_json(one_rank)$plain_in_rank), 3),
            collapse = ", "), "\n")
jsonlite::write_json(tab, file.path(out, "r_ddp_bench.json"), digits = 6)
