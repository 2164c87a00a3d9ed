# New layers against base-R implementations written from torch's definitions (float64, 1e-12),
# jitted against eager, and gradients against central differences.

test_that("activations match their definitions", {
  set.seed(1)
  x <- rnd(4, 5) * 3
  defs <- list(
    list(nn_leaky_relu(0.2), ifelse(x > 0, x, 0.2 * x)),
    list(nn_elu(alpha = 1.5), ifelse(x > 0, x, 1.5 * (exp(x) - 1))),
    list(nn_selu(), 1.0507009873554804934 * ifelse(x > 0, x, 1.6732632423543772848 * (exp(x) - 1))),
    list(nn_silu(), x / (1 + exp(-x))),
    list(nn_softplus(beta = 2), log(1 + exp(2 * x)) / 2),
    list(nn_hardtanh(-0.5, 0.5), pmin(pmax(x, -0.5), 0.5)),
    list(nn_softmax(2), exp(x) / rowSums(exp(x))),
    list(nn_log_softmax(dim = 1), log(sweep(exp(x), 2, colSums(exp(x)), "/"))),
    list(nn_gelu(approximate = "tanh"), 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))),
    list(nn_gelu(), x * pnorm(x)))
  for (d in defs) {
    m <- d[[1]]
    expect_lt(rel_err(m(x), d[[2]]), 1e-12)
    expect_lt(rel_err(rf_jit(m, dtype = "float64")(x), d[[2]]), 1e-12)
  }
  expect_equal(rf_jit(nn_softplus(), dtype = "float64")(c(100, -100)), c(100, log1p(exp(-100))))
})

test_that("flatten's start_dim and end_dim, conv2d's padding = 'same' and conv1d", {
  set.seed(2)
  x <- rnd(2, 3, 4, 5)
  expect_identical(dim(nn_flatten(start_dim = 3)(x)), c(2L, 3L, 20L))
  expect_lt(rel_err(rf_jit(nn_flatten(start_dim = 3), dtype = "float64")(x), nn_flatten(start_dim = 3)(x)), 1e-12)
  expect_identical(dim(nn_flatten(1, 2)(x)), c(6L, 4L, 5L))
  conv <- nn_conv2d(3, 2, c(3, 2), padding = "same")
  y <- conv(x)
  expect_identical(dim(y), c(2L, 2L, 4L, 5L))
  # Reference: zero padding by torch's rule (top/left = total %/% 2), then a valid convolution.
  xp <- array(0, c(2, 3, 6, 6)); xp[, , 2:5, 1:5] <- x
  ref <- array(0, c(2, 2, 4, 5))
  for (n in 1:2) for (o in 1:2) for (i in 1:4) for (j in 1:5)
    ref[n, o, i, j] <- sum(xp[n, , i:(i + 2), j:(j + 1)] * conv$weight[o, , , ]) + conv$bias[o]
  expect_lt(rel_err(y, ref), 1e-12)
  expect_lt(rel_err(rf_jit(conv, dtype = "float64")(x), ref), 1e-12)
  expect_error(nn_conv2d(3, 2, 3, stride = 2, padding = "same")(x), "strided", class = "rfuse_type_error")
  c1 <- nn_conv1d(3, 4, 3, padding = 1)
  s <- rnd(2, 3, 7)
  sp <- array(0, c(2, 3, 9)); sp[, , 2:8] <- s
  ref1 <- array(0, c(2, 4, 7))
  for (n in 1:2) for (o in 1:4) for (l in 1:7) ref1[n, o, l] <- sum(sp[n, , l:(l + 2)] * c1$weight[o, , ]) + c1$bias[o]
  expect_lt(rel_err(c1(s), ref1), 1e-12)
  expect_lt(rel_err(rf_jit(c1, dtype = "float64")(s), ref1), 1e-12)
})

test_that("linear and layer norm on inputs of any rank", {
  set.seed(3)
  x <- rnd(2, 5, 4)
  lin <- nn_linear(4, 3)
  ref <- array(0, c(2, 5, 3))
  for (i in 1:2) for (j in 1:5) ref[i, j, ] <- lin$weight %*% x[i, j, ] + lin$bias
  expect_lt(rel_err(lin(x), ref), 1e-12)
  expect_lt(rel_err(rf_jit(lin, dtype = "float64")(x), ref), 1e-12)
  ln <- nn_layer_norm(c(5, 4))
  ln$weight <- nn_parameter(array(rnd(20), c(5, 4)))
  refn <- x
  for (i in 1:2) { v <- x[i, , ]; refn[i, , ] <- (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1e-5) * ln$weight }
  expect_lt(rel_err(ln(x), refn), 1e-12)
  expect_lt(rel_err(rf_jit(ln, dtype = "float64")(x), refn), 1e-12)
  expect_error(nn_layer_norm(3)(x), "trailing dims", class = "rfuse_shape_error")
})

test_that("embedding looks up 1-based rows, zeroes padding_idx, and trains its weight", {
  set.seed(4)
  e <- nn_embedding(6, 3, padding_idx = 2)
  idx <- matrix(c(1L, 2L, 6L, 3L, 2L, 5L), 2)
  ref <- array(0, c(2, 3, 3))
  for (i in 1:2) for (j in 1:3) ref[i, j, ] <- e$weight[idx[i, j], ]
  expect_equal(e$weight[2, ], c(0, 0, 0))
  expect_lt(rel_err(e(idx), ref), 1e-12)
  expect_lt(rel_err(rf_jit(e, dtype = "float64")(idx), ref), 1e-12)
  expect_error(e(matrix(7L, 1, 1)), "1..6", class = "rfuse_shape_error")
  # Gradient reaches the looked-up rows only.
  f <- function(w, i) sum(nnf_embedding(i, w)^2)
  g <- rf_grad(f, wrt = "w", dtype = "float64")(e$weight + 0, c(1L, 1L, 4L))
  expect_equal(g, rbind(4 * e$weight[1, ], 0, 0, 2 * e$weight[4, ], 0, 0), ignore_attr = TRUE)
})

test_that("batch norm 1d normalizes (N, C) and (N, C, L) per channel and tracks running stats", {
  set.seed(5)
  bn <- nn_batch_norm1d(3)
  x <- rnd(6, 3)
  ref <- sweep(sweep(x, 2, colMeans(x)), 2, sqrt(colMeans(sweep(x, 2, colMeans(x))^2) + 1e-5), "/")
  expect_lt(rel_err(bn(x), ref), 1e-12)
  expect_equal(bn$running_mean, 0.1 * colMeans(x))
  x3 <- rnd(4, 3, 5)
  m <- apply(x3, 2, mean); v <- apply(sweep(x3, 2, m)^2, 2, mean)
  expect_lt(rel_err(nn_batch_norm1d(3)(x3), sweep(sweep(x3, 2, m), 2, sqrt(v + 1e-5), "/")), 1e-12)
  bn$eval()
  expect_lt(rel_err(rf_jit(bn, dtype = "float64")(x), bn(x)), 1e-12)
  expect_error(nn_batch_norm1d(3)(rnd(2, 3, 4, 5)), "2 or 3-d", class = "rfuse_shape_error")
})

# A base-R LSTM / GRU step by torch's equations (gates i, f, g, o and r, z, n).
ref_rnn <- function(mode, x, p, H, reverse = FALSE) {
  N <- dim(x)[1]; Tn <- dim(x)[2]
  h <- matrix(0, N, H); cst <- matrix(0, N, H)
  out <- array(0, c(N, Tn, H))
  sig <- function(v) 1 / (1 + exp(-v))
  for (t in if (reverse) Tn:1 else 1:Tn) {
    gi <- sweep(x[, t, ] %*% t(p$w_ih), 2, p$b_ih, "+"); gh <- sweep(h %*% t(p$w_hh), 2, p$b_hh, "+")
    part <- function(a, k) a[, (k - 1) * H + 1:H, drop = FALSE]
    if (mode == "lstm") {
      g <- gi + gh
      cst <- sig(part(g, 2)) * cst + sig(part(g, 1)) * tanh(part(g, 3))
      h <- sig(part(g, 4)) * tanh(cst)
    } else {
      r <- sig(part(gi, 1) + part(gh, 1)); z <- sig(part(gi, 2) + part(gh, 2))
      n <- tanh(part(gi, 3) + r * part(gh, 3))
      h <- (1 - z) * n + z * h
    }
    out[, t, ] <- h
  }
  list(out = out, h = h, c = cst)
}

test_that("LSTM and GRU follow torch's equations, batch_first or not, bidirectional, and train", {
  set.seed(6)
  x <- rnd(2, 5, 3)
  for (mode in c("lstm", "gru")) {
    m <- if (mode == "lstm") nn_lstm(3, 4, batch_first = TRUE, bidirectional = TRUE) else nn_gru(3, 4, batch_first = TRUE, bidirectional = TRUE)
    par <- function(sfx) list(w_ih = m[[paste0("weight_ih_l0", sfx)]], w_hh = m[[paste0("weight_hh_l0", sfx)]],
                              b_ih = m[[paste0("bias_ih_l0", sfx)]], b_hh = m[[paste0("bias_hh_l0", sfx)]])
    fw <- ref_rnn(mode, x, par(""), 4); bw <- ref_rnn(mode, x, par("_reverse"), 4, reverse = TRUE)
    got <- m(x)
    expect_lt(rel_err(got[[1]], array(c(fw$out, bw$out), c(2, 5, 8))[, , c(1:4, 5:8)]), 1e-12)
    hn <- if (mode == "lstm") got[[2]][[1]] else got[[2]]
    expect_identical(dim(hn), c(2L, 2L, 4L))
    expect_lt(rel_err(hn[2, , ], bw$h), 1e-12)
    jit <- rf_jit(m, dtype = "float64")(x)
    expect_lt(rel_err(jit[[1]], got[[1]]), 1e-12)
    # time-first layout gives the same numbers, transposed
    m2 <- if (mode == "lstm") nn_lstm(3, 4) else nn_gru(3, 4)
    m2$load_state_dict(lapply(m$state_dict()[grep("_reverse", names(m$state_dict()), invert = TRUE)], identity))
    expect_lt(rel_err(m2(aperm(x, c(2, 1, 3)))[[1]], aperm(fw$out, c(2, 1, 3))), 1e-12)
  }
  # Gradients through the unrolled recurrence against central differences.
  lstm <- nn_lstm(3, 2, batch_first = TRUE)
  w <- lstm$weight_hh_l0 + 0
  f <- function(w) {
    lstm$weight_hh_l0 <- nn_parameter(w)
    sum(lstm(x)[[1]]^2)
  }
  g <- rf_grad(function(w, x) { lstm$weight_hh_l0 <- w; sum(lstm(x)[[1]]^2) }, wrt = "w", dtype = "float64")(w, x)
  num <- w * 0
  for (k in seq_along(w)) { e <- w * 0; e[k] <- 1e-6; num[k] <- (f(w + e) - f(w - e)) / 2e-6 }
  expect_lt(rel_err(g, num), 1e-6)
})

# torch's multi-head attention, one batch element and head at a time.
ref_mha <- function(m, q, k, v, attn_mask = NULL, key_padding_mask = NULL) {
  E <- m$embed_dim; H <- m$num_heads; hd <- E / H
  W <- m$in_proj_weight; b <- m$in_proj_bias
  N <- dim(q)[1]; L <- dim(q)[2]; S <- dim(k)[2]
  out <- array(0, c(N, L, E)); avg <- array(0, c(N, L, S))
  for (n in 1:N) {
    Q <- sweep(q[n, , ] %*% t(W[1:E, ]), 2, b[1:E], "+")
    K <- sweep(k[n, , ] %*% t(W[E + 1:E, ]), 2, b[E + 1:E], "+")
    V <- sweep(v[n, , ] %*% t(W[2 * E + 1:E, ]), 2, b[2 * E + 1:E], "+")
    heads <- matrix(0, L, E)
    for (h in 1:H) {
      cols <- (h - 1) * hd + 1:hd
      s <- Q[, cols] %*% t(K[, cols]) / sqrt(hd)
      if (!is.null(attn_mask)) s[attn_mask] <- -Inf
      if (!is.null(key_padding_mask)) s[, key_padding_mask[n, ]] <- -Inf
      a <- exp(s - apply(s, 1, max)); a <- a / rowSums(a)
      heads[, cols] <- a %*% V[, cols]
      avg[n, , ] <- avg[n, , ] + a / H
    }
    out[n, , ] <- sweep(heads %*% t(m$out_proj$weight), 2, m$out_proj$bias, "+")
  }
  list(out, avg)
}

test_that("multi-head attention follows torch's, with causal and key-padding masks, and trains", {
  set.seed(7)
  m <- nn_multihead_attention(4, 2, batch_first = TRUE)
  m$in_proj_bias <- nn_parameter(rnd(12))
  q <- rnd(2, 3, 4); kv <- rnd(2, 5, 4)
  causal <- upper.tri(matrix(0, 3, 5))
  pad <- matrix(FALSE, 2, 5); pad[2, 5] <- TRUE
  ref <- ref_mha(m, q, kv, kv, causal, pad)
  got <- m(q, kv, kv, key_padding_mask = pad, attn_mask = causal)
  expect_lt(rel_err(got[[1]], ref[[1]]), 1e-12)
  expect_lt(rel_err(got[[2]], ref[[2]]), 1e-12)
  f <- function(q, kv, causal, pad) m(q, kv, kv, key_padding_mask = pad, attn_mask = causal)
  jit <- rf_jit(f, dtype = "float64")(q, kv, causal, pad)
  expect_lt(rel_err(jit[[1]], ref[[1]]), 1e-12)
  # time-first layout
  tf <- nn_multihead_attention(4, 2)
  tf$load_state_dict(m$state_dict())
  expect_lt(rel_err(tf(aperm(q, c(2, 1, 3)), aperm(kv, c(2, 1, 3)), aperm(kv, c(2, 1, 3)), attn_mask = causal,
                       key_padding_mask = pad)[[1]], aperm(ref[[1]], c(2, 1, 3))), 1e-12)
  expect_setequal(names(m$state_dict()), c("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"))
  # A gradient through the attention against central differences.
  w <- m$in_proj_weight + 0
  loss <- function(w, q, kv) { m$in_proj_weight <- w; sum(m(q, kv, kv, need_weights = FALSE)[[1]]^2) }
  g <- rf_grad(loss, wrt = "w", dtype = "float64")(w, q, kv)
  num <- w * 0
  for (i in seq_along(w)) { e <- w * 0; e[i] <- 1e-6; num[i] <- (loss(w + e, q, kv) - loss(w - e, q, kv)) / 2e-6 }
  m$in_proj_weight <- nn_parameter(w)
  expect_lt(rel_err(g, num), 1e-6)
  expect_error(m(rnd(2, 3, 5), kv, kv), "3-d query", class = "rfuse_shape_error")
  expect_error(nn_multihead_attention(4, 3), "divisible", class = "rfuse_type_error")
})

test_that("a transformer encoder layer is torch's composition, post-norm and pre-norm", {
  set.seed(8)
  for (nf in c(FALSE, TRUE)) {
    enc <- nn_transformer_encoder_layer(4, 2, dim_feedforward = 6, dropout = 0, batch_first = TRUE, norm_first = nf)
    x <- rnd(2, 3, 4)
    ln <- function(mod, v) { r <- v; for (i in 1:2) for (j in 1:3) { z <- v[i, j, ]; r[i, j, ] <- (z - mean(z)) / sqrt(mean((z - mean(z))^2) + 1e-5) * mod$weight + mod$bias }; r }
    lin <- function(mod, v) { d <- dim(v); r <- matrix(v, d[1] * d[2]) %*% t(mod$weight); array(sweep(r, 2, mod$bias, "+"), c(d[1:2], nrow(mod$weight))) }
    sa <- function(v) ref_mha(enc$self_attn, v, v, v)[[1]]
    ff <- function(v) lin(enc$linear2, pmax(lin(enc$linear1, v), 0))
    ref <- if (nf) { h <- x + sa(ln(enc$norm1, x)); h + ff(ln(enc$norm2, h)) } else { h <- ln(enc$norm1, x + sa(x)); ln(enc$norm2, h + ff(h)) }
    expect_lt(rel_err(enc(x), ref), 1e-12)
    expect_lt(rel_err(rf_jit(enc, dtype = "float64")(x), ref), 1e-12)
  }
  expect_true("self_attn.out_proj.weight" %in% names(enc$state_dict()))
})

test_that("loss modules and reductions are torch's", {
  set.seed(9)
  p <- matrix(runif(6, 0.05, 0.95), 3); t01 <- matrix(c(1, 0, 1, 1, 0, 0), 3)
  bce <- -(t01 * log(p) + (1 - t01) * log(1 - p))
  expect_equal(nn_bce_loss()(p, t01), mean(bce))
  expect_equal(nnf_binary_cross_entropy(p, t01, reduction = "none"), bce)
  expect_equal(nnf_binary_cross_entropy(matrix(c(0, 1)), matrix(c(1, 0))), 100) # torch clamps log at -100
  expect_equal(nn_l1_loss(reduction = "sum")(p, t01), sum(abs(p - t01)))
  logits <- rnd(4, 3); y <- c(1, 3, 2, 3)
  ce <- log(rowSums(exp(logits))) - logits[cbind(1:4, y)]
  expect_equal(nn_cross_entropy_loss(reduction = "none")(logits, y), ce)
  expect_equal(nn_nll_loss()(logits, y), mean(-logits[cbind(1:4, y)]))
  expect_equal(rf_jit(function(a, b) nn_mse_loss()(a, b), dtype = "float64")(p, t01), mean((p - t01)^2))
  expect_error(nn_mse_loss(reduction = "avg"), "reduction", class = "rfuse_type_error")
  # rf_fit with a loss module taking labels
  x <- matrix(rnorm(40), 20); yy <- ifelse(x[, 1] > 0, 1, 2)
  fit <- rf_fit(nn_linear(2, 2), x, yy, loss = nn_cross_entropy_loss(), steps = 20, lr = 0.5, progress = FALSE)
  expect_lt(tail(fit$history, 1), fit$history[1])
})

test_that("layers run on rf_tensors as on R arrays (as their compiled program, in the tensors' dtype)", {
  set.seed(10)
  x <- rnd(3, 4, 5)
  cases <- list(nn_lstm(5, 3, batch_first = TRUE), nn_conv1d(4, 2, 3), nn_layer_norm(5), nn_linear(5, 2),
                nn_elu(), nn_leaky_relu(), nn_batch_norm1d(4))
  for (m in cases) {
    ref <- m(x)
    got <- m(rf_tensor(x, dtype = "float64", device = "cpu"))
    if (is.list(ref)) { ref <- ref[[1]]; got <- got[[1]] }
    expect_s4_class(got, "rf_tensor")
    expect_lt(rel_err(as.array(got), ref), 1e-12)
  }
  e <- nn_embedding(6, 2)
  idx <- matrix(c(1L, 4L, 6L, 2L), 2)
  expect_lt(rel_err(as.array(e(rf_tensor(idx, dtype = "float64", device = "cpu"))), e(idx)), 1e-12)
})

test_that("transposed convolution is the scatter torch defines", {
  set.seed(11)
  x <- rnd(2, 3, 4, 5)
  for (cfg in list(list(k = 4, s = 2, p = 1, op = 0), list(k = 3, s = 1, p = 0, op = 0), list(k = 3, s = 2, p = 1, op = 1))) {
    m <- nn_conv_transpose2d(3, 2, cfg$k, stride = cfg$s, padding = cfg$p, output_padding = cfg$op)
    Ho <- (4 - 1) * cfg$s - 2 * cfg$p + cfg$k + cfg$op; Wo <- (5 - 1) * cfg$s - 2 * cfg$p + cfg$k + cfg$op
    full <- array(0, c(2, 2, (4 - 1) * cfg$s + cfg$k + cfg$op, (5 - 1) * cfg$s + cfg$k + cfg$op))
    for (n in 1:2) for (ci in 1:3) for (i in 1:4) for (j in 1:5) for (a in 1:cfg$k) for (b in 1:cfg$k) {
      r <- (i - 1) * cfg$s + a; c <- (j - 1) * cfg$s + b
      full[n, , r, c] <- full[n, , r, c] + x[n, ci, i, j] * m$weight[ci, , a, b]
    }
    ref <- full[, , cfg$p + 1:Ho, cfg$p + 1:Wo, drop = FALSE]
    for (o in 1:2) ref[, o, , ] <- ref[, o, , ] + m$bias[o]
    expect_identical(dim(m(x)), dim(ref))
    expect_lt(rel_err(m(x), ref), 1e-12)
    expect_lt(rel_err(rf_jit(m, dtype = "float64")(x), ref), 1e-12)
  }
  expect_error(nn_conv_transpose2d(3, 2, 3, groups = 3)(x), class = "rfuse_unsupported")
})

test_that("group norm, dropout2d, nearest upsampling and adaptive max pooling", {
  set.seed(12)
  x <- rnd(2, 4, 3, 3)
  gn <- nn_group_norm(2, 4)
  gn$weight <- nn_parameter(rnd(4)); gn$bias <- nn_parameter(rnd(4))
  ref <- x
  for (n in 1:2) for (g in 1:2) {
    v <- x[n, (g - 1) * 2 + 1:2, , ]
    z <- (v - mean(v)) / sqrt(mean((v - mean(v))^2) + 1e-5)
    for (k in 1:2) ref[n, (g - 1) * 2 + k, , ] <- z[k, , ] * gn$weight[(g - 1) * 2 + k] + gn$bias[(g - 1) * 2 + k]
  }
  expect_lt(rel_err(gn(x), ref), 1e-12)
  expect_lt(rel_err(rf_jit(gn, dtype = "float64")(x), ref), 1e-12)
  dr <- nn_dropout2d(0.5)
  set.seed(3); e <- dr(x)
  kept <- apply(e != 0, c(1, 2), all); dropped <- apply(e == 0, c(1, 2), all)
  expect_true(all(kept | dropped)) # whole channels
  expect_true(any(dropped) && any(kept))
  expect_equal(e[kept[, 1], 1, , ], 2 * x[kept[, 1], 1, , ])
  set.seed(3); j <- rf_jit(dr, dtype = "float64")(x)
  expect_lt(rel_err(j, e), 1e-12)
  dr$eval(); expect_identical(dr(x), x)
  up <- nn_upsample(scale_factor = 2)
  refu <- x[, , rep(1:3, each = 2), rep(1:3, each = 2)]
  expect_equal(up(x), refu)
  expect_lt(rel_err(rf_jit(up, dtype = "float64")(x), refu), 1e-12)
  expect_error(nn_upsample(scale_factor = 2, mode = "bicubic")(x), class = "rfuse_unsupported")
  y <- rnd(2, 3, 4, 6)
  mp <- nn_adaptive_max_pool2d(c(2, 3))
  refm <- array(0, c(2, 3, 2, 3))
  for (i in 1:2) for (j in 1:3) refm[, , i, j] <- apply(y[, , (i - 1) * 2 + 1:2, (j - 1) * 2 + 1:2], c(1, 2), max)
  expect_lt(rel_err(mp(y), refm), 1e-12)
  expect_lt(rel_err(rf_jit(mp, dtype = "float64")(y), refm), 1e-12)
})

test_that("adaptive average pooling to any size uses torch's windows", {
  # torch: window i of n inputs for `out` outputs spans floor(i n / out) .. ceiling((i + 1) n / out) - 1.
  ref <- function(x, oh, ow) {
    d <- dim(x); out <- array(0, c(d[1:2], oh, ow))
    for (i in 0:(oh - 1)) for (j in 0:(ow - 1)) {
      rows <- (floor(i * d[3] / oh) + 1):ceiling((i + 1) * d[3] / oh)
      cols <- (floor(j * d[4] / ow) + 1):ceiling((j + 1) * d[4] / ow)
      out[, , i + 1, j + 1] <- apply(x[, , rows, cols, drop = FALSE], c(1, 2), mean)
    }
    out
  }
  set.seed(51)
  for (case in list(list(c(2, 3, 5, 7), c(3, 4)), list(c(1, 2, 1, 1), c(6, 6)), list(c(2, 1, 7, 7), c(6, 6)))) {
    x <- array(rnorm(prod(case[[1]])), case[[1]])
    r <- ref(x, case[[2]][1], case[[2]][2])
    expect_equal(nnf_adaptive_avg_pool2d(x, case[[2]]), r, tolerance = 1e-12)
    expect_equal(rf_jit(function(x) nnf_adaptive_avg_pool2d(x, case[[2]]), dtype = "float64")(x), r, tolerance = 1e-12)
    expect_equal(nn_adaptive_avg_pool2d(case[[2]])(x), r, tolerance = 1e-12)
  }
  # Its gradient: each input gets 1/|window| from every window holding it.
  x <- array(rnorm(2 * 3 * 5 * 7), c(2, 3, 5, 7))
  g <- rf_grad(function(x) sum(nnf_adaptive_avg_pool2d(x, c(3, 4))), dtype = "float64")(x)
  w <- array(0, dim(x))
  for (i in 0:2) for (j in 0:3) {
    rows <- (floor(i * 5 / 3) + 1):ceiling((i + 1) * 5 / 3); cols <- (floor(j * 7 / 4) + 1):ceiling((j + 1) * 7 / 4)
    w[, , rows, cols] <- w[, , rows, cols] + 1 / (length(rows) * length(cols))
  }
  expect_equal(g, w, tolerance = 1e-12, ignore_attr = TRUE)
})

test_that("dropout2d on c(N, C, L) drops whole channels", {
  set.seed(52)
  x <- array(1, c(3, 4, 6))
  y <- nnf_dropout2d(x, p = 0.5)
  per_channel <- apply(y, c(1, 2), function(v) length(unique(v)))
  expect_true(all(per_channel == 1))
  expect_true(all(y %in% c(0, 2)))
})

test_that("nn_transformer_encoder stacks independent copies of its layer, with torch's names", {
  set.seed(21)
  layer <- nn_transformer_encoder_layer(d_model = 8, nhead = 2, dim_feedforward = 16, dropout = 0, batch_first = TRUE)
  enc <- nn_transformer_encoder(layer, num_layers = 2, norm = nn_layer_norm(8))
  sd <- enc$state_dict()
  expect_true(all(c("layers.0.self_attn.in_proj_weight", "layers.1.linear2.bias", "norm.weight") %in% names(sd)))
  # Copies: the same initial weights as the layer, but their own (changing one changes nothing else).
  expect_equal(sd[["layers.1.linear1.weight"]], unclass(layer$state_dict()[["linear1.weight"]]))
  x <- array(rnorm(3 * 5 * 8), c(3, 5, 8))
  xt <- rf_tensor(x, dtype = "float64")
  want <- as.array(enc$norm(layer(layer(xt))))
  expect_equal(as.array(enc(xt)), want, tolerance = 1e-10)
  expect_equal(rf_jit(enc, dtype = "float64")(x), want, tolerance = 1e-10)
  nn_init_zeros_(enc$layers[[1]]$linear1$weight)
  expect_gt(sum(abs(as.array(layer$linear1$weight))), 0)
  expect_gt(sum(abs(as.array(enc$layers[[2]]$linear1$weight))), 0)
  expect_error(nn_transformer_encoder(layer, 0), class = "rfuse_type_error", regexp = "num_layers")
  expect_error(nn_transformer_encoder(function(x) x, 2), class = "rfuse_type_error", regexp = "encoder_layer")
})

test_that("bilinear interpolation is torch's (align_corners both ways), traced and differentiated", {
  x <- array(c(1, 3, 2, 4), c(1, 1, 2, 2)) # torch's [[1, 2], [3, 4]]
  # PyTorch's F.interpolate of that image to 4 x 4:
  want <- rbind(c(1, 1.25, 1.75, 2), c(1.5, 1.75, 2.25, 2.5), c(2.5, 2.75, 3.25, 3.5), c(3, 3.25, 3.75, 4))
  expect_equal(nnf_interpolate(x, scale_factor = 2, mode = "bilinear")[1, 1, , ], want)
  corners <- rbind(c(1, 4/3, 5/3, 2), c(5/3, 2, 7/3, 8/3), c(7/3, 8/3, 3, 10/3), c(3, 10/3, 11/3, 4))
  expect_equal(nnf_interpolate(x, size = c(4, 4), mode = "bilinear", align_corners = TRUE)[1, 1, , ], corners)
  # Against a direct base-R loop over output pixels, on a batch with a non-integer scale.
  direct <- function(img, oh, ow) {
    ih <- nrow(img); iw <- ncol(img)
    src <- function(o, n_in, n_out) max((o + 0.5) * n_in / n_out - 0.5, 0)
    out <- matrix(0, oh, ow)
    for (r in 0:(oh - 1)) for (c in 0:(ow - 1)) {
      y <- src(r, ih, oh); xx <- src(c, iw, ow)
      y0 <- min(floor(y), ih - 1); x0 <- min(floor(xx), iw - 1)
      y1 <- min(y0 + 1, ih - 1); x1 <- min(x0 + 1, iw - 1)
      ly <- y - y0; lx <- xx - x0
      out[r + 1, c + 1] <- (1 - ly) * ((1 - lx) * img[y0 + 1, x0 + 1] + lx * img[y0 + 1, x1 + 1]) +
        ly * ((1 - lx) * img[y1 + 1, x0 + 1] + lx * img[y1 + 1, x1 + 1])
    }
    out
  }
  set.seed(4)
  b <- array(rnorm(2 * 3 * 5 * 4), c(2, 3, 5, 4))
  got <- rf_jit(function(v) nnf_interpolate(v, size = c(7, 9), mode = "bilinear"), dtype = "float64")(b)
  expect_identical(dim(got), c(2L, 3L, 7L, 9L))
  for (n in 1:2) for (ch in 1:3) expect_equal(got[n, ch, , ], direct(b[n, ch, , ], 7, 9), tolerance = 1e-12)
  # Gradients: the loss's gradient against central differences.
  w <- array(rnorm(2 * 3 * 7 * 9), c(2, 3, 7, 9))
  loss <- function(v) sum(nnf_interpolate(v, size = c(7, 9), mode = "bilinear") * w)
  g <- rf_grad(loss, dtype = "float64")(b)
  h <- 1e-6; e <- replace(array(0, dim(b)), 5, h)
  expect_equal(g[5], (loss(b + e) - loss(b - e)) / (2 * h), tolerance = 1e-6)
  up <- nn_upsample(scale_factor = 2, mode = "bilinear", align_corners = TRUE)
  expect_equal(up(x)[1, 1, , ], nnf_interpolate(x, scale_factor = 2, mode = "bilinear", align_corners = TRUE)[1, 1, , ])
  expect_error(nnf_interpolate(x, scale_factor = 2, align_corners = TRUE), class = "rfuse_type_error", regexp = "interpolating")
  expect_error(nnf_interpolate(x, scale_factor = 2, mode = "bicubic"), class = "rfuse_unsupported")
})

test_that("nn_bilinear and nnf_bilinear equal a base-R double sum, jitted and with gradients", {
  set.seed(41)
  ref <- function(x1, x2, w, b) {
    out <- matrix(0, nrow(x1), dim(w)[1])
    for (r in seq_len(nrow(x1))) for (o in seq_len(dim(w)[1])) out[r, o] <- sum(x1[r, ] %o% x2[r, ] * w[o, , ]) + b[o]
    out
  }
  x1 <- matrix(rnorm(5 * 3), 5); x2 <- matrix(rnorm(5 * 4), 5)
  w <- array(rnorm(2 * 3 * 4), c(2, 3, 4)); b <- rnorm(2)
  expect_lt(rel_err(nnf_bilinear(x1, x2, w, b), ref(x1, x2, w, b)), 1e-12)
  j <- rf_jit(function(x1, x2, w, b) nnf_bilinear(x1, x2, w, b), dtype = "float64")
  expect_lt(rel_err(j(x1, x2, w, b), ref(x1, x2, w, b)), 1e-12)
  m <- nn_bilinear(3, 4, 2)
  expect_identical(dim(as.array(m$weight)), c(2L, 3L, 4L))
  expect_true(all(abs(as.array(m$weight)) <= 1 / sqrt(3)))
  got <- m(x1, x2)
  expect_lt(rel_err(as.array(got), ref(x1, x2, as.array(m$weight), as.array(m$bias))), 1e-6)
  # Leading dims beyond one (a batch of sequences) keep their shape.
  a1 <- array(rnorm(2 * 5 * 3), c(2, 5, 3)); a2 <- array(rnorm(2 * 5 * 4), c(2, 5, 4))
  y3 <- nnf_bilinear(a1, a2, w, b)
  expect_identical(dim(y3), c(2L, 5L, 2L))
  expect_lt(rel_err(y3[2, , ], ref(a1[2, , ], a2[2, , ], w, b)), 1e-12)
  # Gradients against central differences.
  loss <- function(x1, w) sum(nnf_bilinear(x1, x2, w, b)^2)
  g <- rf_grad(loss, dtype = "float64")(x1, w)
  h <- 1e-6; k <- 7
  e <- w; e[k] <- e[k] + h; f <- w; f[k] <- f[k] - h
  expect_lt(abs(g$w[k] - (loss(x1, e) - loss(x1, f)) / (2 * h)), 1e-6)
  expect_error(nnf_bilinear(x1, x2[, 1:3], w, b), class = "rfuse_shape_error")
})

test_that("class losses over K dims are torch's: input (N, C, d...), labels (N, d...) or probabilities", {
  set.seed(21)
  x <- array(rnorm(2 * 5 * 4 * 3), c(2, 5, 4, 3)); y <- array(sample.int(5, 2 * 4 * 3, TRUE), c(2, 4, 3))
  each <- array(0, c(2, 4, 3))
  for (n in 1:2) for (i in 1:4) for (j in 1:3) { z <- x[n, , i, j]; each[n, i, j] <- log(sum(exp(z))) - z[y[n, i, j]] }
  expect_equal(nnf_cross_entropy(x, y), mean(each), tolerance = 1e-14)
  expect_equal(nnf_cross_entropy(x, y, reduction = "none"), each, tolerance = 1e-14)
  expect_equal(nnf_nll_loss(nnf_log_softmax(x, 2), y, reduction = "sum"), sum(each), tolerance = 1e-13)
  expect_equal(rf_jit(function(x, y) nnf_cross_entropy(x, y), dtype = "float64")(x, y), mean(each), tolerance = 1e-14)
  expect_equal(as.vector(as.array(nnf_cross_entropy(rf_tensor(x, dtype = "float64"), rf_tensor(y, dtype = "int64")))), mean(each),
               tolerance = 1e-14)
  # Probabilities of the input's shape (one-hot here: the same loss).
  p <- aperm(array(diag(5)[as.vector(aperm(y, c(1, 2, 3))), ], c(2, 4, 3, 5)), c(1, 4, 2, 3))
  expect_equal(nnf_cross_entropy(x, p), mean(each), tolerance = 1e-14)
  expect_error(nnf_cross_entropy(x, y[, , 1]), class = "rfuse_shape_error")
  expect_error(rf_jit(function(x, y) nnf_cross_entropy(x, y), dtype = "float64")(x, y + 5L), class = "rfuse_type_error")
})

test_that("the class losses take torch's class weights and refuse an ignore_index naming a class", {
  set.seed(42)
  z <- matrix(rnorm(24), 6); y <- c(1, 3, 2, 4, 2, 1); w <- c(0.5, 2, 1, 3)
  lp <- z - log(rowSums(exp(z)))
  picked <- lp[cbind(seq_along(y), y)]
  expect_equal(nnf_cross_entropy(z, y, weight = w), -sum(w[y] * picked) / sum(w[y]), tolerance = 1e-12)
  expect_equal(nnf_cross_entropy(z, y, weight = w, reduction = "none"), -w[y] * picked, tolerance = 1e-12)
  expect_equal(nn_nll_loss(weight = w, reduction = "sum")(lp, y), -sum(w[y] * picked), tolerance = 1e-12)
  j <- rf_jit(function(z, t) nnf_cross_entropy(z, t, weight = c(0.5, 2, 1, 3)), dtype = "float64")
  expect_equal(j(z, rf_one_hot(y, 4)), -sum(w[y] * picked) / sum(w[y]), tolerance = 1e-12)
  # An ignore_index outside the classes (torch's -100, GPT code's -1) leaves every sample in.
  expect_equal(nn_cross_entropy_loss(NULL, -1, "mean")(z, y), nnf_cross_entropy(z, y))
  expect_error(nnf_cross_entropy(z, y, ignore_index = 2), class = "rfuse_unsupported", regexp = "ignore_index = 2")
  expect_error(nnf_cross_entropy(z, y, weight = 1:3), class = "rfuse_type_error", regexp = "4 numbers")
})
