test_that("a second call with the same shapes compiles nothing; a new shape compiles once", {
  f <- function(x, y) exp(x) * y + 1
  jf <- rf_jit(f)
  before <- rf_cache_info()
  jf(rnd(3, 4), rnd(3, 4))
  after1 <- rf_cache_info()
  expect_equal(after1$compiles - before$compiles, 1)
  jf(rnd(3, 4), rnd(3, 4))
  after2 <- rf_cache_info()
  expect_equal(after2$compiles, after1$compiles)
  expect_equal(after2$hits - after1$hits, 1)
  jf(rnd(5, 2), rnd(5, 2))
  jf(rnd(5, 2), rnd(5, 2))
  expect_equal(rf_cache_info()$compiles - after2$compiles, 1)
  expect_gte(rf_cache_info()$programs, 2)
  expect_gte(rf_cache_clear(), 2)
  expect_equal(rf_cache_info()$programs, 0)
})

test_that("scalar parameters are inputs, not constants: new values do not recompile", {
  jf <- rf_jit(function(x, a) x * a, dtype = "float64")
  jf(1:4, 2)
  n <- rf_cache_info()$compiles
  expect_equal(jf(1:4, 3), (1:4) * 3)
  expect_equal(rf_cache_info()$compiles, n)
})

test_that("the cache report survives a jitted function collected while it runs", {
  # A finalizer can drop a cache between ls() and the lookup (a collection runs at any
  # allocation): an id without its cache counts nothing.
  caches <- rfuse:::.rf_caches
  assign("rfuse-test-gone", NULL, envir = caches)
  on.exit(rm(list = "rfuse-test-gone", envir = caches))
  expect_true(is.numeric(rf_cache_info()$programs))
  expect_gte(rf_cache_clear(), 0)
})
