shapes <- list(c(5), c(4, 3), c(1, 7), c(3, 2, 2))

test_that("arithmetic, comparisons and math match base R on several shapes", {
  set.seed(1)
  for (d in shapes) {
    x <- rnd(d); y <- rnd(d)
    expect_matches_base(function(x, y) x + y * 2 - x / y, x, y)
    expect_matches_base(function(x, y) x^2 + abs(y)^1.5 - (-x), x, y)
    expect_matches_base(function(x) exp(x) + log(abs(x)) + sqrt(abs(x)), x)
    expect_matches_base(function(x) tanh(x) * sin(x) - cos(x), x)
    expect_matches_base(function(x, y) pmax(x, y) - pmin(x, 0.1), x, y)
    expect_matches_base(function(x, y) ifelse(x > y, x, y * 2), x, y)
    expect_matches_base(function(x, y) (x < y) + (x >= 0) * 2, x, y)
    expect_matches_base(function(x, y) ifelse(x > 0 & y < 0 | !(x > 1), 1, -1), x, y)
  }
})

test_that("reductions match base R", {
  set.seed(2)
  for (d in list(c(4, 3), c(1, 6), c(6, 1), c(2, 3, 4))) {
    x <- rnd(d)
    expect_matches_base(function(x) rowSums(x), x)
    expect_matches_base(function(x) colSums(x), x)
    expect_matches_base(function(x) rowMeans(x), x)
    expect_matches_base(function(x) colMeans(x), x)
    expect_matches_base(function(x) sum(x) + mean(x), x)
    expect_matches_base(function(x) max(x) - min(x), x)
    expect_matches_base(function(x) sum(x, x * 2), x)
  }
})

test_that("matrix products, transposes and sweeps match base R", {
  set.seed(3)
  A <- rnd(4, 3); B <- rnd(3, 5); C <- rnd(4, 5); v3 <- rnd(3); v4 <- rnd(4)
  expect_matches_base(function(A, B) A %*% B, A, B)
  expect_matches_base(function(A, C) crossprod(A, C), A, C)
  expect_matches_base(function(A) crossprod(A), A)
  expect_matches_base(function(A, B) tcrossprod(A, t(B)), A, B)
  expect_matches_base(function(A) tcrossprod(A), A)
  expect_matches_base(function(A) t(A) * 2, A)
  expect_matches_base(function(A, v) A %*% v, A, v3)
  expect_matches_base(function(A, v) v %*% A, A, v4)
  expect_matches_base(function(v, w) v %*% w, v3, rnd(3))
  expect_matches_base(function(A, v) sweep(A, 1, v), A, v4)
  expect_matches_base(function(A, v) sweep(A, 2, v, "/"), A, v3)
  expect_matches_base(function(A, v) sweep(A, 2, v, FUN = `*`), A, v3)
  expect_matches_base(function(x) { e <- exp(x - max(x)); e / rowSums(e) }, C)
})

test_that("nrow, ncol, dim and length are constants at trace time", {
  x <- rnd(4, 3)
  expect_matches_base(function(x) x / nrow(x) + ncol(x) + length(x) + dim(x)[1], x)
  expect_matches_base(function(x) colSums(x^2) / nrow(x), x)
})

test_that("integer and logical inputs count as numeric", {
  x <- matrix(1:6, 2)
  expect_equal(rf_jit(function(x) x * 2L + 1, dtype = "float64")(x), x * 2L + 1)
  m <- c(TRUE, FALSE, TRUE)
  expect_equal(rf_jit(function(m, v) ifelse(m, v, -v), dtype = "float64")(m, c(1, 2, 3)), c(1, -2, 3))
  expect_identical(rf_jit(function(x) x > 3)(x), x > 3)
})

test_that("helper functions are traced as functions and inlined", {
  softplus <- function(z) log(1 + exp(z))
  f <- function(x) softplus(x) - softplus(-x)
  x <- rnd(3, 4)
  expect_matches_base(f, x)
  ex <- rf_explain(f, x)
  expect_match(ex$traced, "func.func private @softplus_1")
  expect_match(ex$traced, "call @softplus_1", fixed = TRUE)
  expect_false(grepl("softplus", ex$fused))
  expect_equal(ex$kernel_count, 1)
})

test_that("traced functions reached by name, through a default or a computed lookup are rfuse's", {
  # The mask binds only the traced functions the code names (trace_function's cost grew with
  # all of them): names in strings, argument defaults and inner functions count, and code that
  # looks a function up by a computed name gets all of them.
  x <- rnd(4, 3); y <- rnd(4, 3)
  expect_matches_base(function(x, y) do.call("pmax", list(x, y)) + 1, x, y)
  expect_matches_base(function(x, y, f = rowSums) f(x) - f(y), x, y)
  expect_matches_base(function(x) { g <- function(z) colMeans(z); g(x) * 2 }, x)
  expect_matches_base(function(x, y) Reduce(pmin, list(x, y, x * 2)), x, y)
  expect_matches_base(function(x) match.fun(paste0("row", "Sums"))(x), x)
  expect_matches_base(function(x) get(paste0("col", "Sums"))(x) / 2, x)
  # A function's name given as a (static) argument, which the body cannot name.
  how <- function(x, fn) do.call(fn, list(x)) * 2
  expect_equal(rf_jit(how, static = "fn", dtype = "float64")(x, "rowSums"), how(x, "rowSums"))
  # The trace's mask holds what the body names, not every traced function.
  mask <- environment(rfuse:::mask_function(function(x) pmax(x, 0)))
  expect_true(exists("pmax", envir = mask, inherits = FALSE))
  expect_false(exists("rowSums", envir = mask, inherits = FALSE))
  computed <- environment(rfuse:::mask_function(function(x) get("rowSums")(x)))
  expect_true(exists("rowSums", envir = computed, inherits = FALSE))
})

test_that("results keep base R's structure, lists included", {
  x <- rnd(3, 2)
  f <- function(x) list(total = sum(x), scaled = x / 2, n = nrow(x))
  got <- rf_jit(f, dtype = "float64")(x)
  expect_equal(got, f(x))
  expect_null(dim(rf_jit(function(x) rowSums(x))(x)))
})
