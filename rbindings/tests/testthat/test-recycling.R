test_that("R's recycling rules are applied as base R applies them", {
  set.seed(4)
  X <- rnd(4, 3)
  expect_matches_base(function(X, s) X * s, X, 2.5)          # scalar
  expect_matches_base(function(X, v) X + v, X, rnd(4))      # length nrow: down the columns
  expect_matches_base(function(X, v) v - X, X, rnd(12))     # same length
  expect_matches_base(function(X, v) X / v, X, rnd(2))      # divides nrow*ncol, not nrow
  expect_matches_base(function(X) X + c(1, 2), X)           # constant vector
  A <- rnd(2, 3, 2)
  expect_matches_base(function(A, v) A * v, A, rnd(6))      # product of the leading dims
  expect_matches_base(function(a, b) a + b, rnd(6), rnd(3)) # vectors, multiple lengths
  expect_matches_base(function(a, b) a + b, rnd(6), 1)
})

test_that("mismatched lengths warn like base R", {
  X <- rnd(4, 3)
  f <- function(X) X + c(1, 2, 3, 4, 5)
  expect_warning(got <- rf_jit(f, dtype = "float64")(X),
                 "longer object length is not a multiple of shorter object length")
  expect_equal(got, suppressWarnings(f(X)))
})

test_that("non-conformable shapes are rfuse_shape_error with R's wording", {
  expect_error(rf_jit(function(a, b) a + b)(rnd(2, 3), rnd(3, 2)), "non-conformable arrays",
               class = "rfuse_shape_error")
  expect_error(rf_jit(function(a, b) a %*% b)(rnd(2, 3), rnd(2, 3)), "non-conformable arguments",
               class = "rfuse_shape_error")
  expect_error(rf_jit(function(a, b) a * b)(rnd(2, 2), rnd(5)),
               "dims \\[product 4\\] do not match the length of object \\[5\\]",
               class = "rfuse_shape_error")
})
