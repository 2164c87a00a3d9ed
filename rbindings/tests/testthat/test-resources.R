# Bounded resources and empty shapes.
test_that("zero-extent matrix products follow R: zeros of the right shape", {
  f <- function(a, b) a %*% b
  a <- matrix(0, 3, 0); b <- matrix(0, 0, 4)
  expect_identical(rf_jit(f, dtype = "float64")(a, b), f(a, b))
  expect_identical(dim(rf_jit(f, dtype = "float64")(matrix(0, 0, 2), matrix(1, 2, 5))), c(0L, 5L))
  expect_equal(rf_jit(f)(a, b), f(a, b)) # float32
})

test_that("a function keeps at most options(rfuse.cache_limit) programs, and warns once", {
  old <- options(rfuse.cache_limit = 3)
  on.exit(options(old))
  jf <- rf_jit(function(x) x * 2 + 1, dtype = "float64")
  for (n in 1:3) jf(rep(1, n))
  expect_warning(jf(rep(1, 4)), class = "rfuse_recompile_warning")
  expect_silent(jf(rep(1, 5)))
  expect_equal(length(ls(attr(jf, "rfuse")$cache, all.names = TRUE)), 3)
  expect_equal(jf(rep(1, 5)), rep(3, 5))
  before <- rf_cache_info()$compiles
  jf(rep(1, 1)) # dropped: compiles again
  expect_equal(rf_cache_info()$compiles, before + 1)
  options(rfuse.cache_limit = 0)
  expect_error(jf(rep(1, 7)), class = "rfuse_option_error")
})

test_that("rf_cache_clear() forgets every program; a dropped function's programs go at gc", {
  jf <- rf_jit(function(x) exp(x) + 1, dtype = "float64")
  jf(c(1, 2))
  expect_gte(rf_cache_info()$programs, 1)
  rf_cache_clear()
  expect_equal(rf_cache_info()$programs, 0)
  expect_equal(jf(c(0, 0)), c(2, 2))
  n <- rf_cache_info()$programs
  local({ g <- rf_jit(function(x) x - 1, dtype = "float64"); g(c(1, 2, 3)) })
  expect_equal(rf_cache_info()$programs, n + 1)
  gc(); gc()
  expect_equal(rf_cache_info()$programs, n)
})

test_that("labels implying more classes than the model's outputs are a shape error naming both", {
  model <- nn_linear(3, 2)
  x <- matrix(rnorm(12), 4)
  expect_error(rf_fit(model, x, c(1, 2, 3, 1), steps = 1, progress = FALSE), class = "rfuse_shape_error")
  expect_error(rf_fit(model, x, c(1, 2, 3, 1), steps = 1, progress = FALSE), "3 classes.*2 classes")
})
