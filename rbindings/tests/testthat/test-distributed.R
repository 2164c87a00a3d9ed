# Data-parallel training (strategy = "ddp") and its launcher. A group of one rank runs the same
# compiled step as several do (gradients all-reduced in buckets inside it): on the CPU, and on a
# GPU through NCCL. Groups of several ranks need several GPUs; here the launcher's environment,
# its refusals and the stopping of every rank when one fails are checked.

classifier_data <- function() {
  set.seed(1)
  x <- matrix(rnorm(600), 150)
  list(x = x, y = ifelse(x[, 1] + x[, 2] > x[, 3], 1, 2))
}
fresh_net <- function() {
  set.seed(2)
  nn_sequential(nn_linear(4, 16), nn_relu(), nn_linear(16, 2))
}

test_that("ddp over one rank trains exactly as without it, on the default device", {
  d <- classifier_data()
  a <- fresh_net()
  b <- fresh_net()
  set.seed(3) # the same epochs' orders: a group of one shuffles with R's generator
  fa <- rf_fit(a, d$x, d$y, steps = 24, batch_size = 30, lr = 0.2, momentum = 0.9, dtype = "float64",
               shuffle = TRUE, progress = FALSE)
  set.seed(3)
  fb <- rf_fit(b, d$x, d$y, steps = 24, batch_size = 30, lr = 0.2, momentum = 0.9, dtype = "float64",
               shuffle = TRUE, progress = FALSE, strategy = "ddp")
  expect_equal(fb$history, fa$history, tolerance = 1e-12)
  for (p in names(a$parameters))
    expect_equal(as.array(b$parameters[[p]]), as.array(a$parameters[[p]]), tolerance = 1e-12, info = p)
  expect_identical(fb$distributed$rank, 0L)
  expect_identical(fb$distributed$world_size, 1L)
  if (fb$device == "cuda") expect_match(fb$distributed$backend, "^nccl [0-9]") else
    expect_match(fb$distributed$backend, "one rank on the CPU")
  expect_null(fa$distributed)
  # Adam averages the gradients (SGD the updated parameters): one rank equals plain Adam too.
  a2 <- fresh_net(); b2 <- fresh_net()
  ha <- rf_fit(a2, d$x, d$y, steps = 10, batch_size = 50, optimizer = "adam", lr = 0.01, dtype = "float64",
               progress = FALSE)$history
  hb <- rf_fit(b2, d$x, d$y, steps = 10, batch_size = 50, optimizer = "adam", lr = 0.01, dtype = "float64",
               progress = FALSE, strategy = "ddp")$history
  expect_equal(hb, ha, tolerance = 1e-12)
  expect_equal(as.array(b2$parameters[[1]]), as.array(a2$parameters[[1]]), tolerance = 1e-12)
  # The group ends with the loop: a second fit starts its own.
  expect_silent(rf_fit(b, d$x, d$y, steps = 2, progress = FALSE, strategy = "ddp"))
})

test_that("ddp's refusals name what is wrong", {
  d <- classifier_data()
  net <- fresh_net()
  expect_error(rf_fit(net, d$x, d$y, steps = 2, progress = FALSE, strategy = "ddp", devices = 2),
               class = "rfuse_distributed_error", regexp = "rf_launch\\(\"script.R\", devices = 2\\)")
  expect_error(rf_fit(net, d$x, d$y, steps = 2, progress = FALSE, devices = 2),
               class = "rfuse_type_error", regexp = "`devices` is for strategy")
  expect_error(rf_fit(net, d$x, d$y, steps = 2, progress = FALSE, strategy = "fsdp"), "should be one of")
  Sys.setenv(WORLD_SIZE = "two")
  on.exit(Sys.unsetenv("WORLD_SIZE"))
  expect_error(rf_fit(net, d$x, d$y, steps = 2, progress = FALSE, strategy = "ddp"),
               class = "rfuse_distributed_error", regexp = "WORLD_SIZE is 'two', not an integer")
  Sys.setenv(WORLD_SIZE = "1", RANK = "3")
  on.exit(Sys.unsetenv("RANK"), add = TRUE)
  expect_error(rf_fit(net, d$x, d$y, steps = 2, progress = FALSE, strategy = "ddp"),
               class = "rfuse_distributed_error", regexp = "rank 3 is not in 0..0")
  # Nothing was left running: a plain fit and a group of one still work.
  Sys.unsetenv(c("WORLD_SIZE", "RANK"))
  expect_silent(rf_fit(net, d$x, d$y, steps = 2, progress = FALSE, strategy = "ddp"))
})

launch_script <- function(code) {
  f <- tempfile(fileext = ".R")
  writeLines(code, f)
  f
}

test_that("rf_launch gives every rank torchrun's environment and passes NCCL's through", {
  out <- tempfile("ranks")
  dir.create(out)
  script <- launch_script(c(
    "v <- Sys.getenv(c('WORLD_SIZE', 'RANK', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT', 'CUDA_VISIBLE_DEVICES', 'NCCL_RFUSE_PROBE'))",
    sprintf("writeLines(v, file.path('%s', paste0('rank', v[['RANK']])))", out),
    "cat('hello from rank', v[['RANK']], '\\n')"))
  old <- Sys.getenv(c("NCCL_RFUSE_PROBE", "CUDA_VISIBLE_DEVICES"), unset = NA)
  Sys.setenv(NCCL_RFUSE_PROBE = "kept", CUDA_VISIBLE_DEVICES = "5,7,9")
  on.exit(for (n in names(old)) if (is.na(old[[n]])) Sys.unsetenv(n) else do.call(Sys.setenv, as.list(old[n])))
  expect_output(res <- rf_launch(script, devices = 3, master_port = 29517), "hello from rank 0")
  expect_identical(unname(res$status), c(0L, 0L, 0L))
  for (r in 0:2)
    expect_identical(readLines(file.path(out, paste0("rank", r))),
                     c("3", as.character(r), as.character(r), "127.0.0.1", "29517", c("5", "7", "9")[r + 1], "kept"))
  expect_match(readLines(res$logs[2]), "hello from rank 1")
  expect_error(rf_launch(script, devices = 4), class = "rfuse_distributed_error",
               regexp = "CUDA_VISIBLE_DEVICES \\('5,7,9'\\) lists 3 GPUs")
  expect_error(rf_launch(file.path(tempdir(), "none.R")), class = "rfuse_type_error", regexp = "does not exist")
  expect_error(rf_launch(script, devices = 0), class = "rfuse_type_error", regexp = "`devices`")
  expect_error(rf_launch(script, master_port = 70000), class = "rfuse_type_error", regexp = "`master_port`")
})

test_that("a rank that fails stops every other rank, and the error names it", {
  script <- launch_script(c("if (Sys.getenv('RANK') == '1') { cat('rank 1 gives up\\n'); quit(status = 3) }",
                            "Sys.sleep(120)"))
  t0 <- Sys.time()
  err <- tryCatch(rf_launch(script, devices = 3, master_port = 29518), error = function(e) e)
  expect_s3_class(err, "rfuse_distributed_error")
  expect_match(conditionMessage(err), "rank 1 of 3 failed \\(exit status 3\\); the other ranks were stopped")
  expect_match(conditionMessage(err), "rank 1 gives up")
  expect_lt(as.double(difftime(Sys.time(), t0, units = "secs")), 30)
  slow <- launch_script("Sys.sleep(120)")
  expect_error(rf_launch(slow, devices = 2, master_port = 29519, timeout = 1), class = "rfuse_distributed_error",
               regexp = "ranks 0, 1 still running after 1 s: stopped")
})

test_that("two ranks on the CPU are refused by each rank, naming why", {
  d <- classifier_data()
  data_file <- tempfile(fileext = ".rds")
  saveRDS(d, data_file)
  script <- launch_script(c("library(rfuse)", sprintf("d <- readRDS('%s')", data_file),
                            "net <- nn_sequential(nn_linear(4, 2))",
                            "rf_fit(net, d$x, d$y, steps = 2, progress = FALSE, strategy = 'ddp', device = 'cpu')"))
  err <- tryCatch(rf_launch(script, devices = 2, master_port = 29520), error = function(e) e)
  expect_s3_class(err, "rfuse_distributed_error")
  expect_match(conditionMessage(err), "a process group on the CPU has one rank")
})

test_that("a launched rank trains with ddp on the GPU through NCCL (one GPU: one rank)", {
  if (as.vector(rf_default_device()) != "cuda")
    skip(paste("no usable GPU:", attr(rf_default_device(), "description")))
  d <- classifier_data()
  data_file <- tempfile(fileext = ".rds")
  result <- tempfile(fileext = ".rds")
  saveRDS(d, data_file)
  script <- launch_script(c("library(rfuse)", sprintf("d <- readRDS('%s')", data_file),
                            "set.seed(2); net <- nn_sequential(nn_linear(4, 16), nn_relu(), nn_linear(16, 2))",
                            "fit <- rf_fit(net, d$x, d$y, steps = 24, batch_size = 30, lr = 0.2, momentum = 0.9, dtype = 'float64', progress = FALSE, strategy = 'ddp', devices = 1)",
                            sprintf("saveRDS(list(history = fit$history, backend = fit$distributed$backend, w = lapply(net$parameters, as.array)), '%s')", result)))
  rf_launch(script, devices = 1, master_port = 29521)
  got <- readRDS(result)
  expect_match(got$backend, "^nccl [0-9]")
  a <- fresh_net()
  fa <- rf_fit(a, d$x, d$y, steps = 24, batch_size = 30, lr = 0.2, momentum = 0.9, dtype = "float64", progress = FALSE)
  expect_equal(got$history, fa$history, tolerance = 1e-12)
  for (p in names(a$parameters))
    expect_equal(got$w[[p]], as.array(a$parameters[[p]]), tolerance = 1e-12, info = p)
})
