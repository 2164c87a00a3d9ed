# Traced base R: the Ops, Math and Summary group generics on symbolic values, and the plain
# functions (which R 4.2 does not dispatch on S3 objects) that rf_jit binds in the traced
# function's environment.

arith_ops <- c("+" = "add", "-" = "sub", "*" = "mul", "/" = "div", "^" = "pow")
# The ops whose common case (traced values of one structure, or one and a double scalar, in the
# trace's float dtype, without integer bounds or attributes) is recorded in one call
# (.rf_b_pointwise_fast) instead of through align2: what those rules give in that case.
fast_arith_ops <- arith_ops[c("+", "-", "*", "/")]
compare_ops <- c("==" = "eq", "!=" = "ne", "<" = "lt", "<=" = "le", ">" = "gt", ">=" = "ge")

is_const_value <- function(x, v) !is_sym(x) && length(x) == 1L && is.numeric(x) && !is.na(x) && x == v

# The user's call as written (the method's own sys.call() names the method).
generic_call <- function(generic) {
  call <- sys.call(-1)
  call[[1]] <- as.name(generic)
  call
}

# R's arithmetic, comparison and logic keep their operands' attributes: those of the first
# operand of the result's length, else the second's.
#' @export
Ops.rf_sym <- function(e1, e2) {
  call <- generic_call(.Generic)
  if (!missing(e2) && !is.na(kind <- fast_arith_ops[.Generic]) &&
      !is.null(r <- emit(.rf_b_pointwise_fast, kind, e1, e2, trace_float(), call = call)))
    return(r)
  r <- ops_sym(.Generic, e1, if (!missing(e2)) e2, missing(e2), call)
  from <- if (missing(e2) || (rlen(e1) == r$len && length(sym_attrs(e1)))) e1 else e2
  if (rlen(from) == r$len && length(a <- sym_attrs(from))) r <- with_attrs(r, a)
  r
}
ops_sym <- function(op, e1, e2, unary, call) {
  if (unary) {
    if (is_native_int(e1) && op == "+") return(e1)
    if (is_native_int(e1) && op == "-")
      return(new_sym(emit(.rf_b_unary, "neg", e1$id, call = call), e1$rdim, e1$len, e1$dtype))
    ib <- if (is_int_value(e1)) int_ref(e1)
    if (op == "+") {
      s <- to_dtype(e1, trace_float(), call)
      s$ib <- ib
      return(s)
    }
    if (op == "-") {
      s <- to_dtype(e1, trace_float(), call)
      return(new_sym(emit(.rf_b_unary, "neg", s$id, call = call), s$rdim, s$len, s$dtype,
                     if (!is.null(ib)) int_bound("same", ib)))
    }
    if (op == "!") {
      s <- to_dtype(e1, "i1", call)
      return(new_sym(emit(.rf_b_unary, "not", s$id, call = call), s$rdim, s$len, "i1"))
    }
  }
  if (op %in% names(arith_ops)) {
    # x^2 is x*x in R (R_pow special-cases it), bit for bit.
    if (op == "^" && is_const_value(e2, 2)) {
      ab <- align2(e1, e1, call, "arith")
      id <- emit(.rf_b_binary, "mul", ab$a$id, ab$a$id, call = call)
      return(new_sym(id, ab$target$rdim, ab$target$len, trace_float()))
    }
    if (op %in% c("+", "-", "*") && !is.null(nd <- native_int_dtype(e1, e2)))
      return(int_binary(arith_ops[[op]], e1, e2, nd, call))
    ab <- align2(e1, e2, call, "arith")
    id <- emit(.rf_b_binary, arith_ops[[op]], ab$a$id, ab$b$id, call = call)
    # Integer + - * integer is an integer in R; / and ^ are doubles.
    ib <- if (op %in% c("+", "-", "*") && is_int_value(e1) && is_int_value(e2))
      int_bound(arith_ops[[op]], int_ref(e1), int_ref(e2))
    return(new_sym(id, ab$target$rdim, ab$target$len, trace_float(), ib))
  }
  if (op %in% c("%/%", "%%")) return(integer_division(op, e1, e2, call))
  if (op %in% names(compare_ops)) {
    ab <- align2(e1, e2, call, "compare", dtype = native_int_dtype(e1, e2))
    id <- emit(.rf_b_binary, compare_ops[[op]], ab$a$id, ab$b$id, call = call)
    return(new_sym(id, ab$target$rdim, ab$target$len, "i1"))
  }
  if (op %in% c("&", "|")) {
    ab <- align2(e1, e2, call, "logic")
    id <- emit(.rf_b_binary, if (op == "&") "and" else "or", ab$a$id, ab$b$id, call = call)
    return(new_sym(id, ab$target$rdim, ab$target$len, "i1"))
  }
  rf_unsupported(op, call)
}

# R's %/% and %% on integers (logicals included): floor(x / y) and x - floor(x / y) * y, exact
# for integers within the guard's range (see int_bound); a divisor that may be 0 (R: NA) must be
# an argument, checked on every call, or a constant. On doubles R computes them in long double
# with special cases of its own, which rfuse does not reproduce: refused.
integer_division <- function(op, e1, e2, call) {
  if (!is.null(nd <- native_int_dtype(e1, e2))) return(tensor_integer_division(op, e1, e2, nd, call))
  if (is_native_int(e1) || is_native_int(e2))
    rf_unsupported(op, call, "on an integer tensor it takes an integer divisor (`x %/% 2L`, or a tensor of int dtype)")
  if (!is_int_value(e1) || !is_int_value(e2))
    rf_unsupported(op, call, "it is supported on integers only (R computes it on doubles in long double precision)")
  ib2 <- int_ref(e2)
  nonzero <- if (!is_sym(e2)) int_bound("const", v = if (any(e2 == 0, na.rm = TRUE)) Inf else 0)
    else if (.rf_state$int_bounds[[ib2]]$kind == "input") int_bound("nonzero", i = .rf_state$int_bounds[[ib2]]$i)
    else rf_unsupported(op, call, paste("its divisor is computed inside the function and may be 0, where R",
                                        "gives NA; divide by an argument or a constant"))
  ab <- align2(e1, e2, call, "arith")
  q <- emit(.rf_b_unary, "floor", emit(.rf_b_binary, "div", ab$a$id, ab$b$id, call = call), call = call)
  ib1 <- int_ref(e1)
  if (op == "%/%")
    return(new_sym(q, ab$target$rdim, ab$target$len, trace_float(), int_bound("max", int_bound("same", ib1), nonzero)))
  id <- emit(.rf_b_binary, "sub", ab$a$id, emit(.rf_b_binary, "mul", q, ab$b$id, call = call), call = call)
  new_sym(id, ab$target$rdim, ab$target$len, trace_float(), int_bound("max", int_bound("mod", ib1, ib2), nonzero))
}

# A pointwise binary op of integer tensors' values, in their integer dtype `nd`.
int_binary <- function(kind, e1, e2, nd, call, lenient = FALSE) {
  ab <- align2(e1, e2, call, "arith", lenient = lenient, dtype = nd)
  new_sym(emit(.rf_b_binary, kind, ab$a$id, ab$b$id, call = call), ab$target$rdim, ab$target$len, nd)
}

# %/% and %% of integer tensors (torch's floor_divide and remainder, R's %/% and %%): int32
# through float64, where floor(x / y) is exact for every int32 pair; the divisor a constant
# without zeros (an integer division by zero has no value here: R gives NA, torch an error).
# int64 values beyond 2^53 would not be exact through float64: refused.
tensor_integer_division <- function(op, e1, e2, nd, call) {
  if (nd == "i64")
    rf_unsupported(op, call, "on int64 tensors it is not supported (cast to int32 with $to(dtype = \"int32\"))")
  if (is_sym(e2) || !length(e2) || any(e2 == 0))
    rf_unsupported(op, call, paste("on an integer tensor the divisor must be a nonzero integer constant (`x %/% 2L`):",
                                   "a divisor that may be 0 has no integer result"))
  ab <- align2(e1, e2, call, "arith", dtype = nd)
  a64 <- cast_sym(ab$a, "f64"); b64 <- cast_sym(ab$b, "f64")
  q <- cast_sym(new_sym(emit(.rf_b_unary, "floor", emit(.rf_b_binary, "div", a64$id, b64$id, call = call), call = call),
                        ab$target$rdim, ab$target$len, "f64"), nd)
  if (op == "%/%") return(q)
  new_sym(emit(.rf_b_binary, "sub", ab$a$id, emit(.rf_b_binary, "mul", q$id, ab$b$id, call = call), call = call),
          ab$target$rdim, ab$target$len, nd)
}

math_ops <- c(exp = "exp", log = "log", sqrt = "sqrt", abs = "abs", tanh = "tanh", sin = "sin",
              cos = "cos", floor = "floor", tan = "tan", atan = "atan", asin = "asin", acos = "acos",
              gamma = "tgamma", lgamma = "lgamma", digamma = "digamma", trigamma = "trigamma")

# Math functions written with the traced ops: each as accurate as R's to within a few ulps
# (log1p and expm1 by Goldberg's correction of log(1 + x) and exp(x) - 1; sinh through expm1 so
# small arguments do not cancel).
composite_math <- list(
  sign = function(x) rf_ifelse(x > 0, 1, rf_ifelse(x < 0, -1, x)),
  trunc = function(x) rf_ifelse(x < 0, -floor(-x), floor(x)),
  log1p = function(x) { u <- 1 + x; rf_ifelse(u == 1, x, log(u) * (x / (u - 1))) },
  expm1 = function(x) {
    u <- exp(x)
    rf_ifelse(u == 1, x, rf_ifelse(u - 1 == -1, -1, rf_ifelse(u == Inf, u, (u - 1) * (x / log(u)))))
  },
  log2 = function(x) log(x) / log(2),
  log10 = function(x) log(x) / log(10),
  sinh = function(x) (composite_math$expm1(x) - composite_math$expm1(-x)) / 2,
  cosh = function(x) (exp(x) + exp(-x)) / 2)

# R's cumulative functions of a traced value: over all its elements (dims dropped); integers
# stay integers for cumsum / cummax / cummin (cumprod is a double, as in R).
cumulative <- function(op, x, call) {
  # An integer tensor's cumsum/cummax/cummin in its dtype (cumsum in int64, as torch's).
  if (op != "cumprod" && is_native_int(x)) {
    s <- reshape_sym(to_dtype(x, if (op == "cumsum") "i64" else x$dtype, call), NULL, x$len)
    kind <- c(cumsum = "sum", cummax = "max", cummin = "min")[[op]]
    return(if (x$len == 0) s else new_sym(emit(.rf_b_scan, s$id, 0L, kind, call = call), NULL, x$len, s$dtype))
  }
  s <- reshape_sym(to_dtype(x, trace_float(), call), NULL, x$len)
  kind <- c(cumsum = "sum", cumprod = "prod", cummax = "max", cummin = "min")[[op]]
  ib <- if (is_int_value(x) && op != "cumprod")
    if (op == "cumsum") int_bound("sum", int_ref(x), n = x$len) else int_bound("same", int_ref(x))
  if (x$len == 0) return(new_sym(s$id, NULL, 0L, s$dtype, ib))
  new_sym(emit(.rf_b_scan, s$id, 0L, kind, call = call), NULL, x$len, s$dtype, ib)
}

# R's math functions keep their argument's attributes; the cumulative ones keep only names.
#' @export
Math.rf_sym <- function(x, ...) {
  call <- generic_call(.Generic)
  op <- .Generic
  if (op %in% c("cumsum", "cumprod", "cummax", "cummin"))
    return(with_attrs(cumulative(op, x, call), if (is.null(x$rdim)) x$attrs["names"]))
  with_attrs(math_sym(op, x, call, ...), x$attrs)
}
math_sym <- function(op, x, call, ...) {
  if (op %in% names(composite_math)) return(composite_math[[op]](to_dtype(x, trace_float(), call)))
  if (op == "round") { # digits = 0: the nearest integer, ties to even (IEC 60559), as R
    digits <- if (...length()) ..1 else 0
    if (is_sym(digits) || !is.numeric(digits) || length(digits) != 1 || digits != 0)
      rf_unsupported("round", call, "only round(x) (digits = 0) is traced; R rounds other digits in long double")
    s <- to_dtype(x, trace_float(), call)
    return(new_sym(emit(.rf_b_unary, "round_even", s$id, call = call), s$rdim, s$len, s$dtype,
                   if (is_int_value(x)) int_bound("same", int_ref(x))))
  }
  if (!op %in% c(names(math_ops), "ceiling")) rf_unsupported(op, call)
  if (op == "log" && length(list(...)) > 0) {
    base <- list(...)[[1]]
    return(log(to_dtype(x, trace_float(), call)) / log(base))
  }
  s <- to_dtype(x, trace_float(), call)
  if (op == "ceiling") { # -floor(-x)
    neg <- emit(.rf_b_unary, "neg", s$id, call = call)
    return(new_sym(emit(.rf_b_unary, "neg", emit(.rf_b_unary, "floor", neg, call = call), call = call),
                   s$rdim, s$len, s$dtype))
  }
  if (op == "abs" && is_native_int(x))
    return(new_sym(emit(.rf_b_unary, "abs", x$id, call = call), x$rdim, x$len, x$dtype))
  # abs() of an integer is an integer in R; floor() and the others are doubles.
  ib <- if (op == "abs" && is_int_value(x)) int_bound("same", int_ref(x))
  new_sym(emit(.rf_b_unary, math_ops[[op]], s$id, call = call), s$rdim, s$len, s$dtype, ib)
}

# Reduces every element of a symbolic value to a length-1 vector.
reduce_all <- function(kind, x, call) {
  x <- as_sym(x, call)
  # An integer tensor's values reduce in their dtype (a sum in int64, as torch's).
  s <- if (is_native_int(x) && kind %in% c("sum", "max", "min")) to_dtype(x, if (kind == "sum") "i64" else x$dtype, call)
       else to_dtype(x, trace_float(), call)
  t <- sym_tshape(s)
  id <- emit(.rf_b_reduce, kind, s$id, seq_along(t) - 1L, FALSE, call = call)
  id <- emit(.rf_b_reshape, id, 1L, call = call)
  new_sym(id, NULL, 1L, s$dtype)
}

# x with its NA / NaN elements replaced by `v` (na.rm = TRUE: what a reduction skips). A
# traced value's NA is a NaN (inputs holding R's NA are answered by base R).
nan_to <- function(x, v) if (is_sym(x)) rf_ifelse(is.na.rf_sym(x), v, x) else { x[is.na(x)] <- v; x }

# any() / all() of logical values (R's coercion of numbers to logical, with its warning, refused).
any_all <- function(op, args, call) {
  if (!all(vapply(args, function(a) if (is_sym(a)) a$dtype == "i1" else is.logical(a) && !anyNA(a), TRUE)))
    rf_unsupported(op, call, "only logical values (comparisons, masks) without NA are traced")
  parts <- lapply(args, function(a) reduce_all(if (op == "any") "max" else "min", a, call))
  v <- Reduce(function(a, b) new_sym(emit(.rf_b_binary, if (op == "any") "max" else "min", a$id, b$id, call = call),
                                     NULL, 1L, a$dtype), parts)
  v > 0
}

#' @export
Summary.rf_sym <- function(..., na.rm = FALSE) {
  call <- generic_call(.Generic)
  op <- .Generic
  na_rm <- flag(na.rm, "na.rm", op, call)
  if (op %in% c("any", "all")) return(any_all(op, list(...), call))
  if (op == "range") return(rf_c(min(..., na.rm = na_rm), max(..., na.rm = na_rm)))
  # na.rm: each NA / NaN replaced by the reduction's identity (max of nothing is -Inf, as R's).
  args <- list(...)
  if (na_rm) args <- lapply(args, nan_to, v = c(sum = 0, prod = 1, max = -Inf, min = Inf)[[op]])
  if (op == "prod") { # the last of the running products (a double, as R's)
    all <- do.call(rf_c, c(args, list(1)))
    cp <- cumulative("cumprod", all, call)
    return(index_sym(cp, list(cp$len), TRUE, call))
  }
  if (!op %in% c("sum", "max", "min")) rf_unsupported(op, call)
  # sum/max/min of integers or logicals are integers in R (a sum beyond R's range is a double:
  # the guard sends such calls to base R).
  # Integer tensors' values reduce in their dtype, a sum in int64 (see reduce_all), unguarded.
  nd <- do.call(native_int_dtype, args)
  int <- is.null(nd) && all(vapply(args, is_int_value, TRUE))
  parts <- lapply(args, function(x) {
    s <- reduce_all(op, x, call)
    if (!is.null(nd)) return(to_dtype(s, if (op == "sum") "i64" else nd, call))
    if (int) s$ib <- if (op == "sum") int_bound("sum", int_ref(x), n = rlen(x)) else int_bound("same", int_ref(x))
    s
  })
  if (op != "sum" && sum(vapply(args, rlen, 0)) == 0) { # R's -Inf / Inf, with its warning on every call
    if (!is.null(nd)) # an integer has no -Inf (torch refuses too)
      rf_unsupported(op, call, "of no integer tensor elements: it has no integer value (R's is -Inf / Inf)")
    .rf_state$warnings <- c(.rf_state$warnings,
                            sprintf("no non-missing arguments to %s; returning %s", op, if (op == "max") "-Inf" else "Inf"))
  }
  combine <- c(sum = "add", max = "max", min = "min")[[op]]
  Reduce(function(a, b) new_sym(emit(.rf_b_binary, combine, a$id, b$id, call = call), NULL, 1L, a$dtype,
                                if (int) int_bound(if (op == "sum") "add" else "max", a$ib, b$ib)),
         parts)
}

#' Methods for symbolic values
#'
#' While [rf_jit()] traces a function its arguments are symbolic values of class `rf_sym`;
#' these methods record the operation instead of computing it. They are not called directly.
#'
#' @param x A symbolic value.
#' @param ... Ignored.
#' @name rf_sym-methods
#' @keywords internal
#' @method mean rf_sym
#' @export
mean.rf_sym <- function(x, ...) {
  call <- generic_call("mean")
  a <- list(...)
  extra <- setdiff(names(a) %||% rep("", length(a)), c("na.rm", "trim"))
  if (length(extra)) rf_unsupported("mean", call, sprintf("mean() takes only 'trim' and 'na.rm' (not %s)",
                                                         paste(sQuote(extra, FALSE), collapse = ", ")))
  if (!is.null(a$trim) && (is_sym(a$trim) || !is.numeric(a$trim) || length(a$trim) != 1 || a$trim != 0))
    rf_unsupported("mean", call, "a trimmed mean sorts its values: only trim = 0 is traced")
  if (!flag(a$na.rm %||% FALSE, "na.rm", "mean", call)) return(reduce_all("mean", x, call))
  # The mean of the values that are not NA (NaN when there are none, as R's).
  reduce_all("sum", nan_to(x, 0), call) / reduce_all("sum", !is.na.rf_sym(x), call)
}

#' @rdname rf_sym-methods
#' @method t rf_sym
#' @export
t.rf_sym <- function(x) {
  call <- sys.call()
  if (is.null(x$rdim)) return(attrs_from_proxy(reshape_sym(x, c(1L, x$len)), x, base::t))
  if (length(x$rdim) != 2) rf_abort("rfuse_shape_error", "argument is not a matrix", call)
  id <- emit(.rf_b_transpose, x$id, c(1L, 0L), call = call)
  attrs_from_proxy(new_sym(id, rev(x$rdim), x$len, x$dtype, x$ib), x, base::t)
}

# ---- Plain functions bound in the traced function's environment -----------------------------
# Each falls back to base R when no argument is symbolic.

any_sym <- function(...) any(vapply(list(...), is_sym, logical(1)))

# As an R matrix (rdim c(r, c)) for %*%: vectors become rows or columns as base R decides.
as_matrix_sym <- function(x, call) {
  x <- as_sym(x, call)
  if (!is.null(x$rdim) && length(x$rdim) != 2)
    rf_shape_error("non-conformable arguments", call)
  x
}

matmul_syms <- function(x, y, call, ta = FALSE, tb = FALSE) {
  # x is R m x k (tensor [k, m]), y is R k x n (tensor [n, k]); R's x %*% y is the tensor
  # y_t @ x_t of shape [n, m]. ta / tb: R-level transposes of x / y.
  xm <- x$rdim; ym <- y$rdim
  m <- if (ta) xm[2] else xm[1]; k1 <- if (ta) xm[1] else xm[2]
  k2 <- if (tb) ym[2] else ym[1]; n <- if (tb) ym[1] else ym[2]
  if (k1 != k2) rf_shape_error("non-conformable arguments", call)
  x <- to_dtype(x, trace_float(), call); y <- to_dtype(y, trace_float(), call)
  id <- emit(.rf_b_matmul, y$id, x$id, tb, ta, call = call)
  new_sym(id, c(m, n), as.double(m) * n, trace_float()) # beyond 2^31 elements too
}

# The dimnames of a matrix product (R's: the row names of the left factor, the column names of
# the right one; for crossprod and tcrossprod those of the transposed factors).
product_dimnames <- function(s, x, y, rows_of_x, cols_of_y) {
  dn <- function(v, k) { d <- sym_attrs(v)$dimnames; if (length(dim(v)) == 2 && !is.null(d)) d[[k]] }
  r <- dn(x, rows_of_x); c <- dn(y, cols_of_y)
  if (is.null(r) && is.null(c)) s else with_attrs(s, list(dimnames = list(r, c)))
}

rf_matprod <- function(x, y) {
  call <- sys.call()
  if (!any_sym(x, y)) return(base::`%*%`(x, y))
  product_dimnames(matprod_syms(x, y, call), x, y, 1L, 2L)
}
matprod_syms <- function(x, y, call) {
  x <- as_matrix_sym(x, call); y <- as_matrix_sym(y, call)
  if (is.null(x$rdim) && is.null(y$rdim)) {
    if (x$len != y$len) rf_shape_error("non-conformable arguments", call)
    x <- reshape_sym(x, c(1L, x$len)); y <- reshape_sym(y, c(y$len, 1L))
  } else if (is.null(x$rdim)) {
    x <- reshape_sym(x, if (x$len == y$rdim[1]) c(1L, x$len) else c(x$len, 1L))
  } else if (is.null(y$rdim)) {
    y <- reshape_sym(y, if (y$len == x$rdim[2]) c(y$len, 1L) else c(1L, y$len))
  }
  matmul_syms(x, y, call)
}

rf_crossprod <- function(x, y = NULL) {
  call <- sys.call()
  if (!any_sym(x, y)) return(base::crossprod(x, y))
  x <- as_matrix_sym(x, call); y <- if (is.null(y)) x else as_matrix_sym(y, call)
  if (is.null(x$rdim)) x <- reshape_sym(x, c(x$len, 1L))
  if (is.null(y$rdim)) y <- reshape_sym(y, c(y$len, 1L))
  product_dimnames(matmul_syms(x, y, call, ta = TRUE), x, y, 2L, 2L)
}

rf_tcrossprod <- function(x, y = NULL) {
  call <- sys.call()
  if (!any_sym(x, y)) return(base::tcrossprod(x, y))
  x <- as_matrix_sym(x, call); y <- if (is.null(y)) x else as_matrix_sym(y, call)
  if (is.null(x$rdim)) x <- reshape_sym(x, c(x$len, 1L))
  if (is.null(y$rdim)) y <- reshape_sym(y, c(y$len, 1L))
  product_dimnames(matmul_syms(x, y, call, tb = TRUE), x, y, 1L, 1L)
}

# rowSums & co. for a matrix or array (dims = 1): reduce over R dims (dims+1):n (rows) or 1:dims.
margin_reduce <- function(x, kind, rows, dims, call) {
  x <- to_dtype(as_sym(x, call), trace_float(), call)
  rd <- x$rdim
  if (is.null(rd) || length(rd) < 2)
    rf_abort("rfuse_shape_error", "'x' must be an array of at least two dimensions", call)
  n <- length(rd)
  if (dims < 1 || dims >= n) rf_abort("rfuse_shape_error", "invalid 'dims'", call)
  keep_r <- if (rows) seq_len(dims) else seq.int(dims + 1, n)   # R dims that remain
  red_r <- setdiff(seq_len(n), keep_r)
  tdims <- n - red_r                                              # tensor dims reduced
  id <- emit(.rf_b_reduce, kind, x$id, sort(as.integer(tdims)), FALSE, call = call)
  out <- rd[keep_r]
  new_sym(id, if (length(out) > 1) out else NULL, prod(out), x$dtype)
}

# rowSums & co. with na.rm: the sums of the values that are not NA, the means divided by their count.
# The result is named by x's row (column) names, as R's.
margin_sum_mean <- function(x, mean, rows, na.rm, dims, call) {
  x <- as_sym(x, call)
  r <- if (!flag(na.rm, "na.rm", if (rows) "rowSums" else "colSums", call))
    margin_reduce(x, if (mean) "mean" else "sum", rows, dims, call)
  else {
    s <- margin_reduce(nan_to(x, 0), "sum", rows, dims, call)
    if (mean) s / margin_reduce(!is.na.rf_sym(x), "sum", rows, dims, call) else s
  }
  attrs_from_proxy(with_attrs(r, NULL), x, if (rows) base::rowSums else base::colSums, dims = dims)
}
rf_rowSums <- function(x, na.rm = FALSE, dims = 1L) {
  if (!is_sym(x)) return(base::rowSums(x, na.rm, dims))
  margin_sum_mean(x, FALSE, TRUE, na.rm, dims, sys.call())
}
rf_colSums <- function(x, na.rm = FALSE, dims = 1L) {
  if (!is_sym(x)) return(base::colSums(x, na.rm, dims))
  margin_sum_mean(x, FALSE, FALSE, na.rm, dims, sys.call())
}
rf_rowMeans <- function(x, na.rm = FALSE, dims = 1L) {
  if (!is_sym(x)) return(base::rowMeans(x, na.rm, dims))
  margin_sum_mean(x, TRUE, TRUE, na.rm, dims, sys.call())
}
rf_colMeans <- function(x, na.rm = FALSE, dims = 1L) {
  if (!is_sym(x)) return(base::colMeans(x, na.rm, dims))
  margin_sum_mean(x, TRUE, FALSE, na.rm, dims, sys.call())
}

sweep_funs <- list("+" = `+`, "-" = `-`, "*" = `*`, "/" = `/`)

rf_sweep <- function(x, MARGIN, STATS, FUN = "-", check.margin = TRUE, ...) {
  call <- sys.call()
  if (!any_sym(x, STATS)) return(base::sweep(x, MARGIN, STATS, FUN, check.margin, ...))
  name <- if (is.character(FUN)) FUN else {
    hit <- names(sweep_funs)[vapply(sweep_funs, identical, logical(1), FUN)]
    if (length(hit)) hit else "<function>"
  }
  if (!name %in% names(sweep_funs))
    rf_unsupported("sweep", call, "only FUN = \"+\", \"-\", \"*\" or \"/\" can be traced")
  x <- as_sym(x, call)
  rd <- x$rdim
  if (is.null(rd)) rf_abort("rfuse_shape_error", "sweep() needs an array 'x'", call)
  if (length(MARGIN) != 1 || !MARGIN %in% seq_along(rd))
    rf_unsupported("sweep", call, "only a single MARGIN in 1..length(dim(x)) can be traced")
  if (rlen(STATS) != rd[MARGIN])
    rf_unsupported("sweep", call, sprintf("STATS must have length dim(x)[%d] = %d", MARGIN, rd[MARGIN]))
  s <- to_dtype(reshape_sym(as_sym(STATS, call), NULL, rd[MARGIN]), trace_float(), call)
  tdim <- length(rd) - MARGIN
  id <- emit(.rf_b_broadcast, s$id, sym_tshape(x), tdim, call = call)
  stats_full <- new_sym(id, rd, x$len, s$dtype)
  sweep_funs[[name]](x, stats_full)
}

pminmax <- function(kind, args, call) {
  args <- args[!vapply(args, is.null, logical(1))]
  # Of integers or logicals an integer.
  int <- all(vapply(args, is_int_value, TRUE))
  Reduce(function(a, b) {
    if (!int && !is.null(r <- emit(.rf_b_pointwise_fast, kind, a, b, trace_float(), call = call))) return(r)
    if (!is.null(nd <- native_int_dtype(a, b))) return(int_binary(kind, a, b, nd, call, lenient = TRUE))
    ab <- align2(a, b, call, "arith", lenient = TRUE)
    new_sym(emit(.rf_b_binary, kind, ab$a$id, ab$b$id, call = call), ab$target$rdim,
            ab$target$len, trace_float(), if (int) int_bound("max", int_ref(a), int_ref(b)))
  }, args)
}

# na.rm: an NA on one side gives the other side (NA only where all are).
pminmax_na_rm <- function(kind, args, call) {
  if (length(args) == 1) return(args[[1]])
  Reduce(function(a, b) {
    m <- pminmax(kind, list(nan_to(a, if (kind == "max") -Inf else Inf), nan_to(b, if (kind == "max") -Inf else Inf)), call)
    rf_ifelse(is.na(a) & is.na(b), NaN, m)
  }, args)
}
rf_pmax <- function(..., na.rm = FALSE) {
  if (!any_sym(...)) return(base::pmax(..., na.rm = na.rm))
  call <- sys.call()
  if (flag(na.rm, "na.rm", "pmax", call)) pminmax_na_rm("max", list(...), call) else pminmax("max", list(...), call)
}
rf_pmin <- function(..., na.rm = FALSE) {
  if (!any_sym(...)) return(base::pmin(..., na.rm = na.rm))
  call <- sys.call()
  if (flag(na.rm, "na.rm", "pmin", call)) pminmax_na_rm("min", list(...), call) else pminmax("min", list(...), call)
}

rf_ifelse <- function(test, yes, no) {
  call <- sys.call()
  if (!any_sym(test, yes, no)) return(base::ifelse(test, yes, no))
  cond <- to_dtype(as_sym(test, call), "i1", call)
  target <- list(rdim = cond$rdim, len = cond$len)
  # yes/no are recycled to length(test) (as rep() does), then take test's attributes.
  branch <- function(v) {
    v_len <- rlen(v)
    if (!is_sym(v) && v_len != 1) v <- rep_len(as.vector(v), cond$len)
    if (is_sym(v) && !is.null(v$rdim) && v$len == cond$len) v <- reshape_sym(v, cond$rdim, cond$len)
    if (is_sym(v) && is.null(v$rdim) && !is.null(cond$rdim) && v$len != cond$len && v$len != 1)
      v <- expand_to(v, list(rdim = NULL, len = cond$len), call)
    to_dtype(expand_to(v, target, call, nd), nd %||% trace_float(), call)
  }
  nd <- native_int_dtype(yes, no) # integer tensors' branches: in their dtype
  y <- branch(yes); n <- branch(no)
  if (!is.null(nd))
    return(with_attrs(new_sym(emit(.rf_b_select, cond$id, y$id, n$id, call = call), cond$rdim, cond$len, nd),
                      sym_attrs(test)))
  # Integer branches give an integer (R's type of mixed branches depends on which are taken: a
  # double here).
  ib <- if (is_int_value(yes) && is_int_value(no)) int_bound("max", int_ref(yes), int_ref(no))
  # The result has test's attributes (R's ifelse).
  with_attrs(new_sym(emit(.rf_b_select, cond$id, y$id, n$id, call = call), cond$rdim, cond$len, trace_float(), ib),
             sym_attrs(test))
}

# Base functions that would look inside a traced value's record (a list) instead of its elements:
# is.na, names and is.numeric answer as for the R value (no NA and no names reach a compiled
# program: such inputs are answered by base R), the others refuse a traced value.
#' @export
is.na.rf_sym <- function(x) { # NaN computed inside (0/0): x != x
  call <- sys.call()
  with_attrs(new_sym(emit(.rf_b_binary, "ne", x$id, x$id, call = call), x$rdim, x$len, "i1"),
             x$attrs[c("names", "dimnames")])
}
#' @export
names.rf_sym <- function(x) x$attrs$names
#' @export
dimnames.rf_sym <- function(x) x$attrs$dimnames
#' @export
is.numeric.rf_sym <- function(x) x$dtype != "i1"

# The guards (make_guard) of base functions that would look inside a traced value: their reasons.
loop_refusal <- paste("it loops over the elements of a traced value: rfuse compiles one program for every value",
                      "of the traced arguments; write it as vector operations")
text_refusal <- "a traced value has no text before the program runs (format results after the call)"

# sapply / vapply over a static sequence whose function returns traced values: the results
# combined as base R's simplification would (length-1 results into a vector, equal-length ones
# into the columns of a matrix); otherwise base R's own.
simplify_traced <- function(fname, X, res, use_names, call) {
  if (any(vapply(res, has_attrs, TRUE))) attrs_refusal(fname, call)
  if (use_names && (is.character(X) || !is.null(names(X))))
    rf_unsupported(fname, call, "traced results carry no names; use seq_along() or USE.NAMES = FALSE")
  lens <- vapply(res, rlen, 0)
  if (length(res) == 0 || any(lens != lens[1]) || !all(vapply(res, function(r) is_sym(r) || is.numeric(r) || is.logical(r), TRUE)))
    return(res)
  flat <- lapply(res, function(r) if (is_sym(r)) reshape_sym(r, NULL, r$len) else as.vector(r))
  if (lens[1] == 1) do.call(rf_c, flat) else do.call(rf_cbind, unname(flat))
}
# FUN over a static X (lapply's results), named by a character X as sapply / vapply name them.
apply_each <- function(fname, call, use_names, X, FUN, ...) { # (FUN's own arguments last)
  if (is_sym(X)) rf_unsupported(fname, call, loop_refusal)
  res <- base::lapply(X, match.fun(FUN), ...)
  if (use_names && is.character(X) && is.null(names(res))) names(res) <- X
  res
}
rf_sapply <- function(X, FUN, ..., simplify = TRUE, USE.NAMES = TRUE) {
  call <- sys.call()
  res <- apply_each("sapply", call, USE.NAMES, X, FUN, ...)
  if (!any(vapply(res, is_sym, TRUE))) # base R's sapply, on the results at hand
    return(if (!isFALSE(simplify)) simplify2array(res, higher = (simplify == "array")) else res)
  if (isFALSE(simplify)) return(res)
  simplify_traced("sapply", X, res, USE.NAMES, call)
}
rf_vapply <- function(X, FUN, FUN.VALUE, ..., USE.NAMES = TRUE) {
  call <- sys.call()
  res <- apply_each("vapply", call, USE.NAMES, X, FUN, ...)
  if (!any(vapply(res, is_sym, TRUE))) # base R's vapply, on the results at hand
    return(base::vapply(res, identity, FUN.VALUE, USE.NAMES = USE.NAMES))
  for (r in res)
    if (rlen(r) != length(FUN.VALUE))
      rf_abort("rfuse_shape_error", sprintf("values must be length %d,\n but FUN(X[[i]]) result is length %d",
                                            length(FUN.VALUE), rlen(r)), call)
  simplify_traced("vapply", X, res, USE.NAMES, call)
}

rf_as_vector <- function(x, mode = "any") {
  if (!is_sym(x)) return(base::as.vector(x, mode))
  call <- sys.call()
  v <- reshape_sym(x, NULL, x$len)
  switch(if (is.character(mode) && length(mode) == 1) mode else "",
         any = v,
         numeric = , double = to_dtype(v, trace_float(), call),
         logical = if (v$dtype == "i1") v else rf_unsupported("as.vector", call, "numbers to logical: use x != 0"),
         rf_unsupported("as.vector", call, sprintf("mode %s of a traced value (only \"any\", \"numeric\", \"double\", \"logical\")",
                                                   deparse1(mode))))
}
rf_as_numeric <- function(x, ...) {
  if (!is_sym(x)) return(base::as.numeric(x, ...))
  to_dtype(reshape_sym(x, NULL, x$len), trace_float(), sys.call())
}

rf_matrix <- function(data = NA, nrow = 1, ncol = 1, byrow = FALSE, dimnames = NULL) {
  if (!is_sym(data)) { # base R's, with its missing(nrow) / missing(ncol) logic, on the values at hand
    args <- list(data = data, byrow = byrow, dimnames = dimnames)
    if (!missing(nrow)) args$nrow <- nrow
    if (!missing(ncol)) args$ncol <- ncol
    return(do.call(base::matrix, args))
  }
  call <- sys.call()
  if (!is.null(dimnames))
    rf_unsupported("matrix", call, "traced results carry no dimnames (set them after the call)")
  n <- data$len
  if (missing(nrow) && missing(ncol)) { nrow <- n; ncol <- 1 }
  else if (missing(ncol)) ncol <- ceiling(n / nrow)
  else if (missing(nrow)) nrow <- ceiling(n / ncol)
  if (as.double(nrow) * ncol > .Machine$integer.max)
    rf_unsupported("matrix", call, sprintf("a %.0f x %.0f matrix has more elements than rfuse traces (2^31 - 1)", nrow, ncol))
  if (identical(byrow, FALSE) && as.double(nrow) * ncol == n) return(reshape_sym(data, as.integer(c(nrow, ncol))))
  # The positions base R's matrix() would place (its recycling and byrow), gathered; its warnings
  # (data length not a multiple) repeat on every call, as R's would.
  pos <- withCallingHandlers(base::matrix(seq_len(n), nrow, ncol, byrow),
                             warning = function(w) {
                               .rf_state$warnings <- c(.rf_state$warnings, conditionMessage(w))
                               invokeRestart("muffleWarning")
                             })
  s <- index_sym(reshape_sym(data, NULL, n), list(as.vector(pos)), TRUE, call)
  reshape_sym(s, dim(pos))
}

# ---- Distributions (stats), on traced values ---------------------------------------------------
erfc_sym <- function(x, call) {
  s <- to_dtype(as_sym(x, call), trace_float(), call)
  new_sym(emit(.rf_b_unary, "erfc", s$id, call = call), s$rdim, s$len, s$dtype)
}
# The call's arguments must be plain flags where R takes flags.
flag <- function(v, name, fname, call) {
  if (is_sym(v) || !is.logical(v) || length(v) != 1 || is.na(v))
    rf_unsupported(fname, call, sprintf("'%s' must be TRUE or FALSE", name))
  v
}
rf_pnorm <- function(q, mean = 0, sd = 1, lower.tail = TRUE, log.p = FALSE) {
  if (!any_sym(q, mean, sd)) return(stats::pnorm(q, mean, sd, lower.tail, log.p))
  call <- sys.call()
  z <- (q - mean) / sd
  p <- 0.5 * erfc_sym((if (flag(lower.tail, "lower.tail", "pnorm", call)) -z else z) / sqrt(2), call)
  if (flag(log.p, "log.p", "pnorm", call)) log(p) else p
}
rf_dnorm <- function(x, mean = 0, sd = 1, log = FALSE) {
  if (!any_sym(x, mean, sd)) return(stats::dnorm(x, mean, sd, log))
  call <- sys.call()
  z <- (x - mean) / sd
  if (flag(log, "log", "dnorm", call)) -(0.918938533204672741780329736406 + 0.5 * z * z + base::log(sd))
  else 0.398942280401432677939946059934 * exp(-0.5 * z * z) / sd
}
rf_qnorm <- function(p, mean = 0, sd = 1, lower.tail = TRUE, log.p = FALSE) {
  if (!any_sym(p, mean, sd)) return(stats::qnorm(p, mean, sd, lower.tail, log.p))
  call <- sys.call()
  if (flag(log.p, "log.p", "qnorm", call)) rf_unsupported("qnorm", call, "log.p = TRUE is not supported")
  s <- to_dtype(as_sym(p, call), trace_float(), call)
  z <- new_sym(emit(.rf_b_unary, "qnorm", s$id, call = call), s$rdim, s$len, s$dtype)
  mean + sd * (if (flag(lower.tail, "lower.tail", "qnorm", call)) z else -z) # the upper tail by symmetry
}
rf_lbeta <- function(a, b) {
  if (!any_sym(a, b)) return(base::lbeta(a, b))
  lgamma(a) + lgamma(b) - lgamma(a + b)
}
rf_beta <- function(a, b) {
  if (!any_sym(a, b)) return(base::beta(a, b))
  exp(rf_lbeta(a, b))
}
# choose(n, k) for a number k < 30 as R computes it: the running product n (n-1)/2 ... (n-k+1)/k,
# rounded where n is an integer (to within R's 1e-7); NaN n stays NaN.
rf_choose <- function(n, k) {
  if (!any_sym(n, k)) return(base::choose(n, k))
  call <- sys.call()
  if (is_sym(k) || !is.numeric(k) || length(k) != 1 || is.na(k))
    rf_unsupported("choose", call, "only a single number k that is not traced")
  if (abs(k - round(k)) > 1e-7) rf_unsupported("choose", call, "k must be a whole number (R rounds it with a warning)")
  k <- round(k)
  if (k >= 30) rf_unsupported("choose", call, "k >= 30 (R computes it through beta functions)")
  n <- to_dtype(as_sym(n, call), trace_float(), call)
  if (k <= 0) return(rf_ifelse(is.na(n), n, if (k == 0) 1 else 0))
  r <- n
  for (j in seq_len(k)[-1]) r <- r * ((n - (j - 1)) / j)
  whole <- abs(n - round(n)) <= 1e-7 * rf_pmax(1, abs(n))
  rf_ifelse(whole, round(r), r)
}

rf_plogis <- function(q, location = 0, scale = 1, lower.tail = TRUE, log.p = FALSE) {
  if (!any_sym(q, location, scale)) return(stats::plogis(q, location, scale, lower.tail, log.p))
  call <- sys.call()
  z <- (q - location) / scale
  if (!flag(lower.tail, "lower.tail", "plogis", call)) z <- -z
  if (flag(log.p, "log.p", "plogis", call)) -log1p(exp(-z)) else 1 / (1 + exp(-z))
}
rf_dlogis <- function(x, location = 0, scale = 1, log = FALSE) {
  if (!any_sym(x, location, scale)) return(stats::dlogis(x, location, scale, log))
  call <- sys.call()
  z <- abs((x - location) / scale)
  e <- exp(-z)
  if (flag(log, "log", "dlogis", call)) -z - 2 * log1p(e) - base::log(scale) else e / (1 + e)^2 / scale
}
rf_qlogis <- function(p, location = 0, scale = 1, lower.tail = TRUE, log.p = FALSE) {
  if (!any_sym(p, location, scale)) return(stats::qlogis(p, location, scale, lower.tail, log.p))
  call <- sys.call()
  if (flag(log.p, "log.p", "qlogis", call)) rf_unsupported("qlogis", call, "log.p = TRUE is not supported")
  r <- log(p / (1 - p))
  location + scale * (if (flag(lower.tail, "lower.tail", "qlogis", call)) r else -r)
}

rf_atan2 <- function(y, x) {
  if (!any_sym(y, x)) return(base::atan2(y, x))
  call <- sys.call()
  ab <- align2(y, x, call, "arith")
  new_sym(emit(.rf_b_binary, "atan2", ab$a$id, ab$b$id, call = call), ab$target$rdim, ab$target$len, trace_float())
}

# ---- Type helpers on traced values --------------------------------------------------------------
rf_is_matrix <- function(x) if (is_sym(x)) length(x$rdim) == 2 else base::is.matrix(x)
rf_is_array <- function(x) if (is_sym(x)) !is.null(x$rdim) else base::is.array(x)
rf_is_double <- function(x) if (is_sym(x)) x$dtype != "i1" && !is_int_value(x) else base::is.double(x)
rf_is_integer <- function(x) if (is_sym(x)) x$dtype != "i1" && is_int_value(x) else base::is.integer(x)
rf_is_logical <- function(x) if (is_sym(x)) x$dtype == "i1" else base::is.logical(x)
rf_as_matrix <- function(x, ...) {
  if (!is_sym(x)) return(base::as.matrix(x, ...))
  if (...length()) rf_unsupported("as.matrix", sys.call(), "only as.matrix(x)")
  if (length(x$rdim) == 2) x else attrs_from_proxy(reshape_sym(x, c(x$len, 1L), x$len), x, base::as.matrix)
}
rf_I <- function(x) if (is_sym(x)) with_attrs(x, c(x$attrs["class"], list(class = unique(c("AsIs", x$attrs$class))))) else base::I(x)
rf_unname <- function(obj, force = FALSE) {
  if (!is_sym(obj)) return(base::unname(obj, force))
  with_attrs(obj, obj$attrs["class"])
}
rf_drop <- function(x) {
  if (!is_sym(x)) return(base::drop(x))
  if (is.null(x$rdim)) return(x)
  keep <- x$rdim[x$rdim != 1L]
  attrs_from_proxy(reshape_sym(x, if (length(keep) >= 2) keep else NULL, x$len), x, base::drop)
}
#' @export
is.finite.rf_sym <- function(x) {
  s <- to_dtype(x, trace_float(), sys.call())
  a <- abs(s)
  a < Inf # NaN compares false
}
#' @export
is.infinite.rf_sym <- function(x) abs(to_dtype(x, trace_float(), sys.call())) == Inf
#' @export
is.nan.rf_sym <- function(x) is.na.rf_sym(x)

base_guard <- function(name, why, deep = FALSE) make_guard(name, get(name, envir = baseenv()), why, deep)

# The functions bound (as these names) in a traced function's environment.
# Functions of a matrix's shape alone (upper.tri, lower.tri, row, col): on a traced value, R's
# answer for a matrix of its dims, a constant of the program.
shape_only <- function(f, name) function(x, ...) {
  if (!is_sym(x)) return(f(x, ...))
  if (length(x$rdim) != 2)
    rf_abort("rfuse_type_error", sprintf("%s() needs a matrix, not a value of dims c(%s)", name,
                                         paste(x$rdim %||% x$len, collapse = ", ")), sys.call())
  f(matrix(0, x$rdim[1], x$rdim[2]), ...)
}
rf_upper_tri <- shape_only(upper.tri, "upper.tri")
rf_lower_tri <- shape_only(lower.tri, "lower.tri")
rf_row <- shape_only(row, "row")
rf_col <- shape_only(col, "col")

# The base-R functions rfuse traces in place of R's own: name -> the expression giving rfuse's
# version, evaluated in rfuse's namespace when a traced body first names it (masked_traced_function):
# a body names few of them, and each is a lazily loaded object whose first load costs.
traced_function_exprs <- alist(`%*%` = rf_matprod, crossprod = rf_crossprod, tcrossprod = rf_tcrossprod,
  rowSums = rf_rowSums, colSums = rf_colSums, rowMeans = rf_rowMeans, colMeans = rf_colMeans,
  sweep = rf_sweep, pmax = rf_pmax, pmin = rf_pmin, ifelse = rf_ifelse,
  as.vector = rf_as_vector, as.numeric = rf_as_numeric, as.double = rf_as_numeric,
  matrix = rf_matrix,
  lapply = base_guard("lapply", loop_refusal), sapply = rf_sapply,
  vapply = rf_vapply, Map = base_guard("Map", loop_refusal),
  Filter = base_guard("Filter", loop_refusal), Reduce = base_guard("Reduce", loop_refusal),
  paste = base_guard("paste", text_refusal, TRUE), paste0 = base_guard("paste0", text_refusal, TRUE),
  sprintf = base_guard("sprintf", text_refusal, TRUE), unlist = rf_unlist,
  `[[` = rf_index2, `[[<-` = rf_subassign2,
  `[` = rf_index, `[<-` = rf_subassign, c = rf_c, cbind = rf_cbind, rbind = rf_rbind,
  rev = rf_rev, head = rf_head, tail = rf_tail, diff = rf_diff, rep = rf_rep, rep_len = rf_rep_len,
  outer = rf_outer, `%o%` = rf_outer_op, diag = rf_diag, `diag<-` = rf_diag_assign, apply = rf_apply,
  pnorm = rf_pnorm, dnorm = rf_dnorm, qnorm = rf_qnorm, beta = rf_beta, lbeta = rf_lbeta, plogis = rf_plogis, dlogis = rf_dlogis, qlogis = rf_qlogis,
  is.matrix = rf_is_matrix, is.array = rf_is_array, is.double = rf_is_double,
  is.integer = rf_is_integer, is.logical = rf_is_logical, as.matrix = rf_as_matrix, I = rf_I,
  drop = rf_drop, atan2 = rf_atan2, `dim<-` = rf_dim_assign, array = rf_array,
  max.col = rf_max_col, unname = rf_unname, var = rf_var, sd = rf_sd, cov = rf_cov, cor = rf_cor,
  scale = rf_scale, norm = rf_norm, which.max = rf_which_max, which.min = rf_which_min,
  choose = rf_choose, solve = rf_solve, chol = rf_chol, det = rf_det,
  upper.tri = rf_upper_tri, lower.tri = rf_lower_tri, row = rf_row, col = rf_col,
  which = base_guard("which", paste("the number of positions it returns depends on the traced values;",
                                    "use the mask itself (ifelse(mask, x, 0), x * mask) or which.max / which.min")),
  sort = rf_sort, order = rf_order, rank = rf_rank, median = rf_median,
  quantile = rf_quantile, try = rf_try)

# try() in traced code (ETM's forward: logit <- try(self$alphas(w)), then a branch on
# inherits(logit, "try-error")): the expression's value when it traces, as try() gives it when
# nothing fails. An expression that fails while tracing is refused: try() would return a
# "try-error" the program then held (and printed at each call, where the trace prints once);
# rfuse's own refusals pass through unchanged. (`silent` and `outFile` act only on a failure.)
rf_try <- function(expr, silent = FALSE, outFile = NULL) {
  call <- sys.call()
  tryCatch(expr, error = function(e) {
    if (inherits(e, "rfuse_unsupported")) stop(e)
    rf_unsupported("try", call, paste0("its expression fails while tracing (", conditionMessage(e),
                                       "): the program cannot hold try()'s \"try-error\" value"))
  })
}
