# A corpus of models written as torch-for-R users write them (ported by replacing
# library(torch) with library(rfuse) and torch_tensor with rf_tensor). For each: the jitted
# float64 model equals the eager one, and a few rf_fit() steps train it.

# torch for R re-exports magrittr's pipe; rfuse does not, so a ported script needs magrittr.
`%>%` <- magrittr::`%>%`

# The jitted float64 model against the eager one, element by element for list outputs.
expect_jit_matches <- function(jitted, eager, tol = 1e-10) {
  if (is.list(eager)) {
    expect_true(is.list(jitted))
    expect_identical(names(jitted), names(eager))
    expect_identical(length(jitted), length(eager))
    for (i in seq_along(eager)) {
      expect_identical(dim(jitted[[i]]), dim(eager[[i]]))
      expect_lt(rel_err(jitted[[i]], eager[[i]]), tol)
    }
  } else {
    expect_identical(dim(jitted), dim(eager))
    expect_lt(rel_err(jitted, eager), tol)
  }
}

# rf_fit() for `steps` steps: the history is finite, the parameters moved, the loss went down
# (per-step losses averaged over whole passes through the batches, and the whole data's loss).
# `invariant`: parameters the loss does not depend on (a bias just before a batch norm, which
# subtracts it again; a key bias in attention, which the softmax cancels): their gradient is
# zero, so they must stay (numerically) where they were, and every other parameter must move.
# `forward`: how to run the model eagerly (a model using tensor methods needs rf_tensor inputs).
expect_trains <- function(model, x, y, loss = nnf_cross_entropy, steps = 30, batch_size = NROW(x),
                          lr = 0.05, eval_mode = FALSE, invariant = character(),
                          forward = function(x) model(x), ...) {
  before <- model$parameters
  eval_loss <- function() {
    was <- model$training
    if (eval_mode) model$eval()
    on.exit(model$train(was))
    loss(forward(x), y)
  }
  loss_before <- eval_loss()
  fit <- rf_fit(model, x, y, loss = loss, steps = steps, lr = lr, batch_size = batch_size,
                progress = FALSE, dtype = "float64", ...)
  h <- fit$history
  expect_length(h, steps)
  expect_true(all(is.finite(h)))
  expect_identical(names(model$parameters), names(before))
  moved <- vapply(names(before), function(p) max(abs(model$parameters[[p]] - before[[p]])), 0)
  expect_setequal(intersect(invariant, names(before)), invariant)
  free <- setdiff(names(before), invariant)
  expect_true(all(moved[free] > 0), info = paste("unchanged:", paste(free[moved[free] == 0], collapse = ", ")))
  if (length(invariant)) expect_lt(max(moved[invariant]), 1e-10)
  k <- 2 * max(1, NROW(x) %/% batch_size)
  expect_lt(mean(tail(h, k)), mean(head(h, k)))
  expect_lt(eval_loss(), loss_before)
  invisible(fit)
}

as_t <- function(x) rf_tensor(x, dtype = "float64", device = "cpu")

# ---- 1. MNIST-style CNN (the torch for R MNIST example, small) -----------------------------

test_that("an MNIST-style CNN with dropout matches eagerly and trains", {
  net <- nn_module(
    "Net",
    initialize = function() {
      self$conv1 <- nn_conv2d(1, 4, 3, 1)
      self$conv2 <- nn_conv2d(4, 8, 3, 1)
      self$dropout1 <- nn_dropout(0.25)
      self$dropout2 <- nn_dropout(0.5)
      self$fc1 <- nn_linear(72, 16)
      self$fc2 <- nn_linear(16, 2)
    },
    forward = function(x) {
      x <- self$conv1(x)
      x <- nnf_relu(x)
      x <- self$conv2(x)
      x <- nnf_relu(x)
      x <- nnf_max_pool2d(x, 2)
      x <- self$dropout1(x)
      x <- torch_flatten(x, start_dim = 2)
      x <- self$fc1(x)
      x <- nnf_relu(x)
      x <- self$dropout2(x)
      output <- self$fc2(x)
      output
    }
  )
  set.seed(101)
  model <- net()
  n <- 32
  y <- rep(1:2, length.out = n)
  x <- array(rnorm(n * 10 * 10), c(n, 1, 10, 10))
  x[y == 1, 1, , 1:5] <- x[y == 1, 1, , 1:5] + 1.5
  # Training mode: the jitted model draws the same dropout masks from R's RNG.
  jm <- rf_jit(model, dtype = "float64")
  set.seed(7); eager <- model(x)
  set.seed(7); jitted <- jm(x)
  expect_identical(dim(jitted), c(32L, 2L))
  expect_jit_matches(jitted, eager)
  model$eval()
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), model(x))
  expect_gt(rel_err(eager, model(x)), 1e-3) # dropout was on in training mode
  model$train()
  set.seed(8)
  expect_trains(model, x, y, steps = 30, batch_size = 16, lr = 0.1, eval_mode = TRUE)
})

# ---- 2. MLP autoencoder ----------------------------------------------------------------------

test_that("an MLP autoencoder (encoder/decoder sequentials) matches, trains, and has torch's state-dict names", {
  autoencoder <- nn_module(
    "autoencoder",
    initialize = function(input_dim, latent_dim) {
      self$encoder <- nn_sequential(
        nn_linear(input_dim, 6),
        nn_relu(),
        nn_linear(6, latent_dim)
      )
      self$decoder <- nn_sequential(
        nn_linear(latent_dim, 6),
        nn_relu(),
        nn_linear(6, input_dim)
      )
    },
    forward = function(x) {
      z <- self$encoder(x)
      self$decoder(z)
    }
  )
  set.seed(102)
  model <- autoencoder(8, 2)
  expect_identical(sort(names(model$state_dict())),
                   sort(c("encoder.0.weight", "encoder.0.bias", "encoder.2.weight", "encoder.2.bias",
                          "decoder.0.weight", "decoder.0.bias", "decoder.2.weight", "decoder.2.bias")))
  x <- matrix(rnorm(40 * 2), 40) %*% matrix(rnorm(2 * 8), 2)
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), model(x))
  expect_trains(model, x, x, loss = nnf_mse_loss, steps = 30, batch_size = 20)
})

# ---- 3. DCGAN-style discriminator --------------------------------------------------------------

test_that("a DCGAN-style discriminator (strided convs, leaky ReLU, batch norm) matches and trains", {
  discriminator <- nn_module(
    "discriminator",
    initialize = function(nc = 3, ndf = 4) {
      self$main <- nn_sequential(
        nn_conv2d(nc, ndf, 4, 2, 1, bias = FALSE),
        nn_leaky_relu(0.2),
        nn_conv2d(ndf, ndf * 2, 4, 2, 1, bias = FALSE),
        nn_batch_norm2d(ndf * 2),
        nn_leaky_relu(0.2),
        nn_conv2d(ndf * 2, 1, 4, 1, 0, bias = FALSE),
        nn_sigmoid()
      )
    },
    forward = function(input) {
      torch_flatten(self$main(input))
    }
  )
  set.seed(103)
  netD <- discriminator()
  n <- 16
  y <- rep(c(1, 0), length.out = n) # real, fake
  x <- array(rnorm(n * 3 * 16 * 16), c(n, 3, 16, 16))
  x[y == 1, , , ] <- x[y == 1, , , ] * 0.5 + 1
  # Training mode: batch statistics, the same eagerly and jitted.
  eager <- netD(x)
  expect_length(eager, n)
  expect_jit_matches(rf_jit(netD, dtype = "float64")(x), eager)
  netD$eval()
  expect_jit_matches(rf_jit(netD, dtype = "float64")(x), netD(x))
  netD$train()
  bce <- function(input, target) -mean(target * log(input) + (1 - target) * log(1 - input))
  expect_trains(netD, x, y, loss = bce, steps = 30, batch_size = 8)
})

# ---- 4. Text classifier: embedding + conv1d + max-over-time ----------------------------------

test_that("a text CNN (nn_embedding, nn_conv1d, torch_amax pooling) matches and trains", {
  text_cnn <- nn_module(
    "text_cnn",
    initialize = function(vocab_size, embedding_dim, n_filters, filter_size, n_classes) {
      self$embedding <- nn_embedding(vocab_size, embedding_dim, padding_idx = 1)
      self$conv <- nn_conv1d(embedding_dim, n_filters, filter_size)
      self$dropout <- nn_dropout(0.2)
      self$fc <- nn_linear(n_filters, n_classes)
    },
    forward = function(text) {
      embedded <- self$embedding(text)                # (batch, seq, emb)
      embedded <- torch_permute(embedded, c(1, 3, 2)) # (batch, emb, seq)
      conved <- nnf_relu(self$conv(embedded))         # (batch, filters, seq - k + 1)
      pooled <- torch_amax(conved, dim = 3)           # (batch, filters)
      self$fc(self$dropout(pooled))
    }
  )
  set.seed(104)
  model <- text_cnn(30, 6, 5, 3, 2)
  n <- 40; len <- 10
  y <- rep(1:2, length.out = n)
  x <- t(sapply(y, function(k) {
    tok <- sample(if (k == 1) 2:15 else 16:30, len, replace = TRUE)
    tok[seq_len(sample(0:3, 1)) + len - 3] <- 1 # padding at the end
    tok[seq_len(len)]
  }))
  storage.mode(x) <- "double"
  model$eval()
  eager <- model(x)
  expect_identical(dim(eager), c(40L, 2L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  model$train()
  set.seed(9); eager <- model(x)
  set.seed(9); expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  set.seed(10)
  expect_trains(model, x, y, steps = 30, batch_size = 20, lr = 0.1, eval_mode = TRUE)
  # The padding row stays zero (it gets no gradient).
  expect_equal(model$embedding$weight[1, ], rep(0, 6))
})

# ---- 5. UNet-style block with a skip connection ---------------------------------------------

test_that("a UNet-style double-conv block with a torch_cat skip connection matches and trains", {
  double_conv <- nn_module(
    "double_conv",
    initialize = function(in_channels, out_channels) {
      self$double_conv <- nn_sequential(
        nn_conv2d(in_channels, out_channels, kernel_size = 3, padding = 1),
        nn_batch_norm2d(out_channels),
        nn_relu(),
        nn_conv2d(out_channels, out_channels, kernel_size = 3, padding = "same"),
        nn_batch_norm2d(out_channels),
        nn_relu()
      )
    },
    forward = function(x) self$double_conv(x)
  )
  unet_block <- nn_module(
    "unet_block",
    initialize = function(n_channels, n_classes) {
      self$inc <- double_conv(n_channels, 4)
      self$mid <- double_conv(4, 4)
      self$outc <- nn_conv2d(8, n_classes, kernel_size = 1)
    },
    forward = function(x) {
      x1 <- self$inc(x)
      x2 <- self$mid(x1)
      x <- torch_cat(list(x2, x1), dim = 2)
      self$outc(x)
    }
  )
  set.seed(105)
  model <- unet_block(2, 1)
  n <- 8
  x <- array(rnorm(n * 2 * 8 * 8), c(n, 2, 8, 8))
  y <- array((x[, 1, , ] > 0) * 1, c(n, 1, 8, 8))
  eager <- model(x)
  expect_identical(dim(eager), c(8L, 1L, 8L, 8L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  expect_trains(model, x, y, loss = nnf_mse_loss, steps = 30, batch_size = 4,
                invariant = c("inc.double_conv.0.bias", "inc.double_conv.3.bias",
                              "mid.double_conv.0.bias", "mid.double_conv.3.bias"))
})

# ---- 6. LSTM forecaster ------------------------------------------------------------------------

sine_windows <- function(n, len, features = 1) {
  phase <- runif(n, 0, 2 * pi)
  t <- seq_len(len + 1) * 0.5
  s <- outer(phase, t, function(p, t) sin(p + t))
  x <- array(s[, seq_len(len)], c(n, len, 1))
  if (features == 2) x <- array(c(s[, seq_len(len)], outer(phase, t[seq_len(len)], function(p, t) cos(p + t))), c(n, len, 2))
  list(x = x, y = matrix(s[, len + 1], n))
}

test_that("an LSTM forecaster (batch_first, last time step) matches, trains, and has torch's names", {
  lstm_net <- nn_module(
    "lstm_net",
    initialize = function(input_size, hidden_size) {
      self$lstm <- nn_lstm(input_size = input_size, hidden_size = hidden_size, batch_first = TRUE)
      self$fc <- nn_linear(hidden_size, 1)
    },
    forward = function(x) {
      out <- self$lstm(x)[[1]]
      self$fc(out[, dim(out)[2], ])
    }
  )
  set.seed(106)
  model <- lstm_net(1, 6)
  expect_identical(sort(names(model$state_dict())),
                   sort(c("lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0",
                          "fc.weight", "fc.bias")))
  expect_identical(dim(model$lstm$weight_ih_l0), c(24L, 1L))
  d <- sine_windows(32, 8)
  eager <- model(d$x)
  expect_identical(dim(eager), c(32L, 1L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(d$x), eager)
  # The full output and the (h, c) states too.
  lstm_all <- function(x) { r <- model$lstm(x); list(out = r[[1]], h = r[[2]][[1]], c = r[[2]][[2]]) }
  expect_jit_matches(rf_jit(lstm_all, dtype = "float64")(d$x), lstm_all(d$x))
  expect_trains(model, d$x, d$y, loss = nnf_mse_loss, steps = 30, batch_size = 16, lr = 0.1)
})

# ---- 7. GRU forecaster -------------------------------------------------------------------------

test_that("a two-layer GRU forecaster (torch_narrow on the last step) matches and trains", {
  gru_net <- nn_module(
    "gru_net",
    initialize = function(input_size, hidden_size, num_layers) {
      self$gru <- nn_gru(input_size, hidden_size, num_layers = num_layers, batch_first = TRUE)
      self$fc <- nn_linear(hidden_size, 1)
    },
    forward = function(x) {
      output <- self$gru(x)[[1]]
      last <- torch_narrow(output, dim = 2, start = dim(output)[2], length = 1)
      self$fc(torch_squeeze(last, dim = 2))
    }
  )
  set.seed(107)
  model <- gru_net(2, 5, 2)
  expect_identical(sort(names(model$state_dict())),
                   sort(c(paste0(c("gru.weight_ih_l", "gru.weight_hh_l", "gru.bias_ih_l", "gru.bias_hh_l"),
                                 rep(0:1, each = 4)), "fc.weight", "fc.bias")))
  d <- sine_windows(24, 6, features = 2)
  eager <- model(d$x)
  expect_identical(dim(eager), c(24L, 1L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(d$x), eager)
  expect_trains(model, d$x, d$y, loss = nnf_mse_loss, steps = 30, batch_size = 12, lr = 0.1)
})

# ---- 8. Tabular model: embeddings of categorical columns + numeric features -------------------

test_that("a tabular model (one nn_embedding per categorical column, torch_cat with numerics) matches and trains", {
  tabular_net <- nn_module(
    "tabular_net",
    initialize = function(cardinalities, n_numeric, embedding_dim = 3) {
      self$embedders <- nn_module_list(lapply(cardinalities, function(card) nn_embedding(card, embedding_dim)))
      self$n_cat <- length(cardinalities)
      self$fc1 <- nn_linear(self$n_cat * embedding_dim + n_numeric, 12)
      self$output <- nn_linear(12, 2)
    },
    forward = function(x) {
      embedded <- lapply(seq_len(self$n_cat), function(i) self$embedders[[i]](x[, i]))
      numeric <- x[, (self$n_cat + 1):ncol(x)]
      all <- torch_cat(c(embedded, list(numeric)), dim = 2)
      self$output(nnf_relu(self$fc1(all)))
    }
  )
  set.seed(108)
  model <- tabular_net(c(4, 3), 3)
  n <- 48
  cat1 <- sample(1:4, n, TRUE); cat2 <- sample(1:3, n, TRUE)
  num <- matrix(rnorm(n * 3), n)
  x <- cbind(cat1, cat2, num)
  dimnames(x) <- NULL
  y <- ifelse(cat1 <= 2, 1, 2)
  eager <- model(x)
  expect_identical(dim(eager), c(48L, 2L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  expect_true(all(c("embedders.0.weight", "embedders.1.weight") %in% names(model$state_dict())))
  expect_trains(model, x, y, steps = 30, batch_size = 24, lr = 0.1)
})

# ---- 9. ResNet-style blocks with an nn_identity shortcut -------------------------------------

test_that("a small ResNet (identity and downsampling shortcuts, adaptive pooling) matches and trains", {
  res_block <- nn_module(
    "res_block",
    initialize = function(in_channels, out_channels, stride = 1) {
      self$conv1 <- nn_conv2d(in_channels, out_channels, 3, stride = stride, padding = 1, bias = FALSE)
      self$bn1 <- nn_batch_norm2d(out_channels)
      self$conv2 <- nn_conv2d(out_channels, out_channels, 3, padding = 1, bias = FALSE)
      self$bn2 <- nn_batch_norm2d(out_channels)
      if (stride != 1 || in_channels != out_channels) {
        self$shortcut <- nn_sequential(
          nn_conv2d(in_channels, out_channels, 1, stride = stride, bias = FALSE),
          nn_batch_norm2d(out_channels)
        )
      } else {
        self$shortcut <- nn_identity()
      }
    },
    forward = function(x) {
      out <- nnf_relu(self$bn1(self$conv1(x)))
      out <- self$bn2(self$conv2(out))
      out <- out + self$shortcut(x)
      nnf_relu(out)
    }
  )
  tiny_resnet <- nn_module(
    "tiny_resnet",
    initialize = function(num_classes = 2) {
      self$stem <- nn_sequential(nn_conv2d(3, 4, 3, padding = 1, bias = FALSE), nn_batch_norm2d(4), nn_relu())
      self$layer1 <- res_block(4, 4)
      self$layer2 <- res_block(4, 8, stride = 2)
      self$pool <- nn_adaptive_avg_pool2d(c(1, 1))
      self$fc <- nn_linear(8, num_classes)
    },
    forward = function(x) {
      x <- self$stem(x)
      x <- self$layer1(x)
      x <- self$layer2(x)
      x <- torch_flatten(self$pool(x), start_dim = 2)
      self$fc(x)
    }
  )
  set.seed(109)
  model <- tiny_resnet()
  expect_true(inherits(model$layer1$shortcut, "nn_identity"))
  expect_true("layer2.shortcut.0.weight" %in% names(model$state_dict()))
  expect_true("layer2.shortcut.1.running_mean" %in% names(model$state_dict()))
  n <- 12
  y <- rep(1:2, length.out = n)
  x <- array(rnorm(n * 3 * 8 * 8), c(n, 3, 8, 8))
  x[y == 2, 1, , ] <- x[y == 2, 1, , ] + 1
  eager <- model(x)
  expect_identical(dim(eager), c(12L, 2L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  model$eval()
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), model(x))
  model$train()
  expect_trains(model, x, y, steps = 30, batch_size = 6, lr = 0.1)
})

# ---- 10. nn_module_list looped over with seq_along -----------------------------------------

test_that("an MLP held in an nn_module_list, looped with seq_along in forward, matches and trains", {
  mlp <- nn_module(
    "mlp",
    initialize = function(sizes) {
      self$layers <- nn_module_list()
      for (i in seq_len(length(sizes) - 1)) self$layers$append(nn_linear(sizes[i], sizes[i + 1]))
    },
    forward = function(x) {
      for (i in seq_along(self$layers)) {
        x <- self$layers[[i]](x)
        if (i < length(self$layers)) x <- nnf_leaky_relu(x, 0.1)
      }
      x
    }
  )
  set.seed(110)
  model <- mlp(c(4, 10, 8, 3))
  expect_length(model$layers, 3)
  expect_identical(sort(names(model$state_dict())),
                   sort(paste0("layers.", rep(0:2, each = 2), c(".weight", ".bias"))))
  x <- matrix(rnorm(60 * 4), 60)
  y <- max.col(x[, 1:3])
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), model(x))
  expect_trains(model, x, y, steps = 30, batch_size = 30, lr = 0.2)
})

# ---- 11. nn_module_dict, list output -----------------------------------------------------------

test_that("a multi-task model with nn_module_dict heads and a list output matches and trains", {
  multi_task <- nn_module(
    "multi_task",
    initialize = function(n_in, hidden, n_classes) {
      self$trunk <- nn_sequential(nn_linear(n_in, hidden), nn_silu())
      self$heads <- nn_module_dict(list(
        classify = nn_linear(hidden, n_classes),
        regress = nn_linear(hidden, 1)
      ))
    },
    forward = function(x) {
      h <- self$trunk(x)
      list(logits = self$heads[["classify"]](h), value = self$heads$regress(h))
    }
  )
  set.seed(111)
  model <- multi_task(5, 8, 3)
  expect_true(all(c("heads.classify.weight", "heads.regress.bias", "trunk.0.weight") %in% names(model$state_dict())))
  x <- matrix(rnorm(30 * 5), 30)
  y <- max.col(x[, 1:3])
  eager <- model(x)
  expect_named(eager, c("logits", "value"))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  loss <- function(out, target) nnf_cross_entropy(out$logits, target) + 0.1 * mean(out$value^2)
  expect_trains(model, x, rf_one_hot(y, 3), loss = loss, steps = 30, batch_size = 15, lr = 0.2)
})

# ---- 12. %>% inside forward ---------------------------------------------------------------------

test_that("a model whose forward is a %>% pipeline matches and trains", {
  piped <- nn_module(
    "piped",
    initialize = function() {
      self$fc1 <- nn_linear(4, 12)
      self$fc2 <- nn_linear(12, 3)
    },
    forward = function(x) {
      x %>%
        self$fc1() %>%
        nnf_relu() %>%
        self$fc2() %>%
        nnf_log_softmax(dim = 2)
    }
  )
  set.seed(112)
  model <- piped()
  x <- matrix(rnorm(40 * 4), 40)
  y <- max.col(x[, 2:4])
  eager <- model(x)
  expect_equal(rowSums(exp(eager)), rep(1, 40), tolerance = 1e-12)
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  expect_trains(model, x, y, steps = 30, batch_size = 20, lr = 0.2)
})

# ---- 13. Tensor methods in forward ---------------------------------------------------------------

test_that("a model using tensor methods ($view, $size, $permute, $transpose, $mean, $softmax) matches and trains", {
  pooled_net <- nn_module(
    "pooled_net",
    initialize = function(n_in, seq_len, d_model, n_out) {
      self$seq_len <- seq_len
      self$d_model <- d_model
      self$proj <- nn_linear(n_in, seq_len * d_model)
      self$out <- nn_linear(d_model, n_out)
    },
    forward = function(x) {
      batch_size <- x$size(1)
      h <- self$proj(x)$view(c(batch_size, self$seq_len, self$d_model)) # (batch, seq, d)
      h <- h$permute(c(1, 3, 2))                                     # (batch, d, seq)
      h <- h$transpose(2, 3)                                         # (batch, seq, d)
      weights <- h$mean(dim = 3)$softmax(dim = 2)                   # (batch, seq)
      pooled <- torch_bmm(weights$unsqueeze(2), h)$squeeze(2)        # (batch, d)
      self$out(pooled$tanh())
    }
  )
  set.seed(113)
  model <- pooled_net(6, 4, 5, 2)
  x <- matrix(rnorm(24 * 6), 24)
  y <- ifelse(x[, 1] + x[, 2] > 0, 1, 2)
  eager <- as.array(model(as_t(x)))
  expect_identical(dim(eager), c(24L, 2L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  # Eagerly, the model takes rf_tensors (R arrays have no `$` methods): as.array() its output.
  expect_trains(model, x, y, steps = 30, batch_size = 12, lr = 0.2,
                forward = function(x) as.array(model(as_t(x))))
})

# ---- 14. Transformer-style feed-forward block on (batch, seq, features) -----------------------

test_that("a pre-norm transformer feed-forward block (nn_layer_norm, nn_gelu tanh) on 3-d input matches and trains", {
  ff_block <- nn_module(
    "ff_block",
    initialize = function(d_model, d_ff, n_classes, dropout = 0.1) {
      self$norm <- nn_layer_norm(d_model)
      self$ff <- nn_sequential(
        nn_linear(d_model, d_ff),
        nn_gelu(approximate = "tanh"),
        nn_dropout(dropout),
        nn_linear(d_ff, d_model)
      )
      self$head <- nn_linear(d_model, n_classes)
    },
    forward = function(x) {
      x <- x + self$ff(self$norm(x))        # (batch, seq, d_model)
      self$head(torch_mean(x, dim = 2))    # mean over the sequence
    }
  )
  set.seed(114)
  model <- ff_block(6, 12, 2)
  n <- 20
  y <- rep(1:2, length.out = n)
  x <- array(rnorm(n * 5 * 6), c(n, 5, 6))
  x[y == 1, , 1] <- x[y == 1, , 1] + 1
  model$eval()
  eager <- model(x)
  expect_identical(dim(eager), c(20L, 2L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  # The layer norm alone against base R: over the last dim of a 3-d input.
  ln <- model$norm(x)
  ref <- x
  for (i in 1:n) for (s in 1:5) { v <- x[i, s, ]; ref[i, s, ] <- (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1e-5) }
  expect_lt(rel_err(rf_jit(function(x) model$norm(x), dtype = "float64")(x), ref), 1e-10)
  expect_lt(rel_err(ln, ref), 1e-10)
  model$train()
  set.seed(11)
  expect_trains(model, x, y, steps = 30, batch_size = 10, lr = 0.1, eval_mode = TRUE)
})

# ---- 15. initialize calling local helpers via replicate() / lapply(); batch_norm1d ------------

test_that("a model built by replicate()/lapply() of a local helper, with nn_batch_norm1d, matches and trains", {
  make_block <- function(width, p) {
    nn_sequential(nn_linear(width, width), nn_batch_norm1d(width), nn_relu(), nn_dropout(p))
  }
  deep_mlp <- nn_module(
    "deep_mlp",
    initialize = function(n_in, width, depth, n_out) {
      self$input <- nn_linear(n_in, width)
      self$blocks <- nn_sequential(!!!replicate(depth, make_block(width, 0.1), simplify = FALSE))
      self$heads <- nn_module_list(lapply(seq_len(n_out), function(i) nn_linear(width, 1)))
    },
    forward = function(x) {
      h <- self$blocks(self$input(x))
      outs <- lapply(seq_along(self$heads), function(i) self$heads[[i]](h))
      torch_cat(outs, dim = 2)
    }
  )
  set.seed(115)
  model <- deep_mlp(5, 8, 2, 3)
  expect_length(model$blocks, 2)
  sd <- names(model$state_dict())
  expect_true(all(c("blocks.0.0.weight", "blocks.1.1.running_var", "blocks.1.1.num_batches_tracked",
                    "heads.2.bias") %in% sd))
  x <- matrix(rnorm(32 * 5), 32)
  y <- max.col(x[, 1:3])
  set.seed(12); eager <- model(x)
  set.seed(12); jitted <- rf_jit(model, dtype = "float64")(x)
  expect_jit_matches(jitted, eager)
  model$eval()
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), model(x))
  model$train()
  set.seed(13)
  # input.bias and blocks.0.0.bias feed blocks.0.1 (a batch norm) through linear maps only.
  expect_trains(model, x, y, steps = 30, batch_size = 16, lr = 0.1,
                invariant = c("input.bias", "blocks.0.0.bias"))
})

# ---- 16. Activation heads: softplus, elu, selu, silu, hardtanh -------------------------------

test_that("a model with nn_selu/nn_elu trunk and nn_softplus/nn_silu/nn_hardtanh heads matches and trains", {
  activations_net <- nn_module(
    "activations_net",
    initialize = function() {
      self$trunk <- nn_sequential(nn_linear(5, 8), nn_selu(), nn_linear(8, 8), nn_elu(alpha = 0.5))
      self$heads <- nn_module_list(list(
        nn_sequential(nn_linear(8, 1), nn_softplus(beta = 2)),
        nn_sequential(nn_linear(8, 1), nn_silu()),
        nn_sequential(nn_linear(8, 1), nn_hardtanh(-2, 2))
      ))
    },
    forward = function(x) {
      h <- self$trunk(x)
      torch_cat(lapply(seq_along(self$heads), function(i) self$heads[[i]](h)), dim = 2)
    }
  )
  set.seed(116)
  model <- activations_net()
  x <- matrix(rnorm(40 * 5), 40)
  y <- cbind(abs(x[, 1]), x[, 2], pmin(pmax(x[, 3], -2), 2))
  eager <- model(x)
  expect_identical(dim(eager), c(40L, 3L))
  expect_true(all(eager[, 1] > 0))
  expect_true(all(abs(eager[, 3]) <= 2))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  expect_trains(model, x, y, loss = nnf_mse_loss, steps = 30, batch_size = 20, lr = 0.1)
})

# ---- 17. Hand-written self-attention (torch_bmm, torch_softmax) --------------------------------

test_that("a hand-written single-head self-attention classifier matches and trains", {
  self_attention <- nn_module(
    "self_attention",
    initialize = function(d_model, n_classes) {
      self$d_model <- d_model
      self$query <- nn_linear(d_model, d_model)
      self$key <- nn_linear(d_model, d_model)
      self$value <- nn_linear(d_model, d_model)
      self$norm <- nn_layer_norm(d_model)
      self$classifier <- nn_linear(d_model, n_classes)
    },
    forward = function(x) {
      q <- self$query(x); k <- self$key(x); v <- self$value(x)
      scores <- torch_bmm(q, torch_transpose(k, 2, 3)) / sqrt(self$d_model)
      attn <- torch_softmax(scores, dim = -1)
      context <- torch_bmm(attn, v)
      h <- self$norm(x + context)
      self$classifier(torch_amax(h, dim = 2))
    }
  )
  set.seed(117)
  model <- self_attention(4, 2)
  n <- 16
  y <- rep(1:2, length.out = n)
  x <- array(rnorm(n * 6 * 4), c(n, 6, 4))
  x[y == 2, 3, ] <- x[y == 2, 3, ] + 2
  eager <- model(x)
  expect_identical(dim(eager), c(16L, 2L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  # The attention weights sum to one over the keys.
  attn_of <- function(x) torch_softmax(torch_bmm(model$query(x), torch_transpose(model$key(x), 2, 3)) / 2, dim = -1)
  expect_equal(apply(rf_jit(attn_of, dtype = "float64")(x), c(1, 2), sum), matrix(1, n, 6), tolerance = 1e-12)
  expect_trains(model, x, y, steps = 30, batch_size = 8, lr = 0.1, invariant = "key.bias")
})

# ---- 18. LeNet as one nn_sequential of layer modules ---------------------------------------

test_that("a LeNet-style nn_sequential (pool modules, nn_flatten, nn_log_softmax) matches and trains", {
  set.seed(120)
  model <- nn_sequential(
    nn_conv2d(1, 4, kernel_size = 3, padding = 1),
    nn_tanh(),
    nn_avg_pool2d(2),
    nn_conv2d(4, 6, kernel_size = 3),
    nn_relu(),
    nn_max_pool2d(kernel_size = 2),
    nn_flatten(),
    nn_linear(6 * 1 * 1, 8),
    nn_relu(),
    nn_linear(8, 3),
    nn_log_softmax(dim = 2)
  )
  expect_identical(sort(names(model$state_dict())),
                   sort(c("0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias", "9.weight", "9.bias")))
  n <- 24
  y <- rep(1:3, length.out = n)
  x <- array(rnorm(n * 8 * 8, sd = 0.5), c(n, 1, 8, 8))
  for (k in 1:3) x[y == k, 1, (k - 1) * 2 + 1:2, ] <- x[y == k, 1, (k - 1) * 2 + 1:2, ] + 1.5
  eager <- model(x)
  expect_identical(dim(eager), c(24L, 3L))
  expect_equal(rowSums(exp(eager)), rep(1, n), tolerance = 1e-12)
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), eager)
  expect_trains(model, x, y, steps = 30, batch_size = 12, lr = 0.2)
})

# ---- 19. Causal attention with tensor methods (masked_fill, matmul, log_softmax) --------------

causal_attention <- nn_module(
  "causal_attention",
  initialize = function(d_model, seq_len, n_classes) {
    self$qkv <- nn_linear(d_model, 3 * d_model)
    self$d_model <- d_model
    self$mask <- nn_buffer(upper.tri(matrix(0, seq_len, seq_len)) * 1)
    self$w_out <- nn_parameter(matrix(rnorm(n_classes * d_model, sd = 0.3), n_classes))
  },
  forward = function(x) {                                # (batch, seq, d)
    qkv <- self$qkv(x)$chunk(3, dim = 3)
    q <- qkv[[1]]; k <- qkv[[2]]; v <- qkv[[3]]
    scores <- q$matmul(k$transpose(2, 3))$div(sqrt(self$d_model))
    scores <- scores$masked_fill(self$mask == 1, -1e9)  # a (seq, seq) mask broadcast over the batch
    attn <- scores$softmax(dim = -1)
    h <- attn$bmm(v)$add(x)$relu()                       # residual
    last <- h$narrow(2, h$size(2), 1)$reshape(c(h$size(1), -1))
    last$mm(self$w_out$t())$log_softmax(dim = 2)
  }
)

# causal_attention's forward in base R, sample by sample.
causal_attention_reference <- function(model, x) {
  p <- model$state_dict()
  d <- dim(x)[3]; s <- dim(x)[2]
  t(vapply(seq_len(dim(x)[1]), function(b) {
    xb <- matrix(x[b, , ], s)
    qkv <- sweep(xb %*% t(p$qkv.weight), 2, p$qkv.bias, "+")
    q <- qkv[, 1:d]; k <- qkv[, d + 1:d]; v <- qkv[, 2 * d + 1:d]
    scores <- q %*% t(k) / sqrt(d)
    scores[upper.tri(scores)] <- -1e9
    a <- exp(scores - apply(scores, 1, max)); a <- a / rowSums(a)
    h <- pmax(a %*% v + xb, 0)
    z <- drop(h[s, ] %*% t(p$w_out))
    z - max(z) - log(sum(exp(z - max(z))))
  }, numeric(nrow(model$w_out))))
}

test_that("a causal self-attention model written with tensor methods ($masked_fill, $matmul, $reshape, $t) matches and trains", {
  set.seed(121)
  model <- causal_attention(4, 5, 2)
  expect_identical(sort(names(model$state_dict())), sort(c("mask", "qkv.bias", "qkv.weight", "w_out")))
  n <- 16
  y <- rep(1:2, length.out = n)
  x <- array(rnorm(n * 5 * 4), c(n, 5, 4))
  x[y == 2, 2, ] <- x[y == 2, 2, ] + 1.5
  ref <- causal_attention_reference(model, x)
  expect_identical(dim(ref), c(16L, 2L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(x), ref)
  expect_trains(model, x, y, steps = 30, batch_size = 8, lr = 0.2,
                forward = function(x) causal_attention_reference(model, x))
})

# ---- 20. Gated conv1d (torch_chunk GLU), tensor methods, nn_rnn --------------------------------

gated_rnn <- nn_module(
  "gated_rnn",
  initialize = function(in_channels, channels, hidden) {
    self$conv <- nn_conv1d(in_channels, 2 * channels, kernel_size = 3, padding = 1)
    self$rnn <- nn_rnn(channels, hidden, batch_first = TRUE)
    self$fc <- nn_linear(hidden + channels, 1)
  },
  forward = function(x) {                      # x: (batch, channels, length)
    parts <- torch_chunk(self$conv(x), 2, dim = 2)
    gated <- parts[[1]] * torch_sigmoid(parts[[2]])
    seq <- gated$transpose(2, 3)               # (batch, length, channels)
    out <- self$rnn(seq)[[1]]
    last <- out$narrow(2, out$size(2), 1)$squeeze(2)
    self$fc(torch_cat(list(last, gated$mean(dim = 3)), dim = 2))
  }
)
# The same model written with torch_* functions only, which run eagerly on plain R arrays.
gated_rnn_functional <- nn_module(
  "gated_rnn_functional",
  inherit = gated_rnn,
  forward = function(x) {
    parts <- torch_chunk(self$conv(x), 2, dim = 2)
    gated <- parts[[1]] * torch_sigmoid(parts[[2]])
    out <- self$rnn(torch_transpose(gated, 2, 3))[[1]]
    last <- torch_squeeze(torch_narrow(out, 2, dim(out)[2], 1), 2)
    self$fc(torch_cat(list(last, torch_mean(gated, dim = 3)), dim = 2))
  }
)
gated_data <- function() {
  set.seed(218)
  n <- 20
  x <- array(rnorm(n * 2 * 7), c(n, 2, 7))
  list(x = x, y = matrix(rowMeans(x[, 1, ]) - x[, 2, 7], n))
}

test_that("a gated conv1d + nn_rnn sequence model (torch_chunk, $transpose, $narrow, $mean) matches and trains", {
  set.seed(118)
  model <- gated_rnn(2, 3, 4)
  twin <- gated_rnn_functional(2, 3, 4)
  twin$load_state_dict(model$state_dict())
  expect_identical(sort(names(model$state_dict())),
                   sort(c("conv.weight", "conv.bias", "rnn.weight_ih_l0", "rnn.weight_hh_l0",
                          "rnn.bias_ih_l0", "rnn.bias_hh_l0", "fc.weight", "fc.bias")))
  d <- gated_data()
  eager <- twin(d$x)
  expect_identical(dim(eager), c(20L, 1L))
  expect_jit_matches(rf_jit(model, dtype = "float64")(d$x), eager)
  expect_jit_matches(rf_jit(twin, dtype = "float64")(d$x), eager)
  expect_trains(model, d$x, d$y, loss = nnf_mse_loss, steps = 30, batch_size = 10, lr = 0.1,
                forward = function(x) { twin$load_state_dict(model$state_dict()); twin(x) })
})

# The models above that use tensor methods in forward run eagerly on rf_tensors (as torch for
# R's run on torch tensors), agreeing with the jitted model on the R array.
test_that("the tensor-method models (causal attention, gated conv1d + nn_rnn) run eagerly on rf_tensor inputs", {
  set.seed(121)
  attention <- causal_attention(4, 5, 2)
  set.seed(118)
  gated <- gated_rnn(2, 3, 4)
  cases <- list(causal_attention = list(attention, array(rnorm(6 * 5 * 4), c(6, 5, 4))),
                gated_rnn = list(gated, gated_data()$x))
  for (nm in names(cases)) {
    model <- cases[[nm]][[1]]; x <- cases[[nm]][[2]]
    ref <- rf_jit(model, dtype = "float64")(x)
    got <- tryCatch(as.array(model(as_t(x))), error = function(e) paste("error:", conditionMessage(e)))
    expect_true(is.numeric(got), info = paste0(nm, ": ", if (is.character(got)) got))
    if (is.numeric(got)) expect_jit_matches(ref, got)
  }
})

# ---- Layers of the corpus, eagerly on rf_tensor inputs ---------------------------------------

# torch for R's layers take tensors; rfuse's eager layers should take rf_tensors and agree with
# the same layer on the plain array. Each layer is its own expectation (the error, if any, is
# the failure message).
test_that("each layer of the corpus runs eagerly on an rf_tensor as on the R array", {
  set.seed(119)
  img <- array(rnorm(4 * 2 * 6 * 6), c(4, 2, 6, 6))
  seq3 <- array(rnorm(4 * 5 * 3), c(4, 5, 3))
  ncl <- array(rnorm(4 * 3 * 7), c(4, 3, 7))
  mat <- matrix(rnorm(4 * 3), 4)
  ids <- matrix(c(1, 2, 3, 4, 5, 1, 2, 3), 4)
  cases <- list(
    "nn_conv2d" = list(nn_conv2d(2, 3, 3, padding = 1), img),
    "nnf_max_pool2d" = list(function(x) nnf_max_pool2d(x, 2), img),
    "nn_batch_norm2d" = list(nn_batch_norm2d(2), img),
    "nn_adaptive_avg_pool2d" = list(nn_adaptive_avg_pool2d(1), img),
    "nn_conv1d" = list(nn_conv1d(3, 2, 3), ncl),
    "nn_linear (2-d)" = list(nn_linear(3, 2), mat),
    "nn_linear (3-d)" = list(nn_linear(3, 2), seq3),
    "nn_layer_norm (3-d)" = list(nn_layer_norm(3), seq3),
    "nn_batch_norm1d" = list(nn_batch_norm1d(3), mat),
    "nn_embedding" = list(nn_embedding(5, 2), ids),
    "nn_lstm" = list(function(x) nn_lstm(3, 4, batch_first = TRUE)(x)[[1]], seq3),
    "nn_gru" = list(function(x) nn_gru(3, 4, batch_first = TRUE)(x)[[1]], seq3),
    "nn_rnn" = list(function(x) nn_rnn(3, 4, batch_first = TRUE)(x)[[1]], seq3),
    "nn_gelu(tanh)" = list(nn_gelu(approximate = "tanh"), mat),
    "nn_leaky_relu" = list(nn_leaky_relu(0.2), mat),
    "nn_elu" = list(nn_elu(), mat),
    "nn_selu" = list(nn_selu(), mat),
    "nn_silu" = list(nn_silu(), mat),
    "nn_softplus" = list(nn_softplus(), mat),
    "nn_hardtanh" = list(nn_hardtanh(), mat),
    "torch_chunk" = list(function(x) torch_chunk(x, 2, dim = 2)[[1]], ncl),
    "nnf_cross_entropy" = list(function(x) nnf_cross_entropy(x, c(1, 2, 3, 1)), mat),
    "nnf_mse_loss" = list(function(x) nnf_mse_loss(x, mat * 0), mat)
  )
  for (nm in names(cases)) {
    f <- cases[[nm]][[1]]; x <- cases[[nm]][[2]]
    set.seed(1); ref <- f(x) # (nn_lstm & co. draw their weights here, the same both times)
    set.seed(1)
    got <- tryCatch(suppressWarnings(f(as_t(x))), error = function(e) paste("error:", conditionMessage(e)))
    ok <- is(got, "rf_tensor")
    expect_true(ok, info = paste0(nm, ": ", if (is.character(got)) got else paste("gave", class(got)[1])))
    val <- if (ok) as.array(got) else if (is.numeric(got)) got
    if (!is.null(val)) {
      if (is.null(dim(ref))) val <- as.vector(val)
      expect_lt(rel_err(val, ref), 1e-10, label = nm)
    }
  }
})

# ---- DCGAN generator (transposed convolutions) and a UNet decoder step -----------------------
test_that("a DCGAN generator (conv_transpose2d, batch_norm2d, tanh) matches and trains", {
  generator <- nn_module("generator",
    initialize = function(nz, ngf) {
      self$main <- nn_sequential(
        nn_conv_transpose2d(nz, ngf * 2, 4, 1, 0, bias = FALSE), nn_batch_norm2d(ngf * 2), nn_relu(),
        nn_conv_transpose2d(ngf * 2, ngf, 4, 2, 1, bias = FALSE), nn_batch_norm2d(ngf), nn_relu(),
        nn_conv_transpose2d(ngf, 1, 4, 2, 1, bias = FALSE), nn_tanh())
    },
    forward = function(input) self$main(input))
  set.seed(131)
  netG <- generator(6, 4)
  z <- array(rnorm(8 * 6), c(8, 6, 1, 1))
  eager <- netG(z)
  expect_identical(dim(eager), c(8L, 1L, 16L, 16L))
  expect_jit_matches(rf_jit(netG, dtype = "float64")(z), eager)
  netG$eval()
  expect_jit_matches(rf_jit(netG, dtype = "float64")(z), netG(z))
  netG$train()
  target <- array(tanh(rnorm(8 * 256)), c(8, 1, 16, 16))
  expect_trains(netG, z, target, loss = nnf_mse_loss, steps = 30, batch_size = 4, lr = 0.05)
  expect_true(all(c("main.0.weight", "main.1.running_mean", "main.6.weight") %in% names(netG$state_dict())))
})

test_that("a UNet decoder step (upsample or transposed conv, cat skip, group norm, dropout2d) matches and trains", {
  up_block <- nn_module("up_block",
    initialize = function(cin, cout, transposed) {
      self$up <- if (transposed) nn_conv_transpose2d(cin, cin, 2, stride = 2) else nn_upsample(scale_factor = 2)
      self$conv <- nn_conv2d(cin * 2, cout, 3, padding = 1)
      self$norm <- nn_group_norm(2, cout)
      self$drop <- nn_dropout2d(0.1)
    },
    forward = function(x, skip) {
      x <- self$up(x)
      x <- torch_cat(list(x, skip), dim = 2)
      self$drop(nnf_relu(self$norm(self$conv(x))))
    })
  Net <- nn_module("Net",
    initialize = function(transposed) { self$up <- up_block(2, 4, transposed); self$head <- nn_conv2d(4, 1, 1) },
    forward = function(x) {
      low <- nnf_avg_pool2d(x, 2)
      self$head(self$up(low, x))
    })
  for (tr in c(TRUE, FALSE)) {
    set.seed(132)
    net <- Net(tr)
    x <- array(rnorm(4 * 2 * 8 * 8), c(4, 2, 8, 8))
    net$eval()
    expect_jit_matches(rf_jit(net, dtype = "float64")(x), net(x))
    net$train()
    set.seed(5); a <- net(x); set.seed(5); b <- rf_jit(net, dtype = "float64")(x)
    expect_jit_matches(b, a)
    y <- x[, 1, , , drop = FALSE] * 0.5
    expect_trains(net, x, y, loss = nnf_mse_loss, steps = 30, batch_size = 2, lr = 0.05)
  }
})

# ---- A VAE (the torch for R VAE posts: reparameterization with torch_randn_like) ------------

test_that("a VAE drawing its noise with torch_randn_like in forward matches eagerly and trains", {
  vae <- nn_module(
    "vae",
    initialize = function(d_in, d_latent) {
      self$encoder <- nn_sequential(nn_linear(d_in, 16), nn_relu())
      self$mu <- nn_linear(16, d_latent)
      self$logvar <- nn_linear(16, d_latent)
      self$decoder <- nn_sequential(nn_linear(d_latent, 16), nn_relu(), nn_linear(16, d_in))
    },
    reparameterize = function(mu, logvar) {
      std <- torch_exp(0.5 * logvar)
      eps <- torch_randn_like(std)
      eps$mul(std)$add_(mu)
    },
    forward = function(x) {
      h <- self$encoder(x)
      mu <- self$mu(h)
      logvar <- self$logvar(h)
      z <- self$reparameterize(mu, logvar)
      list(self$decoder(z), mu, logvar)
    }
  )
  set.seed(31)
  model <- vae(6, 2)
  x <- matrix(rnorm(64 * 6), 64)
  jm <- rf_jit(model, dtype = "float64")
  # The same draws from R's generator: the jitted model equals the eager one; new draws per call.
  set.seed(5); eager <- model(rf_tensor(x, dtype = "float64"))
  set.seed(5); jitted <- jm(x)
  expect_jit_matches(jitted, lapply(eager, as.array))
  set.seed(6); other <- jm(x)
  expect_gt(rel_err(other[[1]], jitted[[1]]), 1e-3)
  expect_lt(rel_err(other[[2]], jitted[[2]]), 1e-12) # the encoder draws nothing
  vae_loss <- function(out, target)
    nnf_mse_loss(out[[1]], target, reduction = "sum") -
      0.5 * torch_sum(1 + out[[3]] - out[[2]]$pow(2) - out[[3]]$exp())
  xt <- rf_tensor(x, dtype = "float64")
  set.seed(9); before <- as.numeric(vae_loss(model(xt), xt))
  set.seed(8)
  fit <- rf_fit(model, x, x, loss = vae_loss, steps = 60, batch_size = 32, lr = 0.005, progress = FALSE)
  expect_true(all(is.finite(fit$history)))
  set.seed(9); after <- as.numeric(vae_loss(model(xt), xt))
  expect_lt(after, 0.8 * before)
})
