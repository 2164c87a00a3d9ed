# autograd_function(): a function with its own gradient (torch's), traced as rfuse.custom_vjp:
# differentiation uses the given backward, not the forward's own derivative.

scaled_exp <- autograd_function(
  forward = function(ctx, x) {
    y <- exp(x)
    ctx$save_for_backward(y = y)
    y
  },
  backward = function(ctx, grad_output) list(x = 2 * grad_output * ctx$saved_variables$y))

test_that("the gradient is the backward's, in rf_grad, rf_jit and on tensors", {
  x <- c(-1, 0, 0.5, 2)
  expect_equal(scaled_exp(x), exp(x)) # plain R arrays: the forward, called
  g <- rf_grad(function(x) sum(scaled_exp(x) * c(1, 2, 3, 4)), dtype = "float64")
  expect_equal(g(x), 2 * exp(x) * c(1, 2, 3, 4), tolerance = 1e-12) # twice exp's own derivative
  jf <- rf_jit(function(x) scaled_exp(x) * 3, dtype = "float64") # (the GPU's default is float32)
  expect_equal(jf(x), exp(x) * 3, tolerance = 1e-12)
  xt <- rf_tensor(x, requires_grad = TRUE)
  loss <- sum(scaled_exp(xt))
  loss$backward()
  expect_equal(as.vector(as.array(xt$grad)), 2 * exp(x), tolerance = 1e-6)
})

test_that("two autograd functions on tensors are two operations (not one cached program)", {
  twice <- autograd_function(function(ctx, x) x * 2, function(ctx, grad_output) list(x = grad_output * 2))
  thrice <- autograd_function(function(ctx, x) x * 3, function(ctx, grad_output) list(x = grad_output * 3))
  x <- rf_tensor(c(1, 2), dtype = "float64")
  expect_equal(as.vector(as.array(twice(x))), c(2, 4))
  expect_equal(as.vector(as.array(thrice(x))), c(3, 6))
})

test_that("several arguments, a constant argument, ctx fields and a straight-through estimator", {
  clipped_product <- autograd_function(
    forward = function(ctx, x, w, limit = 1) {
      ctx$limit <- limit
      ctx$save_for_backward(x = x, w = w)
      x %*% w
    },
    backward = function(ctx, grad_output) {
      s <- ctx$saved_variables
      gx <- grad_output %*% t(s$w)
      list(x = pmin(pmax(gx, -ctx$limit), ctx$limit), w = t(s$x) %*% grad_output)
    })
  set.seed(3)
  x <- matrix(rnorm(12), 4); w <- matrix(rnorm(6) * 3, 3)
  f <- function(x, w) sum(clipped_product(x, w, limit = 0.5)^2)
  g <- rf_grad(f, dtype = "float64")(x, w)
  go <- 2 * (x %*% w)
  expect_equal(g$x, pmin(pmax(go %*% t(w), -0.5), 0.5), tolerance = 1e-12)
  expect_equal(g$w, t(x) %*% go, tolerance = 1e-12)
  # Rounding whose gradient passes straight through (a quantizer's estimator).
  ste_round <- autograd_function(forward = function(ctx, x) round(x),
                                 backward = function(ctx, grad_output) list(x = grad_output))
  # Values saved without names, and an R value saved beside them, are there by position.
  cube <- autograd_function(
    forward = function(ctx, x) { ctx$save_for_backward(x, 3); x^3 },
    backward = function(ctx, grad_output) {
      s <- ctx$saved_variables
      list(x = s[[2]] * s[[1]]^2 * grad_output)
    })
  expect_equal(rf_grad(function(x) sum(cube(x)), dtype = "float64")(c(1, 2)), c(3, 12))
  v <- c(0.2, 1.7, -2.4)
  expect_equal(rf_grad(function(v) sum(ste_round(v) * c(1, -1, 3)), dtype = "float64")(v), c(1, -1, 3))
  expect_equal(rf_jit(function(v) ste_round(v) + 0)(v), round(v))
})

test_that("several outputs get their cotangents as a list, and a missing gradient is zero", {
  split_scale <- autograd_function(
    forward = function(ctx, x, y) list(a = 2 * x, b = 3 * x),
    backward = function(ctx, grad_output) list(x = grad_output[[1]] + grad_output[[2]])) # (not 2 g1 + 3 g2)
  f <- function(x, y) { o <- split_scale(x, y); sum(o$a) + sum(o$b * y) }
  g <- rf_grad(f, dtype = "float64")(c(1, 2), c(5, 7))
  expect_equal(g$x, 1 + c(5, 7))
  expect_equal(g$y, 3 * c(1, 2)) # y's gradient through the rest of f; the custom one is zero
  o <- rf_jit(function(x, y) split_scale(x, y))(c(1, 2), c(5, 7))
  expect_equal(o, list(a = c(2, 4), b = c(3, 6)))
})

test_that("a model with a custom function trains with rf_fit", {
  ste_relu <- autograd_function(forward = function(ctx, x) { ctx$save_for_backward(x = x); torch_relu(x) },
                                backward = function(ctx, grad_output) list(x = grad_output * (ctx$saved_variables$x > -1)))
  net <- nn_module(
    initialize = function() {
      self$fc1 <- nn_linear(3, 8)
      self$fc2 <- nn_linear(8, 1)
    },
    forward = function(x) x %>% self$fc1() %>% ste_relu() %>% self$fc2())()
  set.seed(4)
  x <- matrix(rnorm(60), 20); y <- x %*% c(1, -1, 2)
  before <- as.array(net$fc1$weight)
  fit <- rf_fit(net, x, y, loss = nnf_mse_loss, steps = 30, lr = 0.05, progress = FALSE)
  expect_lt(fit$history[30], fit$history[1])
  expect_false(isTRUE(all.equal(as.array(net$fc1$weight), before)))
  expect_equal(as.array(rf_jit(net)(x)), as.array(net(x)), tolerance = 1e-5)
})

test_that("wrong definitions and wrong gradients are classed errors", {
  expect_error(autograd_function(function(ctx, ...) 1, function(ctx, g) list()), class = "rfuse_type_error", regexp = "\\.\\.\\.")
  expect_error(autograd_function(function(ctx, x) x, function(ctx) list()), class = "rfuse_type_error", regexp = "grad_output")
  expect_error(autograd_function(1, function(ctx, g) g), class = "rfuse_type_error")
  expect_error(scaled_exp(z = 1), class = "rfuse_type_error", regexp = "no argument 'z'")
  expect_error(scaled_exp(1, 2), class = "rfuse_type_error", regexp = "takes 1 arguments, got 2")
  bad <- autograd_function(forward = function(ctx, x) exp(x), backward = function(ctx, grad_output) list(x = c(1, 2)))
  expect_error(rf_grad(function(x) sum(bad(x)))(c(1, 2, 3)), class = "rfuse_shape_error", regexp = "gradient of 'x' has dims 2; 'x' has 3")
})

test_that("class labels a custom forward one-hot encodes are checked as a helper's are", {
  ce <- autograd_function(
    forward = function(ctx, logits, y) { ctx$save_for_backward(l = logits); nnf_cross_entropy(logits, y) },
    backward = function(ctx, grad_output) list(logits = ctx$saved_variables$l * 0 + grad_output))
  l <- matrix(c(0.1, -0.4, 0.3, 0.9, -1, 0.2), 2)
  g <- rf_grad(function(l, y) ce(l, y), wrt = "l")
  expect_equal(g(l, c(1L, 3L)), matrix(1, 2, 3))
  expect_error(g(l, c(1L, 5L)), class = "rfuse_type_error") # label 5 of 3 classes: refused, not computed
})
