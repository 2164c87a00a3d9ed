# An independent base-R implementation of the layers, for checking rfuse's models.
ref_conv2d <- function(x, w, b) {
  N <- dim(x)[1]; C <- dim(x)[2]; H <- dim(x)[3]; W <- dim(x)[4]
  O <- dim(w)[1]; KH <- dim(w)[3]; KW <- dim(w)[4]
  OH <- H - KH + 1; OW <- W - KW + 1
  out <- array(0, c(N, O, OH, OW))
  for (o in seq_len(O)) {
    acc <- array(b[o], c(N, OH, OW))
    for (ci in seq_len(C)) for (kh in seq_len(KH)) for (kw in seq_len(KW))
      acc <- acc + w[o, ci, kh, kw] * x[, ci, kh:(kh + OH - 1), kw:(kw + OW - 1), drop = FALSE][, 1, , , drop = TRUE]
    out[, o, , ] <- acc
  }
  out
}
ref_maxpool2 <- function(x) {
  H <- dim(x)[3] %/% 2; W <- dim(x)[4] %/% 2
  hi <- function(k) seq(k, by = 2, length.out = H); wi <- function(k) seq(k, by = 2, length.out = W)
  pmax(x[, , hi(1), wi(1), drop = FALSE], x[, , hi(2), wi(1), drop = FALSE],
       x[, , hi(1), wi(2), drop = FALSE], x[, , hi(2), wi(2), drop = FALSE])
}
ref_flatten <- function(x) matrix(aperm(x, c(1, 4, 3, 2)), dim(x)[1]) # torch's row-major (C, H, W)

cnn2 <- nn_module("CNN2",
  initialize = function() {
    self$conv1 <- nn_conv2d(1, 8, 3)
    self$conv2 <- nn_conv2d(8, 16, 3)
    self$fc <- nn_linear(400, 10)
  },
  forward = function(x) {
    x <- nnf_max_pool2d(nnf_relu(self$conv1(x)), 2)
    x <- nnf_max_pool2d(nnf_relu(self$conv2(x)), 2)
    self$fc(nnf_flatten(x))
  })

cnn2_reference <- function(net, x) {
  p <- net$parameters
  h <- ref_maxpool2(pmax(ref_conv2d(x, p[["conv1.weight"]], p[["conv1.bias"]]), 0))
  h <- ref_maxpool2(pmax(ref_conv2d(h, p[["conv2.weight"]], p[["conv2.bias"]]), 0))
  sweep(ref_flatten(h) %*% t(p[["fc.weight"]]), 2, p[["fc.bias"]], "+")
}

test_that("the CNN-2 forward on a 128x1x28x28 batch matches a base-R implementation", {
  set.seed(11)
  net <- cnn2()
  net$eval()
  x <- array(rnorm(128 * 28 * 28), c(128, 1, 28, 28))
  ref <- cnn2_reference(net, x)
  for (dt in c("float64", "float32")) {
    got <- rf_jit(net, dtype = dt)(x)
    expect_identical(dim(got), c(128L, 10L))
    expect_lt(rel_err(got, ref), tol[[dt]])
  }
  # The parameters are inputs: new weights, same program, new answers.
  jnet <- rf_jit(net, dtype = "float64")
  jnet(x)
  compiles <- rf_cache_info()$compiles
  net$fc$weight <- nn_parameter(net$fc$weight * 2)
  expect_lt(rel_err(jnet(x), cnn2_reference(net, x)), 1e-12)
  expect_equal(rf_cache_info()$compiles, compiles)
})

test_that("modules: parameters, sequential, layers, eval/train, unjitted calls", {
  set.seed(12)
  net <- nn_sequential(nn_linear(5, 7), nn_gelu(), nn_layer_norm(7), nn_tanh(),
                       nn_dropout(0.2), nn_linear(7, 3), nn_sigmoid())
  expect_named(net$parameters, c("0.bias", "0.weight", "2.bias", "2.weight", "5.bias", "5.weight"))
  x <- matrix(rnorm(20), 4)
  # Dropout in training mode: the jitted model draws the same masks from R's RNG as the
  # eager one.
  set.seed(3); eager <- net(x)
  set.seed(3); jitted <- rf_jit(net, dtype = "float64")(x)
  expect_equal(jitted, eager, tolerance = 1e-10)
  net$eval()
  expect_false(net[[5]]$training)
  ref <- net(x) # plain R arrays: base R
  p <- net$parameters
  h <- sweep(x %*% t(p$`0.weight`), 2, p$`0.bias`, "+")
  h <- h * pnorm(h)
  h <- (h - rowMeans(h)) / sqrt(rowMeans((h - rowMeans(h))^2) + 1e-5)
  h <- tanh(sweep(sweep(h, 2, p$`2.weight`, "*"), 2, p$`2.bias`, "+"))
  h <- 1 / (1 + exp(-sweep(h %*% t(p$`5.weight`), 2, p$`5.bias`, "+")))
  expect_lt(rel_err(ref, h), 1e-12)
  expect_lt(rel_err(rf_jit(net, dtype = "float64")(x), h), 1e-12)
  expect_lt(rel_err(rf_jit(net)(x), h), 1e-5)
})

test_that("average pooling, padding and strides trace like the reference", {
  set.seed(13)
  x <- array(rnorm(2 * 3 * 9 * 8), c(2, 3, 9, 8))
  f <- function(x) nnf_avg_pool2d(x, 3, stride = 2, padding = 1)
  got <- rf_jit(f, dtype = "float64")(x)
  # count_include_pad = TRUE, as torch's default: window sums over 9.
  xp <- array(0, c(2, 3, 11, 10)); xp[, , 2:10, 2:9] <- x
  ref <- array(0, c(2, 3, 5, 4))
  for (i in 1:5) for (j in 1:4)
    ref[, , i, j] <- apply(xp[, , (2 * i - 1):(2 * i + 1), (2 * j - 1):(2 * j + 1), drop = FALSE], c(1, 2), sum) / 9
  expect_lt(rel_err(got, ref), 1e-12)
})

test_that("a user module with its own base-R code in forward traces too", {
  mlp <- nn_module("MLP",
    initialize = function(d) { self$w <- nn_parameter(matrix(rnorm(d * d), d) / d) },
    forward = function(x) { h <- pmax(x %*% self$w, 0); h / rowSums(abs(h) + 1) })
  set.seed(14)
  m <- mlp(6)
  x <- matrix(rnorm(24), 4)
  ref <- pmax(x %*% m$w, 0); ref <- ref / rowSums(abs(ref) + 1)
  expect_lt(rel_err(m(x), ref), 1e-12)
  expect_lt(rel_err(rf_jit(m, dtype = "float64")(x), ref), 1e-12)
})

test_that("a constant operand of a matrix product (a zero initial state) runs on every device", {
  # On the GPU a splat constant read by cuBLASLt was cloned into its kernel, where the library
  # call had no memory to read (a misaligned-address error that poisoned the context).
  M <- nn_module("M", initialize = function() self$l <- nn_linear(4, 4),
                 forward = function(x) self$l(matrix(0, 2, 4)) + self$l(matrix(0.5, 2, 4)) + x)
  set.seed(14)
  m <- M(); y <- matrix(rnorm(8), 2)
  expect_lt(rel_err(rf_jit(m, dtype = "float64")(y), m(y)), 1e-12)
  expect_lt(rel_err(rf_jit(m)(y), m(y)), 1e-5)
})

test_that("rf_fit trains convolution filters in the step's layout and gives them back in R's", {
  # Float32 steps take each nn_conv2d filter permuted to the layout its NHWC convolution reads
  # (filter_layouts); float64 steps take R's. Both must train the same weights, and the model and
  # fit$params must hold them as dim c(O, I, kH, kW).
  set.seed(12)
  x <- array(rnorm(16 * 2 * 6 * 6), c(16, 2, 6, 6)); y <- sample(1:3, 16, replace = TRUE)
  fit <- function(dtype) {
    torch_manual_seed(2)
    net <- nn_sequential(nn_conv2d(2, 4, c(3, 2), padding = 1), nn_relu(), nn_conv2d(4, 5, 3, bias = FALSE),
                         nn_flatten(), nn_linear(5 * 4 * 5, 3))
    f <- rf_fit(net, x, y, steps = 4, lr = 0.05, momentum = 0.9, batch_size = 8, progress = FALSE, dtype = dtype)
    list(net = net, params = f$params)
  }
  expect_equal(names(rfuse:::filter_layouts(fit("float32")$net, c("0.weight", "2.weight", "4.weight"))),
               c("0.weight", "2.weight"))
  a <- fit("float32"); b <- fit("float64")
  for (p in c("0.weight", "2.weight", "0.bias")) {
    expect_identical(dim(a$params[[p]]), dim(b$params[[p]]), info = p)
    expect_lt(rel_err(as.array(a$net$parameters[[p]]), as.array(b$net$parameters[[p]])), 1e-4)
    expect_lt(rel_err(a$params[[p]], b$params[[p]]), 1e-4)
  }
  expect_identical(dim(as.array(a$net$parameters[["0.weight"]])), c(4L, 2L, 3L, 2L))
  # The model keeps the downloaded values themselves (no second copy of a large model in R), still
  # parameters that train.
  skip_if_not(capabilities("profmem"), "R without memory profiling (tracemem)")
  for (p in c("0.weight", "2.weight", "0.bias", "4.weight")) {
    expect_s3_class(a$net$parameters[[p]], "rf_parameter")
    expect_identical(tracemem(a$net$parameters[[p]]), tracemem(a$params[[p]]), info = p)
  }
})
