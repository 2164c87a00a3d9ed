# Recurrent layers as one op per layer and direction (rfuse.recurrent; cuDNN's RNN call on the
# GPU). On the CPU the op is checked by letting CPU traces take it too (the interpreter runs it):
# every cell and layout (batch first or not, no biases, initial states, two bidirectional
# layers) gives what the steps written out give, forward and through rf_fit's gradients; on a
# GPU the cuDNN calls give what the CPU gives, and the plan shows one call per layer.

with_recurrent_op_on_cpu <- function(code) {
  ns <- asNamespace("rfuse")
  old <- get("recurrent_library_devices", envir = ns)
  utils::assignInNamespace("recurrent_library_devices", c("cuda", "cpu"), "rfuse")
  on.exit(utils::assignInNamespace("recurrent_library_devices", old, "rfuse"))
  force(code)
}

recurrent_configs <- list(
  list(name = "lstm, batch first", make = function() nn_lstm(5, 6, batch_first = TRUE), batch_first = TRUE),
  list(name = "gru, time first, no biases", make = function() nn_gru(5, 6, bias = FALSE), batch_first = FALSE),
  list(name = "relu rnn, two bidirectional layers", make = function() nn_rnn(5, 6, num_layers = 2, bidirectional = TRUE,
                                                                              nonlinearity = "relu", batch_first = TRUE),
       batch_first = TRUE),
  list(name = "lstm, two bidirectional layers", make = function() nn_lstm(5, 4, num_layers = 2, bidirectional = TRUE),
       batch_first = FALSE)
)

test_that("rfuse.recurrent gives what the written-out steps give, every cell and layout", {
  set.seed(1)
  for (cfg in recurrent_configs) {
    layer <- cfg$make()
    x <- array(rnorm(3 * 7 * 5), if (cfg$batch_first) c(3, 7, 5) else c(7, 3, 5))
    lstm <- grepl("lstm", cfg$name)
    f <- function(x) {
      out <- layer(x)
      list(out[[1]], if (lstm) out[[2]][[1]] else out[[2]])
    }
    old <- rf_options(cudnn_rnn = FALSE) # (on a GPU machine too: the steps written out)
    steps <- rf_jit(f, dtype = "float64")(x)
    expect_false(grepl("rfuse.recurrent", rf_explain(f, x)$traced, fixed = TRUE), label = cfg$name)
    rf_options(old)
    with_recurrent_op_on_cpu({
      g <- function(x) f(x) # (a new function: a new trace)
      expect_true(grepl("rfuse.recurrent", rf_explain(g, x)$traced, fixed = TRUE), label = cfg$name)
      op <- rf_jit(g, dtype = "float64")(x)
    })
    expect_equal(op[[1]], steps[[1]], tolerance = 1e-10, label = paste(cfg$name, "output"))
    expect_equal(op[[2]], steps[[2]], tolerance = 1e-10, label = paste(cfg$name, "h_n"))
  }
})

test_that("rf_fit trains the same through rfuse.recurrent's gradient as through the steps", {
  for (cfg in recurrent_configs[c(1, 2, 4)]) {
    Net <- nn_module("Net",
      initialize = function() {
        self$rnn <- cfg$make()
        self$head <- nn_linear(if (grepl("bidirectional", cfg$name)) 8 else 6, 2)
      },
      forward = function(x) { # (samples first, as rf_fit batches them)
        y <- self$rnn(if (cfg$batch_first) x else x$permute(c(2, 1, 3)))[[1]]
        last <- if (cfg$batch_first) y[, dim(y)[2], ] else y[dim(y)[1], , ]
        self$head(last)
      })
    set.seed(3)
    x <- array(rnorm(8 * 6 * 5), c(8, 6, 5)); y <- sample(1:2, 8, TRUE)
    fit_once <- function() {
      set.seed(4)
      net <- Net()
      fit <- rf_fit(net, x, y, steps = 4, batch_size = 8, lr = 0.1, momentum = 0.9, dtype = "float64", progress = FALSE)
      list(history = fit$history, w = as.array(net$rnn$weight_hh_l0))
    }
    a <- fit_once()
    b <- with_recurrent_op_on_cpu(fit_once())
    expect_equal(b$history, a$history, tolerance = 1e-10, label = cfg$name)
    expect_equal(b$w, a$w, tolerance = 1e-10, label = cfg$name)
    expect_lt(a$history[4], a$history[1])
  }
})

test_that("an LSTM layer's gradient through rfuse.recurrent equals central differences", {
  set.seed(5)
  layer <- nn_lstm(3, 4, batch_first = TRUE)
  x <- array(rnorm(2 * 3 * 3), c(2, 3, 3)); w <- array(rnorm(2 * 3 * 4), c(2, 3, 4))
  loss <- function(x) sum(layer(x)[[1]] * w)
  g <- with_recurrent_op_on_cpu(rf_grad(loss, dtype = "float64")(x))
  num <- vapply(seq_along(x), function(k) {
    e <- replace(numeric(length(x)), k, 1e-6)
    (rf_jit(loss, dtype = "float64")(x + e) - rf_jit(loss, dtype = "float64")(x - e)) / 2e-6
  }, 0)
  expect_equal(as.vector(g), num, tolerance = 1e-6)
})

test_that("the cudnn_rnn option is typed and named in errors", {
  expect_error(rf_options(cudnn_rnn = "maybe"), class = "rfuse_error")
  expect_error(rf_options(cudnn_rnn_algo = "fastest"), "persist_static")
})

test_that("on a GPU each layer is one cuDNN call, forward and gradient, equal to the CPU's", {
  if (as.vector(rf_default_device()) != "cuda")
    skip(paste("no usable GPU:", attr(rf_default_device(), "description")))
  old <- rf_options(tf32 = FALSE)
  on.exit(rf_options(old))
  set.seed(6)
  for (cfg in recurrent_configs) {
    layer <- cfg$make()
    x <- array(rnorm(16 * 9 * 5), if (cfg$batch_first) c(16, 9, 5) else c(9, 16, 5))
    f <- function(x) layer(x)[[1]]
    xt <- rf_tensor(x, device = "cuda")
    plan <- rf_explain(f, xt)$gpu_plan
    expect_true(any(grepl("cudnn (lstm|gru|rnn)", plan)), label = cfg$name)
    expect_equal(as.array(rf_jit(f)(xt)), as.array(rf_jit(f)(rf_tensor(x, device = "cpu"))), tolerance = 1e-5,
                 label = cfg$name)
  }
  Net <- nn_module("Net",
    initialize = function() { self$lstm <- nn_lstm(5, 6, batch_first = TRUE); self$head <- nn_linear(6, 2) },
    forward = function(x) { y <- self$lstm(x)[[1]]; self$head(y[, dim(y)[2], ]) })
  x <- array(rnorm(32 * 6 * 5), c(32, 6, 5)); y <- sample(1:2, 32, TRUE)
  fit_on <- function(device) {
    set.seed(7)
    net <- Net()
    rf_fit(net, x, y, steps = 5, batch_size = 32, lr = 0.1, momentum = 0.9, device = device, tf32 = FALSE,
           progress = FALSE)$history
  }
  expect_equal(fit_on("cuda"), fit_on("cpu"), tolerance = 1e-4)
})
