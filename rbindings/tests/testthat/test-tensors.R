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
  expect_null(b@env$buf)                         # recorded, not run
  expect_equal(rf_cache_info()$compiles, before)
  r <- as.array(b)
  expect_equal(rf_cache_info()$compiles, before + 1)
  expect_false(is.null(b@env$buf))
  c2 <- tanh(a * 2 + 1) / 3 - a                  # same structure and shapes: cached
  as.array(c2)
  expect_equal(rf_cache_info()$compiles, before + 1)
  options(gpu.kernel.fusion = FALSE)
  before <- rf_cache_info()$compiles
  e <- tanh(rf_tensor(rnd(13, 29)) * 2 + 1)       # eager: one program per op (3 new ones; a shape no
  # other test file uses, so that none of them is in the session's cache whatever ran before)
  expect_equal(rf_cache_info()$compiles, before + 3)
})

test_that("tensor errors are classed", {
  expect_error(rf_tensor("a"), class = "rfuse_type_error")
  expect_error(rf_tensor(1:3, device = "tpu"), "unknown device", class = "rfuse_error")
  if (as.vector(rf_default_device()) == "cpu")
    expect_error(rf_tensor(1:3, device = "cuda"), "no CUDA device", class = "rfuse_runtime_error")
  expect_error(round(rf_tensor(c(1.5, 2))), class = "rfuse_unsupported")
})

test_that("optim_sgd / optim_adam / optim_adamw step rf_tensors as torch does", {
  set.seed(8)
  x <- matrix(rnorm(40), 10); y <- x %*% c(1, -2, 0.5, 3)
  w0 <- matrix(rnorm(4), 4); b0 <- 0.3
  grads <- function(w, b) { # of mean((x w + b - y)^2), in base R
    r <- x %*% w + b - y
    list(w = 2 * crossprod(x, r) / 10, b = 2 * mean(r))
  }
  # Reference SGD with momentum and weight decay, PyTorch's definition.
  w <- w0; b <- b0; vw <- 0 * w; vb <- 0
  for (s in 1:3) {
    g <- grads(w, b)
    vw <- 0.9 * vw + g$w + 0.01 * w; vb <- 0.9 * vb + g$b + 0.01 * b
    w <- w - 0.05 * vw; b <- b - 0.05 * vb
  }
  train <- function(opt, tw, tb, steps) { # the torch loop
    for (s in seq_len(steps)) {
      opt$zero_grad()
      loss <- mean((x %*% tw + tb - y)^2)
      loss$backward()
      opt$step()
    }
  }
  tw <- rf_tensor(w0, dtype = "float64", requires_grad = TRUE)
  tb <- rf_tensor(b0, dtype = "float64", requires_grad = TRUE)
  opt <- optim_sgd(list(tw, tb), lr = 0.05, momentum = 0.9, weight_decay = 0.01)
  train(opt, tw, tb, 3)
  expect_equal(as.array(tw), w, tolerance = 1e-10)
  expect_equal(as.vector(as.array(tb)), b, tolerance = 1e-10)
  expect_output(print(opt), "optim_sgd: 2 parameter tensor\\(s\\), 3 step")

  # Adam and AdamW against their definitions.
  for (decoupled in c(FALSE, TRUE)) {
    w <- w0; m <- 0 * w; v <- 0 * w
    for (s in 1:4) {
      g <- grads(w, b0)$w
      if (!decoupled) g <- g + 0.1 * w
      m <- 0.9 * m + 0.1 * g; v <- 0.999 * v + 0.001 * g^2
      step <- 0.01 * (m / (1 - 0.9^s)) / (sqrt(v / (1 - 0.999^s)) + 1e-8)
      w <- if (decoupled) w * (1 - 0.01 * 0.1) - step else w - step
    }
    tw <- rf_tensor(w0, dtype = "float64", requires_grad = TRUE)
    opt <- if (decoupled) optim_adamw(tw, lr = 0.01, weight_decay = 0.1) else optim_adam(tw, lr = 0.01, weight_decay = 0.1)
    train(opt, tw, b0, 4)
    expect_equal(as.array(tw), w, tolerance = 1e-10)
  }

  expect_error(optim_sgd(list(rf_tensor(1)), lr = 0.1), class = "rfuse_type_error")
  tw <- rf_tensor(w0, requires_grad = TRUE)
  expect_error(optim_sgd(tw, lr = 0.1)$step(), "backward", class = "rfuse_autodiff_error")
})

test_that("rf_tensor() of a pending (lazily recorded) tensor computes it first", {
  old <- options(gpu.kernel.fusion = TRUE)
  on.exit(options(old))
  a <- rf_tensor(c(1, 2, 3), device = "cpu")
  b <- a * 2
  c2 <- rf_tensor(b, dtype = "float64")
  expect_identical(c2$dtype, "float64")
  expect_identical(as.vector(c2), c(2, 4, 6))
  expect_identical(rf_tensor(b)$dtype, "float32")
})

test_that("$cpu() and $to() of a pending tensor compute it first", {
  old <- options(gpu.kernel.fusion = TRUE)
  on.exit(options(old))
  b <- rf_tensor(c(1, 2), device = "cpu") + 1
  expect_identical(as.vector(b$cpu()), c(2, 3))
  b2 <- rf_tensor(c(1, 2), device = "cpu") + 1
  expect_identical(b2$to(dtype = "float64")$dtype, "float64")
})

test_that("eager ops with a changing number compile once; na.rm on tensors is refused, not ignored", {
  x <- rf_tensor(c(1, 2, 3), device = "cpu")
  y <- x * 1.5 # compiled once for this structure
  before <- rf_cache_info()$compiles
  for (i in c(2, 3.5, 5)) y <- x * i
  expect_equal(rf_cache_info()$compiles, before)
  expect_identical(as.vector(y), c(5, 10, 15))
  expect_error(sum(x, na.rm = TRUE), class = "rfuse_unsupported")
  expect_identical(as.vector(sweep(rf_tensor(matrix(1:4, 2), device = "cpu"), 1, c(1, 2))), c(0, 0, 2, 2))
})

test_that("small whole powers of tensors multiply (eager, lazy, jitted) and equal base R", {
  set.seed(5)
  x <- c(rnd(40), -2, -0.5, 0, 3)
  for (lazy in c(FALSE, TRUE)) {
    old <- options(gpu.kernel.fusion = lazy)
    for (dt in c("float32", "float64")) {
      t <- rf_tensor(x, dt, device = "cpu")
      for (k in c(2, 3, 4, 2.5, 1, -1)) {
        got <- as.vector(t^k)
        ref <- x^k
        fin <- is.finite(ref)
        expect_identical(is.nan(got), is.nan(ref))
        expect_lt(rel_err(got[fin], ref[fin]), tol[[dt]])
      }
    }
    options(old)
  }
  # In a jitted f32 function x^3 is two products: no pow left in the fused IR; f64 keeps R's pow
  # (on the CPU, glibc's, as R's: the same doubles).
  cube <- function(a) a^3 + 1
  expect_false(grepl("rfuse.pow", rf_explain(cube, rf_tensor(x, device = "cpu"))$fused, fixed = TRUE))
  expect_true(grepl("rfuse.pow", rf_explain(cube, rf_tensor(x, "float64", device = "cpu"))$fused, fixed = TRUE))
  expect_lt(rel_err(as.vector(rf_jit(cube)(rf_tensor(x, device = "cpu"))), cube(x)), tol[["float32"]])
  expect_identical(as.vector(rf_jit(cube)(rf_tensor(x, "float64", device = "cpu"))), cube(x))
  # The exponent is a constant of the eager op: each of 2, 3, 4 compiles once, not per call.
  t <- rf_tensor(x, device = "cpu")
  y <- t^3
  before <- rf_cache_info()$compiles
  for (i in 1:3) y <- t^3
  expect_equal(rf_cache_info()$compiles, before)
})

test_that("R's NA is refused where values become tensors (tensors hold NaN, not NA)", {
  expect_error(rf_tensor(c(1, NA, 3)), "element 2 is NA", class = "rfuse_type_error")
  expect_error(rf_tensor(c(1L, NA)), "element 2 is NA", class = "rfuse_type_error")
  big <- rep(1, 2e6); big[c(1500001, 700001)] <- NA # the scan is split over threads: the first still named
  expect_error(rf_tensor(big), "element 700001 is NA", class = "rfuse_type_error")
  expect_error(rf_tensor(c(TRUE, NA)), class = "rfuse_type_error")
  expect_true(is.nan(as.numeric(rf_tensor(c(1, NaN)))[2])) # NaN is a tensor value
  jf <- rf_jit(function(a, b) a + b)
  expect_error(jf(rf_tensor(c(1, 2)), c(1, NA)), "element 2 is NA", class = "rfuse_type_error")
  expect_equal(as.numeric(jf(rf_tensor(c(1, 2)), c(1, 2))), c(2, 4))
})

test_that("the fast permute equals aperm() on numbers, integers and logicals, any dims", {
  set.seed(11)
  for (d in list(c(512L, 64L, 3L, 3L), c(64L, 3L, 7L, 7L), c(7L, 5L, 3L), 10L, c(4L, 1L, 6L, 2L, 3L),
                 c(33L, 65L), c(0L, 3L), c(1L, 1L))) {
    x <- array(rnorm(prod(d)), d)
    xi <- array(sample(c(NA, 1:100), prod(d), TRUE), d)
    xl <- xi > 50L
    perms <- c(list(rev(seq_along(d)), seq_along(d)), replicate(3, sample(length(d)), simplify = FALSE))
    for (p in perms) {
      expect_identical(rfuse:::.rf_aperm(x, p), aperm(x, p))
      expect_identical(rfuse:::.rf_aperm(xi, p), aperm(xi, p))
      expect_identical(rfuse:::.rf_aperm(xl, p), aperm(xl, p))
    }
  }
  # Anything else (dimnames, characters) goes to aperm() itself.
  m <- matrix(1:6, 2, dimnames = list(c("a", "b"), NULL))
  expect_identical(rfuse:::r_aperm(m, 2:1), aperm(m, 2:1))
  expect_identical(rfuse:::r_aperm(matrix(letters[1:6], 2), 2:1), t(matrix(letters[1:6], 2)))
  expect_error(rfuse:::.rf_aperm(array(1, c(2, 2)), c(1L, 1L)), "not a permutation")
  # To a tensor in the permuted layout and back (rf_fit's filters), on the default device.
  dev <- as.vector(rf_default_device())
  w <- array(rnorm(8 * 3 * 5 * 2), c(8, 3, 5, 2))
  for (dt in c("float64", "float32")) {
    perm <- c(2L, 4L, 3L, 1L)
    buf <- rfuse:::rf_guard(rfuse:::.rf_tensor_from_r_permuted(w, perm, rfuse:::ir_dtype(dt), dev))
    t <- rfuse:::make_tensor(buf = buf, dtype = dt, device = dev, rdim = dim(w)[perm], len = length(w))
    expect_equal(as.array(t), aperm(w, perm), tolerance = if (dt == "float32") 1e-6 else 0)
    back <- rfuse:::.rf_deferred_values(buf, dim(w)[perm], order(perm), NULL) # (rf_fit's trained filters)
    expect_identical(dim(back), dim(w))
    expect_equal(back + 0, w, tolerance = if (dt == "float32") 1e-6 else 0)
  }
  expect_error(rfuse:::rf_guard(rfuse:::.rf_tensor_from_r_permuted(array(c(1, NA), c(1, 2)), 2:1, "f32", dev)),
               class = "rfuse_type_error")
  # NA is looked for while permuting, over the threads: the first in R's order is named, whatever
  # order the permuted tiles are visited in; NaN is a value.
  big <- array(rnorm(64 * 64 * 3 * 3), c(64, 64, 3, 3))
  big[c(30000, 777, 20000)] <- NA
  big[5] <- NaN
  for (dt in c("f32", "f64"))
    expect_error(rfuse:::rf_guard(rfuse:::.rf_tensor_from_r_permuted(big, c(2L, 4L, 3L, 1L), dt, dev)),
                 "element 777 is NA", class = "rfuse_type_error")
  big[is.na(big) & !is.nan(big)] <- 0
  buf <- rfuse:::rf_guard(rfuse:::.rf_tensor_from_r_permuted(big, c(2L, 4L, 3L, 1L), "f64", dev))
  t <- rfuse:::make_tensor(buf = buf, dtype = "float64", device = dev, rdim = dim(big)[c(2, 4, 3, 1)], len = length(big))
  expect_identical(as.array(t), aperm(big, c(2, 4, 3, 1)))
})

test_that("zeros_like gives zeros on the tensor's device in its dtype, whatever its values", {
  dev <- as.vector(rf_default_device())
  for (dt in c("float32", "float64", "int32")) {
    v <- if (dt == "int32") c(5, 1, -2, 7, 3, 4) else c(NaN, 1, -2, Inf, 3, 4)
    t <- rf_tensor(array(v, c(2, 3)), dtype = dt, device = dev)
    z <- rfuse:::zeros_like(t)
    expect_identical(z$dtype, t$dtype)
    expect_identical(z@env$device, dev)
    expect_identical(as.array(z), array(if (dt == "int32") 0L else 0, c(2, 3)))
  }
  expect_identical(rfuse:::zeros_like(array(c(NaN, 2), c(1, 2))), array(0, c(1, 2)))
})
