# R's integer semantics: integer results where R gives them, R's NA and warning on overflow,
# %/% and %% as R computes them on integers, in float64 and float32.

# The value, type and warnings of a jitted call against base R's.
expect_integer_semantics <- function(f, ..., dtype = "float64", compiled = TRUE) {
  jf <- rf_jit(f, dtype = dtype)
  ref <- warnings_of(f(...))
  got <- warnings_of(suppressMessages(jf(...)))
  expect_identical(got$value, ref$value)
  expect_identical(got$warnings, ref$warnings)
  if (compiled) expect_silent(jf(...)) # ran compiled: no fallback note
}

test_that("integer arithmetic gives integers, in float64 and float32", {
  for (dt in c("float64", "float32")) {
    expect_integer_semantics(function(x, y) x + y, 5L, 1L, dtype = dt)
    expect_integer_semantics(function(x, y) x * y - 3L, c(1L, -2L, 3L), 4L, dtype = dt)
    expect_integer_semantics(function(x) -x + abs(x), c(3L, -4L), dtype = dt)
    expect_integer_semantics(function(x) x * 2L, c(TRUE, FALSE), dtype = dt)
    expect_integer_semantics(function(x) sum(x > 0), c(1, -1, 2), dtype = dt)
    expect_integer_semantics(function(x) max(x) - min(x), c(4L, 9L, 1L), dtype = dt)
    expect_integer_semantics(function(x) pmax(x, 3L) + ifelse(x > 3L, x, 0L), c(4L, 9L, 1L), dtype = dt)
    expect_integer_semantics(function(x) t(x) * 2L, matrix(1:6, 2), dtype = dt)
  }
  # Mixed with doubles, divided or raised: doubles, as in R.
  expect_integer_semantics(function(x) x * 2, 1:3)
  expect_integer_semantics(function(x) x / 2L + x^2, 1:3)
  expect_integer_semantics(function(x) mean(x), 1:4)
})

test_that("an integer overflow gives R's NA and warning (base R answers that call)", {
  big <- .Machine$integer.max
  expect_integer_semantics(function(x, y) x + y, big, 1L, compiled = FALSE)
  expect_integer_semantics(function(x, y) x + y, big - 1L, 1L) # the largest integer: compiled
  expect_integer_semantics(function(x) (x * x) %/% 7L, c(50000L, 3L), compiled = FALSE) # intermediate
  expect_integer_semantics(function(x) sum(x), c(big, big), compiled = FALSE) # R: a double
  # float32 holds integers exactly up to 2^24: beyond, base R answers.
  expect_integer_semantics(function(x) x + 1L, c(16777216L, 1L), dtype = "float32", compiled = FALSE)
  expect_integer_semantics(function(x) x - 1L, c(16777215L, 1L), dtype = "float32")
})

test_that("%/% and %% on integers are R's, including negative operands and a zero divisor", {
  for (dt in c("float64", "float32")) {
    expect_integer_semantics(function(x) x %/% 3L, -7:7, dtype = dt)
    expect_integer_semantics(function(x) x %% 3L, -7:7, dtype = dt)
    expect_integer_semantics(function(x, y) x %% y + x %/% y, -7:7, c(2L, -3L, 5L), dtype = dt)
  }
  expect_integer_semantics(function(x, y) x %/% y, 7L, c(2L, 0L, 5L), compiled = FALSE) # NA
  expect_integer_semantics(function(x) x %/% 0L, 1:3, compiled = FALSE)
  expect_error(rf_jit(function(x) x %% (x - 1L))(1:3), class = "rfuse_unsupported") # may be 0
  expect_error(rf_jit(function(x) x %% 2)(c(1.5, 2)), class = "rfuse_unsupported") # doubles
})

test_that("integer and double arguments are different signatures", {
  jf <- rf_jit(function(x) x + 1L)
  expect_identical(jf(1:3), 2:4)
  expect_identical(jf(c(1, 2, 3)), c(2, 3, 4))
  expect_identical(jf(1:3), 2:4)
})

test_that("an integer NA is R's NA", {
  expect_integer_semantics(function(x) x * 2L + 1L, c(1L, NA, 3L), compiled = FALSE)
})

test_that("helpers keep integer types and their bounds", {
  h <- function(a) a * 3L
  expect_integer_semantics(function(x) h(x) + h(x + 1L), c(1L, 5L))
  expect_integer_semantics(function(x) h(h(x)), c(100000L, 1L), compiled = FALSE) # 9e10 overflows
})

test_that("floor and ceiling are R's", {
  expect_matches_base(function(x) floor(x / 2) + ceiling(x / 3), c(-5, 5.5, 7, -0.2))
})

# Integer rf_tensors compute in their own dtype, exactly (torch's semantics: int32 + int32 is an
# int32, a sum an int64, / and exp floats). They once computed in float32: 16777217L + 1L gave
# 16777216.
int_tensor_devices <- function() c("cpu", if (as.vector(rf_default_device()) == "cuda") "cuda")

test_that("integer tensors compute exactly in their dtype, eager and lazy, on every device", {
  v <- c(16777217L, 3L, -7L, 2000000000L, 0L, -123456789L)
  m <- matrix(c(16777219L, -5L, 8L, 1073741000L, 33554433L, 1L), 2)
  for (device in int_tensor_devices()) for (lazy in c(FALSE, TRUE)) {
    info <- paste(device, if (lazy) "lazy" else "eager")
    old <- options(gpu.kernel.fusion = lazy)
    x <- rf_tensor(v, dtype = "int32", device = device)
    y <- x + 1L
    expect_identical(y$dtype, "int32", info = info)
    expect_identical(as.vector(y), v + 1L, info = info)
    expect_identical(as.vector(x - x * 2L), -v, info = info)
    expect_identical(as.vector(-x + abs(x)), -v + abs(v), info = info)
    expect_identical(as.vector(x == 16777217L), v == 16777217L, info = info)
    expect_identical(as.vector(x > -8L & x < 16777218L), v > -8L & v < 16777218L, info = info)
    expect_identical(as.vector(pmax(x, 4L)), pmax(v, 4L), info = info)
    expect_identical(as.vector(ifelse(x > 0L, x, -1L)), ifelse(v > 0L, v, -1L), info = info)
    expect_identical(as.vector(x %/% 3L), v %/% 3L, info = info)
    expect_identical(as.vector(x %% -7L), v %% -7L, info = info)
    s <- sum(x)
    expect_identical(s$dtype, "int64", info = info) # torch's sum of integers
    expect_identical(as.vector(s), sum(as.double(v)), info = info)
    expect_identical(as.vector(max(x)), max(v), info = info)
    expect_identical(as.vector(min(x)), min(v), info = info)
    expect_identical(as.vector(cumsum(x)), cumsum(as.double(v)), info = info)
    expect_identical(as.vector(cummax(x)), cummax(v), info = info)
    # int32 and int64 together: int64.
    z <- x + rf_tensor(v, dtype = "int64", device = device)
    expect_identical(z$dtype, "int64", info = info)
    expect_identical(as.vector(z), 2 * as.double(v), info = info)
    # What R computes in doubles computes in float32 (torch's default float dtype).
    h <- x / 2L
    expect_identical(h$dtype, "float32", info = info)
    expect_equal(as.vector(h), v / 2, tolerance = 1e-7, info = info)
    # Matrices keep their dims; a jitted function on integer tensors gives integer tensors.
    xm <- rf_tensor(m, dtype = "int32", device = device)
    expect_identical(as.array(t(xm) * 2L - 1L), t(m) * 2L - 1L, info = info)
    jf <- rf_jit(function(a, b) a * b + 1L)
    r <- jf(xm, rf_tensor(matrix(2L, 2, 3), dtype = "int32", device = device))
    expect_identical(r$dtype, "int32", info = info)
    expect_identical(as.array(r), m * 2L + 1L, info = info)
    options(old)
  }
})

test_that("integer tensors wrap around on overflow, as torch's; unsupported integer ops refuse", {
  for (device in int_tensor_devices()) {
    x <- rf_tensor(c(2147483000L, 5L), dtype = "int32", device = device)
    # torch's int32 arithmetic wraps modulo 2^32 (R would give NA: R integers, not tensors).
    wrapped <- as.vector((x + 1000L)$to(dtype = "int64"))
    expect_identical(wrapped, c(2147483000 + 1000 - 2^32, 1005), info = device)
    expect_error(as.vector(x %/% x), "nonzero integer constant", class = "rfuse_unsupported")
    expect_error(as.vector(max(rf_tensor(integer(), dtype = "int32", device = device))), "no integer value",
                 class = "rfuse_unsupported") # R's -Inf is no integer
    expect_error(as.vector(x %/% 0L), "nonzero integer constant", class = "rfuse_unsupported")
    expect_error(as.vector(rf_tensor(1:3, dtype = "int64", device = device) %% 2L), "int64",
                 class = "rfuse_unsupported")
  }
})
