# R's recycling rules, applied exactly as base R applies them, resolved into explicit broadcasts.

rlen <- function(x) if (is_sym(x)) x$len else length(x)
rdim_of <- function(x) if (is_sym(x)) x$rdim else dim(x)

# The R structure (rdim, len) of `e1 op e2` under arithmetic's rules, or a shape error worded as
# base R words it. `lenient` (pmax/pmin) takes the first argument's dims when lengths agree.
result_structure <- function(e1, e2, call, lenient = FALSE) {
  d1 <- rdim_of(e1); d2 <- rdim_of(e2); l1 <- rlen(e1); l2 <- rlen(e2)
  if (!is.null(d1) && !is.null(d2)) {
    if (!identical(as.integer(d1), as.integer(d2))) {
      if (lenient && l1 == l2) return(list(rdim = d1, len = l1))
      rf_shape_error("non-conformable arrays", call)
    }
    return(list(rdim = d1, len = l1))
  }
  if (!is.null(d1) || !is.null(d2)) {
    arr_len <- if (is.null(d1)) l2 else l1
    vec_len <- if (is.null(d1)) l1 else l2
    if (vec_len > arr_len && arr_len > 0)
      rf_shape_error(sprintf("dims [product %d] do not match the length of object [%d]",
                             arr_len, vec_len), call)
    if (vec_len > 0 && arr_len %% vec_len != 0)
      warning("longer object length is not a multiple of shorter object length", call. = FALSE)
    return(list(rdim = if (is.null(d1)) d2 else d1, len = arr_len))
  }
  n <- if (l1 == 0 || l2 == 0) 0L else max(l1, l2)
  if (n > 0 && n %% min(l1, l2) != 0)
    warning("longer object length is not a multiple of shorter object length", call. = FALSE)
  list(rdim = NULL, len = n)
}

# Expands operand `x` (symbolic or constant) to the R structure `target`, recycling in R's
# column-major order: a scalar broadcasts; a vector whose length is the product of the leading
# R dims broadcasts over the trailing ones (pure broadcast_in_dim, which fusion sees through);
# other exact divisors go through a reshape; constants are recycled in R with rep_len.
expand_to <- function(x, target, call, dtype = NULL) {
  n <- target$len
  tgt <- tshape(target$rdim, n)
  if (!is_sym(x)) {
    if (length(x) == 1L || length(x) == n) {
      s <- lift_constant(if (length(x) == 1L) x else array(x, dim = target$rdim %||% n), call, dtype)
    } else {
      s <- lift_constant(array(rep_len(x, n), dim = target$rdim %||% n), call, dtype)
    }
  } else s <- x
  if (identical(sym_tshape(s), tgt)) return(new_sym(s$id, target$rdim, n, s$dtype))
  L <- s$len
  if (L == n) return(reshape_sym(s, target$rdim, n))
  if (L == 1L) {
    flat <- reshape_sym(s, NULL, 1L)
    id <- emit(.rf_b_broadcast, flat$id, tgt, length(tgt) - 1L, call = call)
    return(new_sym(id, target$rdim, n, s$dtype))
  }
  rd <- target$rdim %||% n
  k <- which(cumprod(rd) == L)
  if (length(k) > 0) {
    k <- k[1]
    lead <- reshape_sym(s, if (k == 1) NULL else rd[seq_len(k)], L)
    dims <- seq.int(length(tgt) - k, length(tgt) - 1L)
    id <- emit(.rf_b_broadcast, lead$id, tgt, dims, call = call)
    return(new_sym(id, target$rdim, n, s$dtype))
  }
  if (n %% L == 0) {
    flat <- reshape_sym(s, NULL, L)
    b <- emit(.rf_b_broadcast, flat$id, c(n %/% L, L), 1L, call = call)
    id <- emit(.rf_b_reshape, b, tgt, call = call)
    return(new_sym(id, target$rdim, n, s$dtype))
  }
  rf_unsupported(deparse(call[[1]]), call,
                 sprintf("recycling a traced length-%d vector over %d elements (not a multiple)", L, n))
}

# Brings two operands to a common structure and element type for a pointwise op.
# `kind`: "arith" (floats), "compare" (common type), "logic" (i1); `dtype` (an integer tensor's,
# see native_int_dtype) overrides it, constants then lifted in it.
align2 <- function(e1, e2, call, kind = "arith", lenient = FALSE, dtype = NULL) {
  target <- result_structure(e1, e2, call, lenient)
  a <- expand_to(e1, target, call, dtype)
  b <- expand_to(e2, target, call, dtype)
  want <- dtype %||% switch(kind, arith = trace_float(), logic = "i1",
                 compare = if (a$dtype == "i1" && b$dtype == "i1") "i1" else trace_float())
  list(a = to_dtype(a, want, call), b = to_dtype(b, want, call), target = target)
}

# Numbers to masks compare with zero (R's as.logical); masks to numbers are 0/1.
to_dtype <- function(s, dtype, call) {
  if (s$dtype == dtype) return(s)
  if (dtype == "i1") {
    zero <- expand_to(0, list(rdim = s$rdim, len = s$len), call)
    return(new_sym(emit(.rf_b_binary, "ne", s$id, zero$id, call = call), s$rdim, s$len, "i1"))
  }
  cast_sym(s, dtype)
}
