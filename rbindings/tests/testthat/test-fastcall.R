# The fast path of a jitted function called again on rf_tensors (fastcall.cpp): every call it takes
# gives what the R path gives, and whatever could change the answer (new values, other dims or
# dtypes, named arguments, a model's new parameters or structure, an outside number, a cleared
# cache) takes the R path again.
dev <- as.vector(rf_default_device())

test_that("repeated calls on tensors give the R path's answers, for new values too", {
  f <- function(x, a) x * a + 1
  jf <- rf_jit(f)
  for (i in 1:5) {
    x <- rnd(7); a <- rnd(7)
    got <- jf(rf_tensor(x, device = dev), rf_tensor(a, device = dev))
    expect_true(is(got, "rf_tensor"))
    expect_equal(as.vector(got), f(x, a), tolerance = 1e-6)
  }
  hits <- rf_cache_info()$hits
  fast <- rfuse:::.rf_fast_hits()
  xt <- rf_tensor(rnd(7), device = dev)
  for (i in 1:10) r <- jf(xt, xt)
  expect_equal(rf_cache_info()$hits - hits, 10) # the fast path counts its hits
  expect_equal(rfuse:::.rf_fast_hits() - fast, 10) # and took all ten
  expect_equal(as.vector(r), as.vector(xt) * as.vector(xt) + 1, tolerance = 1e-6)
})

test_that("dims, dtypes and names are part of the signature", {
  f <- function(x, y) x - 2 * y
  jf <- rf_jit(f)
  v <- rnd(6); m <- matrix(rnd(6), 2)
  for (k in 1:2) { # the second round is served from the records of the first
    r1 <- jf(rf_tensor(v, device = dev), rf_tensor(v, device = dev))
    r2 <- jf(rf_tensor(m, device = dev), rf_tensor(m, device = dev))
    r3 <- jf(rf_tensor(m, dtype = "float64", device = dev), rf_tensor(m, dtype = "float64", device = dev))
    r4 <- jf(y = rf_tensor(v, device = dev), x = rf_tensor(2 * v, device = dev))
    expect_null(dim(r1))
    expect_equal(dim(r2), c(2L, 3L))
    expect_equal(r3$dtype, "float64")
    expect_equal(as.array(r3), f(m, m), tolerance = 1e-12)
    expect_equal(as.vector(r4), f(2 * v, v), tolerance = 1e-6) # by name, not by position
  }
})

test_that("a jitted model follows new parameters and a changed structure", {
  set.seed(51)
  net <- nn_sequential(nn_linear(3, 4), nn_relu(), nn_linear(4, 2))
  jm <- rf_jit(net)
  x <- matrix(rnd(15), 5)
  xt <- rf_tensor(x, device = dev)
  fast <- rfuse:::.rf_fast_hits()
  for (i in 1:3) expect_equal(as.array(jm(xt)), net(x), tolerance = 1e-5)
  expect_equal(rfuse:::.rf_fast_hits() - fast, 2) # the first call recorded, the others repeated it
  # New parameter values (the module holds new objects): the next call uses them.
  rf_fit(net, x, matrix(rnd(10), 5), loss = nnf_mse_loss, steps = 3, lr = 0.1, progress = FALSE)
  expect_equal(as.array(jm(xt)), net(x), tolerance = 1e-5)
  first <- attr(net[[1]], "self")
  first$weight <- nn_parameter(matrix(0, 4, 3))
  expect_equal(as.array(jm(xt)), net(x), tolerance = 1e-5)
  # A structure change ($<- on a module) finds the parameters again.
  net$`2` <- nn_linear(4, 2)
  expect_equal(as.array(jm(xt)), net(x), tolerance = 1e-5)
})

test_that("outside numbers, rf_cache_clear() and freed tensors take the R path", {
  k <- 2
  f <- function(x) x * k
  jf <- rf_jit(f)
  xt <- rf_tensor(c(1, 2, 3), device = dev)
  expect_equal(as.vector(jf(xt)), c(2, 4, 6))
  expect_equal(as.vector(jf(xt)), c(2, 4, 6))
  k <- 3
  expect_message(r <- jf(xt), class = "rfuse_retrace")
  expect_equal(as.vector(r), c(3, 6, 9))
  g <- rf_jit(function(x) x + 1)
  for (i in 1:3) g(xt)
  rf_cache_clear()
  expect_equal(as.vector(g(xt)), c(2, 3, 4))
  expect_equal(as.vector(g(xt)), c(2, 3, 4))
  # A tensor whose handle no longer holds memory (as after a session restart) is a classed error.
  gone <- rf_tensor(c(1, 2, 3), device = dev)
  g(gone)
  attr(gone, "env")$buf <- unserialize(serialize(attr(gone, "env")$buf, NULL))
  expect_error(g(gone), class = "rfuse_invalid_tensor")
})

test_that("a jitted function saved and restored takes the R path and answers", {
  jf <- rf_jit(function(x) x * 2)
  xt <- rf_tensor(c(1, 2), device = dev)
  jf(xt); jf(xt)
  f <- tempfile(fileext = ".rds")
  saveRDS(jf, f)
  back <- readRDS(f)
  expect_equal(as.vector(back(rf_tensor(c(3, 4), device = dev))), c(6, 8))
})

test_that("jitted and gradient functions saved and restored compile again", {
  jf <- rf_jit(function(x) x * 2)
  jf(c(1, 2))
  gf <- rf_grad(function(w) sum(w^2))
  gf(c(1, 2))
  f <- tempfile(fileext = ".rds")
  saveRDS(list(jf, gf), f)
  back <- readRDS(f) # their programs' handles come back empty
  expect_equal(back[[1]](c(3, 4)), c(6, 8))
  expect_equal(back[[2]](c(3, 4)), c(6, 8), tolerance = 1e-6)
})

test_that("results of the fast path are independent tensors, and an autocast region misses it", {
  jf <- rf_jit(function(x) x * 2)
  xt <- rf_tensor(matrix(c(1, 2, 3, 4, 5, 6), 2), device = dev)
  jf(xt)
  fast <- rfuse:::.rf_fast_hits()
  r1 <- jf(xt); r2 <- jf(xt)
  expect_equal(rfuse:::.rf_fast_hits() - fast, 2)
  # Their fields are shared R values: changing one result must not change the other.
  attr(r1, "env")$rdim[1] <- 6L
  expect_equal(dim(r1), c(6L, 3L))
  expect_equal(dim(r2), c(2L, 3L))
  expect_equal(as.array(r2), matrix(c(2, 4, 6, 8, 10, 12), 2))
  expect_false(identical(attr(r1, "env"), attr(r2, "env")))
  # Inside an autocast region the program's key differs: the R path runs it.
  fast <- rfuse:::.rf_fast_hits()
  with_autocast(device_type = dev, dtype = "bfloat16", jf(xt))
  expect_equal(rfuse:::.rf_fast_hits() - fast, 0)
  jf(xt)
  expect_equal(rfuse:::.rf_fast_hits() - fast, 1)
})
