test_that("rf_explain returns the traced and fused IR, kernels and library calls", {
  x <- rnd(8, 4); w <- rnd(4, 3); b <- rnd(3)
  mlp <- function(x, w, b) pmax(sweep(x %*% w, 2, b, "+"), 0)
  ex <- rf_explain(mlp, x, w, b)
  expect_named(ex, c("traced", "fused", "kernels", "kernel_names", "library_calls",
                     "gpu_fallbacks", "gpu_plan", "cpu_steps", "kernel_count", "bytes_moved", "pipeline"),
               ignore.order = TRUE)
  expect_match(ex$traced, "rfuse.matmul")
  expect_match(ex$fused, "rfuse.kernel = #rfuse<fusion_kind matmul_epilogue>", fixed = TRUE)
  expect_equal(ex$kernel_count, 1)
  expect_equal(unname(names(ex$kernel_names)), "matmul_epilogue")
  expect_match(ex$library_calls, "^matmul")
  expect_type(ex$kernels, "character")
  # On the CPU backend: BLAS for the product, the bias + ReLU compiled into one pass.
  expect_match(ex$cpu_steps, "BLAS \\+ compiled epilogue")
})

test_that("the CPU backend compiles fused reductions and says which steps it interprets", {
  x <- matrix(rnorm(64 * 32), 64)
  ex <- rf_explain(function(x) { e <- exp(x); e / rowSums(e) }, x)
  expect_match(ex$cpu_steps, "compiled reduction")
  jf <- rf_jit(function(x) { e <- exp(x); e / rowSums(e) }, dtype = "float64")
  expect_equal(jf(x), exp(x) / rowSums(exp(x)), tolerance = 1e-12)
})

test_that("rf_explain returns the generated CUDA C++ of each kernel, even without a GPU", {
  x <- rnd(16, 8)
  ex <- rf_explain(function(x) { e <- exp(x - max(x)); e / rowSums(e) }, x)
  expect_gte(length(ex$kernels), 1)
  expect_true(all(nzchar(names(ex$kernels))))
  expect_true(all(grepl("__global__", ex$kernels)))
  expect_true(any(grepl("rf_exp<(float|double)>", ex$kernels)))
  expect_length(ex$gpu_fallbacks, 0)
  # Each kernel names the R expressions it came from.
  expect_true(any(grepl("e/rowSums(e)", ex$kernels, fixed = TRUE)))
})

test_that("the device is cpu without a GPU, and options(rfuse.device) forces cpu", {
  dev <- rf_default_device()
  expect_true(dev %in% c("cpu", "cuda"))
  expect_type(attr(dev, "description"), "character")
  old <- options(rfuse.device = "cpu")
  on.exit(options(old))
  expect_equal(as.vector(rf_default_device()), "cpu")
  expect_equal(rf_jit(function(x) x * 2, dtype = "float64")(1:3), c(2, 4, 6))
})

test_that("pipelines are selectable from R and compute the same numbers", {
  x <- rnd(6, 5)
  f <- function(x) { e <- exp(x); e / rowSums(e) * 2 + 1 }
  counts <- sapply(c("default", "elementwise-only", "no-fusion"), function(p)
    rf_explain(f, x, pipeline = p)$kernel_count)
  expect_equal(unname(counts[["default"]]), 1)
  expect_gt(counts[["elementwise-only"]], counts[["default"]])
  expect_gt(counts[["no-fusion"]], counts[["elementwise-only"]])
  for (p in names(counts))
    expect_lt(rel_err(rf_jit(f, "float64", pipeline = p)(x), f(x)), 1e-12)
})
