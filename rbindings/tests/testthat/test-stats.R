# Statistics, NA-skipping reductions, attributes and special functions on traced values, each
# against base R (attributes included: expect_matches_base compares them).

# User helpers the functions below call (traced as functions of their own).
lchoose_free <- function(n) n * 0
solve_free <- function(X) X %*% c(0.5, 2)
apply_free <- function(X) 0
backsolve_free <- function(U) U %*% t(U)

test_that("na.rm = TRUE skips the NaN a traced function computes, as base R", {
  set.seed(301)
  x <- c(abs(rnd(7)), -0.5, 2, -3)
  # nan(): log where positive, NaN elsewhere (without R's "NaNs produced" warning).
  nan <- function(v) ifelse(v > 0, log(abs(v)), NaN)
  expect_matches_base(function(x) sum(nan(x), na.rm = TRUE) + max(nan(x) * 2, na.rm = TRUE), x)
  expect_matches_base(function(x) mean(nan(x), na.rm = TRUE) + min(nan(x), na.rm = TRUE), x)
  expect_matches_base(function(x) range(nan(x), na.rm = TRUE), x)
  expect_matches_base(function(x) prod(log(abs(x) + 1), nan(x) + 1, na.rm = TRUE), x)
  X <- matrix(x, 5, 2)
  expect_matches_base(function(X) rowSums(nan(X), na.rm = TRUE) + rowMeans(nan(X) - 1, na.rm = TRUE), X)
  expect_matches_base(function(X) colSums(nan(X), na.rm = TRUE) - colMeans(nan(X), na.rm = TRUE), X)
  expect_matches_base(function(x) pmax(nan(x), 0, na.rm = TRUE) + pmin(nan(x), 1, na.rm = TRUE), x)
  # Without na.rm the NaN propagates, as in R.
  expect_true(is.nan(rf_jit(function(x) sum(nan(x)), dtype = "float64")(x)))
  # A mean of nothing left: NaN, as R's.
  expect_true(is.nan(rf_jit(function(x) mean(nan(-abs(x)), na.rm = TRUE), dtype = "float64")(x)))
})

test_that("arguments reductions cannot honour are refused, not ignored", {
  x <- rnd(6)
  expect_refused(function(x) mean(x, trim = 0.2), x)
  expect_refused(function(x) sum(x, na.rm = NA), x)
  expect_refused(function(x) mean(x, 0, TRUE, 1), x)
  expect_refused(function(x) as.vector(x, "list"), x)
  expect_refused(function(x) var(x, na.rm = TRUE), x)
  expect_refused(function(x) cor(x, x * 2, method = "spearman"), x)
  expect_refused(function(x) cov(x, x, use = "complete.obs"), x)
  expect_error(rf_jit(function(x) x[which(x > 0)])(x), "mask itself", class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) sort(x, partial = 1)[1])(x), "partial", class = "rfuse_unsupported")
  expect_refused(function(x) any(x), x) # numbers coerced to logical, with R's warning
  expect_matches_base(function(x) as.vector(x > 0, "numeric") + as.vector(x), x)
})

test_that("any / all of comparisons, as base R", {
  x <- rnd(9)
  for (v in list(x, abs(x))) {
    expect_identical(rf_jit(function(x) any(x > 0.5) | all(x < 0), dtype = "float64")(v), any(v > 0.5) | all(v < 0))
    expect_identical(rf_jit(function(x) all(x > 0, x < 2), dtype = "float32")(v), all(v > 0, v < 2))
  }
})

test_that("var, sd, cov, cor and scale match base R", {
  set.seed(302)
  X <- matrix(rnorm(40, 3, 2), 10, 4)
  x <- rnorm(12); y <- rnorm(12)
  expect_matches_base(function(x) var(x) + sd(x), x)
  expect_matches_base(function(x, y) cov(x, y) / (sd(x) * sd(y)) + cor(x, y), x, y)
  expect_matches_base(function(X) var(X), X)
  expect_matches_base(function(X) cov(X, X[, 1:2] * 2), X)
  expect_matches_base(function(X) cor(X), X)
  expect_matches_base(function(X) sd(X), X)
  expect_matches_base(function(X) scale(X), X)
  expect_matches_base(function(X) scale(X, center = FALSE) + 1, X)
  expect_matches_base(function(X) scale(X, center = colMeans(X) * 2, scale = FALSE), X)
  # Named columns (from cbind's argument names) name the covariance matrix and scale's attributes.
  expect_matches_base(function(x, y) cov(cbind(a = x, b = y, c = x * y)), x, y)
  expect_matches_base(function(x, y) scale(cbind(x, y)), x, y)
  expect_matches_base(function(x, y) cor(cbind(x, y, x + y))[2, ], x, y)
  expect_refused(function(x) var(x[1]), x) # one observation: R's NA
})

test_that("norm, which.max / which.min and choose match base R", {
  set.seed(303)
  X <- matrix(rnorm(20), 4, 5)
  for (t in c("O", "I", "F", "M", "f", "1", "E"))
    expect_matches_base(function(X) norm(X, t), X)
  expect_refused(function(X) norm(X, "2"), X)
  x <- c(rnorm(5), 3, rnorm(3), 3)
  expect_identical(rf_jit(function(x) which.max(x), dtype = "float64")(x), which.max(x))
  expect_identical(rf_jit(function(x) which.min(x) + which.max(-x), dtype = "float32")(x), which.min(x) + which.max(-x))
  expect_identical(rf_jit(function(x) x[which.max(x)] * 2, dtype = "float64")(x), x[which.max(x)] * 2)
  # NaN computed inside is skipped; when all are NaN, R's answer has length 0: base R answers.
  nan <- function(v) ifelse(v > 0, log(abs(v)), NaN)
  expect_identical(rf_jit(function(x) which.max(nan(x)), dtype = "float64")(c(-1, 0.5, 2, -3)), 3L)
  f <- rf_jit(function(x) which.min(nan(x)), dtype = "float64")
  expect_message(r <- f(-abs(x)), class = "rfuse_fallback")
  expect_identical(r, integer(0))
  n <- c(5, 10, 4.5, 2, 0, 3, -2.5, 30)
  for (k in c(0, 1, 2, 3, 7)) expect_matches_base(function(n) choose(n, k), n)
  expect_matches_base(function(n) choose(n * 2, 4) + lchoose_free(n), n)
  expect_refused(function(n) choose(n, 2.5), n)
  expect_refused(function(n) choose(10, n), n)
})

test_that("digamma and trigamma match base R, and differentiate lgamma", {
  x <- c(1e-8, 0.1, 0.5, 1, 1.4616321, 2.5, 7, 19.9, 123.4, 1e6, -0.5, -2.3, -7.9)
  expect_matches_base(function(x) digamma(x), x, dtypes = "float64")
  expect_matches_base(function(x) trigamma(x), x, dtypes = "float64")
  expect_matches_base(function(x) digamma(x) + trigamma(x), x[c(2:9, 11:12)], dtypes = "float32")
  # The poles: NaN and Inf, as R.
  expect_identical(rf_jit(function(x) trigamma(x), dtype = "float64")(c(0, -1, -3)), c(Inf, Inf, Inf))
  expect_true(all(is.nan(rf_jit(function(x) digamma(x * 1), dtype = "float64")(c(0, -1, -3)))))
  # lgamma, gamma and digamma now have gradients: against central differences.
  f <- function(x) sum(lgamma(x) + gamma(x / 4) + digamma(x))
  x <- c(0.7, 1.3, 2.2, 5.1)
  g <- rf_grad(f, dtype = "float64")(x)
  expect_lt(rel_err(as.vector(g), central_diff(f, list(x = x), "x")), 1e-7)
})

test_that("names, dimnames and class travel as in R, or the function refuses", {
  set.seed(304)
  x <- rnorm(6); y <- rnorm(6)
  expect_matches_base(function(x, y) cbind(x, y) * 2, x, y)
  expect_matches_base(function(x, y) rbind(x, y, x + y), x, y)
  expect_matches_base(function(x, y) cbind(1, x, deparse.level = 0), x, y)
  expect_matches_base(function(x, y) cbind(one = 1, x * y, deparse.level = 2), x, y)
  expect_matches_base(function(x, y) exp(cbind(x, y))[2:4, ], x, y)
  expect_matches_base(function(x, y) cbind(x, y)[3, ], x, y)
  expect_matches_base(function(x, y) t(cbind(x, y)) %*% cbind(x, y), x, y)
  expect_matches_base(function(x, y) crossprod(cbind(x, y)) - tcrossprod(rbind(x, y)), x, y)
  expect_matches_base(function(x, y) colMeans(cbind(x, y)) + rowSums(rbind(x, y)), x, y)
  expect_matches_base(function(x, y) { X <- cbind(1, x); solve_free(X) }, x, y)
  expect_matches_base(function(x, y) unname(cbind(x, y)) + 1, x, y)
  expect_matches_base(function(x, y) I(x) * 2, x, y)
  expect_matches_base(function(x, y) ifelse(cbind(x, y) > 0, x, 0), x, y)
  expect_matches_base(function(x, y) { X <- cbind(x, y); X[X < 0] <- 0; X }, x, y)
  expect_matches_base(function(x, y) head(cbind(x, y), 2) + tail(cbind(x, y), 2), x, y)
  # A named constant read from outside keeps its names in arithmetic.
  w <- c(a = 1, b = 2, c = 3, d = 4, e = 5, f = 6)
  expect_matches_base(function(x) x * w, x)
  # Functions that do not carry them refuse instead of dropping them.
  expect_refused(function(x, y) cumsum(cbind(x, y)) + apply_free(cbind(x, y)), x, y)
  expect_refused(function(x, y) sweep(cbind(x, y), 2, c(1, 2)), x, y)
  expect_refused(function(x, y) rev(cbind(x, y)), x, y)
})

test_that("solve() is R's: LAPACK's dgesv on the same data, bit for bit", {
  # On the CPU every step is R's own arithmetic (BLAS, LAPACK): bit for bit. On the GPU the
  # cross products come from cuBLAS: equal to rounding.
  same <- if (rf_default_device() == "cpu") expect_identical else function(a, b) expect_equal(a, b, tolerance = 1e-12)
  set.seed(305)
  X <- matrix(rnorm(60), 12, 5); y <- rnorm(12)
  ridge <- function(X, y, lambda = 0.5) solve(crossprod(X) + diag(lambda, ncol(X)), crossprod(X, y))
  same(rf_jit(ridge, dtype = "float64")(X, y), ridge(X, y))
  expect_matches_base(ridge, X, y)
  ols_vec <- function(X, y) solve(crossprod(X), drop(crossprod(X, y))) # a vector right-hand side
  same(rf_jit(ols_vec, dtype = "float64")(X, y), ols_vec(X, y))
  inverse <- function(X) solve(crossprod(X)) %*% t(X)
  expect_matches_base(inverse, X)
  # Names: the result's rows are a's columns, its columns b's.
  named <- function(x, y) { A <- crossprod(cbind(a = x, b = y)); solve(A, cbind(r = x[1:2], s = y[1:2])) }
  expect_matches_base(named, y, y^2 + 1)
  expect_matches_base(function(x, y) solve(crossprod(cbind(a = x, b = y))), y, y^2 + 1)
  expect_matches_base(function(x, y) solve(crossprod(cbind(a = x, b = y)), x[1:2]), y, y^2 + 1)
  expect_matches_base(function(X) solve(X[1:3, 1:3], tol = 1e-10), X)
  # Gradients through the solve: against central differences.
  loss <- function(X, y) sum(solve(crossprod(X) + diag(5), crossprod(X, y))^2)
  g <- rf_grad(loss, dtype = "float64")(X, y)
  expect_lt(rel_err(g$X, central_diff(loss, list(X = X, y = y), "X")), 1e-6)
  expect_lt(rel_err(g$y, central_diff(loss, list(X = X, y = y), "y")), 1e-6)
})

test_that("where R's solve() stops, base R answers with R's error", {
  S <- matrix(c(1, 2, 2, 4), 2)
  f <- rf_jit(function(S) solve(S) * 2, dtype = "float64")
  expect_error(expect_message(f(S), class = "rfuse_fallback"), "exactly singular")
  near <- matrix(c(1, 1, 1, 1 + 1e-17 * 3), 2) + diag(c(0, 1e-16))
  expect_error(suppressMessages(rf_jit(function(S) solve(S), dtype = "float64")(near)), "singular")
  expect_equal(rf_jit(function(S) solve(S + diag(2)), dtype = "float64")(S), solve(S + diag(2)))
  # Shapes and arguments R refuses, or rfuse does not take.
  expect_error(rf_jit(function(X) solve(X), dtype = "float64")(matrix(1:6 + 0.5, 2)), "must be square", class = "rfuse_shape_error")
  expect_error(rf_jit(function(X, b) solve(X, b), dtype = "float64")(diag(3), c(1, 2)), "compatible", class = "rfuse_shape_error")
  expect_refused(function(X) solve(X, LINPACK = TRUE), diag(2) + 0.5)
  expect_refused(function(X) solve(X, foo = 1), diag(2) + 0.5)
})

test_that("chol() and det() are R's (LAPACK's dpotrf and dgetrf on the same data)", {
  same <- if (rf_default_device() == "cpu") expect_identical else function(a, b) expect_equal(a, b, tolerance = 1e-12)
  set.seed(306)
  X <- matrix(rnorm(40), 8, 5)
  spd <- function(X) crossprod(X) + diag(0.5, ncol(X))
  same(rf_jit(function(X) chol(spd(X)), dtype = "float64")(X), chol(spd(X)))
  expect_matches_base(function(X) chol(spd(X)), X)
  expect_matches_base(function(X) backsolve_free(chol(spd(X))), X)
  expect_matches_base(function(x, y) chol(crossprod(cbind(a = x, b = y)) + diag(2)), X[, 1], X[, 2]) # dimnames kept
  # The Gaussian log-density's log-determinant through the Cholesky factor, and det itself.
  logdet <- function(X) 2 * sum(log(diag(chol(spd(X)))))
  expect_matches_base(logdet, X)
  same(rf_jit(function(X) det(spd(X)), dtype = "float64")(X), det(spd(X)))
  expect_matches_base(function(X) det(X[1:5, ]) + det(-spd(X)), X) # negative determinants too
  expect_identical(rf_jit(function(X) det(X %*% diag(c(1, 1, 1, 1, 0))), dtype = "float64")(X[1:5, ]),
                   det(X[1:5, ] %*% diag(c(1, 1, 1, 1, 0)))) # singular: 0, as R
  # Not positive definite: base R answers, with R's error.
  f <- rf_jit(function(X) chol(X - diag(100, 5)), dtype = "float64")
  expect_error(suppressMessages(f(spd(X))), "leading minor")
  expect_error(rf_jit(function(X) chol(X), dtype = "float64")(X), "square", class = "rfuse_shape_error")
  expect_refused(function(X) chol(spd(X), pivot = TRUE), X)
  expect_error(rf_grad(function(X) det(spd(X)), dtype = "float64")(X), class = "rfuse_autodiff_error")
})
