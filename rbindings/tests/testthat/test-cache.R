test_that("a second call with the same shapes compiles nothing; a new shape compiles once", {
  f <- function(x, y) exp(x) * y + 1
  jf <- rf_jit(f)
  before <- rf_cache_info()
  jf(rnd(3, 4), rnd(3, 4))
  after1 <- rf_cache_info()
  expect_equal(after1$compiles - before$compiles, 1)
  jf(rnd(3, 4), rnd(3, 4))
  after2 <- rf_cache_info()
  expect_equal(after2$compiles, after1$compiles)
  expect_equal(after2$hits - after1$hits, 1)
  jf(rnd(5, 2), rnd(5, 2))
  jf(rnd(5, 2), rnd(5, 2))
  expect_equal(rf_cache_info()$compiles - after2$compiles, 1)
  expect_gte(rf_cache_info()$programs, 2)
  expect_gte(rf_cache_clear(), 2)
  expect_equal(rf_cache_info()$programs, 0)
})

test_that("scalar parameters are inputs, not constants: new values do not recompile", {
  jf <- rf_jit(function(x, a) x * a, dtype = "float64")
  jf(1:4, 2)
  n <- rf_cache_info()$compiles
  expect_equal(jf(1:4, 3), (1:4) * 3)
  expect_equal(rf_cache_info()$compiles, n)
})

test_that("the cache report survives a jitted function collected while it runs", {
  # A finalizer can drop a cache between ls() and the lookup (a collection runs at any
  # allocation): an id without its cache counts nothing.
  caches <- rfuse:::.rf_caches
  assign("rfuse-test-gone", NULL, envir = caches)
  on.exit(rm(list = "rfuse-test-gone", envir = caches))
  expect_true(is.numeric(rf_cache_info()$programs))
  expect_gte(rf_cache_clear(), 0)
})

test_that("past the recompile limit, one warning lists the signatures that compiled", {
  f <- rf_jit(function(x) x * 2, dynamic = FALSE) # (a program per length: see test-dynamic.R)
  old <- options(rfuse.recompile_limit = 3)
  on.exit(options(old))
  for (n in 1:3) expect_no_warning(f(seq_len(n) + 0.5))
  w <- tryCatch(f(seq_len(4) + 0.5), warning = function(w) w)
  expect_s3_class(w, "rfuse_recompile_warning")
  expect_match(conditionMessage(w), "compiled 4 times")
  expect_match(conditionMessage(w), "recompile_limit")
  expect_no_warning(for (n in 5:7) f(seq_len(n) + 0.5)) # once per function
  expect_equal(f(c(1.5, 2.5)), c(3, 5)) # an earlier signature: no compile, no warning
  options(rfuse.recompile_limit = 0)
  expect_error(rf_jit(function(x) x + 1)(1), class = "rfuse_option_error")
})

test_that("a new R session compiles a traced function from the disk cache, running no passes (and, on the CPU, no LLVM codegen)", {
  dir <- tempfile("rfuse-cache-")
  script <- tempfile(fileext = ".R")
  writeLines(c(
    "suppressMessages(library(rfuse))",
    "f <- rf_jit(function(x, w) sum(tanh(x %*% w)^2) + max(x))",
    "set.seed(1); v <- f(matrix(runif(64), 8), matrix(runif(32), 8))",
    "i <- rf_cache_info()",
    "cat(sprintf('%.17g %d %d %d %d\\n', v, as.integer(i$pass_runs), as.integer(i$disk_hits),",
    "            as.integer(i$llvm_compiles), as.integer(i$llvm_disk_hits)))"), script)
  env <- c(paste0("RFUSE_CACHE_DIR=", dir), paste0("R_LIBS=", paste(.libPaths(), collapse = ":")))
  run <- function() strsplit(system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE, env = env), " ")[[1]]
  first <- run()
  second <- run()
  expect_identical(first[2:3], c("1", "0"))  # passes ran, nothing on disk yet
  expect_identical(second[2:3], c("0", "1")) # read back: no passes
  expect_identical(second[1], first[1])      # the same program, the same number
  if (as.vector(rf_default_device()) == "cpu") {
    expect_gt(as.integer(first[4]), 0)          # the CPU backend's functions compiled by LLVM
    expect_identical(second[4], "0")            # then loaded from their objects
    expect_identical(second[5], first[4])
  }
  unlink(dir, recursive = TRUE)
})

test_that("rf_cache_info() says where first calls' time went, and a new program adds to it", {
  before <- rf_cache_info()$seconds
  expect_named(before, c("trace", "program", "plan", "load", "library"))
  expect_true(all(before >= 0))
  f <- rf_jit(function(x) tanh(x) * 3 + 0.25 - x^2)
  f(runif(37))
  after <- rf_cache_info()$seconds
  expect_gt(after[["trace"]], before[["trace"]])
  expect_gt(after[["program"]], before[["program"]])
  expect_gt(after[["plan"]], before[["plan"]])
  expect_true(all(after >= before))
})
