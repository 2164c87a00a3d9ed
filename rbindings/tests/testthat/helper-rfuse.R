# Norm-wise relative error ||got - ref|| / ||ref|| (NaN never passes).
rel_err <- function(got, ref) {
  if (!identical(dim(got), dim(ref)) || length(got) != length(ref)) return(Inf)
  if (anyNA(got) != anyNA(ref)) return(Inf)
  d <- sqrt(sum((as.vector(got) - as.vector(ref))^2))
  n <- sqrt(sum(as.vector(ref)^2))
  if (n == 0) d else d / n
}

tol <- c(float64 = 1e-12, float32 = 1e-5)

# Random inputs away from zero (never time or test on zeros).
rnd <- function(...) {
  d <- c(...)
  x <- stats::runif(prod(d), 0.2, 1.5) * sample(c(-1, 1), prod(d), replace = TRUE)
  if (length(d) > 1) array(x, d) else x
}

expect_matches_base <- function(f, ..., dtypes = c("float64", "float32")) {
  ref <- f(...)
  for (dt in dtypes) {
    got <- rf_jit(f, dtype = dt)(...)
    expect_identical(dim(got), dim(ref), info = dt)
    expect_lt(rel_err(got, ref), tol[[dt]])
  }
}
