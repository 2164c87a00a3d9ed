test_that("rf_explain returns the traced and fused IR, kernels and library calls", {
  x <- rnd(8, 4); w <- rnd(4, 3); b <- rnd(3)
  mlp <- function(x, w, b) pmax(sweep(x %*% w, 2, b, "+"), 0)
  ex <- rf_explain(mlp, x, w, b)
  expect_named(ex, c("traced", "fused", "kernels", "kernel_names", "library_calls",
                     "kernel_count", "bytes_moved", "pipeline"), ignore.order = TRUE)
  expect_match(ex$traced, "rfuse.matmul")
  expect_match(ex$fused, "rfuse.kernel = #rfuse<fusion_kind matmul_epilogue>", fixed = TRUE)
  expect_equal(ex$kernel_count, 1)
  expect_equal(unname(names(ex$kernel_names)), "matmul_epilogue")
  expect_match(ex$library_calls, "^matmul")
  expect_type(ex$kernels, "character")
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
