# Sorting traced values (rfuse.sort): base R's sort / order / rank / median against base R itself,
# torch_sort / torch_argsort against torch's rules (stable, NaN above +Inf, 1-based indices),
# gradients against finite differences, and the classed refusals.

test_that("sort, order and median of traced values are base R's", {
  set.seed(5)
  x <- c(rnorm(9), 2, 2, -0, 0, -Inf, Inf) # ties, signed zeros, infinities
  for (dec in c(FALSE, TRUE)) {
    expect_identical(rf_jit(function(x) sort(x, decreasing = dec), dtype = "float64")(x), sort(x, decreasing = dec))
    expect_identical(rf_jit(function(x) order(x, decreasing = dec), dtype = "float64")(x), order(x, decreasing = dec))
  }
  m <- matrix(rnorm(12), 3) # a matrix sorts as a vector
  expect_identical(rf_jit(function(m) sort(m * 2), dtype = "float64")(m), sort(m * 2))
  expect_identical(rf_jit(function(x) median(x), dtype = "float64")(x), median(x))         # odd length
  expect_identical(rf_jit(function(x) median(x), dtype = "float64")(x[-1]), median(x[-1])) # even
  expect_identical(rf_jit(function(x) median(x * 3 - 1), dtype = "float64")(m), median(m * 3 - 1))
  # R integers stay integers (and median of an even count is a double, as R's).
  i <- c(5L, -2L, 9L, 0L, 5L)
  expect_identical(rf_jit(function(i) sort(i))(i), sort(i))
  expect_identical(rf_jit(function(i) order(i))(i), order(i))
  expect_identical(rf_jit(function(i) median(i))(i), median(i))
  expect_identical(rf_jit(function(i) median(i))(i[-1]), median(i[-1]))
  # median(na.rm = TRUE) of the values a program computes: the middle of those that are not NaN.
  f <- rf_jit(function(x) median(log(x), na.rm = TRUE), dtype = "float64")
  for (v in list(c(3, -1, 8, 0.5), c(-1, 2, 4, 7, -3), c(1, 2))) expect_equal(suppressWarnings(f(v)), suppressWarnings(median(log(v), na.rm = TRUE)), tolerance = 1e-15)
})

test_that("rank of traced values is base R's for every deterministic ties.method", {
  set.seed(8)
  x <- c(round(rnorm(12), 1), 0.5, 0.5, 0.5, -0, 0, Inf, -Inf) # ties of two and three, signed zeros
  for (tm in c("average", "first", "last", "max", "min")) {
    f <- rf_jit(function(x) rank(x * 2, ties.method = tm), dtype = "float64")
    expect_identical(f(x), rank(x * 2, ties.method = tm), info = tm) # double for "average", else integer
    expect_identical(f(x[1]), rank(x[1] * 2, ties.method = tm), info = tm)
  }
  m <- matrix(c(3, 1, 3, 2, 1, 3), 2) # a matrix ranks as a vector (no dims back)
  expect_identical(rf_jit(function(m) rank(m), dtype = "float64")(m), rank(m))
  i <- c(4L, 4L, -1L, 7L)
  expect_identical(rf_jit(function(i) rank(i))(i), rank(i))
  expect_identical(rf_jit(function(x) order(x, method = "shell"), dtype = "float64")(x), order(x, method = "shell"))
  # NA (given or computed) is ranked by na.last: base R answers.
  for (nl in list(TRUE, FALSE, NA, "keep")) {
    g <- rf_jit(function(x) rank(log(x), na.last = nl), dtype = "float64")
    expect_identical(suppressWarnings(suppressMessages(g(c(2, -1, 5, 1)))), suppressWarnings(rank(log(c(2, -1, 5, 1)), na.last = nl)))
  }
  expect_error(rf_jit(function(x) rank(x, ties.method = "random"))(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) rank(x > 0))(x), class = "rfuse_unsupported")
})

test_that("quantile (type 7) of traced values is base R's, names included", {
  set.seed(2)
  x <- c(rnorm(10), 1, 1, Inf)
  # (interpolated values within an ulp or two: a GPU program may fuse (1 - h) * a + h * b into an FMA)
  for (p in list(seq(0, 1, 0.25), c(0.1, 0.5, 0.99), 0.5, c(1, 0)))
    expect_equal(rf_jit(function(x) quantile(x * 2, probs = p), dtype = "float64")(x), quantile(x * 2, probs = p), tolerance = 1e-14)
  expect_equal(rf_jit(function(x) quantile(x, c(0.3, 0.7), names = FALSE), dtype = "float64")(x[1:7]),
               quantile(x[1:7], c(0.3, 0.7), names = FALSE), tolerance = 1e-14)
  expect_null(names(rf_jit(function(x) quantile(x, 0.3, names = FALSE), dtype = "float64")(x)))
  expect_identical(rf_jit(function(i) quantile(i))(c(4L, 1L, 9L)), quantile(c(4L, 1L, 9L)))
  expect_error(rf_jit(function(x) quantile(x, 1.5))(x), "outside")
  expect_identical(suppressMessages(rf_jit(function(x) tryCatch(quantile(x), error = function(e) "stopped"), dtype = "float64")(c(1, NA))),
                   "stopped")
})

test_that("NA and NaN: answered by base R where the program could not know R's answer", {
  xn <- c(3, NA, 1, NaN, 2)
  s <- rf_jit(function(x) sort(x), dtype = "float64")
  expect_identical(suppressMessages(s(xn)), sort(xn)) # R drops them: base R answers
  expect_message(rf_jit(function(x) median(x), dtype = "float64")(xn), class = "rfuse_fallback")
  expect_identical(suppressMessages(rf_jit(function(x) median(x), dtype = "float64")(xn)), median(xn))
  # A NaN the program computes is one R drops too: the runtime check sends the call to base R.
  expect_identical(suppressWarnings(suppressMessages(rf_jit(function(x) sort(log(x)), dtype = "float64")(c(2, -1, 1)))),
                   suppressWarnings(sort(log(c(2, -1, 1)))))
  # na.last = TRUE keeps them, last, as R does.
  k <- rf_jit(function(x) sort(x * 1, na.last = TRUE), dtype = "float64")
  expect_identical(is.na(suppressMessages(k(xn))), is.na(sort(xn, na.last = TRUE)))
  expect_identical(suppressMessages(k(xn))[1:3], sort(xn, na.last = TRUE)[1:3])
})

test_that("what is not traced is refused with a classed error naming it", {
  x <- c(3, 1, 2)
  expect_error(rf_jit(function(x) sort(x, partial = 2))(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) sort(x, na.last = FALSE))(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) sort(x, method = "quick"))(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) order(x, -x))(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) sort(x > 1))(x), class = "rfuse_unsupported")
  expect_identical(rf_jit(function(x, d) sort(x, decreasing = d), dtype = "float64")(x, TRUE), c(3, 2, 1)) # a flag argument: a constant
  expect_error(rf_jit(function(x) quantile(x, type = 1))(x), class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) quantile(x, na.rm = TRUE))(x), class = "rfuse_unsupported")
})

# torch's sort along a 1-based dim, by base R: stable, NaN above +Inf.
torch_sort_ref <- function(a, dim, descending) {
  d <- dim(a); n <- length(d); perm <- c(dim, setdiff(seq_len(n), dim))
  lines <- matrix(aperm(a, perm), d[dim])
  o <- apply(lines, 2, function(v) order(v, decreasing = descending, na.last = !descending, method = "radix"))
  v <- matrix(lines[cbind(as.vector(o), rep(seq_len(ncol(lines)), each = d[dim]))], d[dim])
  list(aperm(array(v, d[perm]), order(perm)), aperm(array(o, d[perm]), order(perm)))
}

test_that("torch_sort and torch_argsort: plain arrays, eager tensors and traced code", {
  set.seed(9)
  a <- array(round(rnorm(60), 1), c(3, 4, 5)) # rounded: ties
  a[2, 3, 1] <- NaN; a[1, 1, 4] <- Inf
  for (dim in 1:3) for (desc in c(FALSE, TRUE)) {
    ref <- torch_sort_ref(a, dim, desc)
    got <- torch_sort(a, dim = dim, descending = desc)
    expect_identical(got[[1]], ref[[1]]); expect_identical(got[[2]], ref[[2]])
    t <- torch_sort(rf_tensor(a, dtype = "float64"), dim = dim, descending = desc)
    expect_identical(as.array(t[[1]]), ref[[1]])
    expect_equal(as.array(t[[2]]), ref[[2]])
    jf <- rf_jit(function(x) torch_sort(x, dim = dim, descending = desc), dtype = "float64")
    j <- jf(rf_tensor(a, dtype = "float64"))
    expect_identical(as.array(j[[1]]), ref[[1]])
    expect_equal(as.array(j[[2]]), ref[[2]])
  }
  expect_equal(as.array(rf_tensor(a)$argsort(dim = -1)), torch_sort_ref(a, 3, FALSE)[[2]])
  expect_equal(as.array(torch_argsort(rf_tensor(a), dim = 2, descending = TRUE)), torch_sort_ref(a, 2, TRUE)[[2]])
  expect_error(torch_sort(a, dim = 4), class = "rfuse_shape_error")
})

test_that("gradients through sort are finite differences' (rf_grad, backward())", {
  set.seed(4)
  x <- rnorm(7)
  w <- seq(1, 7)
  f <- function(x) sum(sort(x) * w) + median(x)^2
  g <- rf_grad(f, dtype = "float64")(x)
  h <- 1e-6
  fd <- vapply(seq_along(x), function(i) { e <- replace(numeric(7), i, h); (f(x + e) - f(x - e)) / (2 * h) }, 0)
  expect_equal(g, fd, tolerance = 1e-6)
  m <- matrix(rnorm(12), 3)
  xt <- rf_tensor(m, dtype = "float64", requires_grad = TRUE)
  loss <- torch_sum(torch_sort(xt, dim = 2, descending = TRUE)[[1]] * matrix(1:12, 3))
  loss$backward()
  o <- t(apply(m, 1, order, decreasing = TRUE)) # row i: the columns in sorted order
  expected <- m * 0
  for (i in 1:3) expected[i, o[i, ]] <- matrix(1:12, 3)[i, ]
  expect_equal(as.array(xt$grad), expected)
})

test_that("torch_topk, torch_cumsum and torch_cumprod: plain arrays, tensors and traced code", {
  set.seed(3)
  a <- array(rnorm(24), c(2, 3, 4)); a[1, 2, 3] <- NaN
  for (dim in 1:3) for (largest in c(TRUE, FALSE)) {
    ref <- lapply(torch_sort_ref(a, dim, largest), function(v) {
      idx <- rep(list(TRUE), 3); idx[[dim]] <- 1:2
      do.call(`[`, c(list(v), idx, list(drop = FALSE)))
    })
    got <- torch_topk(a, 2, dim = dim, largest = largest)
    expect_identical(got[[1]], ref[[1]]); expect_identical(got[[2]], ref[[2]])
    t <- torch_topk(rf_tensor(a, dtype = "float64"), 2, dim = dim, largest = largest)
    expect_identical(as.array(t[[1]]), ref[[1]]); expect_equal(as.array(t[[2]]), ref[[2]])
    j <- rf_jit(function(x) x$topk(2, dim = dim, largest = largest)[[1]], dtype = "float64")(a)
    expect_identical(j, ref[[1]])
  }
  expect_error(torch_topk(a, 5, dim = 1), class = "rfuse_shape_error")
  b <- array(rnorm(24), c(2, 3, 4))
  cs <- aperm(apply(b, c(1, 3), cumsum), c(2, 1, 3))
  expect_equal(torch_cumsum(b, 2), cs)
  expect_equal(as.array(torch_cumsum(rf_tensor(b, dtype = "float64"), dim = -2)), cs)
  expect_equal(rf_jit(function(x) x$cumprod(dim = 3), dtype = "float64")(b), aperm(apply(b, c(1, 2), cumprod), c(2, 3, 1)))
  expect_equal(as.vector(as.array(torch_cumsum(rf_tensor(1:5, dtype = "int32"), 1))), c(1, 3, 6, 10, 15))
  expect_equal(rf_grad(function(x) sum(torch_cumsum(x, 1) * c(1, 2, 3)), dtype = "float64")(c(1, 2, 3)), c(6, 5, 3))
  expect_error(torch_cumsum(b, 1, dtype = "float64"), class = "rfuse_unsupported")
})
