# torch for R's training loop on modules: opt <- optim_adam(model$parameters); for each step
# opt$zero_grad(); loss <- loss_fn(model(x), y); loss$backward(); opt$step().

mlp <- nn_module("mlp",
  initialize = function(i, h, o) { self$fc1 <- nn_linear(i, h); self$fc2 <- nn_linear(h, o) },
  forward = function(x) x %>% self$fc1() %>% nnf_relu() %>% self$fc2())

# The MLP's forward, gradient (softmax cross-entropy, mean over rows) and Adam, by hand in R.
mlp_adam_reference <- function(p, x, y, steps, lr, betas = c(0.9, 0.999), eps = 1e-8) {
  m <- lapply(p, function(v) v * 0); v2 <- m
  n <- nrow(x); k <- ncol(p$fc2.weight) * 0 + nrow(p$fc2.weight)
  onehot <- outer(y, seq_len(k), "==") * 1
  for (s in seq_len(steps)) {
    z1 <- sweep(x %*% t(p$fc1.weight), 2, p$fc1.bias, "+")
    h <- pmax(z1, 0)
    o <- sweep(h %*% t(p$fc2.weight), 2, p$fc2.bias, "+")
    e <- exp(o - apply(o, 1, max))
    do <- (e / rowSums(e) - onehot) / n
    g <- list(fc2.weight = t(do) %*% h, fc2.bias = colSums(do))
    dz1 <- (do %*% p$fc2.weight) * (z1 > 0)
    g$fc1.weight <- t(dz1) %*% x
    g$fc1.bias <- colSums(dz1)
    for (nm in names(p)) {
      m[[nm]] <- betas[1] * m[[nm]] + (1 - betas[1]) * g[[nm]]
      v2[[nm]] <- betas[2] * v2[[nm]] + (1 - betas[2]) * g[[nm]]^2
      mh <- m[[nm]] / (1 - betas[1]^s); vh <- v2[[nm]] / (1 - betas[2]^s)
      p[[nm]] <- p[[nm]] - lr * mh / (sqrt(vh) + eps)
    }
  }
  p
}

test_that("torch's loop on a module trains as a hand-written Adam", {
  set.seed(11)
  net <- mlp(4, 8, 3)
  start <- net$state_dict()
  x <- matrix(rnorm(40), 10); y <- sample(1:3, 10, TRUE)
  opt <- optim_adam(net$parameters, lr = 0.01)
  expect_length(opt$params, 4)
  xt <- rf_tensor(x)
  losses <- numeric(5)
  for (i in 1:5) {
    opt$zero_grad()
    loss <- nnf_cross_entropy(net(xt), y)
    loss$backward()
    opt$step()
    losses[i] <- loss$item()
  }
  ref <- mlp_adam_reference(start, x, y, 5, 0.01)
  got <- net$state_dict()
  for (nm in names(ref)) expect_lt(max(abs(got[[nm]] - ref[[nm]])), 2e-5)
  expect_lt(losses[5], losses[1])
  # The module holds the optimizer's tensors: its parameters are them, on their device.
  expect_s4_class(net$fc1$weight, "rf_tensor")
  expect_identical(attr(net$fc1$weight, "env"), attr(opt$params[[which(names(net$parameters) == "fc1.weight")]], "env"))
  expect_output(print(net), "4 parameter arrays, 67 values")
})

test_that("the loop's details follow torch", {
  set.seed(12)
  enc <- mlp(4, 6, 2); dec <- mlp(2, 6, 4)
  x <- rf_tensor(matrix(rnorm(32), 8))
  # Two modules' parameters in one optimizer (c() keeps where they live).
  opt <- optim_sgd(c(enc$parameters, dec$parameters), lr = 0.1, momentum = 0.9)
  expect_length(opt$params, 8)
  for (i in 1:3) {
    opt$zero_grad()
    loss <- nnf_mse_loss(dec(enc(x)), x)
    loss$backward()
    opt$step()
  }
  expect_false(is.null(enc$fc1$weight$grad))
  enc$zero_grad()
  expect_null(enc$fc1$weight$grad)
  # Evaluation without recording equals the recorded forward.
  out <- dec(enc(x))
  with_no_grad(expect_equal(as.array(dec(enc(x))), as.array(out), tolerance = 1e-6))
  # A state dict round trip writes into the optimizer's tensors.
  sd <- enc$state_dict()
  sd$fc1.bias <- sd$fc1.bias + 1
  enc$load_state_dict(sd)
  expect_equal(as.vector(as.array(opt$params[[1]])), sd$fc1.bias, tolerance = 1e-6)
  expect_s4_class(enc$fc1$bias, "rf_tensor")

  # Frozen parameters stay as they are and out of the optimizer; a parameter the loss does not
  # use has no gradient and is left as it is, silently as in torch (tft's unused layers) ...
  set.seed(13)
  net <- mlp(3, 5, 2)
  net$fc1$requires_grad_(FALSE)
  net$spare <- nn_linear(2, 2)
  frozen <- net$fc1$weight; spare <- net$spare$weight
  opt <- optim_adamw(Filter(function(p) p$requires_grad, net$parameters), lr = 0.05)
  expect_length(opt$params, 4)
  xs <- rf_tensor(matrix(rnorm(12), 4))
  opt$zero_grad(); loss <- sum(net(xs)^2); loss$backward()
  expect_no_warning(opt$step())
  # ... but with a warning when the forward read recorded values into R, which cuts the graph
  # there (rfuse's hazard): as.array() in a forward leaves the layers before it untrained.
  cut <- nn_module(
    initialize = function() { self$a <- nn_linear(3, 4); self$b <- nn_linear(4, 2) },
    forward = function(x) self$b(as.array(self$a(x))))()
  opt <- optim_sgd(cut$parameters, lr = 0.1)
  opt$zero_grad(); loss <- sum(cut(xs)^2); loss$backward()
  expect_warning(opt$step(), "parameter\\(s\\) 1, 2 got no gradient", class = "rfuse_no_gradient_warning")
  opt$zero_grad(); loss <- sum(cut(xs)^2); loss$backward()
  expect_no_warning(opt$step()) # once per optimizer
  # A loss printed on the way (one value) is not such a read.
  opt <- optim_adamw(Filter(function(p) p$requires_grad, net$parameters), lr = 0.05)
  opt$zero_grad(); loss <- sum(net(xs)^2); loss$backward(); loss$item()
  expect_no_warning(opt$step())
  expect_identical(net$fc1$weight, frozen)
  expect_equal(as.array(net$spare$weight), unclass(spare), tolerance = 1e-7, ignore_attr = TRUE)
  expect_true(is.null(net$spare$weight$grad))
})

test_that("every layer trains through torch's loop as through rf_fit", {
  cases <- list(
    cnn = list(make = function() nn_sequential(nn_conv2d(2, 3, 3, padding = 1), nn_batch_norm2d(3), nn_relu(),
                                               nn_max_pool2d(2), nn_flatten(), nn_linear(3 * 4 * 4, 2)),
               x = c(6, 2, 8, 8), y = c(6, 2)),
    conv1d = list(make = function() nn_sequential(nn_conv1d(3, 4, 3), nn_gelu(), nn_flatten(), nn_linear(4 * 6, 2)),
                  x = c(5, 3, 8), y = c(5, 2)),
    norms = list(make = function() nn_sequential(nn_linear(6, 8), nn_layer_norm(8), nn_silu(), nn_linear(8, 3)),
                 x = c(7, 6), y = c(7, 3)),
    upconv = list(make = function() nn_sequential(nn_conv_transpose2d(2, 3, 2, stride = 2), nn_group_norm(1, 3),
                                                  nn_leaky_relu(0.1), nn_avg_pool2d(2), nn_flatten()),
                  x = c(3, 2, 4, 4), y = c(3, 48)),
    recurrent = list(make = function() nn_module(
                       initialize = function() {
                         self$lstm <- nn_lstm(3, 5, batch_first = TRUE); self$gru <- nn_gru(5, 4, batch_first = TRUE)
                         self$head <- nn_linear(4, 2)
                       },
                       forward = function(x) {
                         h <- self$gru(self$lstm(x)[[1]])[[1]]
                         self$head(h[, dim(h)[2], ])
                       })(),
                     x = c(4, 6, 3), y = c(4, 2)),
    attention = list(make = function() nn_module(
                       initialize = function() {
                         self$att <- nn_multihead_attention(8, 2, batch_first = TRUE); self$norm <- nn_layer_norm(8)
                         self$pool <- nn_adaptive_avg_pool2d(c(1, 1))
                       },
                       forward = function(x) {
                         a <- self$att(x, x, x)[[1]]
                         y <- self$norm(x + a)
                         torch_flatten(self$pool(torch_unsqueeze(y, 2)), start_dim = 2)
                       })(),
                     x = c(3, 5, 8), y = c(3, 1)))
  for (nm in names(cases)) {
    cs <- cases[[nm]]
    set.seed(20)
    a <- cs$make(); b <- cs$make()
    s0 <- a$state_dict()
    b$load_state_dict(s0)
    x <- array(rnorm(prod(cs$x)), cs$x); y <- array(rnorm(prod(cs$y)), cs$y)
    opt <- optim_sgd(a$parameters, lr = 0.05)
    xt <- rf_tensor(x)
    for (i in 1:3) {
      opt$zero_grad(); loss <- nnf_mse_loss(a(xt), y); loss$backward(); opt$step()
    }
    rf_fit(b, x, y, loss = nnf_mse_loss, optimizer = "sgd", lr = 0.05, steps = 3, batch_size = cs$x[1],
           progress = FALSE, tf32 = FALSE)
    sa <- a$state_dict(); sb <- b$state_dict()
    expect_identical(names(sa), names(sb))
    for (p in names(sa)) expect_lt(max(abs(sa[[p]] - sb[[p]])), 1e-4, label = paste(nm, p))
    # Every parameter got a gradient (each op on the way recorded for backward()).
    for (p in names(a$parameters)) expect_gt(max(abs(sa[[p]] - s0[[p]])), 0, label = paste(nm, p))
  }
})

test_that("an optimizer refuses what it cannot train", {
  net <- mlp(2, 3, 1)
  expect_error(optim_sgd(list(matrix(0, 2, 2)), lr = 0.1), "model\\$parameters", class = "rfuse_type_error")
  expect_error(optim_sgd(unclass(net$parameters), lr = 0.1), class = "rfuse_type_error")
  expect_error(optim_adam(list(w = net$parameters[[1]]), lr = 0.1), "belongs to no module|model\\$parameters",
               class = "rfuse_type_error")
  opt <- optim_sgd(net$parameters, lr = 0.1)
  expect_error(opt$step(), "backward", class = "rfuse_autodiff_error")
})

test_that("torch's loop over a dataloader's batches, and a dataset of tensors for rf_fit", {
  set.seed(14)
  x <- matrix(rnorm(60), 20); y <- rep(1:3, length.out = 20)
  dl <- dataloader(tensor_dataset(x = x, y = y), batch_size = 5, shuffle = TRUE)
  batches <- enumerate(dl)
  expect_length(batches, 4)
  expect_s4_class(batches[[1]]$x, "rf_tensor")
  expect_identical(batches[[1]]$y$dtype, "int64")
  # One epoch holds every sample once.
  seen <- sort(unlist(lapply(batches, function(b) as.vector(as.array(b$y)))))
  expect_equal(seen, sort(y))
  net <- mlp(3, 6, 3)
  start <- net$state_dict()
  opt <- optim_adam(net$parameters, lr = 0.01)
  it <- dataloader_make_iter(dl)
  n <- 0
  while (!is.null(b <- dataloader_next(it))) {
    opt$zero_grad()
    loss <- nnf_cross_entropy(net(b$x), b$y)
    loss$backward()
    opt$step()
    n <- n + 1
  }
  expect_identical(dataloader_next(it, completed = "done"), "done")
  # A factor's levels are the classes 1..K.
  fb <- enumerate(dataloader(tensor_dataset(x = x[1:4, ], y = factor(c("b", "a", "b", "c"))), batch_size = 4))[[1]]
  expect_equal(as.vector(as.array(fb$y)), c(2, 1, 2, 3))
  expect_equal(n, 4)
  # Labels as a tensor give the loss of the same labels as an R vector.
  b <- batches[[2]]
  with_no_grad(expect_equal(nnf_cross_entropy(net(b$x), b$y)$item(),
                            nnf_cross_entropy(net(b$x), as.vector(as.array(b$y)))$item(), tolerance = 1e-6))

  # A dataset whose .getitem gives rf_tensors feeds rf_fit.
  pairs <- dataset("pairs", initialize = function(x, y) { self$x <- x; self$y <- y },
                   .getitem = function(i) list(x = rf_tensor(self$x[i, ]), y = self$y[i]),
                   .length = function() nrow(self$x))
  fit_net <- mlp(3, 6, 3)
  fit <- rf_fit(fit_net, dataloader(pairs(x, y), batch_size = 10), steps = 4, lr = 0.1, progress = FALSE)
  expect_length(fit$history, 4)
  expect_true(all(is.finite(fit$history)))
})

test_that("evaluating between steps sees the weights the optimizer changed in place", {
  # The compiled model's repeat-call path keyed parameters by R object; an optimizer changes a
  # tensor parameter's values but not the object, so evaluation after steps used the old weights.
  set.seed(15)
  dense <- nn_module(initialize = function(i, o) { self$w <- nn_parameter(torch_randn(i, o)); self$b <- nn_parameter(torch_zeros(o)) },
                     forward = function(x) torch_mm(x, self$w) + self$b)
  model <- dense(3, 1)
  x <- rf_tensor(array(rnorm(30), c(10, 3))); y <- rf_tensor(array(rnorm(10), c(10, 1)))
  opt <- optim_sgd(model$parameters, lr = 0.1)
  ref <- function() as.array(x) %*% as.array(model$w) + as.vector(as.array(model$b))
  for (i in 1:3) {
    expect_equal(as.array(with_no_grad(model(x))), ref(), tolerance = 1e-5)
    expect_equal(as.array(with_no_grad(model(x))), ref(), tolerance = 1e-5) # the repeat call too
    opt$zero_grad(); loss <- nnf_mse_loss(model(x), y); loss$backward(); opt$step()
  }
  expect_equal(as.array(with_no_grad(model(x))), ref(), tolerance = 1e-5)
})

test_that("a custom loss over integer class labels trains as the default loss, and bad labels are refused", {
  set.seed(4)
  x <- matrix(rnorm(300), 100)
  y <- ifelse(x[, 1] + x[, 2] > 0, 1L, ifelse(x[, 3] > 0, 2L, 3L))
  make <- function() { set.seed(6); nn_sequential(nn_linear(3, 8), nn_relu(), nn_linear(8, 3)) }
  a <- make(); b <- make(); d <- make()
  fa <- rf_fit(a, x, y, steps = 12, batch_size = 20, lr = 0.3, dtype = "float64", progress = FALSE)
  fb <- rf_fit(b, x, y, loss = function(out, target) nnf_cross_entropy(out, target), steps = 12, batch_size = 20,
               lr = 0.3, dtype = "float64", progress = FALSE)
  expect_equal(fb$history, fa$history, tolerance = 1e-12)
  # Through a helper of the user's, and nll over log-softmax: the same labels, the same loss.
  smoothed <- function(out, target) nnf_nll_loss(nnf_log_softmax(out, 2), target)
  fd <- rf_fit(d, x, y, loss = function(out, target) smoothed(out, target), steps = 12, batch_size = 20,
               lr = 0.3, dtype = "float64", progress = FALSE)
  expect_equal(fd$history, fa$history, tolerance = 1e-10)
  # A label outside 1..K would be a row of zeros in the compiled one-hot: refused up front.
  y0 <- y - 1L
  expect_error(rf_fit(make(), x, y0, loss = function(out, target) nnf_cross_entropy(out, target), steps = 2,
                      progress = FALSE),
               class = "rfuse_type_error", regexp = "the class labels `y` must be whole numbers in 1..3.*not 0")
  j <- rf_jit(function(out, lab) nnf_cross_entropy(out, lab))
  o <- matrix(rnorm(30), 10)
  expect_equal(j(o, rep(1:3, length.out = 10)), nnf_cross_entropy(o, rep(1:3, length.out = 10)), tolerance = 1e-6)
  expect_error(j(o, c(rep(1:3, length.out = 9), 4)), class = "rfuse_type_error",
               regexp = "class labels \\('lab'\\) must be whole numbers in 1..3.*not 4 \\(element 10\\)")
  expect_error(j(o, c(rep(1:3, length.out = 9), NA)), class = "rfuse_type_error", regexp = "not NA")
  # Labels computed in the traced code cannot be checked: refused, naming what to do.
  expect_error(rf_jit(function(out, lab) nnf_cross_entropy(out, lab + 1))(o, rep(0:2, length.out = 10)),
               class = "rfuse_unsupported", regexp = "pass them as an argument")
})
