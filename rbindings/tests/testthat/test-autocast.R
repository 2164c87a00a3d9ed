# Mixed precision (issue 17): with_autocast() / local_autocast() run float32 products in
# bfloat16 / float16 against a base-R reference of the same rounding; the region is part of the
# cache key; float64 and the other device type are left alone; rf_fit(precision = "bf16-mixed")
# trains as float32 does; bad settings are classed errors. On every device present (the GPU's
# part skips with the reason on a CPU machine).

devices <- function() c("cpu", if (as.vector(rf_default_device()) == "cuda") "cuda")
on_device <- function(dev) options(rfuse.device = if (dev == "cpu") "cpu" else NULL)

# Rounding to nearest even at `bits` significand bits (24: float32, 8: bfloat16, 11: float16).
round_bits <- function(v, bits) {
  e <- floor(log2(abs(v)))
  e[!is.finite(e)] <- 0
  s <- 2^(e - (bits - 1))
  s * round(v / s) # (R rounds halves to even; v / s is exact)
}
f32 <- function(v) round_bits(v, 24)

# tanh(x %*% w) with the product's inputs and result rounded as autocast rounds them.
low_reference <- function(x, w, bits) {
  p <- round_bits(round_bits(f32(x), bits) %*% round_bits(f32(w), bits), bits)
  tanh(p)
}

set.seed(17)
x <- matrix(rnorm(16 * 64), 16); w <- matrix(rnorm(64 * 8) / 8, 64)

for (dev in devices()) {
  test_that(paste("with_autocast runs products in bfloat16 and float16 on", dev), {
    old <- on_device(dev); on.exit(options(old))
    f <- rf_jit(function(x, w) tanh(x %*% w), dtype = "float32")
    exact <- f(x, w)
    for (low in c("bfloat16", "float16")) {
      bits <- if (low == "bfloat16") 8 else 11
      got <- with_autocast(f(x, w), device_type = dev, dtype = low)
      ref <- low_reference(x, w, bits)
      # Float32 sums may round the product to the neighbouring low-precision value: at most one
      # unit of its last place, rarely.
      err <- abs(got - ref)
      expect_true(all(err <= 2^-(bits - 1) * abs(atanh(pmin(abs(ref), 0.999999))) + 1e-5), info = low)
      expect_gt(mean(err <= 1e-5), 0.9, label = paste(low, "share equal to the reference"))
      expect_gt(max(abs(got - exact)), 2^-(bits + 4), label = paste(low, "differs from float32"))
    }
    # The same function outside the region is float32 again: a program of its own.
    expect_identical(f(x, w), exact)
    # Calls on tensors that the fast path repeats (a signature it has recorded) still see the
    # region, and a call inside it records nothing the fast path would repeat outside.
    xt <- rf_tensor(x, device = dev); wt <- rf_tensor(w, device = dev)
    for (k in 1:2) tensor_exact <- as.array(f(xt, wt))
    tensor_low <- as.array(with_autocast(f(xt, wt), device_type = dev, dtype = "bfloat16"))
    expect_gt(max(abs(tensor_low - tensor_exact)), 2^-12)
    expect_lt(max(abs(tensor_low - low_reference(x, w, 8))), 2^-7)
    for (k in 1:2) with_autocast(f(xt, wt), device_type = dev, dtype = "bfloat16")
    expect_identical(as.array(f(xt, wt)), tensor_exact)
  })

  test_that(paste("autocast regions nest, opt out, and end with their frame on", dev), {
    old <- on_device(dev); on.exit(options(old))
    f <- rf_jit(function(x, w) tanh(x %*% w), dtype = "float32")
    exact <- f(x, w)
    low <- with_autocast(f(x, w), device_type = dev, dtype = "bfloat16")
    other <- if (dev == "cpu") "cuda" else "cpu"
    expect_identical(with_autocast(f(x, w), device_type = other, dtype = "bfloat16"), exact)
    expect_identical(with_autocast(with_autocast(f(x, w), device_type = dev, enabled = FALSE),
                                   device_type = dev, dtype = "bfloat16"), exact)
    g <- function() {
      local_autocast(device_type = dev, dtype = torch_bfloat16())
      f(x, w)
    }
    expect_identical(g(), low)
    expect_identical(f(x, w), exact)
    ctx <- set_autocast(device_type = dev, dtype = "bfloat16")
    expect_identical(f(x, w), low)
    unset_autocast(ctx)
    expect_identical(f(x, w), exact)
    # Inside traced code, and float64 left exact.
    h <- rf_jit(function(x, w) tanh(with_autocast(x %*% w, device_type = dev, dtype = "bfloat16")), dtype = "float32")
    expect_identical(h(x, w), low)
    d <- rf_jit(function(x, w) tanh(x %*% w), dtype = "float64")
    expect_lt(rel_err(with_autocast(d(x, w), device_type = dev, dtype = "bfloat16"), tanh(x %*% w)), 1e-12)
  })

  test_that(paste("rf_fit with precision = 'bf16-mixed' trains as float32 does on", dev), {
    old <- on_device(dev); on.exit(options(old))
    set.seed(5)
    n <- 256
    xs <- matrix(rnorm(n * 8), n)
    ys <- ifelse(xs[, 1] + xs[, 2] * xs[, 3] > 0, 1, 2)
    fit <- function(precision) {
      torch_manual_seed(3)
      net <- nn_sequential(nn_linear(8, 32), nn_relu(), nn_linear(32, 2))
      h <- rf_fit(net, xs, ys, steps = 150, lr = 0.3, momentum = 0.9, batch_size = 64, progress = FALSE,
                  precision = precision, device = dev)
      list(history = h$history, accuracy = mean(max.col(as.array(net(xs))) == ys),
           weight = as.array(net$parameters[[1]]))
    }
    full <- fit("32")
    mixed <- fit("bf16-mixed")
    expect_lt(mean(tail(mixed$history, 10)), 0.5 * mixed$history[1])
    expect_gt(mixed$accuracy, full$accuracy - 0.05)
    expect_false(identical(mixed$weight, full$weight)) # the products really were bfloat16
    expect_lt(rel_err(mixed$weight, full$weight), 0.3) # (150 steps apart, not bit for bit)
  })

  test_that(paste("a bf16-mixed CNN reaches the float32 accuracy on", dev), {
    old <- on_device(dev); on.exit(options(old))
    set.seed(8)
    n <- 192
    img <- array(rnorm(n * 64, sd = 0.3), c(n, 1, 8, 8))
    cls <- sample(1:2, n, replace = TRUE)
    img[cls == 2, 1, 3:6, 3:6] <- img[cls == 2, 1, 3:6, 3:6] + 1 # class 2: a bright square
    fit <- function(precision) {
      torch_manual_seed(4)
      net <- nn_sequential(nn_conv2d(1, 4, 3), nn_relu(), nn_flatten(), nn_linear(4 * 6 * 6, 2))
      rf_fit(net, img, cls, steps = 60, lr = 0.1, batch_size = 64, progress = FALSE, precision = precision,
             device = dev)
      mean(max.col(as.array(net(img))) == cls)
    }
    full <- fit("32")
    mixed <- fit("bf16-mixed")
    expect_gt(full, 0.9)
    expect_gt(mixed, full - 0.05)
  })
}

for (dev in devices()) {
  test_that(paste("bfloat16 attention is one fused op, close to float32's, and trains as it does on", dev), {
    old <- on_device(dev); on.exit(options(old))
    torch_manual_seed(6)
    mha <- nn_multihead_attention(32, 2, batch_first = TRUE) # head dim 16
    f <- rf_jit(function(x) mha(x, x, x, need_weights = FALSE)[[1]], dtype = "float32")
    set.seed(6)
    x <- array(rnorm(3 * 70 * 32), c(3, 70, 32))
    exact <- f(x)
    low <- with_autocast(f(x), device_type = dev, dtype = "bfloat16")
    expect_lt(rel_err(low, exact), 3e-2)
    expect_gt(max(abs(low - exact)), 2^-12) # the products really were bfloat16
    fused <- with_autocast(rf_explain(f, x), device_type = dev, dtype = "bfloat16")$fused
    expect_match(fused, "rfuse.attention ", fixed = TRUE)
    expect_false(grepl("rfuse.attention ", rf_explain(f, x)$fused, fixed = TRUE)) # float32: op by op
    # torch's default need_weights = TRUE: the probabilities are read, so it stays op by op, and
    # agrees with the fused output.
    g <- rf_jit(function(x) mha(x, x, x), dtype = "float32")
    both <- with_autocast(g(x), device_type = dev, dtype = "bfloat16")
    expect_false(grepl("rfuse.attention ", with_autocast(rf_explain(g, x), device_type = dev, dtype = "bfloat16")$fused,
                       fixed = TRUE))
    expect_lt(rel_err(both[[1]], low), 3e-2)
    # fuse_attention = FALSE: op by op, the same values.
    old_fuse <- rf_options(fuse_attention = FALSE)
    h <- rf_jit(function(x) mha(x, x, x, need_weights = FALSE)[[1]], dtype = "float32")
    expect_false(grepl("rfuse.attention ", with_autocast(rf_explain(h, x), device_type = dev, dtype = "bfloat16")$fused,
                       fixed = TRUE))
    expect_lt(rel_err(with_autocast(h(x), device_type = dev, dtype = "bfloat16"), low), 3e-2)
    rf_options(old_fuse)
    # Training through the fused op's gradient: a bf16-mixed encoder layer fits as the float32 one.
    y <- array(rnorm(3 * 70 * 32), c(3, 70, 32))
    fit <- function(precision) {
      torch_manual_seed(7)
      layer <- nn_transformer_encoder_layer(32, 2, 64, dropout = 0, batch_first = TRUE, norm_first = TRUE)
      h <- rf_fit(layer, x, y, loss = nnf_mse_loss, steps = 40, batch_size = 3, optimizer = "adamw", lr = 3e-3,
                  progress = FALSE, precision = precision, device = dev)$history
      list(history = h, weight = as.array(layer$self_attn$in_proj_weight))
    }
    full <- fit("32")
    mixed <- fit("bf16-mixed")
    expect_lt(tail(mixed$history, 1), 0.8 * mixed$history[1])
    expect_lt(abs(tail(mixed$history, 1) - tail(full$history, 1)), 0.05 * full$history[1])
    expect_lt(rel_err(mixed$weight, full$weight), 0.1)
  })

  test_that(paste("masked bfloat16 attention (causal, key padding, float masks) is one fused op, as masked on", dev), {
    old <- on_device(dev); on.exit(options(old))
    torch_manual_seed(8)
    mha <- nn_multihead_attention(32, 2, batch_first = TRUE)
    L <- 70
    causal <- upper.tri(matrix(0, L, L)) # TRUE: masked (torch's bool attn_mask)
    float_causal <- ifelse(causal, -Inf, 0) # nn_transformer's square subsequent mask
    padding <- matrix(FALSE, 3, L); padding[2, 61:70] <- TRUE; padding[3, 2:5] <- TRUE
    set.seed(8)
    x <- array(rnorm(3 * L * 32), c(3, L, 32))
    run <- function(...) {
      args <- list(...)
      f <- rf_jit(function(x) do.call(mha, c(list(x, x, x, need_weights = FALSE), args))[[1]], dtype = "float32")
      list(exact = f(x), low = with_autocast(f(x), device_type = dev, dtype = "bfloat16"),
           fused = with_autocast(rf_explain(f, x), device_type = dev, dtype = "bfloat16")$fused)
    }
    both <- run(attn_mask = causal, key_padding_mask = padding)
    expect_match(both$fused, "rfuse.attention [^\n]* mask %[^\n]* causal", perl = TRUE) # padding: a [B, 1, S] mask
    expect_match(both$fused, "tensor<6x1x70xi1>", fixed = TRUE)
    expect_lt(rel_err(both$low, both$exact), 3e-2)
    unmasked <- run()$exact
    expect_gt(max(abs(both$exact - unmasked)), 0.05) # the masks change the result
    # A key padding mask given at each call (an input of the program): one fused op that reads it.
    g <- rf_jit(function(x, kpm) mha(x, x, x, need_weights = FALSE, key_padding_mask = kpm)[[1]], dtype = "float32")
    expect_match(with_autocast(rf_explain(g, x, padding), device_type = dev, dtype = "bfloat16")$fused,
                 "rfuse.attention [^\n]* mask %", perl = TRUE)
    other <- padding; other[1, 40:70] <- TRUE
    for (m in list(padding, other))
      expect_lt(rel_err(with_autocast(g(x, m), device_type = dev, dtype = "bfloat16"), g(x, m)), 3e-2)
    # The float mask (0 and -Inf added) is the same mask: causal alone.
    fl <- run(attn_mask = float_causal)
    expect_match(fl$fused, "rfuse.attention [^\n]* causal :", perl = TRUE)
    expect_lt(rel_err(fl$low, run(attn_mask = causal)$exact), 3e-2)
    # fuse_attention = FALSE: the masked program op by op, the same values.
    old_fuse <- rf_options(fuse_attention = FALSE)
    off <- run(attn_mask = causal, key_padding_mask = padding)
    rf_options(old_fuse)
    expect_false(grepl("rfuse.attention ", off$fused, fixed = TRUE))
    expect_lt(rel_err(off$low, both$low), 3e-2)
    # Training through the masked gradient: a causal bf16-mixed encoder layer fits as the f32 one.
    y <- array(rnorm(3 * L * 32), c(3, L, 32))
    causal_layer <- nn_module("causal_layer",
      initialize = function() self$layer <- nn_transformer_encoder_layer(32, 2, 64, dropout = 0, batch_first = TRUE,
                                                                        norm_first = TRUE),
      forward = function(x) self$layer(x, src_mask = causal))
    fit <- function(precision) {
      torch_manual_seed(9)
      m <- causal_layer()
      rf_fit(m, x, y, loss = nnf_mse_loss, steps = 30, batch_size = 3, optimizer = "adamw", lr = 3e-3,
             progress = FALSE, precision = precision, device = dev)$history
    }
    full <- fit("32")
    mixed <- fit("bf16-mixed")
    expect_lt(tail(mixed, 1), 0.8 * mixed[1])
    expect_lt(abs(tail(mixed, 1) - tail(full, 1)), 0.05 * full[1])
  })

  test_that(paste("bfloat16 attention with dropout is one fused op drawing what the op-by-op program draws on", dev), {
    old <- on_device(dev); on.exit(options(old))
    torch_manual_seed(10)
    mha <- nn_multihead_attention(32, 2, dropout = 0.2, batch_first = TRUE) # training mode: dropout on
    set.seed(10)
    x <- array(rnorm(3 * 70 * 32), c(3, 70, 32))
    run <- function(seed) {
      f <- rf_jit(function(x) mha(x, x, x, need_weights = FALSE)[[1]], dtype = "float32")
      set.seed(seed)
      list(low = with_autocast(f(x), device_type = dev, dtype = "bfloat16"),
           fused = with_autocast(rf_explain(f, x), device_type = dev, dtype = "bfloat16")$fused)
    }
    fused <- run(1)
    # one op: its dropout keyed by the traced seed, the draws in R's layout [S, L, B] as strides
    expect_match(fused$fused, "rfuse.attention [^\n]* dropout %[^\n]*dropout_strides = array<i64: 1, 6, 420>", perl = TRUE)
    expect_false(grepl("rfuse.random_uniform", fused$fused, fixed = TRUE))
    old_fuse <- rf_options(fuse_attention = FALSE)
    off <- run(1)
    rf_options(old_fuse)
    expect_false(grepl("rfuse.attention ", off$fused, fixed = TRUE))
    expect_lt(rel_err(fused$low, off$low), 3e-2) # the same draws: the same kept probabilities
    expect_gt(max(abs(run(2)$low - fused$low)), 0.05) # another seed, other draws
    mha$eval()
    plain <- run(1)$low
    expect_gt(max(abs(plain - fused$low)), 0.05) # dropout really dropped
    mha$train()
    # Training through the fused gradient with dropout: the same history as op by op.
    y <- array(rnorm(3 * 70 * 32), c(3, 70, 32))
    fit <- function(fuse) {
      old_fuse <- rf_options(fuse_attention = fuse); on.exit(rf_options(old_fuse))
      torch_manual_seed(11)
      set.seed(11)
      layer <- nn_transformer_encoder_layer(32, 2, 64, dropout = 0.1, batch_first = TRUE, norm_first = TRUE)
      rf_fit(layer, x, y, loss = nnf_mse_loss, steps = 30, batch_size = 3, optimizer = "adamw", lr = 3e-3,
             progress = FALSE, precision = "bf16-mixed", device = dev)$history
    }
    fused_history <- fit(TRUE)
    off_history <- fit(FALSE)
    expect_lt(tail(fused_history, 1), 0.8 * fused_history[1])
    expect_lt(max(abs(fused_history - off_history)), 0.05 * fused_history[1])
  })

  test_that(paste("precision = '16-mixed' skips overflowing steps, recovers, and never writes NaN weights on", dev), {
    old <- on_device(dev); on.exit(options(old))
    set.seed(9)
    x <- matrix(rnorm(64 * 8), 64)
    y <- x %*% matrix(rnorm(16) * 30, 8) # large targets: gradients scaled by 2^16 overflow float16
    loss <- function(w, x, y) nnf_mse_loss(x %*% w, y)
    p <- list(w = matrix(0, 8, 2))
    fit <- rf_train(loss, p, list(x = x, y = y), steps = 80, lr = 0.05, precision = "16-mixed", progress = FALSE,
                    device = dev)
    h <- fit$history
    expect_identical(h[2], h[1]) # step 1 was skipped: step 2 saw the same weights
    expect_lt(fit$loss_scale, 65536)
    expect_gt(fit$loss_scale, 0)
    expect_true(all(is.finite(fit$params$w)))
    expect_lt(tail(h, 1), 0.2 * h[1])
    ref <- rf_train(loss, p, list(x = x, y = y), steps = 80, lr = 0.05, progress = FALSE, device = dev)
    expect_lt(rel_err(fit$params$w, ref$params$w), 0.2) # fewer steps taken, the same direction
    # Data that are never finite: every step skipped, the scale halves to 0 (a warning), and the
    # weights stay the initial ones.
    xbad <- x; xbad[1, 1] <- Inf
    expect_warning(bad <- rf_train(loss, p, list(x = xbad, y = y), steps = 170, lr = 0.05, precision = "16-mixed",
                                   progress = FALSE, device = dev), class = "rfuse_loss_scale_warning")
    expect_identical(bad$loss_scale, 0)
    expect_identical(bad$params$w, p$w)
    # AdamW too: skipped steps leave the weights (and the step count) as they were.
    aw <- rf_train(loss, p, list(x = x, y = y), steps = 80, lr = 0.5, optimizer = "adamw", weight_decay = 0.01,
                   precision = "16-mixed", progress = FALSE, device = dev)
    expect_identical(aw$history[2], aw$history[1])
    expect_true(all(is.finite(aw$params$w)))
    expect_lt(tail(aw$history, 1), 0.2 * aw$history[1])
  })
}

test_that("bad autocast settings are classed errors naming what is wrong", {
  expect_error(with_autocast(1, device_type = "tpu"), class = "rfuse_type_error", regexp = "device_type")
  expect_error(with_autocast(1, device_type = "cpu", dtype = "float64"), class = "rfuse_type_error",
               regexp = "bfloat16 or float16")
  expect_error(with_autocast(1, device_type = "cpu", fast = TRUE), class = "rfuse_type_error", regexp = "fast")
  expect_error(with_autocast(1, device_type = "cpu", enabled = NA), class = "rfuse_type_error", regexp = "enabled")
  expect_error(unset_autocast(list()), class = "rfuse_type_error")
  x <- matrix(rnorm(20), 10); y <- rnorm(10)
  loss <- function(w, x, y) nnf_mse_loss(x %*% w, y)
  p <- list(w = matrix(0, 2, 1))
  expect_error(rf_train(loss, p, list(x = x, y = y), steps = 2, precision = "bf16-mixed", dtype = "float64",
                        progress = FALSE), class = "rfuse_type_error", regexp = "float32")
  expect_error(rf_train(loss, p, list(x = x, y = y), steps = 2, precision = "fp8", progress = FALSE),
               class = "rfuse_type_error", regexp = "precision")
  # A failed region leaves autocast off.
  old <- options(rfuse.device = "cpu"); on.exit(options(old))
  f <- rf_jit(function(x, w) x %*% w, dtype = "float32")
  before <- f(x, p$w + 1)
  try(with_autocast(stop("inside"), device_type = "cpu"), silent = TRUE)
  expect_identical(f(x, p$w + 1), before)
  expect_identical(rfuse:::autocast_for("cpu"), "")
})
