# Dynamic batch sizes: rf_jit compiles one program for every size of the arguments' first
# dimension once two sizes are compiled (or, with dynamic = "batch", at the first call).

# The GPU computes R's doubles in float32 by default.
tol <- if (as.vector(rf_default_device()) == "cuda") 1e-5 else 1e-12
counts <- function() unlist(rf_cache_info()[c("compiles", "pass_runs", "disk_hits", "specializations")])
compiles_of <- function(expr) {
  before <- counts()
  force(expr)
  d <- counts() - before
  d[["compiles"]]
}

test_that("an R function called with batch sizes 1, 7, 64 and 257 compiles twice and equals base R", {
  set.seed(7)
  W1 <- matrix(rnorm(16 * 32), 16, 32); b1 <- rnorm(32); W2 <- matrix(rnorm(32 * 4), 32, 4)
  head <- function(x) {
    h <- pmax(sweep(x %*% W1, 2, b1, "+"), 0)
    e <- exp(tanh(h %*% W2))
    e / rowSums(e)
  }
  jf <- rf_jit(head)
  before <- counts()
  for (n in c(1, 7, 64, 257)) {
    x <- matrix(rnorm(n * 16), n, 16)
    expect_equal(jf(x), head(x), tolerance = tol)
  }
  d <- counts() - before
  expect_equal(d[["compiles"]], 2)
  expect_equal(d[["specializations"]], 2)
  expect_lte(d[["pass_runs"]], 2)
  # later calls of a made size are cache hits
  x <- matrix(rnorm(7 * 16), 7, 16)
  expect_equal(compiles_of(jf(x)), 0)
  expect_equal(jf(x), head(x), tolerance = tol)
})

test_that("dynamic = 'batch' compiles a second size at the first call and none after", {
  f <- function(x, y) tanh(x * 2 + y) / (1 + abs(y))
  jf <- rf_jit(f, dynamic = "batch")
  x <- matrix(runif(5 * 3), 5, 3); y <- matrix(runif(5 * 3), 5, 3)
  expect_equal(compiles_of(jf(x, y)), 2)
  for (n in c(1, 9, 300)) {
    x <- matrix(runif(n * 3), n, 3); y <- matrix(runif(n * 3), n, 3)
    n0 <- counts()
    expect_equal(jf(x, y), f(x, y), tolerance = tol)
    expect_equal((counts() - n0)[["compiles"]], 0)
  }
  # vectors: their length is the batch
  g <- function(v) sqrt(abs(v)) + 1
  jg <- rf_jit(g, dynamic = TRUE)
  for (n in c(10, 3, 1000)) { v <- rnorm(n); expect_equal(jg(v), g(v), tolerance = tol) }
})

test_that("a weight vector beside the batch stays fixed: f(x, w) shares one program", {
  f <- function(x, w) tanh(sweep(x, 2, w, "*")) + 1
  jf <- rf_jit(f)
  w <- c(0.5, -1, 2)
  compiled <- 0
  for (n in c(2, 5, 9, 33)) {
    x <- matrix(rnorm(n * 3), n, 3)
    compiled <- compiled + compiles_of(r <- jf(x, w))
    expect_equal(r, f(x, w), tolerance = tol)
  }
  expect_equal(compiled, 2)
})

test_that("dynamic = FALSE compiles each size, and a bad value is a classed error", {
  f <- function(x) x * 3 - 1
  jf <- rf_jit(f, dynamic = FALSE)
  before <- counts()
  for (n in 2:5) expect_equal(jf(matrix(1:n * 1.5, n, 2)), f(matrix(1:n * 1.5, n, 2)), tolerance = tol)
  expect_equal((counts() - before)[["compiles"]], 4)
  expect_equal((counts() - before)[["specializations"]], 0)
  expect_error(rf_jit(f, dynamic = "rows"), class = "rfuse_type_error")
  expect_error(rf_jit(f, dynamic = 2), class = "rfuse_type_error")
})

test_that("code that depends on the batch size some other way compiles per size and stays right", {
  # a constant from the size
  f <- function(x) x / nrow(x)
  jf <- rf_jit(f)
  for (n in c(2, 3, 4, 10)) { x <- matrix(runif(n * 2), n, 2); expect_equal(jf(x), f(x), tolerance = tol) }
  # a branch on the size, the same branch at the first two sizes
  g <- function(x) if (nrow(x) > 50) x * 2 else x * 3
  jg <- rf_jit(g)
  for (n in c(5, 6, 7, 80, 81)) { x <- matrix(runif(n * 2), n, 2); expect_equal(jg(x), g(x), tolerance = tol) }
  # R's recycling of a vector along a matrix depends on its number of rows
  v <- c(1, 2, 3)
  h <- function(x) x + v
  jh <- rf_jit(h)
  for (n in c(2, 3, 4, 5)) { x <- matrix(runif(n * 3), n, 3); expect_equal(jh(x), h(x), tolerance = tol) }
  # with dynamic = "batch" the refusal is a classed warning, once
  jg2 <- rf_jit(g, dynamic = "batch")
  x <- matrix(runif(60 * 2), 60, 2)
  expect_equal(jg2(x), g(x), tolerance = tol)
  expect_warning(for (n in c(3, 4)) { x <- matrix(runif(n * 2), n, 2); expect_equal(jg2(x), g(x), tolerance = tol) },
                 class = "rfuse_dynamic_warning")
})

test_that("a reduction over the batch is made for each size exactly", {
  f <- function(x) colSums(x) + colMeans(x * x)
  jf <- rf_jit(f)
  before <- counts()
  for (n in c(2, 3, 17, 400)) { x <- matrix(rnorm(n * 5), n, 5); expect_equal(jf(x), f(x), tolerance = tol) }
  expect_equal((counts() - before)[["compiles"]], 2)
})

test_that("a jitted model on tensors shares one program across batch sizes", {
  set.seed(3)
  model <- nn_sequential(nn_linear(8, 16), nn_relu(), nn_linear(16, 3))
  jm <- rf_jit(model)
  compiled <- 0
  for (n in c(4, 5, 1, 33)) {
    x <- rf_tensor(matrix(rnorm(n * 8), n, 8))
    compiled <- compiled + compiles_of(y <- jm(x))
    expect_s4_class(y, "rf_tensor")
    expect_equal(dim(y), c(n, 3L))
    expect_equal(as.array(y), as.array(model(x)), tolerance = 1e-5)
  }
  expect_equal(compiled, 2)
})

test_that("the recompile limit counts compiles, not sizes made from a template", {
  old <- options(rfuse.recompile_limit = 3)
  on.exit(options(old))
  f <- function(x) x * 2 + 1
  jf <- rf_jit(f)
  expect_no_warning(for (n in 2:20) jf(matrix(runif(n), n, 1)))
  g <- function(x) x / nrow(x)
  jg <- rf_jit(g)
  expect_warning(for (n in 2:6) jg(matrix(runif(n), n, 1)), class = "rfuse_recompile_warning")
})
