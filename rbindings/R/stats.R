# Statistics of traced values: var / sd / cov / cor, scale, norm, which.max / which.min, as R
# computes them (two passes: the means, then the centred cross products), with R's dimnames.

# `use` / `method` / `na.rm` beyond R's defaults change which values count or how: refused.
stats_defaults <- function(fname, call, na.rm = FALSE, use = "everything", method = "pearson") {
  if (!identical(na.rm, FALSE))
    rf_unsupported(fname, call, "na.rm = TRUE drops incomplete observations, a data-dependent shape; remove NAs first")
  if (!identical(use, "everything"))
    rf_unsupported(fname, call, sprintf("use = %s (only \"everything\" is traced)", deparse1(use)))
  if (!identical(method, "pearson"))
    rf_unsupported(fname, call, sprintf("method = %s ranks its values (only \"pearson\" is traced)", deparse1(method)))
}

# The column-centred matrix of x (a vector is one column), refusing fewer than two rows.
centred_columns <- function(x, fname, call) {
  x <- to_dtype(as_sym(x, call), trace_float(), call)
  m <- if (length(x$rdim) == 2) x else with_attrs(reshape_sym(x, c(x$len, 1L), x$len), NULL)
  if (length(x$rdim) > 2) rf_shape_error("'x' must be a vector or a matrix", call)
  if (m$rdim[1] < 2) rf_unsupported(fname, call, "fewer than two observations (R's answer is NA)")
  list(c = m - spread_columns(margin_reduce(m, "mean", FALSE, 1L, call), m, call), n = m$rdim[1],
       vector = is.null(x$rdim))
}
# A value per column of matrix m (length ncol), repeated down its rows.
spread_columns <- function(v, m, call) {
  v <- to_dtype(reshape_sym(as_sym(v, call), NULL, m$rdim[2]), trace_float(), call)
  new_sym(emit(.rf_b_broadcast, v$id, sym_tshape(m), 0L, call = call), m$rdim, m$len, v$dtype)
}

cov_syms <- function(x, y, fname, call, cor) {
  a <- centred_columns(x, fname, call)
  b <- if (is.null(y)) a else centred_columns(y, fname, call)
  if (a$n != b$n) rf_shape_error("incompatible dimensions", call)
  v <- rf_crossprod(a$c, b$c) / (a$n - 1)
  if (cor) {
    sa <- sqrt(margin_reduce(a$c * a$c, "sum", FALSE, 1L, call) / (a$n - 1))
    sb <- if (is.null(y)) sa else sqrt(margin_reduce(b$c * b$c, "sum", FALSE, 1L, call) / (b$n - 1))
    dn <- v$attrs
    v <- with_attrs(rf_pmax(rf_pmin(v / rf_outer(sa, sb), 1), -1), dn) # R clamps rounding beyond +-1
  }
  # A vector with a vector: a number, as R's.
  if (a$vector && b$vector) return(with_attrs(reshape_sym(v, NULL, 1L), NULL))
  v
}

rf_var <- function(x, y = NULL, na.rm = FALSE, use) {
  if (!any_sym(x, y)) return(if (missing(use)) stats::var(x, y, na.rm) else stats::var(x, y, na.rm, use))
  call <- sys.call()
  stats_defaults("var", call, na.rm, if (missing(use)) "everything" else use)
  cov_syms(x, y, "var", call, FALSE)
}
rf_cov <- function(x, y = NULL, use = "everything", method = c("pearson", "kendall", "spearman")) {
  if (!any_sym(x, y)) return(stats::cov(x, y, use, method))
  call <- sys.call()
  stats_defaults("cov", call, use = use, method = match.arg(method))
  cov_syms(x, y, "cov", call, FALSE)
}
rf_cor <- function(x, y = NULL, use = "everything", method = c("pearson", "kendall", "spearman")) {
  if (!any_sym(x, y)) return(stats::cor(x, y, use, method))
  call <- sys.call()
  stats_defaults("cor", call, use = use, method = match.arg(method))
  cov_syms(x, y, "cor", call, TRUE)
}
rf_sd <- function(x, na.rm = FALSE) {
  if (!is_sym(x)) return(stats::sd(x, na.rm))
  call <- sys.call()
  stats_defaults("sd", call, na.rm)
  sqrt(cov_syms(rf_as_vector(x), NULL, "sd", call, FALSE))
}

# scale(x, center, scale): the centred (by the column means or the given numbers) and scaled (by
# the columns' root mean squares over n - 1, or the given numbers) matrix, with R's attributes
# "scaled:center" and "scaled:scale" (traced values, set on the call's result).
rf_scale <- function(x, center = TRUE, scale = TRUE) {
  if (!any_sym(x, center, scale)) return(base::scale(x, center, scale))
  call <- sys.call()
  x <- rf_as_matrix(to_dtype(as_sym(x, call), trace_float(), call))
  nc <- x$rdim[2]; n <- x$rdim[1]
  cn <- x$attrs$dimnames[[2]]
  named <- function(v) if (is.null(cn)) v else with_attrs(v, list(names = cn))
  attrs <- x$attrs
  x <- with_attrs(x, NULL)
  cen <- NULL; sc <- NULL
  if (isTRUE(center)) cen <- margin_reduce(x, "mean", FALSE, 1L, call)
  else if (!isFALSE(center)) {
    if (rlen(center) != nc) rf_shape_error("length of 'center' must equal the number of columns of 'x'", call)
    cen <- if (is_sym(center)) center else as.numeric(center)
  }
  if (!is.null(cen)) x <- x - spread_columns(cen, x, call)
  if (isTRUE(scale)) sc <- sqrt(margin_reduce(x * x, "sum", FALSE, 1L, call) / max(1, n - 1))
  else if (!isFALSE(scale)) {
    if (rlen(scale) != nc) rf_shape_error("length of 'scale' must equal the number of columns of 'x'", call)
    sc <- if (is_sym(scale)) scale else as.numeric(scale)
  }
  if (!is.null(sc)) x <- x / spread_columns(sc, x, call)
  static_or_named <- function(v) if (is_sym(v)) named(with_attrs(reshape_sym(v, NULL, nc), NULL))
                                 else { if (!is.null(cn)) names(v) <- cn; v }
  with_attrs(x, c(attrs["dimnames"],
                  list(`scaled:center` = if (!is.null(cen)) static_or_named(cen),
                       `scaled:scale` = if (!is.null(sc)) static_or_named(sc))))
}

# norm(x, type): "O"ne, "I"nfinity, "F"robenius, "M"aximum modulus (the spectral "2" needs an SVD).
rf_norm <- function(x, type = c("O", "I", "F", "M", "2")) {
  if (!is_sym(x)) return(base::norm(x, type))
  call <- sys.call()
  if (!is.character(type) || length(type) < 1) rf_abort("rfuse_type_error", "'type' must be a string", call)
  t <- toupper(substr(type[1], 1, 1))
  x <- to_dtype(as_sym(x, call), trace_float(), call)
  if (length(x$rdim) != 2) x <- with_attrs(reshape_sym(x, c(x$len, 1L), x$len), NULL)
  a <- abs(with_attrs(x, NULL))
  switch(t,
         O = , "1" = reduce_all("max", margin_reduce(a, "sum", FALSE, 1L, call), call),
         I = reduce_all("max", margin_reduce(a, "sum", TRUE, 1L, call), call),
         F = , E = sqrt(reduce_all("sum", a * a, call)),
         M = reduce_all("max", a, call),
         rf_unsupported("norm", call, sprintf("type %s (the spectral norm needs an SVD)", deparse1(type[1]))))
}

# which.max / which.min: the position of the first maximum (minimum), NA and NaN skipped. When
# every element is NA, R's answer has length 0: the call is checked and answered by base R.
which_extreme <- function(x, max, call) {
  x <- to_dtype(reshape_sym(as_sym(x, call), NULL, x$len), trace_float(), call)
  n <- x$len
  if (n == 0) rf_unsupported(if (max) "which.max" else "which.min", call, "of a length-0 value")
  nan <- is.na.rf_sym(x)
  clean <- rf_ifelse(nan, if (max) -Inf else Inf, x)
  best <- reduce_all(if (max) "max" else "min", clean, call)
  at <- (clean == expand_to(best, list(rdim = NULL, len = n), call)) & !nan
  pos <- reduce_all("min", rf_ifelse(at, lift_constant(as.double(seq_len(n)), call), n + 1), call)
  runtime_check(reduce_all("min", nan, call) > 0, "hold only NA values (R's answer has length 0)")
  pos$ib <- int_bound("const", v = n)
  pos
}
rf_which_max <- function(x) if (is_sym(x)) which_extreme(x, TRUE, sys.call()) else base::which.max(x)
rf_which_min <- function(x) if (is_sym(x)) which_extreme(x, FALSE, sys.call()) else base::which.min(x)

# ---- Linear algebra ------------------------------------------------------------------------------
# solve(a, b): rfuse.solve, which runs LAPACK's dgesv (and dgecon's condition check) on the data
# exactly as R's solve does. Where R's solve stops (a singular system, or one whose reciprocal
# condition number is below `tol`), the program's result is NaN and the call is answered by base R
# (runtime_check): R's own error.
rf_solve <- function(a, b, ...) {
  if (missing(b)) { if (!is_sym(a)) return(base::solve(a, ...)) }
  else if (!any_sym(a, b)) return(base::solve(a, b, ...))
  call <- sys.call()
  extra <- list(...)
  if (length(extra) && (is.null(names(extra)) || !all(names(extra) %in% c("tol", "LINPACK"))))
    rf_unsupported("solve", call, "solve() takes only 'tol' (and LINPACK = FALSE) besides a and b")
  if (isTRUE(extra$LINPACK)) rf_unsupported("solve", call, "LINPACK = TRUE (defunct in R)")
  tol <- extra$tol %||% .Machine$double.eps
  if (is_sym(tol) || !is.numeric(tol) || length(tol) != 1 || is.na(tol))
    rf_unsupported("solve", call, "'tol' must be a single number that is not traced")
  a <- to_dtype(as_sym(a, call), trace_float(), call)
  if (is.null(a$rdim) && a$len == 1) a <- reshape_sym(a, c(1L, 1L), 1L)
  ad <- a$rdim %||% c(a$len, 1L)
  if (length(ad) != 2 || ad[1] != ad[2]) rf_shape_error(sprintf("'a' (%d x %d) must be square", ad[1], ad[2]), call)
  n <- ad[1]
  an <- a$attrs$dimnames
  if (missing(b)) {
    b <- lift_constant(diag(1, n), call)
    vector_b <- FALSE
    bn <- list(NULL, an[[1]])
  } else {
    b <- to_dtype(as_sym(b, call), trace_float(), call)
    vector_b <- is.null(b$rdim)
    bd <- b$rdim %||% c(b$len, 1L)
    if (length(bd) != 2 || bd[1] != n)
      rf_shape_error(sprintf("'b' (%d x %d) must be compatible with 'a' (%d x %d)", bd[1], bd[length(bd)], n, n), call)
    bn <- b$attrs$dimnames
  }
  k <- if (vector_b) 1L else b$rdim[2]
  x <- new_sym(emit(.rf_b_solve, a$id, reshape_sym(b, c(n, k))$id, as.double(tol), call = call),
               c(n, k), as.double(n) * k, trace_float())
  runtime_check(any_all("any", list(is.na.rf_sym(x)), call),
                "make R's solve() stop (a singular system, or one too ill-conditioned for 'tol')")
  if (vector_b) return(with_attrs(reshape_sym(x, NULL, n), list(names = an[[2]])))
  dn <- list(an[[2]], bn[[2]])
  with_attrs(x, if (!is.null(dn[[1]]) || !is.null(dn[[2]])) list(dimnames = dn))
}

# chol(x): rfuse.cholesky, LAPACK's dpotrf as R's chol calls it (upper triangle, zeros below, x's
# dimnames); where R stops (not positive definite), base R answers with its error.
rf_chol <- function(x, ...) {
  if (!is_sym(x)) return(base::chol(x, ...))
  call <- sys.call()
  extra <- list(...)
  if (length(extra) && (is.null(names(extra)) || !all(names(extra) %in% c("pivot", "LINPACK", "tol"))))
    rf_unsupported("chol", call, "chol() takes only pivot = FALSE besides x")
  if (isTRUE(extra$pivot)) rf_unsupported("chol", call, "pivot = TRUE (its pivot and rank attributes depend on the data)")
  if (isTRUE(extra$LINPACK)) rf_unsupported("chol", call, "LINPACK = TRUE (defunct in R)")
  x <- to_dtype(as_sym(x, call), trace_float(), call)
  if (is.null(x$rdim) && x$len == 1) x <- reshape_sym(x, c(1L, 1L), 1L)
  d <- x$rdim %||% c(x$len, 1L)
  if (length(d) != 2 || d[1] != d[2]) rf_shape_error("'a' must be a square matrix", call)
  u <- new_sym(emit(.rf_b_cholesky, x$id, call = call), d, x$len, trace_float())
  runtime_check(any_all("any", list(is.na.rf_sym(u)), call),
                "make R's chol() stop (a matrix that is not positive definite)")
  with_attrs(u, x$attrs["dimnames"])
}

# det(x): sign * exp(log |det|) from rfuse.log_determinant (R's determinant, LAPACK's dgetrf).
rf_det <- function(x, ...) {
  if (!is_sym(x)) return(base::det(x, ...))
  call <- sys.call()
  if (...length()) rf_unsupported("det", call, "det() takes only x")
  x <- to_dtype(as_sym(x, call), trace_float(), call)
  if (is.null(x$rdim) && x$len == 1) x <- reshape_sym(x, c(1L, 1L), 1L)
  d <- x$rdim %||% c(x$len, 1L)
  if (length(d) != 2 || d[1] != d[2]) rf_shape_error("'a' must be a square matrix", call)
  ld <- new_sym(emit(.rf_b_log_determinant, x$id, call = call), NULL, 2L, trace_float())
  index_sym(ld, list(2), TRUE, call) * exp(index_sym(ld, list(1), TRUE, call))
}
