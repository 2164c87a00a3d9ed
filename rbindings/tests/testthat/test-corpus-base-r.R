# A corpus of real-world-style base-R numeric code (the way it appears in CRAN packages, textbooks
# and blog posts), each function traced by rf_jit and checked against plain base R, attributes
# included. Functions that use what rfuse does not trace yet (a mask computed from the data,
# Cholesky or QR factorizations) are expected to be refused with a classed rfuse_unsupported error, never
# answered wrongly: when one becomes supported, its expectation moves to expect_matches_base.

test_that("corpus: a 2-layer neural net forward, loss and hand-written backward", {
  set.seed(101)
  X <- rnd(8, 4); Y <- rnd(8, 2)
  W1 <- rnd(4, 5) / 2; b1 <- rnd(5) / 4; W2 <- rnd(5, 2) / 2; b2 <- rnd(2) / 4

  # ReLU MLP forward pass: hidden bias via sweep, output bias via a byrow matrix.
  nn_forward <- function(X, W1, b1, W2, b2) {
    H <- pmax(sweep(X %*% W1, 2, b1, "+"), 0)
    H %*% W2 + matrix(b2, nrow(X), length(b2), byrow = TRUE)
  }
  expect_matches_base(nn_forward, X, W1, b1, W2, b2)

  # Mean squared error of a tanh MLP (a scalar training loss).
  nn_loss <- function(X, Y, W1, b1, W2) {
    H <- tanh(sweep(X %*% W1, 2, b1, "+"))
    out <- H %*% W2
    sum((out - Y)^2) / (2 * nrow(X))
  }
  expect_matches_base(nn_loss, X, Y, W1, b1, W2)
  expect_grads_match(nn_loss, list(X = X, Y = Y, W1 = W1, b1 = b1, W2 = W2), wrt = c("W1", "b1", "W2"))

  # Hand-written backprop for the loss above: returns c(dW1, db1, dW2), flattened.
  nn_backward <- function(X, Y, W1, b1, W2) {
    n <- nrow(X)
    H <- tanh(sweep(X %*% W1, 2, b1, "+"))
    dout <- (H %*% W2 - Y) / n
    dW2 <- crossprod(H, dout)
    dH <- dout %*% t(W2)
    dZ <- dH * (1 - H^2)
    dW1 <- t(X) %*% dZ
    db1 <- colSums(dZ)
    c(dW1, db1, dW2)
  }
  expect_matches_base(nn_backward, X, Y, W1, b1, W2)
})

test_that("corpus: logistic regression by gradient descent, likelihoods and probit", {
  set.seed(102)
  n <- 20
  X <- cbind(1, matrix(rnorm(n * 2), n, 2))
  y <- as.numeric(runif(n) < 0.5)
  beta <- c(0.1, -0.2, 0.3)

  # Five unrolled gradient-descent steps on the logistic log-loss.
  logreg_gd <- function(X, y, beta) {
    for (i in 1:5) {
      p <- 1 / (1 + exp(-X %*% beta))
      beta <- beta - 0.5 * crossprod(X, p - y) / nrow(X)
    }
    beta
  }
  expect_matches_base(logreg_gd, X, y, beta)

  # Logistic negative log-likelihood with log1p for stability.
  logreg_nll <- function(beta, X, y) {
    eta <- drop(X %*% beta)
    -sum(y * eta - log1p(exp(eta)))
  }
  expect_matches_base(logreg_nll, beta, X, y)
  expect_grads_match(logreg_nll, list(beta = beta, X = X, y = y), wrt = "beta")

  # Probit log-likelihood with pnorm(..., log.p = TRUE).
  probit_ll <- function(beta, X, y) {
    eta <- X %*% beta
    sum(y * pnorm(eta, log.p = TRUE) + (1 - y) * pnorm(-eta, log.p = TRUE))
  }
  expect_matches_base(probit_ll, beta, X, y)
  expect_grads_match(probit_ll, list(beta = beta, X = X, y = y), wrt = "beta")

  # Logistic log-likelihood via dlogis, a plogis link, and log(pnorm()) for a probit link.
  logis_ll <- function(x, mu, s) {
    sum(log(dlogis(x, mu, s))) + sum(log(plogis(x, mu, s))) + sum(log(pnorm(x / 4 + 0.5)))
  }
  expect_matches_base(logis_ll, rnorm(12), 0.3, 1.2)
})

test_that("corpus: k-means assignment, farthest point and RBF kernels", {
  set.seed(103)
  X <- matrix(rnorm(30 * 2), 30, 2)
  C <- matrix(c(-1, 0, 1.2, 0.8, -0.9, 1.1), 3, 2, byrow = TRUE)

  # Squared distances to each centre by expansion, then each point's nearest distance.
  kmeans_mindist <- function(X, C) {
    n <- nrow(X); k <- nrow(C)
    D <- matrix(rowSums(X^2), n, k) + matrix(rowSums(C^2), n, k, byrow = TRUE) - 2 * X %*% t(C)
    apply(D, 1, min)
  }
  expect_matches_base(kmeans_mindist, X, C)

  # Within-cluster sum of squares: pmin over the columns of a distance matrix.
  kmeans_wss <- function(X, C) {
    D <- -2 * tcrossprod(X, C) + rowSums(X^2)
    D <- sweep(D, 2, rowSums(C^2), "+")
    sum(pmin(D[, 1], D[, 2], D[, 3]))
  }
  expect_matches_base(kmeans_wss, X, C)

  # k-means++ style: the point farthest from a centre (which.max used as an index).
  farthest_point <- function(X, c0) {
    d <- rowSums(sweep(X, 2, c0)^2)
    X[which.max(d), ]
  }
  expect_matches_base(farthest_point, X, c(0.1, -0.2))

  # Gaussian (RBF) kernel matrix between two sets of points.
  rbf_kernel <- function(X, Y, gamma = 0.5) {
    D2 <- outer(rowSums(X^2), rowSums(Y^2), "+") - 2 * tcrossprod(X, Y)
    exp(-gamma * D2)
  }
  Y <- matrix(rnorm(10 * 2), 10, 2)
  expect_matches_base(rbf_kernel, X, Y)
})

test_that("corpus: attention, softmax and log-sum-exp in base R", {
  set.seed(104)
  Q <- rnd(6, 4); K <- rnd(6, 4); V <- rnd(6, 3)

  # Scaled dot-product attention, softmax over rows with apply(S, 1, max).
  attention <- function(Q, K, V) {
    S <- Q %*% t(K) / sqrt(ncol(Q))
    S <- exp(S - apply(S, 1, max))
    A <- S / rowSums(S)
    A %*% V
  }
  expect_matches_base(attention, Q, K, V)

  # Numerically stable log-sum-exp of a vector.
  logsumexp <- function(x) {
    m <- max(x)
    m + log(sum(exp(x - m)))
  }
  x <- rnorm(10) * 3
  expect_matches_base(logsumexp, x)
  expect_grads_match(logsumexp, list(x = x))
})

test_that("corpus: Black-Scholes price, delta and gamma", {
  set.seed(105)
  S <- runif(6, 80, 120); K <- runif(6, 90, 110)

  # Black-Scholes call prices summed over a small book (a smooth scalar).
  bs_call_book <- function(S, K, r, sigma, T) {
    d1 <- (log(S / K) + (r + sigma^2 / 2) * T) / (sigma * sqrt(T))
    d2 <- d1 - sigma * sqrt(T)
    sum(S * pnorm(d1) - K * exp(-r * T) * pnorm(d2))
  }
  expect_matches_base(bs_call_book, S, K, 0.03, 0.25, 0.5)
  expect_grads_match(bs_call_book, list(S = S, K = K, r = 0.03, sigma = 0.25, T = 0.5))

  # Delta and gamma side by side, plus the put price by put-call parity.
  bs_greeks <- function(S, K, r, sigma, T) {
    d1 <- (log(S / K) + (r + 0.5 * sigma^2) * T) / (sigma * sqrt(T))
    d2 <- d1 - sigma * sqrt(T)
    call <- S * pnorm(d1) - K * exp(-r * T) * pnorm(d2)
    put <- call - S + K * exp(-r * T)
    cbind(pnorm(d1), dnorm(d1) / (S * sigma * sqrt(T)), put)
  }
  expect_matches_base(bs_greeks, S, K, 0.03, 0.25, 0.5)
  # The same with column names: the result carries them, as R's.
  bs_greeks_named <- function(S, K, r, sigma, T) {
    d1 <- (log(S / K) + (r + 0.5 * sigma^2) * T) / (sigma * sqrt(T))
    cbind(delta = pnorm(d1), gamma = dnorm(d1) / (S * sigma * sqrt(T)))
  }
  expect_matches_base(bs_greeks_named, S, K, 0.03, 0.25, 0.5)
})

test_that("corpus: standardization, moving averages, differences and cumulative ops", {
  set.seed(106)
  X <- matrix(rnorm(10 * 3, mean = 2, sd = 3), 10, 3)
  x <- rnorm(20)

  # Column standardization with scale().
  standardize_scale <- function(X) scale(X)
  expect_matches_base(standardize_scale, X) # with its scaled:center / scaled:scale attributes
  expect_matches_base(function(X) scale(X, scale = FALSE) * 2, X)
  expect_matches_base(function(X) scale(X, center = c(1, 2, 3), scale = c(2, 2, 4))[, 2:3], X)
  expect_matches_base(function(x) scale(x), x)
  # The same by hand, with sweep().
  standardize_sweep <- function(X) {
    Xc <- sweep(X, 2, colMeans(X))
    sweep(Xc, 2, sqrt(colSums(Xc^2) / (nrow(X) - 1)), "/")
  }
  expect_matches_base(standardize_sweep, X)

  # Trailing moving average of width k via cumsum and shifted indexing.
  moving_average <- function(x) {
    k <- 3; n <- length(x)
    cs <- cumsum(x)
    (cs[k:n] - c(0, cs[1:(n - k)])) / k
  }
  expect_matches_base(moving_average, x)

  # First differences, lag-2 differences and second differences.
  differences <- function(x) c(diff(x), diff(x, lag = 2), diff(diff(x)))
  expect_matches_base(differences, x)

  # Roughness penalty from slices: sum of squared successive differences.
  roughness <- function(x) sum((x[-1] - x[-length(x)])^2)
  expect_matches_base(roughness, x)
  expect_grads_match(roughness, list(x = x))

  # Sum of squared partial sums (a random-walk energy).
  cumsum_energy <- function(x) sum(cumsum(x)^2)
  expect_matches_base(cumsum_energy, x)
  expect_grads_match(cumsum_energy, list(x = x))

  # Running maximum drawdown and a compounded growth index.
  drawdown_growth <- function(r) {
    wealth <- cumprod(1 + r / 10)
    c(cummax(wealth) - wealth, wealth)
  }
  expect_matches_base(drawdown_growth, x)

  # head/tail/rev idioms: successive ratios, the last three, the reversed series.
  head_tail_rev <- function(x) {
    c(tail(x, -1) / head(x, -1), tail(x, 3), rev(x), x - rev(x))
  }
  expect_matches_base(head_tail_rev, rnd(9))
})

test_that("corpus: PDE stencils and ODE Euler steps", {
  set.seed(107)
  u <- sin(seq(0, pi, length.out = 12)) + runif(12, 0, 0.1)

  # Explicit heat-equation step repeated three times, boundary values kept.
  heat_steps <- function(u) {
    r <- 0.25; n <- length(u)
    for (s in 1:3) {
      inner <- u[2:(n - 1)] + r * (u[1:(n - 2)] - 2 * u[2:(n - 1)] + u[3:n])
      u <- c(u[1], inner, u[n])
    }
    u
  }
  expect_matches_base(heat_steps, u)

  # Energy (sum of squares) after one heat step: a smooth scalar of u.
  heat_energy <- function(u) {
    n <- length(u)
    inner <- u[2:(n - 1)] + 0.2 * (u[1:(n - 2)] - 2 * u[2:(n - 1)] + u[3:n])
    sum(c(u[1], inner, u[n])^2)
  }
  expect_matches_base(heat_energy, u)
  expect_grads_match(heat_energy, list(u = u))

  # SIR epidemic model, ten forward-Euler steps on the state vector c(S, I, R).
  sir_euler <- function(x, beta, gamma) {
    dt <- 0.1
    for (t in 1:10) {
      S <- x[1]; I <- x[2]; R <- x[3]
      N <- S + I + R
      x <- c(S - dt * beta * S * I / N, I + dt * (beta * S * I / N - gamma * I), R + dt * gamma * I)
    }
    x
  }
  expect_matches_base(sir_euler, c(990, 10, 0), 0.3, 0.1)

  # Discrete logistic population growth for three populations, trajectory via cbind.
  logistic_growth <- function(N, r, K) {
    traj <- N
    for (t in 1:6) {
      N <- N + r * N * (1 - N / K)
      traj <- cbind(traj, N)
    }
    traj
  }
  expect_matches_base(logistic_growth, c(10, 50, 120), c(0.5, 0.3, 0.8), 200)
})

test_that("corpus: sparse regression, NMF, cosine similarity and optimizers", {
  set.seed(108)
  n <- 15
  X <- matrix(rnorm(n * 4), n, 4); beta <- c(0.5, -0.3, 0.2, 0.1)
  y <- drop(X %*% c(1, -2, 0, 0.5)) + rnorm(n, sd = 0.1)

  # Soft-thresholding operator of the lasso.
  soft_threshold <- function(z, lambda) sign(z) * pmax(abs(z) - lambda, 0)
  expect_matches_base(soft_threshold, rnd(10), 0.6)

  # One lasso coordinate-descent update of beta[j] on column X[, j].
  lasso_update <- function(X, y, beta, lambda) {
    j <- 2; n <- nrow(X)
    r <- y - X %*% beta + X[, j] * beta[j]
    z <- sum(X[, j] * r) / n
    beta[j] <- sign(z) * max(abs(z) - lambda, 0) / (sum(X[, j]^2) / n)
    beta
  }
  expect_matches_base(lasso_update, X, y, beta, 0.1)

  # Lee-Seung multiplicative updates for NMF, three rounds, returns the reconstruction.
  nmf_updates <- function(V, W, H) {
    for (i in 1:3) {
      H <- H * (t(W) %*% V) / (t(W) %*% W %*% H)
      W <- W * (V %*% t(H)) / (W %*% H %*% t(H))
    }
    W %*% H
  }
  expect_matches_base(nmf_updates, abs(rnd(6, 5)), abs(rnd(6, 2)), abs(rnd(2, 5)))

  # Cosine similarity between the rows of a matrix.
  cosine_sim <- function(X) {
    Xn <- X / sqrt(rowSums(X^2))
    tcrossprod(Xn)
  }
  expect_matches_base(cosine_sim, rnd(5, 3))

  # Adam on a quadratic, three steps with bias correction.
  adam_steps <- function(theta, target) {
    b1 <- 0.9; b2 <- 0.999; lr <- 0.1; eps <- 1e-8
    m <- rep(0, length(theta)); v <- rep(0, length(theta))
    for (t in 1:3) {
      g <- 2 * (theta - target)
      m <- b1 * m + (1 - b1) * g
      v <- b2 * v + (1 - b2) * g^2
      mhat <- m / (1 - b1^t)
      vhat <- v / (1 - b2^t)
      theta <- theta - lr * mhat / (sqrt(vhat) + eps)
    }
    theta
  }
  expect_matches_base(adam_steps, rnd(5), rnd(5))
})

test_that("corpus: robust losses and elementwise math", {
  set.seed(109)
  r <- rnd(12)

  # Huber loss with ifelse.
  huber <- function(r, delta) {
    mean(ifelse(abs(r) <= delta, 0.5 * r^2, delta * (abs(r) - 0.5 * delta)))
  }
  expect_matches_base(huber, r, 1)

  # Softplus and friends: log1p, expm1 and their inverses.
  softplus_family <- function(x) {
    sp <- log1p(exp(x))
    cbind(sp, log(expm1(sp)), expm1(x / 2), log1p(abs(x)))
  }
  expect_matches_base(softplus_family, r)

  # tanh from sinh/cosh, the catenary curve, and the polar angle with atan2.
  hyperbolic_polar <- function(x, y) {
    cbind(sinh(x) / cosh(x) + 2 * cosh(x / 2) - tanh(x), sqrt(x^2 + y^2), atan2(y, x))
  }
  expect_matches_base(hyperbolic_polar, r, rnd(12))
  hyperbolic <- function(x, y) cbind(sinh(x) / cosh(x) + 2 * cosh(x / 2) - tanh(x), sqrt(x^2 + y^2))
  expect_matches_base(hyperbolic, r, rnd(12))

  # Min-max normalization with range, a product of growth factors, rounding to cents, truncation.
  range_prod_round <- function(x) {
    rg <- range(x)
    c((x - rg[1]) / (rg[2] - rg[1]), diff(range(x)), prod(1 + x / 10),
      round(x * 100) / 100 + trunc(x * 10) + round(x, 1))
  }
  expect_refused(range_prod_round, r)
  # The same, rounding to cents only.
  range_prod_cents <- function(x) {
    rg <- range(x)
    c((x - rg[1]) / (rg[2] - rg[1]), prod(1 + x / 10), round(x * 100) / 100 + trunc(x * 10))
  }
  expect_matches_base(range_prod_cents, r)
  # Min-max normalization alone.
  min_max <- function(x) { rg <- range(x); c((x - rg[1]) / (rg[2] - rg[1]), diff(range(x))) }
  expect_matches_base(min_max, r)
})

test_that("corpus: subassignment, diag, rep, outer, cbind and rbind", {
  set.seed(110)
  x <- rnd(8); X <- rnd(4, 4)

  # Clamp negatives to zero (x[x < 0] <- 0), then fill masked entries with a constant (out[mask] <- v).
  clamp_fill <- function(x, y) {
    x[x < 0] <- 0
    out <- x * y
    mask <- abs(y) > 1
    out[mask] <- -1
    out
  }
  expect_matches_base(clamp_fill, x, rnd(8))

  # Row and column replacement with static indices.
  replace_rows <- function(X, v) {
    X[2, ] <- v
    X[, 1] <- X[, 1] * 2
    X[nrow(X), ] <- 0
    X
  }
  expect_matches_base(replace_rows, X, rnd(4))

  # diag() extraction, diag(n) identity and diag(vector) in a ridge-like system matrix.
  diag_ops <- function(X, lambda) {
    A <- crossprod(X) + lambda * diag(nrow(X))
    A - diag(diag(A)) + diag(sum(diag(X)), nrow(X))
  }
  expect_matches_base(diag_ops, X, 0.3)

  # rep with times and each, outer product of two vectors.
  rep_outer <- function(x, y) {
    outer(rep(x, times = 2), rep(y, each = 2)) + outer(x, y)[rep(1:2, times = 4), rep(1:3, each = 2)]
  }
  expect_matches_base(rep_outer, rnd(4), rnd(3))

  # Design matrices from vectors with cbind and rbind.
  bind_vectors <- function(x, y) {
    D <- cbind(1, x, y, x * y)
    R <- rbind(x, y, (x^2 + y^2 > 1) * 1)
    rbind(colMeans(D), D, R %*% D / length(x))
  }
  expect_matches_base(bind_vectors, x, rnd(8))
})
