# R's integer semantics: integer results where R gives them, R's NA and warning on overflow,
# %/% and %% as R computes them on integers, in float64 and float32.

# The value, type and warnings of a jitted call against base R's.
expect_integer_semantics <- function(f, ..., dtype = "float64", compiled = TRUE) {
  jf <- rf_jit(f, dtype = dtype)
  ref <- warnings_of(f(...))
  got <- warnings_of(suppressMessages(jf(...)))
  expect_identical(got$value, ref$value)
  expect_identical(got$warnings, ref$warnings)
  if (compiled) expect_silent(jf(...)) # ran compiled: no fallback note
}

test_that("integer arithmetic gives integers, in float64 and float32", {
  for (dt in c("float64", "float32")) {
    expect_integer_semantics(function(x, y) x + y, 5L, 1L, dtype = dt)
    expect_integer_semantics(function(x, y) x * y - 3L, c(1L, -2L, 3L), 4L, dtype = dt)
    expect_integer_semantics(function(x) -x + abs(x), c(3L, -4L), dtype = dt)
    expect_integer_semantics(function(x) x * 2L, c(TRUE, FALSE), dtype = dt)
    expect_integer_semantics(function(x) sum(x > 0), c(1, -1, 2), dtype = dt)
    expect_integer_semantics(function(x) max(x) - min(x), c(4L, 9L, 1L), dtype = dt)
    expect_integer_semantics(function(x) pmax(x, 3L) + ifelse(x > 3L, x, 0L), c(4L, 9L, 1L), dtype = dt)
    expect_integer_semantics(function(x) t(x) * 2L, matrix(1:6, 2), dtype = dt)
  }
  # Mixed with doubles, divided or raised: doubles, as in R.
  expect_integer_semantics(function(x) x * 2, 1:3)
  expect_integer_semantics(function(x) x / 2L + x^2, 1:3)
  expect_integer_semantics(function(x) mean(x), 1:4)
})

test_that("an integer overflow gives R's NA and warning (base R answers that call)", {
  big <- .Machine$integer.max
  expect_integer_semantics(function(x, y) x + y, big, 1L, compiled = FALSE)
  expect_integer_semantics(function(x, y) x + y, big - 1L, 1L) # the largest integer: compiled
  expect_integer_semantics(function(x) (x * x) %/% 7L, c(50000L, 3L), compiled = FALSE) # intermediate
  expect_integer_semantics(function(x) sum(x), c(big, big), compiled = FALSE) # R: a double
  # float32 holds integers exactly up to 2^24: beyond, base R answers.
  expect_integer_semantics(function(x) x + 1L, c(16777216L, 1L), dtype = "float32", compiled = FALSE)
  expect_integer_semantics(function(x) x - 1L, c(16777215L, 1L), dtype = "float32")
})

test_that("%/% and %% on integers are R's, including negative operands and a zero divisor", {
  for (dt in c("float64", "float32")) {
    expect_integer_semantics(function(x) x %/% 3L, -7:7, dtype = dt)
    expect_integer_semantics(function(x) x %% 3L, -7:7, dtype = dt)
    expect_integer_semantics(function(x, y) x %% y + x %/% y, -7:7, c(2L, -3L, 5L), dtype = dt)
  }
  expect_integer_semantics(function(x, y) x %/% y, 7L, c(2L, 0L, 5L), compiled = FALSE) # NA
  expect_integer_semantics(function(x) x %/% 0L, 1:3, compiled = FALSE)
  expect_error(rf_jit(function(x) x %% (x - 1L))(1:3), class = "rfuse_unsupported") # may be 0
  expect_error(rf_jit(function(x) x %% 2)(c(1.5, 2)), class = "rfuse_unsupported") # doubles
})

test_that("integer and double arguments are different signatures", {
  jf <- rf_jit(function(x) x + 1L)
  expect_identical(jf(1:3), 2:4)
  expect_identical(jf(c(1, 2, 3)), c(2, 3, 4))
  expect_identical(jf(1:3), 2:4)
})

test_that("an integer NA is R's NA", {
  expect_integer_semantics(function(x) x * 2L + 1L, c(1L, NA, 3L), compiled = FALSE)
})

test_that("helpers keep integer types and their bounds", {
  h <- function(a) a * 3L
  expect_integer_semantics(function(x) h(x) + h(x + 1L), c(1L, 5L))
  expect_integer_semantics(function(x) h(h(x)), c(100000L, 1L), compiled = FALSE) # 9e10 overflows
})

test_that("floor and ceiling are R's", {
  expect_matches_base(function(x) floor(x / 2) + ceiling(x / 3), c(-5, 5.5, 7, -0.2))
})
