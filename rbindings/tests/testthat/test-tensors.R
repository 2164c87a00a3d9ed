test_that("rf tensors compute like base R, eagerly and lazily, with the same numbers", {
  set.seed(21)
  x <- rnd(5, 4); y <- rnd(5, 4); v <- rnd(4)
  f <- function(a, b) {
    h <- exp(a / 3) * 2 + b - 1
    list(h = h, mm = h %*% t(b), s = sum(h) + mean(b), m = max(abs(h)), cmp = h > b)
  }
  ref <- f(x, y)
  for (lazy in c(FALSE, TRUE)) {
    old <- options(gpu.kernel.fusion = lazy)
    on.exit(options(old), add = TRUE)
    for (dt in c("float64", "float32")) {
      got <- f(rf_tensor(x, dt), rf_tensor(y, dt))
      for (nm in c("h", "mm", "s", "m")) expect_lt(rel_err(as.array(got[[nm]]), as.array(ref[[nm]])), tol[[dt]])
      expect_identical(as.vector(got$cmp), as.vector(ref$cmp))
      expect_identical(dim(got$h), dim(ref$h))
    }
  }
  options(gpu.kernel.fusion = FALSE); eager <- as.array(f(rf_tensor(x), rf_tensor(y))$h)
  options(gpu.kernel.fusion = TRUE); lazy <- as.array(f(rf_tensor(x), rf_tensor(y))$h)
  expect_identical(lazy, eager)
})

test_that("lazy mode records a chain and compiles it once, as one fused program", {
  old <- options(gpu.kernel.fusion = TRUE)
  on.exit(options(old))
  a <- rf_tensor(rnd(64, 32))
  before <- rf_cache_info()$compiles
  b <- tanh(a * 2 + 1) / 3 - a
  expect_null(b@env$value)                       # recorded, not run
  expect_equal(rf_cache_info()$compiles, before)
  r <- as.array(b)
  expect_equal(rf_cache_info()$compiles, before + 1)
  expect_false(is.null(b@env$value))
  c2 <- tanh(a * 2 + 1) / 3 - a                  # same structure and shapes: cached
  as.array(c2)
  expect_equal(rf_cache_info()$compiles, before + 1)
  options(gpu.kernel.fusion = FALSE)
  before <- rf_cache_info()$compiles
  e <- tanh(rf_tensor(rnd(7, 3)) * 2 + 1)         # eager: one program per op (3 new ones)
  expect_equal(rf_cache_info()$compiles, before + 3)
})

test_that("tensor errors are classed", {
  expect_error(rf_tensor("a"), class = "rfuse_type_error")
  expect_error(rf_tensor(1:3, device = "tpu"), "unknown device", class = "rfuse_error")
  if (as.vector(rf_default_device()) == "cpu")
    expect_error(rf_tensor(1:3, device = "cuda"), "no CUDA device", class = "rfuse_runtime_error")
  expect_error(floor(rf_tensor(c(1.5, 2))), class = "rfuse_unsupported")
})
