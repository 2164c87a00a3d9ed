test_that("rf_options lists every setting with a typed value", {
  o <- rf_options()
  tab <- rf_option_table()
  expect_setequal(names(o), tab$name)
  expect_true(all(c("tf32", "cuda_graphs", "cpu_threads", "cpu_jit", "lt_epilogues") %in% names(o)))
  expect_type(o$cuda_graphs, "logical")
  expect_type(o$cpu_threads, "integer")
  expect_false(o$tf32) # the R package's default
  expect_true(all(startsWith(tab$environment, "RFUSE_")))
})

test_that("rf_options sets, returns the old values and restores them", {
  old <- rf_options(cpu_threads = 1L, cuda_graphs = FALSE)
  on.exit(rf_options(old))
  expect_identical(old, list(cpu_threads = 0L, cuda_graphs = TRUE))
  expect_identical(rf_options()$cpu_threads, 1L)
  expect_false(rf_options()$cuda_graphs)
  rf_options(old)
  expect_identical(rf_options()$cpu_threads, 0L)
  expect_true(rf_options()$cuda_graphs)
})

test_that("a setting changes what runs: cpu_jit = FALSE interprets, with the same answer", {
  f <- function(x) exp(x) / sum(exp(x))
  x <- c(0.5, -1, 2)
  jf <- rf_jit(f, dtype = "float64")
  a <- jf(x)
  old <- rf_options(cpu_jit = FALSE)
  on.exit(rf_options(old))
  b <- rf_jit(f, dtype = "float64")(x)
  expect_equal(a, b, tolerance = 1e-12)
  expect_equal(a, f(x), tolerance = 1e-12)
})

test_that("bad settings are classed errors naming the setting and what it accepts", {
  expect_error(rf_options(no_such_thing = 1), class = "rfuse_option_error")
  expect_error(rf_options(no_such_thing = 1), "no_such_thing")
  expect_error(rf_options(cuda_graphs = "maybe"), class = "rfuse_option_error")
  expect_error(rf_options(cuda_graphs = "maybe"), "TRUE or FALSE")
  expect_error(rf_options(cpu_threads = -2L), class = "rfuse_option_error")
  expect_error(rf_options(cpu_threads = 1.5), "an integer")
  expect_error(rf_options(row_grid = "diagonal"), "row, wave")
  expect_error(rf_options(tf32 = c(TRUE, FALSE)), "one value")
  expect_error(rf_options(TRUE), class = "rfuse_option_error")
  expect_identical(rf_options()$cuda_graphs, TRUE) # nothing changed
  expect_error(rf_allow_tf32("yes"), class = "rfuse_option_error")
})

test_that("options(rfuse.*) apply before a compile, and an unknown one is named", {
  old <- rf_options()
  on.exit({ options(rfuse.cpu_threads = NULL, rfuse.bogus = NULL); rf_options(old) })
  options(rfuse.cpu_threads = 2L)
  rf_jit(function(x) x + 1, dtype = "float64")(c(1, 2))
  expect_identical(rf_options()$cpu_threads, 2L)
  options(rfuse.cpu_threads = NULL, rfuse.bogus = TRUE)
  expect_error(rf_jit(function(x) x + 2, dtype = "float64")(c(1, 2)), "rfuse.bogus")
})

test_that("rf_allow_tf32 goes through rf_options", {
  old <- rf_allow_tf32(TRUE)
  on.exit(rf_allow_tf32(old))
  expect_false(old)
  expect_true(rf_options()$tf32)
})

test_that("rf_explain shows the GPU plan's choices", {
  ex <- rf_explain(function(x) { e <- exp(x); e / rowSums(e) }, matrix(runif(64 * 32), 64))
  expect_true(length(ex$gpu_plan) >= 1)
  expect_match(ex$gpu_plan, "grid [0-9]+ block [0-9]+", all = FALSE)
})

test_that("rf_options(device = ) steers where calls run", {
  old <- rf_options(device = "cpu")
  on.exit(rf_options(old))
  expect_identical(as.vector(rf_default_device()), "cpu")
  expect_equal(rf_jit(function(x) x * 2, dtype = "float64")(c(1, 2)), c(2, 4))
  rf_options(old)
  expect_identical(rf_options()$device, "auto")
})
