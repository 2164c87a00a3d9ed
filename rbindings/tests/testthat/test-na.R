# R's NA semantics: the answers base R gives, including NA (not NaN) where R gives NA.
expect_same_as_r <- function(f, ..., dtype = "float64") {
  jf <- rf_jit(f, dtype = dtype)
  got <- suppressMessages(jf(...))
  expect_identical(got, f(...))
  # NA stays NA and NaN stays NaN, element by element.
  expect_identical(is.na(got) & !is.nan(got), is.na(f(...)) & !is.nan(f(...)))
}

test_that("NA in logical and double inputs propagates as R does", {
  expect_same_as_r(function(x) x * 2, c(TRUE, NA, FALSE))
  expect_same_as_r(function(x) x > 0, c(1, NA, -1))
  expect_same_as_r(function(x) ifelse(x > 0, x, 0), c(1, NA, -1))
  expect_same_as_r(function(x) x + 1, c(1, NA, NaN, 3))
  expect_same_as_r(function(x) exp(x) * 2 + sqrt(abs(x)), c(0.5, NA, -2, NaN))
  expect_same_as_r(function(x) pmax(x, 0) + pmin(x, 1), c(0.5, NA, -2, NaN))
  expect_same_as_r(function(x) sum(x) + mean(x), c(0.5, NA, 2))
  expect_same_as_r(function(x) rowSums(x), matrix(c(1, NA, 3, 4, NaN, 6), 3))
  expect_same_as_r(function(x, y) x %*% y, matrix(c(1, NA, 3, 4), 2), matrix(c(0, 0, 1, 1), 2))
  expect_same_as_r(function(x) x * 2, c(1, NA, 3), dtype = "float32")
  expect_same_as_r(function(x) (x > 1) & (x < 3), c(2, NA, 0))
})

test_that("inputs without NA still run compiled, and NaN alone is NaN", {
  jf <- rf_jit(function(x) x * 2 + 1, dtype = "float64")
  expect_silent(jf(c(1, 2, 3)))
  expect_silent(out <- jf(c(1, NaN, 3)))
  expect_true(is.nan(out[2]))
})

test_that("the fallback says so once per function, as a classed message", {
  jf <- rf_jit(function(x) x > 0, dtype = "float64")
  expect_message(jf(c(1, NA)), class = "rfuse_fallback")
  expect_silent(jf(c(1, NA)))
})

test_that("names and dimnames come back as base R returns them", {
  f <- function(x) x * 2
  expect_identical(suppressMessages(rf_jit(f, dtype = "float64")(c(a = 1, b = 2))), c(a = 2, b = 4))
  m <- matrix(1:4 + 0.5, 2, dimnames = list(c("r1", "r2"), c("c1", "c2")))
  g <- function(x) x %*% t(x) + 1
  expect_identical(suppressMessages(rf_jit(g, dtype = "float64")(m)), g(m))
  expect_identical(suppressMessages(rf_jit(function(x) rowSums(x), dtype = "float64")(m)), rowSums(m))
})

test_that("a vector and a 1-d array are different signatures", {
  jf <- rf_jit(function(x) x + 1, dtype = "float64")
  a <- jf(array(c(1, 2, 3), 3))
  v <- jf(c(1, 2, 3))
  expect_identical(v, c(2, 3, 4))
  expect_identical(a, array(c(2, 3, 4), 3))
  expect_identical(dim(a), 3L)
  expect_null(dim(v))
})
