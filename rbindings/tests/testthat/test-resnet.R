# Batch norm, adaptive pooling, residual networks and rf_fit(): traced values equal base R's,
# gradients equal central differences, running statistics follow torch's rule, and a small
# ResNet learns.

test_that("nnf_batch_norm2d and nnf_adaptive_avg_pool2d traced equal base R", {
  set.seed(2)
  x <- array(rnorm(3 * 4 * 5 * 6), c(3, 4, 5, 6))
  g <- rnorm(4); b <- rnorm(4); rm <- rnorm(4); rv <- runif(4, 0.5, 2)
  ref_train <- x
  for (ch in 1:4) {
    v <- x[, ch, , ]
    ref_train[, ch, , ] <- (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1e-5) * g[ch] + b[ch]
  }
  f <- function(x, g, b, rm, rv, training) nnf_batch_norm2d(x, rm, rv, g, b, training = training)
  jf <- rf_jit(f, dtype = "float64")
  expect_equal(f(x, g, b, rm, rv, TRUE), ref_train, tolerance = 1e-12)
  expect_equal(jf(x, g, b, rm, rv, TRUE), ref_train, tolerance = 1e-12)
  ref_eval <- sweep(sweep(sweep(sweep(x, 2, rm), 2, sqrt(rv + 1e-5), "/"), 2, g, "*"), 2, b, "+")
  expect_equal(jf(x, g, b, rm, rv, FALSE), ref_eval, tolerance = 1e-12)

  gp <- rf_jit(function(x) nnf_adaptive_avg_pool2d(x, 1), dtype = "float64")
  expect_equal(gp(x), array(apply(x, c(1, 2), mean), c(3, 4, 1, 1)), tolerance = 1e-12)
  expect_equal(rf_jit(function(x) nnf_adaptive_avg_pool2d(x, c(5, 2)), dtype = "float64")(x),
               nnf_avg_pool2d(x, c(1, 3)), tolerance = 1e-12)
  # A size that does not divide the input: torch's overlapping windows (test-layers.R checks them).
  expect_identical(dim(rf_jit(function(x) nnf_adaptive_avg_pool2d(x, 4))(x)), c(3L, 4L, 4L, 4L))
})

test_that("gradients through batch norm, strided convolutions, overlapping pools and residuals equal central differences", {
  set.seed(4)
  x <- array(rnorm(2 * 2 * 7 * 7), c(2, 2, 7, 7))
  w1 <- array(rnorm(3 * 2 * 3 * 3, sd = 0.5), c(3, 2, 3, 3))
  w2 <- array(rnorm(3 * 3 * 3 * 3, sd = 0.5), c(3, 3, 3, 3))
  gam <- runif(3, 0.5, 1.5); bet <- rnorm(3)
  f <- function(x, w1, w2, gam, bet) {
    h <- nnf_conv2d(x, w1, stride = 2, padding = 1)                    # 4x4
    h <- nnf_relu(nnf_batch_norm2d(h, weight = gam, bias = bet, training = TRUE))
    h <- nnf_conv2d(h, w2, padding = 1) + h                             # a residual add
    h <- nnf_max_pool2d(h, 3, 2, 1)                                     # overlapping windows
    sum(nnf_adaptive_avg_pool2d(h, 1)^2)
  }
  expect_grads_match(f, list(x = x, w1 = w1, w2 = w2, gam = gam, bet = bet))
})

test_that("eager training-mode batch norm updates the running statistics as torch does", {
  set.seed(5)
  bn <- nn_batch_norm2d(3)
  x <- array(rnorm(4 * 3 * 2 * 2, mean = 2), c(4, 3, 2, 2))
  bn(x)
  st <- attr(bn, "self")
  m <- apply(x, 2, mean); v <- apply(x, 2, var) # var(): unbiased, as torch's running_var
  expect_equal(st$running_mean, 0.9 * 0 + 0.1 * m)
  expect_equal(st$running_var, 0.9 * 1 + 0.1 * v)
  bn$eval()
  expect_equal(bn(x), nnf_batch_norm2d(x, st$running_mean, st$running_var, rep(1, 3), rep(0, 3)))

  # Jitted training-mode calls update them the same way: the batch statistics are extra
  # outputs of the program, applied after each call.
  bn2 <- nn_batch_norm2d(3)
  jbn <- rf_jit(bn2, dtype = "float64")
  for (i in 1:2) jbn(x * i)
  st2 <- attr(bn2, "self")
  ref <- nn_batch_norm2d(3)
  for (i in 1:2) ref(x * i)
  expect_equal(st2$running_mean, attr(ref, "self")$running_mean, tolerance = 1e-12)
  expect_equal(st2$running_var, attr(ref, "self")$running_var, tolerance = 1e-12)
  expect_equal(st2$num_batches_tracked, 2)
})

test_that("rf_fit's steps update the running statistics on the device as eager training does", {
  # lr = 0: every step sees the same batch through the same weights, so k steps of rf_fit()
  # must leave the running statistics (and the count) that k eager training-mode calls leave.
  # momentum 0.1 keeps them as state of the compiled step; momentum NULL (the cumulative
  # average) takes the R-side updates; the eval-mode batch norm tracks nothing.
  set.seed(41)
  x <- array(rnorm(6 * 2 * 5 * 5), c(6, 2, 5, 5)); y <- rf_one_hot(rep(1:2, 3), 2)
  make <- function() {
    set.seed(42)
    nn_sequential(nn_conv2d(2, 3, 3), nn_batch_norm2d(3), nn_relu(), nn_batch_norm2d(3, momentum = NULL),
                  nn_batch_norm2d(3), nn_flatten(), nn_linear(27, 2))
  }
  net <- make(); net[[5]]$eval()
  ref <- make(); ref[[5]]$eval()
  rf_fit(net, x, y, steps = 4, lr = 0, dtype = "float64", progress = FALSE)
  for (i in 1:4) ref(x)
  for (k in c(2, 4, 5)) {
    s <- attr(net[[k]], "self"); r <- attr(ref[[k]], "self")
    expect_equal(s$running_mean, r$running_mean, tolerance = 1e-12)
    expect_equal(s$running_var, r$running_var, tolerance = 1e-12)
    expect_equal(s$num_batches_tracked, r$num_batches_tracked)
  }
  expect_equal(attr(net[[2]], "self")$num_batches_tracked, 4)
  expect_equal(attr(net[[5]], "self")$num_batches_tracked, 0)
  expect_false(isTRUE(all.equal(attr(net[[2]], "self")$running_mean, rep(0, 3))))
})

test_that("a small ResNet learns a synthetic image task with rf_fit() on the CPU", {
  set.seed(3)
  n <- 64
  y <- rep(1:4, length.out = n)
  imgs <- array(rnorm(n * 12 * 12, sd = 0.3), c(n, 1, 12, 12))
  for (i in seq_len(n)) { # a bright block in the quadrant of the class
    r <- if (y[i] %in% c(1, 2)) 1:5 else 8:12
    c <- if (y[i] %in% c(1, 3)) 1:5 else 8:12
    imgs[i, 1, r, c] <- imgs[i, 1, r, c] + 1
  }
  net <- nn_resnet(blocks = c(1, 1), widths = c(4, 8), num_classes = 4, in_channels = 1)
  expect_true(any(grepl("downsample", names(net$parameters))))
  before <- net$parameters
  made <- function() { i <- rf_cache_info(); i$pass_runs + i$disk_hits + i$specializations }
  made0 <- made()
  fit <- rf_fit(net, imgs, y, steps = 30, optimizer = "adam", lr = 0.01, progress = FALSE)
  # One program, the step: the optimizer's moments start as zeros set on the device, not as a
  # program per parameter shape.
  expect_equal(made() - made0, 1)
  expect_lt(fit$history[30], fit$history[1] / 4)
  # Filters trained in the convolution's layout come back in R's, in the model and in fit$params.
  expect_identical(dim(fit$params$conv1.weight), dim(before$conv1.weight))
  expect_identical(fit$params$conv1.weight, net$parameters$conv1.weight) # (the same values, not a copy)
  expect_false(isTRUE(all.equal(before$conv1.weight, net$parameters$conv1.weight)))
  expect_s3_class(net$parameters$conv1.weight, "rf_parameter")
  # Every compiled step updated the running statistics (torch's momentum 0.1).
  expect_equal(attr(net$bn1, "self")$num_batches_tracked, 30)
  net$eval()
  expect_gt(mean(max.col(net(imgs)) == y), 0.9)
  expect_gt(mean(max.col(rf_jit(net)(imgs)) == y), 0.9)
})

test_that("nn_resnet18 has torchvision's parameter count and rf_fit checks its input", {
  net <- nn_resnet18(num_classes = 10)
  expect_equal(sum(vapply(net$parameters, length, integer(1))), 11181642)
  expect_equal(length(net$parameters), 62)
  expect_error(rf_fit(function(x) x, 1, 1), class = "rfuse_type_error")
  small <- nn_sequential(nn_linear(2, 2))
  expect_error(rf_fit(small, matrix(0, 3, 2), 1:2), class = "rfuse_shape_error")
})

test_that("dropout draws a fresh, seeded mask per call, in traced code and its gradients", {
  # A mask: Philox draws (rfuse.random_uniform) under a key R's generator draws, as rfuse's C++
  # side computes them (checked against Philox's known answers in InterpreterTest).
  philox_mask <- function(n, p) {
    key <- as.integer(floor(runif(2) * 2147483647))
    (rfuse:::.rf_random_uniform(key, n) >= p) / (1 - p)
  }
  x <- matrix(rnorm(400) + 3, 20)
  jf <- rf_jit(function(x) nnf_dropout(x, 0.3), dtype = "float64")
  set.seed(9); a <- jf(x)
  set.seed(9); mask <- philox_mask(length(x), 0.3)
  expect_equal(a, x * mask)
  # The program draws the mask itself: its only extra input is the two-integer key.
  traced <- rf_explain(jf, x)$traced
  expect_match(traced, "rfuse.random_uniform")
  expect_match(traced, "%arg1: tensor<2xi32>")
  expect_false(grepl("%arg2", traced))
  expect_equal(dim(a), dim(x))
  b <- jf(x)
  expect_false(isTRUE(all.equal(a, b)))                 # a new mask each call, same program
  expect_equal(rf_cache_info()$programs > 0, TRUE)
  expect_gt(mean(b == 0), 0.2); expect_lt(mean(b == 0), 0.4)
  set.seed(9); expect_equal(nnf_dropout(x, 0.3), x * mask) # plain R: the same draws
  expect_identical(nnf_dropout(x, 0.3, training = FALSE), x)

  w <- matrix(rnorm(400), 20)
  g <- rf_grad(function(x, w) sum(nnf_dropout(x, 0.5) * w), wrt = "w", dtype = "float64")
  set.seed(10); gw <- g(x, w)
  set.seed(10); m2 <- philox_mask(length(x), 0.5)
  expect_equal(gw, x * m2)

  drop <- nn_dropout(0.5)
  drop$eval(); expect_identical(drop(x), x)
  expect_error(nnf_dropout(x, 1), class = "rfuse_type_error")
  # A helper of the user's that draws a mask is traced inline: the same draws as eagerly.
  helper <- function(v) nnf_dropout(v, 0.5)
  set.seed(12); want <- helper(x) + 1
  set.seed(12); expect_equal(rf_jit(function(x) helper(x) + 1, dtype = "float64")(x), want)
})

test_that("rf_fit with dropout draws every step's key up front, in order, and feeds no step from R", {
  set.seed(3)
  x <- matrix(rnorm(64 * 6), 64); y <- matrix(rnorm(64 * 2), 64)
  net <- function() { set.seed(4); nn_sequential(nn_linear(6, 16), nn_relu(), nn_dropout(0.5), nn_linear(16, 2)) }
  fit <- function(m, steps) rf_fit(m, x, y, loss = nnf_mse_loss, steps = steps, batch_size = 64, lr = 0.05,
                                   momentum = 0, shuffle = FALSE, dtype = "float64", progress = FALSE)
  # R draws no step's random input itself (it fed every step before: draw_random each step, and
  # the steps could not run in chunks); the loop copies each step's key from the table.
  draws <- new.env(); draws$n <- 0L
  suppressMessages(trace("draw_random", bquote(assign("n", get("n", .(draws)) + 1L, envir = .(draws))),
                         where = asNamespace("rfuse"), print = FALSE))
  a <- net(); set.seed(5); fa <- fit(a, 12)
  suppressMessages(untrace("draw_random", where = asNamespace("rfuse")))
  expect_identical(draws$n, 0L)
  # One call of 12 steps against 12 calls of one step: the same keys in the same order (R draws two
  # numbers a step), so the same masks and the same weights.
  b <- net(); set.seed(5); lb <- vapply(1:12, function(i) fit(b, 1)$history, 0)
  expect_equal(fa$history, lb, tolerance = 1e-12)
  expect_equal(as.array(a[[4]]$weight), as.array(b[[4]]$weight), tolerance = 1e-12)
  # A new mask each step: without dropout the same batch gives a smooth descent; with it, the
  # losses of consecutive steps jump around it.
  expect_gt(sd(diff(fa$history)), 1e-3)
  c0 <- net(); set.seed(5); fc <- fit(c0, 12)
  expect_equal(fc$history, fa$history, tolerance = 1e-12) # and set.seed reproduces the run
})
