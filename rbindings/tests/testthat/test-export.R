# rf_export() / rf_load_compiled(): ahead-of-time artifacts from R (issue 18). Exporting needs
# NVRTC (present here, no GPU needed) and, for the CPU program, a C compiler; a loaded function
# runs on the GPU where there is one, else on the artifact's CPU program.

gpu <- function() as.vector(rf_default_device()) == "cuda"
artifact_file <- function(name) file.path(tempdir(), paste0(name, ".rfuse"))

test_that("rf_export writes one artifact for each architecture asked", {
  f <- rf_jit(function(x, w) tanh(x %*% w) + 1)
  path <- artifact_file("export-basic")
  s <- rf_export(f, path, matrix(runif(64), 8), matrix(runif(32), 8), archs = c("sm_90", "sm_86"))
  expect_identical(s$archs, c("sm_86", "sm_90"))
  expect_identical(s$ptx, "sm_90")
  expect_gte(s$kernels, 1)
  bytes <- readBin(path, "raw", file.size(path))
  expect_identical(rawToChar(bytes[1:8]), "RFUSEART")
  expect_equal(length(bytes), file.size(path))
  expect_true(nzchar(s$cpu)) # a CPU program too, by default
  s2 <- rf_export(f, path, matrix(runif(64), 8), matrix(runif(32), 8), archs = "sm_90", ptx = FALSE, cpu = FALSE)
  expect_identical(s2$ptx, "")
  expect_identical(s2$cpu, "")
  expect_lt(s2$bytes, s$bytes)
  expect_error(rf_export(f, path, matrix(runif(64), 8), matrix(runif(32), 8), archs = character(), cpu = FALSE),
               class = "rfuse_type_error", regexp = "holds nothing")
})

test_that("what an artifact cannot reproduce is refused when exporting", {
  x <- matrix(runif(16), 4)
  expect_error(rf_export(rf_jit(function(x) x * runif(1)), artifact_file("r"), x), class = "rfuse_unsupported",
               regexp = "random")
  expect_error(rf_export(rf_jit(function(x) which.max(x)), artifact_file("w"), x), class = "rfuse_unsupported",
               regexp = "checks its values")
  m <- nn_sequential(nn_linear(4, 3), nn_batch_norm1d(3))
  expect_error(rf_export(m, artifact_file("m"), x), class = "rfuse_unsupported", regexp = "eval")
  expect_error(rf_export(function(x) x, artifact_file("f"), x), class = "rfuse_type_error", regexp = "rf_jit")
  expect_error(rf_export(rf_jit(function(x) x + 1), artifact_file("a"), x, archs = "gfx90a"), class = "rfuse_type_error")
  expect_error(rf_export(rf_jit(function(x) x + 1), NA_character_, x), class = "rfuse_type_error")
  expect_error(rf_export(rf_jit(function(x) x + 1), artifact_file("n")), class = "rfuse_type_error",
               regexp = "example arguments")
  expect_error(rf_export(rf_jit(function(x) x + 1), artifact_file("p"), x, ptx = NA), class = "rfuse_type_error")
})

test_that("damaged, foreign and missing files are classed errors", {
  f <- rf_jit(function(x) exp(x) * 2)
  path <- artifact_file("export-damage")
  rf_export(f, path, runif(100), archs = "sm_90")
  bytes <- readBin(path, "raw", file.size(path))
  cut <- artifact_file("export-cut")
  writeBin(bytes[seq_len(length(bytes) %/% 2)], cut)
  expect_error(rf_load_compiled(cut), class = "rfuse_artifact_error", regexp = "truncated")
  flipped <- bytes
  flipped[length(bytes) - 10] <- as.raw(bitwXor(as.integer(flipped[length(bytes) - 10]), 0x5a))
  bad <- artifact_file("export-flipped")
  writeBin(flipped, bad)
  expect_error(rf_load_compiled(bad), class = "rfuse_artifact_error", regexp = "checksum")
  text <- artifact_file("export-text")
  writeLines("function(x) x", text)
  expect_error(rf_load_compiled(text), class = "rfuse_artifact_error", regexp = "not an rfuse artifact")
  expect_error(rf_load_compiled(artifact_file("does-not-exist")), class = "rfuse_artifact_error", regexp = "cannot open")
  expect_error(rf_load_compiled(3), class = "rfuse_type_error")
})

test_that("without a GPU a GPU-only artifact says so", {
  skip_if(gpu(), "a GPU is present")
  path <- artifact_file("export-nogpu")
  rf_export(rf_jit(function(x) x * 2), path, runif(10), archs = "sm_90", cpu = FALSE)
  expect_error(rf_load_compiled(path), class = "rfuse_device_error", regexp = "no CUDA")
})

test_that("a loaded function answers as the jitted one, without tracing or compiling", {
  f <- rf_jit(function(x, w, b) list(y = tanh(sweep(x %*% w, 2, b, "+")), s = sum(x)))
  x <- matrix(runif(96), 12); w <- matrix(runif(40), 8); b <- runif(5)
  path <- artifact_file("export-run")
  rf_export(f, path, x, w, b, archs = if (gpu()) "sm_90" else character())
  before <- rf_cache_info()
  g <- rf_load_compiled(path)
  expect_s3_class(g, "rf_compiled_function")
  expect_match(attr(g, "description"), if (gpu()) "cuda" else "cpu")
  x2 <- matrix(runif(96), 12)
  got <- g(x2, w, b)
  want <- f(x2, w, b)
  expect_named(got, c("y", "s"))
  expect_equal(dim(got$y), c(12L, 5L))
  tol <- if (gpu()) 1e-6 else 1e-12 # float32 on the GPU, float64 on the CPU (as rf_jit)
  expect_equal(got$y, want$y, tolerance = tol)
  expect_equal(got$s, want$s, tolerance = tol)
  after <- rf_cache_info()
  expect_identical(after$pass_runs, before$pass_runs)
  expect_identical(after$nvrtc_compiles, before$nvrtc_compiles)
  expect_error(g(x2, w), class = "rfuse_type_error", regexp = "takes 3 arguments")
  expect_error(g(t(x2), w, b), class = "rfuse_shape_error")
  x2[3] <- NA
  expect_error(g(x2, w, b), class = "rfuse_unsupported", regexp = "NA")
})

test_that("an exported model carries its weights", {
  m <- nn_sequential(nn_linear(6, 16), nn_relu(), nn_linear(16, 3))
  m$eval()
  x <- matrix(runif(60), 10)
  path <- artifact_file("export-model")
  rf_export(m, path, x, archs = if (gpu()) "sm_90" else character())
  g <- rf_load_compiled(path)
  x2 <- matrix(runif(60), 10)
  expect_equal(g(x2), as.array(m(x2)), tolerance = 1e-5)
})

test_that("two loaded artifacts at once each run their own program", {
  # (a CPU program's library is loaded from an anonymous file; two of them alive at once must
  # not be taken for one another)
  f1 <- rf_jit(function(x) x * 2 + 1)
  f2 <- rf_jit(function(x) sqrt(abs(x)) - 3)
  p1 <- artifact_file("export-two-1"); p2 <- artifact_file("export-two-2")
  x <- runif(50)
  rf_export(f1, p1, x, archs = if (gpu()) "sm_90" else character())
  rf_export(f2, p2, x, archs = if (gpu()) "sm_90" else character())
  g1 <- rf_load_compiled(p1)
  g2 <- rf_load_compiled(p2)
  g3 <- rf_load_compiled(p1)
  tol <- if (gpu()) 1e-6 else 1e-12
  expect_equal(g1(x), x * 2 + 1, tolerance = tol)
  expect_equal(g2(x), sqrt(abs(x)) - 3, tolerance = tol)
  expect_equal(g3(x), x * 2 + 1, tolerance = tol)
  rm(g1); gc()
  g4 <- rf_load_compiled(p2)
  expect_equal(g4(x), sqrt(abs(x)) - 3, tolerance = tol)
  expect_equal(g2(x), sqrt(abs(x)) - 3, tolerance = tol)
})

# ---- Training steps kept in a file (rf_train(compiled = ), rf_fit(compiled = )) ------------------

regression_data <- function() {
  set.seed(71)
  x <- matrix(rnorm(48 * 3), 48)
  list(x = x, y = x %*% c(1, -2, 0.5) + 0.25)
}
regression_loss <- function(w, b, x, y) nnf_mse_loss(x %*% w + b, y)
regression_fit <- function(compiled = NULL, batch_size = 16, momentum = 0.9, ...)
  rf_train(regression_loss, list(w = matrix(0, 3, 1), b = 0), regression_data(), steps = 12, batch_size = batch_size,
           lr = 0.05, momentum = momentum, progress = FALSE, compiled = compiled, ...)

test_that("a training step kept in a file trains as the traced one, without tracing or compiling", {
  path <- artifact_file("step-regression")
  unlink(path)
  plain <- regression_fit()
  first <- regression_fit(compiled = path) # traced, compiled, and written
  expect_true(file.exists(path))
  expect_equal(first$history, plain$history)
  before <- rf_cache_info()
  again <- regression_fit(compiled = path) # loaded
  after <- rf_cache_info()
  expect_identical(again$history, first$history)
  expect_identical(again$params, first$params)
  expect_identical(after$pass_runs, before$pass_runs)
  expect_identical(after$nvrtc_compiles, before$nvrtc_compiles)
  expect_identical(after$llvm_compiles, before$llvm_compiles)
  expect_identical(after$seconds[["trace"]], before$seconds[["trace"]]) # nothing was traced
  # Another learning rate (an input of the step) and more steps use the same file.
  longer <- rf_train(regression_loss, list(w = matrix(0, 3, 1), b = 0), regression_data(), steps = 30,
                     batch_size = 16, lr = function(s) 0.05 / sqrt(s), momentum = 0.9, progress = FALSE, compiled = path)
  expect_identical(rf_cache_info()$pass_runs, before$pass_runs)
  expect_length(longer$history, 30)
  expect_lt(longer$history[30], longer$history[1])
})

test_that("an epoch's smaller last batch has its own step in the file", {
  path <- artifact_file("step-last-batch")
  unlink(path)
  fit <- function(compiled, shuffle = FALSE) { # 48 samples in batches of 20: 20, 20, then 8
    set.seed(12)
    regression_fit(compiled = compiled, batch_size = 20, shuffle = shuffle)
  }
  plain <- fit(NULL)
  first <- fit(path)
  before <- rf_cache_info()
  again <- fit(path)
  expect_identical(rf_cache_info()$pass_runs, before$pass_runs)
  expect_identical(rf_cache_info()$seconds[["trace"]], before$seconds[["trace"]])
  expect_equal(first$history, plain$history)
  expect_identical(again$history, first$history)
  expect_identical(again$params, first$params)
  expect_equal(fit(path, shuffle = TRUE)$history, fit(NULL, shuffle = TRUE)$history) # (the order drawn on the device)
  # The file serves only calls with the same last batch.
  expect_error(regression_fit(compiled = path, batch_size = 20, drop_last = TRUE), class = "rfuse_artifact_error",
               regexp = "last_batch: one there, none here")
})

test_that("a new R session trains from the file with no trace, no pass pipeline and no code generation", {
  path <- artifact_file("step-session")
  unlink(path)
  first <- regression_fit(compiled = path)
  out <- tempfile(fileext = ".rds")
  script <- tempfile(fileext = ".R")
  writeLines(c(
    "suppressMessages(library(rfuse))",
    sprintf("regression_data <- %s", paste(deparse(regression_data), collapse = "\n")),
    sprintf("regression_loss <- %s", paste(deparse(regression_loss), collapse = "\n")),
    sprintf("fit <- rf_train(regression_loss, list(w = matrix(0, 3, 1), b = 0), regression_data(), steps = 12,
             batch_size = 16, lr = 0.05, momentum = 0.9, progress = FALSE, compiled = '%s')", path),
    sprintf("saveRDS(list(fit = unclass(fit)[c('history', 'params')], info = rf_cache_info()), '%s')", out)), script)
  log <- system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE, stderr = TRUE,
                 env = paste0("R_LIBS=", paste(.libPaths(), collapse = ":")))
  expect_true(file.exists(out), info = paste(log, collapse = "\n"))
  got <- readRDS(out)
  expect_identical(got$fit$history, first$history)
  expect_identical(got$fit$params, first$params)
  expect_identical(got$info$pass_runs, 0)
  expect_identical(got$info$disk_hits, 0)
  expect_identical(got$info$nvrtc_compiles, 0)
  expect_identical(got$info$llvm_compiles + got$info$llvm_disk_hits, 0)
  expect_identical(got$info$seconds[["trace"]], 0)
})

test_that("rf_fit keeps its step in a file: filters in their training layout, running statistics, dropout", {
  make <- function() {
    torch_manual_seed(5)
    nn_sequential(nn_conv2d(2, 3, 3), nn_batch_norm2d(3), nn_relu(), nn_dropout(0.25), nn_flatten(),
                  nn_linear(27, 2))
  }
  set.seed(8)
  x <- array(rnorm(12 * 2 * 5 * 5), c(12, 2, 5, 5)); y <- rep(1:2, 6)
  path <- artifact_file("step-fit")
  unlink(path)
  train <- function(compiled) {
    net <- make()
    set.seed(9) # (the dropout masks)
    fit <- rf_fit(net, x, y, steps = 6, lr = 0.1, momentum = 0.9, progress = FALSE, compiled = compiled)
    list(history = fit$history, params = lapply(net$parameters, as.array),
         running = as.array(net[[2]]$running_var), batches = as.numeric(as.array(net[[2]]$num_batches_tracked)))
  }
  plain <- train(NULL)
  first <- train(path)
  before <- rf_cache_info()
  again <- train(path)
  expect_identical(rf_cache_info()$pass_runs, before$pass_runs)
  tol <- if (gpu()) 1e-5 else 1e-12
  expect_equal(first, plain, tolerance = tol)
  expect_equal(again, first, tolerance = tol)
  expect_equal(again$batches, 6)
  expect_false(isTRUE(all.equal(again$running, rep(1, 3)))) # the running statistics moved
})

test_that("a step file is checked against the call, and what one file cannot hold is refused", {
  path <- artifact_file("step-checked")
  unlink(path)
  regression_fit(compiled = path)
  size <- file.size(path)
  expect_error(regression_fit(compiled = path, batch_size = 12), class = "rfuse_artifact_error",
               regexp = "data x dim: c\\(16, 3\\) there, c\\(12, 3\\) here")
  expect_error(regression_fit(compiled = path, momentum = 0.5), class = "rfuse_artifact_error",
               regexp = "settings momentum: 0.9 there, 0.5 here")
  expect_error(regression_fit(compiled = path, optimizer = "adam"), class = "rfuse_artifact_error", regexp = "optimizer")
  expect_error(rf_train(regression_loss, list(w = matrix(0, 3, 2), b = 0), regression_data(), steps = 2, batch_size = 16,
                        lr = 0.05, momentum = 0.9, progress = FALSE, compiled = path),
               class = "rfuse_artifact_error", regexp = "params w")
  expect_identical(file.size(path), size) # a refusal leaves the file as it was
  expect_error(rf_load_compiled(path), class = "rfuse_artifact_error", regexp = "training step")
  # A file without a last batch's step does not serve a call that has one; ranks of a group do not
  # train from a file.
  d40 <- lapply(regression_data(), function(v) v[1:40, , drop = FALSE])
  expect_error(rf_train(regression_loss, list(w = matrix(0, 3, 1), b = 0), d40, steps = 2, batch_size = 16,
                        lr = 0.05, momentum = 0.9, progress = FALSE, compiled = path),
               class = "rfuse_artifact_error", regexp = "last_batch: none there, one here")
  expect_error(regression_fit(compiled = path, strategy = "ddp"), class = "rfuse_unsupported", regexp = "ddp")
  expect_error(regression_fit(compiled = c("a", "b")), class = "rfuse_type_error", regexp = "one file name")
  # A compiled function's artifact is not a training step, and a damaged file is named.
  fpath <- artifact_file("step-not-a-step")
  rf_export(rf_jit(function(x) x + 1), fpath, runif(4), archs = if (gpu()) "sm_90" else character())
  expect_error(regression_fit(compiled = fpath), class = "rfuse_artifact_error", regexp = "not a training step")
  bytes <- readBin(path, "raw", size)
  cut <- artifact_file("step-cut")
  writeBin(bytes[seq_len(size %/% 2)], cut)
  expect_error(regression_fit(compiled = cut), class = "rfuse_artifact_error", regexp = "truncated")
  # R-side updates of running statistics (a batch norm's cumulative average) cannot be exported.
  net <- nn_sequential(nn_linear(3, 4), nn_batch_norm1d(4, momentum = NULL), nn_linear(4, 1))
  d <- regression_data()
  expect_error(rf_fit(net, d$x, d$y, loss = nnf_mse_loss, steps = 2, progress = FALSE,
                      compiled = artifact_file("step-cumulative")), class = "rfuse_unsupported", regexp = "momentum = NULL")
  expect_false(file.exists(artifact_file("step-cumulative")))
})

test_that("rf_fit's step file is refused for a model whose constants changed: frozen weights, mode", {
  set.seed(21)
  x <- matrix(rnorm(40 * 3), 40); y <- rep(1:2, 20)
  make <- function() {
    torch_manual_seed(3)
    net <- nn_sequential(nn_linear(3, 6), nn_relu(), nn_linear(6, 2))
    net[[1]]$requires_grad_(FALSE) # a frozen first layer: constants of the step
    net
  }
  path <- artifact_file("step-frozen")
  unlink(path)
  fit <- function(net) rf_fit(net, x, y, steps = 3, lr = 0.1, progress = FALSE, compiled = path)
  first <- fit(make())
  expect_equal(fit(make())$history, first$history) # the same constants: loaded
  changed <- make()
  changed[[1]]$weight <- nn_parameter(as.array(changed[[1]]$weight) * 2, requires_grad = FALSE)
  expect_error(fit(changed), class = "rfuse_artifact_error", regexp = "model_constants")
  evaluated <- make()
  evaluated$eval()
  expect_error(fit(evaluated), class = "rfuse_artifact_error", regexp = "model_constants")
})
