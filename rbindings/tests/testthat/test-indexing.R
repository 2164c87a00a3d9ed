# Indexing and assembling traced values (rfuse.slice / reverse / pad / concat / gather) with R's
# semantics, in float64 and float32, their gradients, and the classed refusals.

test_that("x[i] forms match base R", {
  set.seed(11)
  x <- rnd(7); X <- rnd(4, 5); A <- rnd(3, 4, 2)
  expect_matches_base(function(x) x[2:4] * 2, x)
  expect_matches_base(function(x) x[-1] - x[-length(x)], x)
  expect_matches_base(function(x) x[-c(2, 5)], x)
  expect_matches_base(function(x) x[c(3, 1, 1, 7)] + 1, x)
  expect_matches_base(function(x) x[c(TRUE, FALSE)], x)
  expect_matches_base(function(x) x[7:3], x)
  expect_matches_base(function(x) x[c(0, 2, 2.9)], x) # zeros dropped, fractions truncated
  expect_matches_base(function(x) x[1] * x, x)
  expect_matches_base(function(X) X[, 2] + X[2, 1:4] / 2, X[, 1:4])
  expect_matches_base(function(X) X[2, ], X)
  expect_matches_base(function(X) X[2:3, c(5, 1), drop = FALSE] * 3, X)
  expect_matches_base(function(X) X[-1, ], X)
  expect_matches_base(function(X) X[c(TRUE, FALSE), -2], X)
  expect_matches_base(function(X) X[7], X) # linear index into the column-major data
  expect_matches_base(function(A) A[2, , 1] + A[, 3, 2][1], A)
  expect_matches_base(function(A) A[, 2:3, , drop = FALSE], A)
  expect_matches_base(function(X) X[, 1][3] + X[1, 1], X)
  expect_identical(rf_jit(function(x) c(x[NULL], x[integer(0)], x[2]), dtype = "float64")(x), x[2]) # NULL selects nothing
  expect_identical(rf_jit(function(x) x[NULL] + 0, dtype = "float64")(x), numeric(0))
})

test_that("assignment into parts matches base R", {
  set.seed(12)
  x <- rnd(6); X <- rnd(3, 4)
  expect_matches_base(function(x) { x[x < 0] <- 0; x }, x)
  expect_matches_base(function(x, y) { x[y > x] <- -1; x }, x, rnd(6))
  expect_matches_base(function(x) { x[2] <- 10; x }, x)
  expect_matches_base(function(x) { x[c(1, 3, 1)] <- c(7, 8, 9); x }, x) # the last of repeated positions
  expect_matches_base(function(X) { X[2, ] <- c(9, 8, 7, 6); X }, X)
  expect_matches_base(function(X) { X[, 1] <- X[, 1] * 2; X[3, 4] <- 0; X }, X)
  expect_matches_base(function(X, v) { X[nrow(X), ] <- v; X }, X, rnd(4))
  expect_matches_base(function(X) { diag(X) <- 0; X }, X[, 1:3])
  # A base R array assigned a traced value becomes traced.
  expect_matches_base(function(x) { out <- matrix(0, 2, 3); out[1, ] <- x[1:3]; out }, x)
})

test_that("c, cbind, rbind, rev, head, tail, diff, rep, outer, diag and apply match base R", {
  set.seed(13)
  x <- rnd(6); X <- rnd(4, 3)
  expect_matches_base(function(x) c(x[1], x * 2, 5), x)
  expect_matches_base(function(x, X) c(X, x), x, X)
  expect_matches_base(function(x) cbind(1, x, x^2), x)
  expect_matches_base(function(x) rbind(x, -x, 0), x)
  expect_matches_base(function(X) cbind(X, X[, 1]) + 1, X)
  expect_matches_base(function(X) rbind(X, colMeans(X)), X)
  expect_matches_base(function(x) rev(x) * seq_along(x), x)
  expect_matches_base(function(x) head(x, -1) + tail(x, 5), x)
  expect_matches_base(function(X) head(X, 2) - tail(X, 2), X)
  expect_matches_base(function(x) diff(x) + diff(x, lag = 2)[1], x)
  expect_matches_base(function(x) diff(x, differences = 2), x)
  expect_matches_base(function(X) diff(X), X)
  expect_matches_base(function(x) rep(x, times = 2) + rep(x, each = 2), x)
  expect_matches_base(function(x) rep(x, length.out = 9) + rep_len(x, 9), x)
  expect_matches_base(function(x, y) outer(x, y) + outer(x, y, "+") + x %o% y, x, x[1:3])
  expect_matches_base(function(x, y) outer(x, y, function(a, b) exp(-(a - b)^2)), x, rnd(4))
  expect_matches_base(function(X) diag(X), X)
  expect_matches_base(function(x) diag(x) + diag(x[1], 6), x)
  expect_matches_base(function(X) apply(X, 1, max) + apply(X, 1, "sum") - apply(X, 2, mean)[2], X)
  expect_matches_base(function(X) { S <- X %*% t(X); exp(S - apply(S, 1, max)) }, X)
  expect_matches_base(function(x) matrix(x, 3, 4, byrow = TRUE) + matrix(x[1:2], 3, 4), x)
  expect_matches_base(function(x) range(x) + is.matrix(x) + NCOL(x) + drop(as.matrix(x))[1], x)
  expect_matches_base(function(X) apply(X, 1, function(r) sum(r^2) / max(r)), X)
  M <- rbind(c(1, 3, 3), c(2, 0, 1), c(5, 5, 5), c(0, 0, 7))
  expect_identical(rf_jit(function(M) max.col(M, "first") + 0L, dtype = "float64")(M), max.col(M, "first") + 0L)
  expect_identical(rf_jit(function(M) max.col(M, ties.method = "last"), dtype = "float64")(M), max.col(M, "last"))
  expect_identical(rf_jit(function(M) max.col(log(M - 1), "first"), dtype = "float64")(M), # rows with NaN: NA
                   suppressWarnings(max.col(log(M - 1), "first")))
  expect_error(rf_jit(function(M) max.col(M), dtype = "float64")(M), "random", class = "rfuse_unsupported")
  expect_matches_base(function(X) apply(X, 2, function(cl) cl - mean(cl)), X) # a matrix of columns
  expect_matches_base(function(x) { y <- x * 2; dim(y) <- c(2, 3); y %*% t(y) }, x)
  expect_matches_base(function(x) array(x, c(2, 3, 2))[, 2, ] + array(x[1:2], c(2, 2)), x)
})

test_that("sapply / vapply over a static sequence, Reduce, and both pipes trace", {
  set.seed(17)
  X <- rnd(5, 4); x <- rnd(5)
  expect_matches_base(function(X) sapply(seq_len(ncol(X)), function(j) sum(X[, j]^2)), X)
  expect_matches_base(function(X) sapply(1:3, function(k) X[k, ] * k), X) # a 4 x 3 matrix
  expect_matches_base(function(X) vapply(seq_len(4), function(j) max(X[, j]), numeric(1)), X)
  expect_matches_base(function(X) Reduce(`+`, lapply(1:4, function(j) X[, j])), X)
  expect_matches_base(function(x) x |> exp() |> sum(), x)
  expect_matches_base(function(x) { `%>%` <- magrittr::`%>%`; x %>% abs() %>% sqrt() %>% cumsum() }, x)
  expect_error(rf_jit(function(x) sapply(c(a = 1, b = 2), function(k) x[k]), dtype = "float64")(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) sapply(x, function(v) v), dtype = "float64")(x), class = "rfuse_unsupported")
  expect_identical(rf_jit(function(x) x * sapply(1:2, function(k) k), dtype = "float64")(c(1, 2)), c(1, 4))
})

test_that("linear algebra beyond solve(), chol() and det() refuses cleanly (no broken .Internal)", {
  A <- crossprod(rnd(4, 3)) + diag(3)
  for (f in list(function(A) qr(A), function(A) determinant(A), function(A) svd(A), function(A) eigen(A)))
    expect_error(rf_jit(f, dtype = "float64")(A), class = "rfuse_unsupported")
})

test_that("math and distribution functions match base R", {
  set.seed(14)
  x <- rnd(20) * 2
  expect_matches_base(function(x) sign(x) * log1p(abs(x)) + expm1(x / 10) + trunc(x * 3), x)
  expect_matches_base(function(x) log1p(x * 1e-10) * 1e10 + expm1(x * 1e-9) * 1e9, x) # no cancellation
  expect_matches_base(function(x) log2(abs(x)) + log10(abs(x)) + log(abs(x), 3) + sinh(x) + cosh(x), x)
  expect_matches_base(function(x) pnorm(x) + dnorm(x, 0.5, 2) + pnorm(x, 1, 2, lower.tail = FALSE), x)
  expect_matches_base(function(x) pnorm(x, log.p = TRUE) + dnorm(x, log = TRUE), x)
  expect_matches_base(function(x) plogis(x) + dlogis(x, 1, 2) + qlogis(plogis(x / 4)) + plogis(x, log.p = TRUE), x)
  p <- c(1e-300, 1e-12, 0.01, 0.3, 0.5, 0.7, 0.975, 1 - 1e-12)
  expect_matches_base(function(p) qnorm(p) + qnorm(p, 1, 2, lower.tail = FALSE), p, dtypes = "float64")
  expect_matches_base(function(p) qnorm(p), p[3:7], dtypes = "float32")
  expect_identical(rf_jit(function(p) qnorm(p * 1), dtype = "float64")(c(0, 1)), c(-Inf, Inf))
  a <- abs(x) + 0.5
  expect_matches_base(function(a) gamma(a) + lgamma(a * 3) + beta(a, 2) + lbeta(a, a), a)
  expect_error(rf_value_and_grad(function(a) sum(trigamma(a)), dtype = "float64")(a), "tetragamma", class = "rfuse_autodiff_error")
  # Inf and NaN computed inside (inputs holding them are answered by base R).
  f <- function(x) cbind(is.finite(1 / x), is.nan(x / x), is.infinite(1 / x))
  expect_equal(rf_jit(f, dtype = "float64")(c(1, 0, -2)), f(c(1, 0, -2)))
})

test_that("cumulative ops, prod, round and the inverse trigonometric functions match base R", {
  set.seed(16)
  x <- rnd(9); X <- rnd(3, 4)
  expect_matches_base(function(x) cumsum(x) + cumprod(x / 2) - cummax(x) * cummin(x), x)
  expect_matches_base(function(X) cumsum(X) / 2, X) # over all elements: a vector
  expect_matches_base(function(x) { cs <- cumsum(x); (cs[3:9] - c(0, cs[1:6])) / 3 }, x)
  expect_matches_base(function(x) prod(x) + prod(x, 2) + prod(x[1:3]), x)
  expect_matches_base(function(x) c(round(x * 7), round(c(0.5, 1.5, 2.5, -0.5) * x[1] / x[1])), x)
  expect_matches_base(function(x) atan(x) + atan2(x, rev(x)) + asin(x / 2) - acos(x / 2) + tan(x / 2), x)
  expect_identical(rf_jit(function(i) cumsum(i), dtype = "float64")(1:6), cumsum(1:6)) # an integer
  expect_grads_match(function(x) sum(cumsum(x)^2) + sum(atan2(x, 2) * atan(x)), list(x = x))
  expect_error(rf_value_and_grad(function(x) sum(cumprod(x)), dtype = "float64")(x), class = "rfuse_autodiff_error")
})

test_that("gradients flow through slices, gathers, pads, concatenations and reversals", {
  set.seed(15)
  x <- rnd(8); X <- rnd(4, 3)
  expect_grads_match(function(x) sum((x[-1] - x[-length(x)])^2), list(x = x))
  expect_grads_match(function(x) sum(x[c(2, 2, 5, 8)] * c(1, 2, 3, 4)), list(x = x))
  expect_grads_match(function(x) sum(c(0, x, x[3])^3) + sum(rev(x) * seq_along(x)), list(x = x))
  expect_grads_match(function(X) sum(cbind(X, X[, 1])^2) + sum(X[2:3, c(3, 1)]), list(X = X))
  expect_grads_match(function(x) { y <- x; y[y < 0] <- 0; y[3] <- 2 * x[1]; sum(y^2) }, list(x = x))
  expect_grads_match(function(x) sum(pnorm(x) + dnorm(x)), list(x = x))
})

test_that("indexing fuses: a stencil re-assembled with its boundary values is one kernel", {
  heat <- function(u) c(u[1], u[2:7] + 0.2 * (u[1:6] - 2 * u[2:7] + u[3:8]), u[8])
  u <- rnd(8)
  expect_equal(rf_jit(heat, dtype = "float64")(u), heat(u), tolerance = 1e-12)
  expect_equal(rf_explain(heat, u)$kernel_count, 1)
  # A row-wise stable softmax with apply(): a row max, then the normalised exponentials.
  X <- rnd(6, 5)
  expect_lte(rf_explain(function(X) { e <- exp(X - apply(X, 1, max)); e / rowSums(e) }, X)$kernel_count, 2)
})

test_that("bad subscripts get R's errors or classed refusals", {
  x <- rnd(5); X <- rnd(3, 2)
  f <- rf_jit(function(x) x[x > 0], dtype = "float64")
  expect_error(f(x), class = "rfuse_unsupported")
  expect_error(f(x), "ifelse")
  expect_error(rf_jit(function(x) x[7], dtype = "float64")(x), class = "rfuse_shape_error")
  expect_error(rf_jit(function(X) X[4, 1], dtype = "float64")(X), "subscript out of bounds", class = "rfuse_shape_error")
  expect_error(rf_jit(function(X) X[1, 1, 1], dtype = "float64")(X), "incorrect number of dimensions", class = "rfuse_shape_error")
  expect_error(rf_jit(function(x) x[c(-1, 2)], dtype = "float64")(x), "mix", class = "rfuse_shape_error")
  expect_error(rf_jit(function(x) x[c(1, NA)], dtype = "float64")(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) x["a"], dtype = "float64")(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) x[x > 0 & x < 1][1], dtype = "float64")(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x, v) { x[x > 0] <- v; x }, dtype = "float64")(x, rnd(5)), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) c(a = x), dtype = "float64")(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) psigamma(x, 2), dtype = "float64")(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) round(x, 2), dtype = "float64")(x), "digits", class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) { y <- x; y[1:3] <- c(1, 2); y }, dtype = "float64")(x), class = "rfuse_shape_error")
})

test_that("positions the traced code computes gather, checked on every call", {
  set.seed(141)
  x <- rnd(9); M <- rnd(4, 6)
  expect_matches_base(function(x) x[which.max(x)] * 2 + x[[which.min(x)]], x)
  expect_matches_base(function(M, j) M[2, j] + M[j[3], 1:3], M, c(5, 1, 3))
  expect_matches_base(function(x, i) x[i] + x[[i[2]]], x, c(2.7, 9, 1)) # fractions truncate, as in R
  tab <- c(0.5, 1.5, 2.5, 3.5)
  expect_identical(rf_jit(function(k) tab[k %% 4L + 1L])(1:10), tab[1:10 %% 4L + 1L])
  # A position outside 1..n (R: dropped, or NA) sends the call to base R: the same answer.
  f <- rf_jit(function(x, i) x[i] * 2, dtype = "float64")
  expect_message(r <- f(x, c(0, 2)), class = "rfuse_fallback") # (the note comes once per function)
  expect_identical(r, x[c(0, 2)] * 2)
  for (bad in list(c(-1, -3), c(10, 1))) expect_identical(f(x, bad), x[bad] * 2)
  expect_identical(f(x, c(3, 4)), x[c(3, 4)] * 2)
  # On rf_tensors there is no base R to answer: a classed error.
  g <- rf_jit(function(x, i) x[i], dtype = "float64")
  expect_error(g(rf_tensor(x), rf_tensor(c(0, 1))), "outside", class = "rfuse_unsupported")
  # A mask still selects a data-dependent number of elements.
  expect_refused(function(x) x[x > 0], x)
})
