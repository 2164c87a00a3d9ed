# nn_init_*: torch's distributions, fans and gains; parameters filled where they live (a module's
# field, $apply()'s m$weight, an rf_tensor in place), copies refused.

test_that("calculate_gain is torch's", {
  expect_identical(calculate_gain("linear"), 1)
  expect_identical(calculate_gain("conv2d"), 1)
  expect_identical(calculate_gain("sigmoid"), 1)
  expect_equal(calculate_gain("tanh"), 5 / 3)
  expect_equal(calculate_gain("relu"), sqrt(2))
  expect_equal(calculate_gain("leaky_relu"), sqrt(2 / (1 + 0.01^2)))
  expect_equal(calculate_gain("leaky_relu", 0.2), sqrt(2 / 1.04))
  expect_equal(calculate_gain("selu"), 0.75)
  expect_error(calculate_gain("swish"), "Unsupported nonlinearity", class = "rfuse_type_error")
})

test_that("the distributions have torch's bounds and spreads", {
  set.seed(501)
  w <- matrix(0, 300, 200) # torch size [300, 200]: fan_in 200, fan_out 300
  nn_init_xavier_uniform_(w, gain = 2)
  bound <- 2 * sqrt(6 / 500)
  expect_lte(max(abs(w)), bound)
  expect_equal(sd(as.vector(w)), bound / sqrt(3), tolerance = 0.02)
  nn_init_xavier_normal_(w)
  expect_equal(sd(as.vector(w)), sqrt(2 / 500), tolerance = 0.02)
  nn_init_kaiming_normal_(w, mode = "fan_out", nonlinearity = "relu")
  expect_equal(sd(as.vector(w)), sqrt(2) / sqrt(300), tolerance = 0.02)
  k <- array(0, c(64, 16, 3, 3)) # a conv weight: fan_in 16 * 9
  nn_init_kaiming_uniform_(k, a = sqrt(5)) # torch's default for nn_linear / nn_conv2d
  b <- sqrt(3) * calculate_gain("leaky_relu", sqrt(5)) / sqrt(16 * 9)
  expect_lte(max(abs(k)), b)
  expect_gt(max(abs(k)), 0.95 * b)
  expect_identical(dim(k), c(64L, 16L, 3L, 3L))
  nn_init_normal_(w, mean = 3, std = 0.5)
  expect_equal(c(mean(w), sd(as.vector(w))), c(3, 0.5), tolerance = 0.02)
  nn_init_uniform_(w, -1, 2)
  expect_true(all(w >= -1 & w <= 2))
  nn_init_constant_(w, 0.25); expect_true(all(w == 0.25))
  nn_init_ones_(w); expect_true(all(w == 1))
  nn_init_zeros_(w); expect_true(all(w == 0))
  e <- matrix(5, 3, 4); nn_init_eye_(e); expect_identical(e, diag(1, 3, 4))
  # Repeatable with set.seed.
  set.seed(7); a <- matrix(0, 4, 4); nn_init_normal_(a)
  set.seed(7); b2 <- matrix(0, 4, 4); nn_init_normal_(b2)
  expect_identical(a, b2)
})

test_that("parameters are filled where they live", {
  Net <- nn_module("Net",
    initialize = function() {
      self$fc <- nn_linear(6, 4)
      self$out <- nn_linear(4, 2)
      nn_init_zeros_(self$fc$bias)
      nn_init_constant_(self$out$weight, 0.5)
    },
    forward = function(x) self$out(self$fc(x)))
  net <- Net()
  expect_true(all(net$fc$bias == 0))
  expect_true(all(net$out$weight == 0.5))
  expect_s3_class(net$out$weight, "rf_parameter")
  expect_true(all(names(net$state_dict()) %in% c("fc.weight", "fc.bias", "out.weight", "out.bias")))
  net$apply(function(m) if (inherits(m, "nn_linear")) nn_init_ones_(m$bias))
  expect_true(all(net$fc$bias == 1) && all(net$out$bias == 1))
  nn_init_constant_(net$fc$weight, 2)
  expect_true(all(net$fc$weight == 2))
  x <- matrix(1, 3, 6)
  expect_equal(as.array(net(x)), matrix((6 * 2 + 1) * 0.5 * 4 + 1, 3, 2))
  # An rf_tensor in place.
  t <- rf_tensor(matrix(0, 2, 3))
  u <- t
  nn_init_ones_(u)
  expect_identical(as.array(t), matrix(1, 2, 3))
})

test_that("copies, traced values and wrong shapes are refused by name", {
  net <- nn_linear(3, 2)
  # The loop's p is the module's own parameter (R copies only on change): filled in the module, as torch's.
  for (p in net$parameters) nn_init_constant_(p, 3)
  expect_true(all(unclass(net$weight) == 3) && all(unclass(net$bias) == 3))
  # A changed copy is no longer the module's: nowhere to write it back.
  changed <- net$weight * 1
  expect_error(nn_init_zeros_(changed), "copy", class = "rfuse_unsupported")
  expect_true(all(unclass(net$weight) == 3))
  expect_error(nn_init_xavier_uniform_(net$bias), "fewer than 2 dimensions", class = "rfuse_shape_error")
  expect_error(nn_init_kaiming_normal_(net$weight, mode = "fan_avg"), "Mode", class = "rfuse_type_error")
  expect_error(nn_init_zeros_(net$weight + 1), "not a place", class = "rfuse_unsupported")
  expect_error(rf_jit(function(x) { nn_init_normal_(x); x })(c(1, 2)), "random", class = "rfuse_unsupported")
  expect_error(nn_init_constant_(net$weight, "a"), "single number", class = "rfuse_type_error")
  expect_error(nn_init_eye_(array(0, c(2, 2, 2))), "2 dimensions", class = "rfuse_shape_error")
})

test_that("torch's in-place fills on parameters write back to the place they name", {
  G <- nn_module(
    initialize = function(i, o) {
      self$weight <- nn_parameter(torch_randn(i, o)); self$conv <- nn_conv2d(1, 2, 3); self$reset_parameters()
    },
    reset_parameters = function() {
      stdv <- 1 / sqrt(self$weight$size(2))
      with_no_grad(self$weight$data()$uniform_(-stdv, stdv))
      self$conv$parameters$weight$data()$fill_(0.25)
      self$conv$bias$zero_()
    },
    forward = function(x) x %*% self$weight)
  set.seed(71)
  g <- G(3, 4)
  expect_true(all(abs(g$weight) <= 0.5) && length(unique(as.vector(g$weight))) == 12)
  expect_s3_class(g$weight, "rf_parameter")
  expect_true(all(g$conv$weight == 0.25))
  expect_true(all(g$conv$bias == 0))
  expect_setequal(names(g$parameters), c("weight", "conv.weight", "conv.bias"))
  set.seed(72)
  g$weight$normal_(0, 0.01)
  expect_lt(max(abs(g$weight)), 0.1)
  ps <- g$parameters
  expect_error(ps[[1]]$fill_(1), class = "rfuse_unsupported") # a copy in a list: nowhere to write back
})

test_that("nn_init_orthogonal_ gives orthonormal rows or columns times the gain, in place", {
  set.seed(3)
  for (size in list(c(3, 5), c(5, 3), c(4, 2, 3), c(6, 6))) {
    w <- array(0, size)
    w <- nn_init_orthogonal_(w, gain = 2)
    m <- matrix(w, size[1])
    g <- if (nrow(m) <= ncol(m)) tcrossprod(m) else crossprod(m)
    expect_equal(g, diag(4, min(dim(m))), tolerance = 1e-12, info = paste(size, collapse = "x"))
  }
  lin <- nn_linear(4, 3)
  nn_init_orthogonal_(lin$weight)
  expect_equal(tcrossprod(as.array(lin$weight)), diag(1, 3), tolerance = 1e-6) # float32 parameter storage
  expect_error(nn_init_orthogonal_(numeric(4)), class = "rfuse_shape_error", regexp = "2 or more")
  expect_error(nn_init_orthogonal_(matrix(0, 2, 2), gain = "a"), class = "rfuse_type_error", regexp = "gain")
})
