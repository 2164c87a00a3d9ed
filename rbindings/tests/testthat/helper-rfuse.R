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

# The same attributes as base R's: names, dimnames and class identical, computed ones (scale()'s
# "scaled:center") within the dtype's tolerance.
expect_same_attributes <- function(got, ref, info) {
  ga <- attributes(got); ra <- attributes(ref)
  expect_identical(sort(c(character(), names(ga))), sort(c(character(), names(ra))), info = info)
  for (n in intersect(names(ra), names(ga))) {
    if (is.double(ra[[n]])) {
      expect_identical(names(ga[[n]]), names(ra[[n]]), info = paste(info, n))
      expect_lt(rel_err(ga[[n]], ra[[n]]), tol[[info]])
    } else expect_identical(ga[[n]], ra[[n]], info = paste(info, n))
  }
}

expect_matches_base <- function(f, ..., dtypes = c("float64", "float32")) {
  ref <- f(...)
  for (dt in dtypes) {
    got <- rf_jit(f, dtype = dt)(...)
    expect_identical(dim(got), dim(ref), info = dt)
    expect_same_attributes(got, ref, dt)
    expect_lt(rel_err(got, ref), tol[[dt]])
  }
}

# A function rfuse must refuse (a classed rfuse_unsupported error), not answer.
expect_refused <- function(f, ...) {
  expect_error(rf_jit(f, dtype = "float64")(...), class = "rfuse_unsupported")
}

# Gradients (rf_value_and_grad, float64) against central differences of f.
central_diff <- function(f, args, name, h = 1e-6) {
  x <- args[[name]]
  g <- x * 0
  for (i in seq_along(x)) {
    up <- args; dn <- args
    up[[name]][i] <- x[i] + h
    dn[[name]][i] <- x[i] - h
    g[i] <- (do.call(f, up) - do.call(f, dn)) / (2 * h)
  }
  g
}

expect_grads_match <- function(f, args, wrt = names(args)) {
  vg <- rf_value_and_grad(f, wrt = wrt, dtype = "float64")
  r <- do.call(vg, args)
  expect_equal(r$value, do.call(f, args), tolerance = 1e-10)
  for (w in wrt) {
    num <- central_diff(f, args, w)
    got <- r$grad[[w]]
    expect_equal(dim(got), dim(args[[w]]))
    expect_lt(max(abs(got - num)) / max(abs(num), 1e-8), 1e-6)
  }
}

# An expression's value and the messages of the warnings it gave, in order.
warnings_of <- function(expr) {
  w <- character()
  v <- withCallingHandlers(expr, warning = function(c) { w <<- c(w, conditionMessage(c)); invokeRestart("muffleWarning") })
  list(value = v, warnings = w)
}
