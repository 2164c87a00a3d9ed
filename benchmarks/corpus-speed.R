# Issue 15's speed target: the five largest functions of the base-R corpus (written the way
# tests/testthat/test-corpus-base-r.R writes them, at realistic sizes), rfuse's rf_jit with
# default settings against base R evaluating the same function on the same data, in one
# process. Ratio of medians (base R / rfuse); the target is >= 2 for each.
# Run: Rscript benchmarks/corpus-speed.R   (after scripts/install-r-package.sh)
suppressPackageStartupMessages(library(rfuse))
set.seed(1)
reps <- as.integer(Sys.getenv("RFUSE_BENCH_REPS", "7"))

median_ms <- function(f, reps) {
  f()
  1000 * median(vapply(seq_len(reps), function(i) system.time(f(), gcFirst = FALSE)[["elapsed"]], 0))
}

workloads <- list(
  heat_steps = list(
    label = "3 heat-equation steps on 2^21 points, boundaries re-assembled with c()",
    f = function(u) {
      n <- length(u)
      for (s in 1:3) u <- c(u[1], u[2:(n - 1)] + 0.2 * (u[1:(n - 2)] - 2 * u[2:(n - 1)] + u[3:n]), u[n])
      u
    },
    args = function() list(u = runif(2^21))),
  moving_average = list(
    label = "moving average of width 5 by cumsum and shifted slices, 2^22",
    f = function(x) { k <- 5; n <- length(x); cs <- cumsum(x); (cs[k:n] - c(0, cs[1:(n - k)])) / k },
    args = function() list(x = rnorm(2^22))),
  black_scholes = list(
    label = "Black-Scholes calls and puts with pnorm, 2^20 options",
    f = function(S, K, r, sigma, T) {
      d1 <- (log(S / K) + (r + 0.5 * sigma^2) * T) / (sigma * sqrt(T))
      d2 <- d1 - sigma * sqrt(T)
      call <- S * pnorm(d1) - K * exp(-r * T) * pnorm(d2)
      cbind(call, call - S + K * exp(-r * T))
    },
    args = function() list(S = runif(2^20, 50, 150), K = runif(2^20, 50, 150), r = 0.03, sigma = 0.25, T = 0.5)),
  rbf_kernel = list(
    label = "RBF kernel matrix via outer(rowSums) - 2 tcrossprod, 2000 x 1500 points in 16 dims",
    f = function(X, Y) {
      D2 <- outer(rowSums(X^2), rowSums(Y^2), "+") - 2 * tcrossprod(X, Y)
      exp(-0.5 * pmax(D2, 0))
    },
    args = function() list(X = matrix(rnorm(2000 * 16), 2000), Y = matrix(rnorm(1500 * 16), 1500))),
  soft_threshold_path = list(
    label = "soft-thresholding with sign/pmax and a clamp by assignment, 2^22",
    f = function(z) { s <- sign(z) * pmax(abs(z) - 0.3, 0); s[s > 1] <- 1; diff(s, lag = 2) },
    args = function() list(z = rnorm(2^22)))
)

cat(sprintf("rfuse corpus speed, %s, R %s, %d reps, default settings (rf_jit(f))\n",
            format(Sys.Date()), getRversion(), reps))
cat(sprintf("%-22s %12s %12s %8s %s\n", "workload", "base R ms", "rfuse ms", "ratio", "target"))
for (nm in names(workloads)) {
  w <- workloads[[nm]]
  a <- w$args()
  ref <- do.call(w$f, a)
  jf <- rf_jit(w$f)
  got <- do.call(jf, a)
  err <- max(abs(got - ref)) / max(abs(ref))
  tb <- median_ms(function() do.call(w$f, a), reps)
  tr <- median_ms(function() do.call(jf, a), reps)
  cat(sprintf("%-22s %12.2f %12.2f %8.2f %s (max rel err %.1e)\n", nm, tb, tr, tb / tr,
              if (tb / tr >= 2) ">= 2: met" else ">= 2: NOT met", err))
}
