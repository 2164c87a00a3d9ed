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

test_that("arithmetic's one-call path records what R's rules record, and leaves every other case to them", {
  ns <- asNamespace("rfuse")
  trace_ir <- function(f, args, fast = TRUE) {
    if (!fast) { # the rules alone: the one-call path declines everything
      real <- ns$.rf_b_pointwise_fast
      unlockBinding(".rf_b_pointwise_fast", ns); assign(".rf_b_pointwise_fast", function(...) NULL, envir = ns)
      on.exit({ assign(".rf_b_pointwise_fast", real, envir = ns); lockBinding(".rf_b_pointwise_fast", ns) })
    }
    tr <- ns$trace_function(f, args, "f32", rep(FALSE, length(args)))
    list(hash = tr$hash, ops = lengths(regmatches(tr$text, gregexpr("rfuse\\.[a-z_]+", tr$text))))
  }
  calls <- 0L
  real <- ns$.rf_b_pointwise_fast
  counting <- function(...) { r <- real(...); if (!is.null(r)) calls <<- calls + 1L; r }
  cases <- list(
    list(function(x, a) pmax(x * a + 1, 0) / (1 + exp(-x)) - 0.5, list(rnd(5), rnd(5)), TRUE),
    list(function(x) 2 / x, list(rnd(3, 4)), TRUE),                 # the scalar first, a matrix
    list(function(x) x + 1, list(array(2, c(1, 1))), TRUE),         # one element: reshaped
    list(function(x) x * 3, list(array(rnd(6), c(1, 2, 3))), TRUE),
    list(function(x, v) x + v, list(rnd(4, 3), rnd(4)), FALSE),     # recycled: R's rules
    list(function(x, y) x - y, list(rnd(2, 3), rnd(6)), FALSE),     # an array and a vector
    list(function(x, i) x * i, list(rnd(3), 2L), FALSE),            # an integer: its bound
    list(function(i, j) i + j, list(1:3, 4:6), FALSE),
    list(function(x) x + NA_real_, list(rnd(3)), FALSE),
    list(function(x) c(a = 2) * x, list(rnd(2)), FALSE)             # a named scalar
  )
  for (k in seq_along(cases)) {
    f <- cases[[k]][[1]]; args <- cases[[k]][[2]]
    calls <- 0L
    unlockBinding(".rf_b_pointwise_fast", ns); assign(".rf_b_pointwise_fast", counting, envir = ns)
    fast <- tryCatch(trace_ir(f, args), finally = { assign(".rf_b_pointwise_fast", real, envir = ns); lockBinding(".rf_b_pointwise_fast", ns) })
    expect_identical(fast, trace_ir(f, args, fast = FALSE), info = deparse(f))
    expect_identical(calls > 0L, cases[[k]][[3]], info = deparse(f))
    ref <- do.call(f, args)
    if (anyNA(ref)) expect_identical(is.na(do.call(rf_jit(f), args)), is.na(ref))
    else do.call(expect_matches_base, c(list(f), args))
  }
})
