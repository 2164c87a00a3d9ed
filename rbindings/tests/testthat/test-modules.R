# The module system as torch for R's: names, state dicts, containers, inheritance, modes,
# freezing, and initialize running exactly as written.

test_that("state dicts use torch's names and round-trip through load_state_dict()", {
  set.seed(1)
  net <- nn_sequential(nn_linear(3, 4), nn_relu(), nn_batch_norm1d(4), nn_linear(4, 2))
  expect_setequal(names(net$state_dict()),
                  c("0.weight", "0.bias", "2.weight", "2.bias", "2.running_mean", "2.running_var",
                    "2.num_batches_tracked", "3.weight", "3.bias"))
  expect_setequal(names(net$parameters), c("0.weight", "0.bias", "2.weight", "2.bias", "3.weight", "3.bias"))
  expect_setequal(names(net$buffers), c("2.running_mean", "2.running_var", "2.num_batches_tracked"))
  sd <- net$state_dict()
  set.seed(2)
  other <- nn_sequential(nn_linear(3, 4), nn_relu(), nn_batch_norm1d(4), nn_linear(4, 2))
  x <- matrix(rnorm(15), 5)
  net$eval(); other$eval()
  expect_false(isTRUE(all.equal(other(x), net(x))))
  other$load_state_dict(sd)
  expect_equal(other(x), net(x))
  bad <- sd; bad[["0.weight"]] <- matrix(0, 2, 2)
  expect_error(other$load_state_dict(bad), "size mismatch for 0.weight", class = "rfuse_shape_error")
  expect_error(other$load_state_dict(sd[-1]), "missing keys: ", class = "rfuse_type_error")
  expect_silent(other$load_state_dict(sd[-1], strict = FALSE))
  lstm <- nn_lstm(3, 4, num_layers = 2, bidirectional = TRUE)
  expect_true(all(c("weight_ih_l0", "weight_hh_l1_reverse", "bias_ih_l1") %in% names(lstm$state_dict())))
  expect_identical(dim(lstm$state_dict()$weight_ih_l1), c(16L, 8L))
})

test_that("containers: sequential with !!! and a trailing comma, module lists and dicts, identity", {
  set.seed(3)
  layers <- list(nn_linear(2, 3), nn_tanh())
  net <- nn_sequential(!!!layers, nn_linear(3, 1), )
  expect_identical(length(net), 3L)
  expect_s3_class(net[[3]], "nn_linear")
  x <- matrix(rnorm(8), 4)
  ref <- sweep(tanh(sweep(x %*% t(net[[1]]$weight), 2, net[[1]]$bias, "+")) %*% t(net[[3]]$weight), 2, net[[3]]$bias, "+")
  expect_lt(rel_err(net(x), ref), 1e-12)
  ml <- nn_module_list(list(nn_linear(2, 2)))
  ml$append(nn_linear(2, 5))
  expect_identical(length(ml), 2L)
  expect_setequal(names(ml$state_dict()), c("0.weight", "0.bias", "1.weight", "1.bias"))
  expect_error(ml[[3]], "out of range", class = "rfuse_type_error")
  md <- nn_module_dict(list(enc = nn_linear(2, 2), head = nn_linear(2, 1)))
  expect_s3_class(md[["head"]], "nn_linear")
  expect_setequal(names(md$state_dict()), c("enc.weight", "enc.bias", "head.weight", "head.bias"))
  expect_identical(nn_identity()(x), x)
  expect_error(nn_sequential(nn_linear(2, 2), 3), "element 2 is not a module", class = "rfuse_type_error")
})

test_that("initialize runs in its own environments: local helpers, replicate, errors pass through", {
  Block <- nn_module("Block", initialize = function(k) self$fc <- nn_linear(k, k), forward = function(x) self$fc(x))
  make_net <- function(n) {
    my_block <- function(k) Block(k) # local to this function: only initialize's own scope sees it
    nn_module("Net",
      initialize = function(k) self$blocks <- nn_module_list(replicate(n, my_block(k))),
      forward = function(x) {
        for (i in seq_along(self$blocks)) x <- self$blocks[[i]](x)
        x
      })
  }
  set.seed(4)
  net <- make_net(3)(4)
  expect_identical(length(net$blocks), 3L)
  x <- matrix(rnorm(8), 2)
  expect_lt(rel_err(rf_jit(net, dtype = "float64")(x), net(x)), 1e-12)
  Broken <- nn_module("Broken", initialize = function() self$m <- replicate(2, stop("the model's own error")))
  expect_error(Broken(), "the model's own error")
})

test_that("fields, active bindings, private members, inherit and super", {
  Base <- nn_module("Base",
    scale = 2,
    initialize = function(n) self$fc <- nn_linear(n, n),
    forward = function(x) self$fc(x) * self$scale,
    active = list(width = function() nrow(self$fc$weight)),
    private = list(secret = 7))
  set.seed(5)
  b <- Base(3)
  expect_identical(b$scale, 2)
  expect_identical(b$width, 3L)
  Child <- nn_module("Child", inherit = Base,
    forward = function(x) super$forward(x) + 1)
  set.seed(5)
  ch <- Child(3)
  x <- matrix(rnorm(6), 2)
  expect_equal(ch(x), b(x) + 1)
  expect_s3_class(ch, "Child")
  expect_lt(rel_err(rf_jit(ch, dtype = "float64")(x), b(x) + 1), 1e-12)
  expect_error(nn_module("X", inherit = function() 1), class = "rfuse_type_error")
})

test_that("train/eval, apply, add_module, register_buffer, requires_grad_ and $to", {
  set.seed(6)
  net <- nn_sequential(nn_linear(2, 3), nn_dropout(0.5))
  net$eval()
  expect_false(net[[2]]$training)
  net$train()
  expect_true(net[[2]]$training)
  seen <- character()
  net$apply(function(m) seen <<- c(seen, class(m)[1]))
  expect_identical(seen, c("nn_linear", "nn_dropout", "nn_sequential"))
  M <- nn_module("M", initialize = function() {
    self$register_buffer("steps", 0)
    self$add_module("fc", nn_linear(2, 1))
    self$register_parameter("gain", 1.5)
  }, forward = function(x) self$fc(x) * self$gain)
  m <- M()
  expect_setequal(names(m$state_dict()), c("fc.weight", "fc.bias", "gain", "steps"))
  expect_identical(names(m$named_parameters()), names(m$parameters))
  expect_identical(length(m$children), 1L)
  expect_identical(length(m$modules), 2L)
  # Frozen parameters stay as they are in training.
  set.seed(7)
  x <- matrix(rnorm(40), 20); y <- x %*% c(1, -1) + 0.5
  net <- nn_sequential(nn_linear(2, 4), nn_tanh(), nn_linear(4, 1))
  net[[1]]$requires_grad_(FALSE)
  w0 <- net[[1]]$weight; w2 <- net[[3]]$weight
  rf_fit(net, x, y, loss = nnf_mse_loss, steps = 5, lr = 0.1, progress = FALSE, dtype = "float64")
  expect_equal(unclass(net[[1]]$weight), unclass(w0))
  expect_false(isTRUE(all.equal(unclass(net[[3]]$weight), unclass(w2))))
  expect_identical(net$to(device = rf_default_device()), net)
  expect_error(net$to(dtype = "float16"), class = "rfuse_unsupported")
})

test_that("arguments a layer does not have are refused by name; rf_fit takes every class", {
  expect_error(nn_linear(3, 4, device = "cuda"), "has no argument `device`", class = "rfuse_unsupported")
  expect_error(nn_conv2d(1, 2, 3, padding_mode = "reflect"), "`padding_mode`", class = "rfuse_unsupported")
  expect_error(nn_gelu(approximate = "fast"), "approximate", class = "rfuse_type_error")
  expect_error(nn_lstm(2, 3, nonlinearity = "relu"), class = "rfuse_unsupported")
  # Labels of 3 classes where the batches hold only some of them: one-hot width is the class count.
  set.seed(8)
  x <- matrix(rnorm(60), 30); y <- c(rep(1L, 14), rep(2L, 14), 3L, 3L)
  net <- nn_sequential(nn_linear(2, 3))
  fit <- rf_fit(net, x, y, steps = 3, batch_size = 10, lr = 0.1, progress = FALSE)
  expect_true(all(is.finite(fit$history)))
  expect_error(rf_fit(net, x, y - 1L, steps = 1, progress = FALSE), "1-based", class = "rfuse_type_error")
})

test_that("a jitted model follows $train() and $eval() (dropout, recurrent dropout)", {
  set.seed(31)
  m <- nn_sequential(nn_linear(4, 4), nn_dropout(0.5))
  x <- matrix(rnorm(8), 2)
  jm <- rf_jit(m, dtype = "float64")
  jm(x) # traced in training mode
  m$eval()
  expect_equal(jm(x), m(x), tolerance = 1e-12)
  expect_equal(jm(x), nnf_linear(x, m[[1]]$weight, m[[1]]$bias), tolerance = 1e-12, ignore_attr = TRUE)
  m$train()
  expect_false(isTRUE(all.equal(jm(x), m$eval()(x))))
  l <- nn_lstm(2, 3, num_layers = 2, dropout = 0.5, batch_first = TRUE)
  xx <- array(rnorm(20), c(2, 5, 2))
  jl <- rf_jit(l, dtype = "float64")
  jl(xx)
  l$eval()
  expect_equal(jl(xx)[[1]], l(xx)[[1]], tolerance = 1e-12)
})

test_that("torch's module internals that ported code reads", {
  # torchvision's resnet reads block$public_fields$expansion; mobilenet's sequential subclass
  # registers children with add_module(i - 1, m) and runs them from private$modules_.
  block <- nn_module("block", expansion = 4, initialize = function() self$fc <- nn_linear(2, 2),
                     forward = function(x) self$fc(x))
  expect_identical(block$public_fields$expansion, 4)
  expect_identical(block$classname, "block")
  expect_true(is.function(block$public_methods$forward))
  expect_error(block$nothing, class = "rfuse_unsupported")
  seq2 <- nn_module("seq2",
    initialize = function(...) { mods <- list(...); for (i in seq_along(mods)) self$add_module(name = i - 1, module = mods[[i]]) },
    forward = function(input) { for (m in private$modules_) input <- m(input); input })
  set.seed(61)
  a <- nn_linear(3, 4); b <- nn_relu(); l2 <- nn_linear(4, 2)
  s <- seq2(a, b, l2)
  x <- matrix(rnorm(6), 2)
  expect_equal(s(x), l2(b(a(x))))
  expect_identical(names(s$children), c("0", "1", "2"))
  expect_identical(s[[3]]$.classes, c("nn_linear", "nn_module"))
  # m$weight$data() names the parameter's place for an initializer; p$requires_grad <- FALSE freezes it.
  s$apply(function(m) if (inherits(m, "nn_linear")) nn_init_constant_(m$weight$data(), 0.5))
  expect_true(all(s[[1]]$weight == 0.5) && all(s[[3]]$weight == 0.5))
  s[[1]]$weight$requires_grad <- FALSE
  expect_false(s[[1]]$weight$requires_grad)
  expect_true(s[[3]]$weight$requires_grad)
  expect_identical(length(optim_sgd(s$parameters, lr = 0.1)$params), 3L)
})

test_that("formula lambdas (purrr / rlang style) in a forward see their own arguments", {
  # `~` builds a formula without evaluating it; a guard that forced its argument broke
  # purrr::map(xs, ~ .x(x)) in ported code.
  M <- nn_module(initialize = function() self$layers <- nn_module_list(list(nn_linear(2, 2), nn_linear(2, 2))),
    forward = function(x) {
      f <- rlang::as_function(~ .x(x) * 2)
      Reduce(`+`, lapply(as.list(self$layers), f))
    })
  set.seed(81)
  m <- M()
  x <- matrix(rnorm(6), 3)
  ref <- 2 * (m$layers[[1]](x) + m$layers[[2]](x))
  expect_equal(m(x), ref, tolerance = 1e-12)
  expect_equal(rf_jit(m, dtype = "float64")(x), ref, tolerance = 1e-12)
})

test_that("a jitted model computes with the module's state as it is at each call", {
  # Running statistics changed by training (eager or rf_fit) after the program was made.
  set.seed(91)
  m <- nn_sequential(nn_linear(3, 4), nn_batch_norm1d(4))
  x <- matrix(rnorm(30), 10)
  m$eval()
  jm <- rf_jit(m, dtype = "float64")
  jm(x)
  m$train(); invisible(m(x)); m$eval()
  expect_equal(jm(x), m(x), tolerance = 1e-12)
  rf_fit(m, x, matrix(rnorm(40), 10), loss = nnf_mse_loss, steps = 2, progress = FALSE)
  m$eval()
  expect_equal(jm(x), m(x), tolerance = 1e-12)
  # A jitted call in training mode updates the running statistics as the eager call does.
  a <- nn_batch_norm1d(4); b <- nn_batch_norm1d(4)
  z <- matrix(rnorm(40), 10)
  rf_jit(a, dtype = "float64")(z); b(z)
  expect_equal(a$running_mean, b$running_mean, tolerance = 1e-12)
  expect_equal(a$running_var, b$running_var, tolerance = 1e-12)
  expect_equal(a$num_batches_tracked, b$num_batches_tracked)
  # A field assigned after the program was made.
  M <- nn_module(initialize = function() { self$scale <- matrix(2, 2, 2); self$fc <- nn_linear(2, 2) },
                 forward = function(x) self$fc(x) * self$scale)
  s <- M()
  w <- matrix(1, 2, 2)
  js <- rf_jit(s, dtype = "float64")
  js(w)
  s$scale <- matrix(3, 2, 2)
  expect_equal(js(w), s(w), tolerance = 1e-12)
})
