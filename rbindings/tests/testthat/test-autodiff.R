# Reverse-mode differentiation from R: gradients against central differences, losses, errors,
# and training that learns.

test_that("gradients of base R code equal central differences", {
  set.seed(11)
  x <- matrix(rnorm(12), 3); w <- matrix(rnorm(8), 4); b <- rnorm(2)
  expect_grads_match(function(x, w, b) sum(tanh(sweep(x %*% w, 2, b, "+"))^2), list(x = x, w = w, b = b))
  expect_grads_match(function(x) mean(exp(x) / rowSums(exp(x))^2), list(x = x))
  expect_grads_match(function(x, y) sum(pmax(x * y, 0.1) + ifelse(x > 0, x^3, -x)), list(x = x + 0.05, y = x * 2 - 0.3))
  expect_grads_match(function(x) sum(log(1 + x * x)) * mean(colMeans(x)) + sum(rowMeans(x)^2), list(x = x))
  expect_grads_match(function(a, v) sum(crossprod(a, v)) + max(a), list(a = matrix(rnorm(6), 3), v = rnorm(3)))
})

test_that("rf_grad returns the gradient array for one argument and a list for several", {
  f <- function(x, y) sum(x * y)
  x <- c(1, 2, 3); y <- c(4, 5, 6)
  expect_equal(rf_grad(f, wrt = "x", dtype = "float64")(x, y), y)
  g <- rf_grad(f, dtype = "float64")(x, y)
  expect_named(g, c("x", "y"))
  expect_equal(g$y, x)
})

test_that("cross-entropy is log-softmax + NLL, stable, with the textbook gradient", {
  set.seed(3)
  z <- matrix(rnorm(20), 5); y <- c(1, 4, 2, 2, 3)
  t <- rf_one_hot(y, 4)
  p <- exp(z) / rowSums(exp(z))
  expect_equal(nnf_cross_entropy(z, y), -mean(log(p[cbind(1:5, y)])))
  ce <- function(z, t) nnf_cross_entropy(z, t)
  expect_equal(rf_jit(ce, dtype = "float64")(z, t), nnf_cross_entropy(z, y), tolerance = 1e-12)
  expect_equal(rf_grad(ce, wrt = "z", dtype = "float64")(z, t), (p - t) / 5, tolerance = 1e-12)
  big <- z * 1000 # no overflow: each row is shifted by its maximum
  expect_true(is.finite(rf_jit(ce, dtype = "float64")(big, t)))
  expect_error(rf_jit(function(z, y) nnf_cross_entropy(z, rf_one_hot(y, 4)))(z, y), class = "rfuse_unsupported")
})

test_that("cross-entropy with probabilities that do not sum to 1 is torch's -sum(target * log_softmax)", {
  set.seed(5)
  z <- matrix(rnorm(20), 4); t <- matrix(runif(20), 4) # soft targets; rows sum to ~2.5, not 1
  lse <- log(rowSums(exp(z)))
  ref <- mean(-rowSums(t * (z - lse)))
  ce <- function(z, t) nnf_cross_entropy(z, t)
  expect_equal(nnf_cross_entropy(z, t), ref, tolerance = 1e-12)
  expect_equal(rf_jit(ce, dtype = "float64")(z, t), ref, tolerance = 1e-12)
  # d/dz: softmax(z) * sum(t) - t, over the rows' mean; the same with the rows shifted (the
  # maximum the loss subtracts cancels whatever the targets sum to).
  p <- exp(z - lse)
  expect_equal(rf_grad(ce, wrt = "z", dtype = "float64")(z, t), (p * rowSums(t) - t) / 4, tolerance = 1e-12)
  expect_equal(rf_jit(ce, dtype = "float64")(z + 100, t), ref, tolerance = 1e-12)
})

test_that("softmax's gradient is torch's, with no gradient through the maximum it subtracts", {
  set.seed(6)
  x <- matrix(rnorm(30), 5); w <- matrix(rnorm(30), 5)
  f <- function(x, w) sum(nnf_softmax(x, 2) * w)
  s <- exp(x) / rowSums(exp(x))
  expect_equal(rf_grad(f, wrt = "x", dtype = "float64")(x, w), s * (w - rowSums(w * s)), tolerance = 1e-12)
  ls <- function(x, w) sum(nnf_log_softmax(x, 2) * w)
  expect_equal(rf_grad(ls, wrt = "x", dtype = "float64")(x, w), w - s * rowSums(w), tolerance = 1e-12)
})

test_that("$detach() stops the gradient, traced and on recorded tensors", {
  set.seed(7)
  x <- rnorm(6)
  # d/dx sum(x * detach(x)) is detach(x) = x, not 2x
  g <- rf_grad(function(x) sum(x * x$detach()), wrt = "x", dtype = "float64")(x)
  expect_equal(g, x, tolerance = 1e-12)
  m <- rf_tensor(x, dtype = "float64", requires_grad = TRUE)
  d <- m$detach()
  expect_false(d$requires_grad)
  expect_equal(as.vector(d), x)
  l <- torch_sum(m * d)
  l$backward()
  expect_equal(as.vector(m$grad), x, tolerance = 1e-12)
})

test_that("mse and binary cross-entropy with logits", {
  set.seed(4)
  x <- matrix(rnorm(6), 3); t <- matrix(rbinom(6, 1, 0.5), 3)
  naive <- mean(-(t * log(1 / (1 + exp(-x))) + (1 - t) * log(1 - 1 / (1 + exp(-x)))))
  expect_equal(nnf_binary_cross_entropy_with_logits(x, t), naive)
  bce <- function(x, t) nnf_binary_cross_entropy_with_logits(x, t)
  expect_equal(rf_jit(bce, dtype = "float64")(x, t), naive, tolerance = 1e-12)
  expect_true(is.finite(rf_jit(bce, dtype = "float64")(x * 1e4, t)))
  expect_grads_match(function(x, t) nnf_mse_loss(x, t), list(x = x, t = t))
})

test_that("what cannot be differentiated is a classed error naming the cause", {
  expect_error(rf_grad(function(x) exp(x))(c(1, 2)), class = "rfuse_autodiff_error")
  expect_error(rf_grad(function(x, m) sum(x * m), wrt = "m")(c(1, 2), c(TRUE, FALSE)),
               "only numeric arguments have gradients", class = "rfuse_autodiff_error")
  expect_error(rf_grad(function(x) sum(x), wrt = "y")(c(1, 2)), "not an argument", class = "rfuse_autodiff_error")
  # Overlapping pooling windows differentiate (rfuse.max_pool2d_backward).
  img <- array(rnorm(25), c(1, 1, 5, 5))
  expect_grads_match(function(x) sum(nnf_max_pool2d(x, 3, stride = 1)^2), list(x = img))
})

test_that("anomaly detection names the op where a non-finite gradient appears", {
  old <- options(rfuse.detect_anomaly = TRUE)
  on.exit(options(old))
  g <- rf_grad(function(x) sum(sqrt(x)), dtype = "float64")
  expect_error(g(c(0, 1, 4)), "sqrt|div", class = "rfuse_anomaly_error")
  expect_equal(g(c(1, 4)), 0.5 / sqrt(c(1, 4)))
})

test_that("a small MLP learns a separable (non-linear) task to > 90% accuracy on the CPU", {
  set.seed(7)
  n <- 400
  x <- matrix(runif(2 * n, -1, 1), n)
  y <- ifelse(x[, 1]^2 + x[, 2]^2 < 0.45, 1, 2) # a disc inside a square: not linearly separable
  t <- rf_one_hot(y, 2)
  mlp <- function(w1, b1, w2, b2, x) sweep(tanh(sweep(x %*% w1, 2, b1, "+")) %*% w2, 2, b2, "+")
  loss <- function(w1, b1, w2, b2, x, t) nnf_cross_entropy(mlp(w1, b1, w2, b2, x), t)
  params <- list(w1 = matrix(rnorm(2 * 16, sd = 1), 2), b1 = rnorm(16, sd = 0.1),
                 w2 = matrix(rnorm(16 * 2, sd = 0.3), 16), b2 = c(0, 0))
  fit <- rf_train(loss, params, data = list(x = x, t = t), steps = 300, lr = 0.5, momentum = 0.9,
                  progress = FALSE)
  expect_s3_class(fit, "rf_training")
  expect_lt(fit$history[300], fit$history[1] / 3)
  p <- with(fit$params, mlp(w1, b1, w2, b2, x))
  acc <- mean(max.col(p) == y)
  expect_gt(acc, 0.9)
  pdf(NULL); on.exit(dev.off(), add = TRUE)
  expect_silent(plot(fit))
})

test_that("minibatches and weight decay run one compiled step program", {
  set.seed(8)
  x <- matrix(rnorm(300), 100); w_true <- c(1, -2, 0.5); y <- x %*% w_true
  fit <- rf_train(function(w, x, y) nnf_mse_loss(x %*% w, y), list(w = matrix(0, 3, 1)),
                  data = list(x = x, y = y), steps = 120, batch_size = 25, lr = 0.1,
                  weight_decay = 1e-4, dtype = "float64", progress = FALSE)
  expect_lt(max(abs(fit$params$w - w_true)), 0.01)
})

test_that("Adam and AdamW steps follow PyTorch's definitions", {
  set.seed(9)
  x <- matrix(rnorm(40), 10); y <- rnorm(10)
  loss <- function(w, x, y) nnf_mse_loss(x %*% w, y)
  grad <- rf_grad(loss, wrt = "w", dtype = "float64")
  for (opt in c("adam", "adamw")) {
    w0 <- matrix(rnorm(4), 4)
    fit <- rf_train(loss, list(w = w0), data = list(x = x, y = y), steps = 5, optimizer = opt,
                    lr = 0.05, weight_decay = 0.1, dtype = "float64", progress = FALSE)
    w <- w0; m <- w * 0; v <- w * 0
    for (t in 1:5) {
      g <- grad(w, x, y)
      if (opt == "adam") g <- g + 0.1 * w else w <- w - 0.05 * 0.1 * w
      m <- 0.9 * m + 0.1 * g; v <- 0.999 * v + 0.001 * g^2
      w <- w - 0.05 * (m / (1 - 0.9^t)) / (sqrt(v / (1 - 0.999^t)) + 1e-8)
    }
    expect_equal(fit$params$w, w, tolerance = 1e-10)
  }
})

test_that("torch-style autograd on rf tensors: requires_grad, backward(), $grad, $zero_grad()", {
  set.seed(12)
  x <- matrix(rnorm(12), 3)
  w0 <- matrix(rnorm(8), 4)
  f <- function(x, w) sum(tanh(x %*% w)^2)
  ref <- rf_grad(f, wrt = "w", dtype = "float64")(x, w0)
  for (lazy in c(FALSE, TRUE)) {
    old <- options(gpu.kernel.fusion = lazy)
    w <- rf_tensor(w0, dtype = "float64", requires_grad = TRUE)
    expect_true(w$requires_grad)
    loss <- sum(tanh(x %*% w)^2)
    expect_null(w$grad)
    loss$backward()
    expect_equal(as.array(w$grad), ref, tolerance = 1e-12)
    expect_equal(as.vector(loss), f(x, w0), tolerance = 1e-12)
    loss2 <- sum(tanh(x %*% w)^2) # gradients accumulate, as in torch
    loss2$backward()
    expect_equal(as.array(w$grad), 2 * ref, tolerance = 1e-12)
    w$zero_grad()
    expect_null(w$grad)
    options(old)
  }
  plain <- rf_tensor(w0, dtype = "float64")
  expect_error((sum(plain * 2))$backward(), class = "rfuse_autodiff_error")
  expect_error(w$nonsense, class = "rfuse_unsupported")
})

test_that("the CNN-2 learns a synthetic, separable image task to > 90% on the CPU", {
  set.seed(21)
  n <- 96
  y <- rep(1:4, length.out = n)
  imgs <- array(rnorm(n * 28 * 28, sd = 0.3), c(n, 1, 28, 28))
  for (i in seq_len(n)) { # a bright 8x8 square in the quadrant of the class
    r <- if (y[i] %in% c(1, 2)) 3:10 else 17:24
    c <- if (y[i] %in% c(1, 3)) 3:10 else 17:24
    imgs[i, 1, r, c] <- imgs[i, 1, r, c] + 1
  }
  t <- rf_one_hot(y, 4)
  cnn <- function(w1, b1, w2, b2, fw, fb, x) {
    h <- nnf_max_pool2d(nnf_relu(nnf_conv2d(x, w1, b1)), 2)
    h <- nnf_max_pool2d(nnf_relu(nnf_conv2d(h, w2, b2)), 2)
    nnf_linear(nnf_flatten(h), fw, fb)
  }
  loss <- function(w1, b1, w2, b2, fw, fb, x, t) nnf_cross_entropy(cnn(w1, b1, w2, b2, fw, fb, x), t)
  params <- list(w1 = array(rnorm(8 * 9, sd = 0.3), c(8, 1, 3, 3)), b1 = rep(0, 8),
                 w2 = array(rnorm(16 * 8 * 9, sd = 0.1), c(16, 8, 3, 3)), b2 = rep(0, 16),
                 fw = matrix(rnorm(4 * 400, sd = 0.05), 4), fb = rep(0, 4))
  fit <- rf_train(loss, params, data = list(x = imgs, t = t), steps = 40, optimizer = "adam",
                  lr = 0.01, progress = FALSE)
  p <- with(fit$params, cnn(w1, b1, w2, b2, fw, fb, imgs))
  expect_gt(mean(max.col(p) == y), 0.9)
  expect_lt(fit$history[40], fit$history[1] / 2)
})

test_that("rf_train's tf32 is TRUE or FALSE, and changes nothing where products are exact", {
  set.seed(71)
  x <- matrix(rnorm(40), 10); y <- x %*% c(1, 2, -1, 0.5)
  loss <- function(w, x, y) nnf_mse_loss(x %*% w, y)
  expect_error(rf_train(loss, list(w = matrix(0, 4, 1)), list(x = x, y = y), steps = 2, tf32 = NA, progress = FALSE),
               class = "rfuse_type_error")
  expect_error(rf_train(loss, list(w = matrix(0, 4, 1)), list(x = x, y = y), steps = 2, tf32 = "yes", progress = FALSE),
               class = "rfuse_type_error")
  # float64 (and the CPU) has no TF32: both settings train the same numbers.
  a <- rf_train(loss, list(w = matrix(0, 4, 1)), list(x = x, y = y), steps = 5, dtype = "float64", progress = FALSE)
  b <- rf_train(loss, list(w = matrix(0, 4, 1)), list(x = x, y = y), steps = 5, dtype = "float64", tf32 = FALSE,
                progress = FALSE)
  expect_identical(a$params$w, b$params$w)
})

test_that("an epoch ends with the smaller last batch unless drop_last, as torch's DataLoader", {
  set.seed(2)
  x <- matrix(rnorm(20), 10); y <- x %*% c(1.5, -2) + 0.3 + rnorm(10, sd = 0.1)
  # Plain SGD on the mean squared error, in base R, over the given batches in turn.
  sgd <- function(batches, steps, lr) {
    w <- matrix(0, 2, 1); b <- 0; hist <- numeric(steps)
    for (s in seq_len(steps)) {
      idx <- batches[[(s - 1) %% length(batches) + 1]]
      r <- x[idx, , drop = FALSE] %*% w + b - y[idx, , drop = FALSE]
      hist[s] <- mean(r^2)
      w <- w - lr * 2 / length(idx) * crossprod(x[idx, , drop = FALSE], r)
      b <- b - lr * 2 / length(idx) * sum(r)
    }
    list(w = w, b = b, hist = hist)
  }
  loss <- function(w, b, x, y) nnf_mse_loss(x %*% w + b, y)
  p0 <- list(w = matrix(0, 2, 1), b = 0)
  fit <- rf_train(loss, p0, list(x = x, y = y), steps = 7, batch_size = 4, lr = 0.1, dtype = "float64", progress = FALSE)
  ref <- sgd(list(1:4, 5:8, 9:10), 7, 0.1) # 4, 4, then the 2 left: 3 steps an epoch
  expect_equal(fit$params$w, ref$w, tolerance = 1e-12)
  expect_equal(fit$params$b, ref$b, tolerance = 1e-12)
  expect_equal(fit$history, ref$hist, tolerance = 1e-12)
  dropped <- rf_train(loss, p0, list(x = x, y = y), steps = 7, batch_size = 4, lr = 0.1, dtype = "float64",
                      progress = FALSE, drop_last = TRUE)
  ref2 <- sgd(list(1:4, 5:8), 7, 0.1)
  expect_equal(dropped$params$w, ref2$w, tolerance = 1e-12)
  expect_equal(dropped$history, ref2$hist, tolerance = 1e-12)
  # A dataloader's own setting, and its length.
  dl <- dataloader(tensor_dataset(x = x, y = y), batch_size = 4)
  expect_identical(length(dl), 3L)
  viadl <- rf_train(loss, p0, dl, steps = 7, lr = 0.1, dtype = "float64", progress = FALSE)
  expect_equal(viadl$history, ref$hist, tolerance = 1e-12)
  expect_error(rf_train(loss, p0, list(x = x, y = y), steps = 2, batch_size = 4, drop_last = NA, progress = FALSE),
               class = "rfuse_type_error")
  # Shuffled epochs cover every sample once per epoch, the last batch included (the mean of the
  # losses over an epoch of a zero-learning-rate fit is the full-batch loss weighted by size).
  shuf <- rf_train(loss, p0, list(x = x, y = y), steps = 6, batch_size = 4, lr = 0, dtype = "float64",
                   shuffle = TRUE, progress = FALSE)
  full <- mean((x %*% p0$w + p0$b - y)^2)
  for (e in 0:1) {
    h <- shuf$history[e * 3 + 1:3]
    expect_equal(sum(h * c(4, 4, 2)) / 10, full, tolerance = 1e-12)
  }
})
