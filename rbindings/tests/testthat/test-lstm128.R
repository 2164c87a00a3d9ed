# The seeds' LSTM-128 (input 128, hidden 128, batch 128, 64 steps, linear head) trains on a
# synthetic sequence task to > 90% held-out accuracy on the CPU (float32, as users train).
test_that("the LSTM-128 learns a synthetic sequence task to > 90% held-out accuracy", {
  set.seed(42)
  steps <- 64; feat <- 128
  make <- function(n) {
    y <- sample(1:2, n, replace = TRUE)
    x <- array(rnorm(n * steps * feat), c(n, steps, feat))
    # The class shifts two features a little at every step: the evidence must be accumulated
    # over the sequence (one step alone is mostly noise).
    x[, , 1] <- x[, , 1] + ifelse(y == 1, 0.3, -0.3)
    x[, , 2] <- x[, , 2] - ifelse(y == 1, 0.3, -0.3)
    list(x = x, y = y)
  }
  train <- make(512); test <- make(256)
  Forecaster <- nn_module("Forecaster",
    initialize = function() {
      self$lstm <- nn_lstm(feat, 128, batch_first = TRUE)
      self$head <- nn_linear(128, 2)
    },
    forward = function(x) {
      h_n <- self$lstm(x)[[2]][[1]] # (layers, batch, hidden)
      self$head(h_n[1, , ])
    })
  net <- Forecaster()
  fit <- rf_fit(net, train$x, train$y, steps = 16, batch_size = 128, optimizer = "adam", lr = 0.01,
                dtype = "float32", progress = FALSE)
  expect_lt(tail(fit$history, 1), fit$history[1] / 2)
  acc <- mean(max.col(rf_jit(net)(test$x)) == test$y)
  expect_gt(acc, 0.9)
})
