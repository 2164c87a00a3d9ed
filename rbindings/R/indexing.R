# Traced indexing: `[`, `[<-`, c(), cbind(), rbind(), rev(), head(), tail(), diff(), rep(),
# outer(), diag() on symbolic values, with R's semantics for static indices (1-based, negative
# indices drop, logical masks recycle, drop = TRUE). Every form becomes rfuse.slice / gather /
# reverse / concat / pad (index maps that fuse into the kernels reading them) or a select with a
# constant mask. An index computed inside the traced function would make the result's shape depend
# on the data: refused (ifelse() and masking say the same thing with a fixed shape).

data_dependent_why <- paste("the index is computed from the traced arguments, so the result's length",
                            "would depend on their values; use ifelse(mask, x, 0) or multiply by the mask,",
                            "or pass the index as a static argument (rf_jit(f, static = ...))")

# The 1-based positions that index `i` selects among `n`, as R's `[` does for one subscript.
# `dim_bounds`: out-of-range positions are R's "subscript out of bounds" (a matrix subscript);
# otherwise (a vector) R would answer NA, which rfuse does not trace.
index_positions <- function(i, n, call, dim_bounds = FALSE) {
  if (is_sym(i)) rf_unsupported("[", call, data_dependent_why)
  if (is.null(i)) return(integer())
  if (is.character(i) || is.factor(i))
    rf_unsupported("[", call, "traced values have no names; index by position")
  if (!(is.numeric(i) || is.logical(i)) || is.object(i))
    rf_abort("rfuse_type_error", sprintf("invalid subscript type '%s'", typeof(i)), call)
  if (anyNA(i))
    rf_unsupported("[", call, "an NA subscript selects NA, which rfuse's tensors cannot hold")
  if (is.logical(i)) {
    if (length(i) > n)
      rf_shape_error(if (dim_bounds) "(subscript) logical subscript too long" else
                       "subscript out of bounds (a logical subscript longer than the vector)", call)
    if (length(i) == 0) return(integer())
    return(which(rep_len(i, n)))
  }
  i <- as.integer(trunc(i)) # R truncates fractional subscripts toward zero
  if (any(i < 0)) {
    if (any(i > 0)) rf_shape_error("can't mix positive and negative subscripts", call)
    return(setdiff(seq_len(n), -i))
  }
  i <- i[i != 0]
  if (any(i > n)) rf_shape_error("subscript out of bounds", call)
  i
}

# `s` (a sym of tensor shape `shape`) restricted to 0-based `pos` along tensor dim `d`: a slice
# when the positions step evenly upwards, else a gather. Reversed runs are a reversed slice.
select_along <- function(s_id, shape, d, pos, call) {
  n <- shape[d + 1]
  k <- length(pos)
  if (k == n && all(pos == seq_len(n) - 1L)) return(s_id)
  rank <- length(shape)
  start <- integer(rank); limit <- as.integer(shape); strides <- rep(1L, rank)
  step <- if (k > 1) unique(diff(pos)) else 1L
  if (k == 0 || (length(step) == 1 && step >= 1)) {
    start[d + 1] <- if (k == 0) 0L else pos[1]
    limit[d + 1] <- if (k == 0) 0L else pos[k] + 1L
    strides[d + 1] <- step
    return(emit(.rf_b_slice, s_id, start, limit, as.integer(strides), call = call))
  }
  if (length(step) == 1 && step == -1) {
    run <- emit(.rf_b_slice, s_id, `[<-`(start, d + 1, pos[k]), `[<-`(limit, d + 1, pos[1] + 1L), strides, call = call)
    return(emit(.rf_b_reverse, run, as.integer(d), call = call))
  }
  emit(.rf_b_gather, s_id, as.integer(pos), as.integer(d), call = call)
}

# An empty subscript (the j of x[i, ]): all of its dimension. (NULL is a subscript selecting nothing.)
all_of_dim <- structure(list(), class = "rf_all_of_dim")
is_all_of_dim <- function(i) inherits(i, "rf_all_of_dim")

# The positions of each R dimension (or of the flattened vector) that the subscripts in `idx`
# (a list, all_of_dim for empty subscripts) select.
subscript_positions <- function(s, idx, call) {
  rd <- s$rdim
  if (length(idx) == 1) {
    i <- idx[[1]]
    if (is.matrix(i) && !is.logical(i))
      rf_unsupported("[", call, "indexing by a matrix of positions is not supported")
    return(list(flat = TRUE, pos = if (is_all_of_dim(i)) seq_len(s$len) else index_positions(i, s$len, call)))
  }
  if (length(idx) != length(rd)) rf_shape_error("incorrect number of dimensions", call)
  pos <- lapply(seq_along(rd), function(k)
    if (is_all_of_dim(idx[[k]])) seq_len(rd[k]) else index_positions(idx[[k]], rd[k], call, dim_bounds = TRUE))
  list(flat = FALSE, pos = pos)
}

# The subscripts of a `[` / `[<-` call (after x), each forced once, all_of_dim for empty ones.
subscripts_of <- function(dots_expr, n, elt) {
  lapply(seq_len(n), function(k) {
    if (k <= length(dots_expr) && identical(dots_expr[[k]], quote(expr = ))) all_of_dim else elt(k)
  })
}
# The subscripts as arguments of a call to base R's own `[` / `[<-`.
as_call_args <- function(idx) lapply(idx, function(e) if (is_all_of_dim(e)) quote(expr = ) else e)

# x[i] / x[i, j] with positions the traced code computes (x[which.max(x)], lookup[k]): a gather
# by them. Their number is known; their values are checked on every call: one outside 1..n
# (R drops 0 and negatives and gives NA beyond n) sends the call to base R (runtime_check). A
# computed logical mask selects a data-dependent number of elements: refused.
index_computed <- function(x, idx, drop, call) {
  flat <- length(idx) == 1
  if (!flat && length(idx) != length(x$rdim)) rf_shape_error("incorrect number of dimensions", call)
  dims <- if (flat) x$len else x$rdim
  s <- if (flat) reshape_sym(x, NULL, x$len) else x
  shape <- if (flat) as.integer(x$len) else rev(as.integer(dims))
  id <- s$id
  counts <- integer(length(idx))
  for (k in seq_along(idx)) {
    i <- idx[[k]]; n <- dims[k]; d <- length(shape) - k
    if (!is_sym(i)) {
      pos <- if (is_all_of_dim(i)) seq_len(n) else index_positions(i, n, call, dim_bounds = !flat)
      id <- select_along(id, shape, d, pos - 1L, call)
      counts[k] <- length(pos)
    } else {
      if (i$dtype == "i1") rf_unsupported("[", call, data_dependent_why)
      p <- to_dtype(reshape_sym(i, NULL, i$len), trace_float(), call)
      runtime_check(any_all("any", list((p < 1) | !(p < n + 1)), call),
                    "lead to computed positions outside 1..n (where R drops the position or gives NA)")
      id <- emit(.rf_b_gather_at, id, (p - 1)$id, as.integer(d), call = call)
      counts[k] <- p$len
    }
    shape[d + 1] <- counts[k]
  }
  ib <- if (x$dtype != "i1" && is_int_value(x)) int_bound("same", int_ref(x))
  out <- new_sym(id, if (flat) NULL else rev(shape), prod(counts), x$dtype, ib)
  if (flat) return(out)
  keep <- if (isTRUE(drop)) counts != 1L else rep(TRUE, length(counts))
  new_rd <- if (sum(keep) >= 2) counts[keep] else NULL
  if (is.null(new_rd) || length(new_rd) != length(counts)) reshape_sym(out, new_rd, prod(counts)) else out
}

# x[i], x[i, j, ...] on a traced x with static subscripts.
index_sym <- function(x, idx, drop, call) {
  s <- index_sym_plain(x, idx, drop, call)
  if (!has_attrs(x)) return(s)
  if (any(vapply(idx, is_sym, TRUE)))
    rf_unsupported("[", call, "the names of positions the traced code computes are not known when tracing")
  attrs_from_proxy(s, x, function(p) eval(as.call(c(list(base::`[`, p), as_call_args(idx), list(drop = drop)))))
}
index_sym_plain <- function(x, idx, drop, call) {
  if (any(vapply(idx, is_sym, TRUE))) return(index_computed(x, idx, drop, call))
  sp <- subscript_positions(x, idx, call)
  ib <- if (x$dtype != "i1" && is_int_value(x)) int_bound("same", int_ref(x))
  if (sp$flat) {
    flat <- reshape_sym(x, NULL, x$len)
    id <- select_along(flat$id, x$len, 0L, sp$pos - 1L, call)
    return(new_sym(id, NULL, length(sp$pos), x$dtype, ib))
  }
  rd <- x$rdim
  shape <- rev(as.integer(rd))
  id <- x$id
  for (k in seq_along(rd)) { # R dim k is tensor dim rank - k
    d <- length(rd) - k
    id <- select_along(id, shape, d, sp$pos[[k]] - 1L, call)
    shape[d + 1] <- length(sp$pos[[k]])
  }
  out <- lengths(sp$pos)
  keep <- if (isTRUE(drop)) out != 1L else rep(TRUE, length(out))
  new_rd <- if (sum(keep) >= 2) out[keep] else NULL
  s <- new_sym(id, rev(shape), prod(out), x$dtype, ib)
  if (is.null(new_rd) || length(new_rd) != length(out)) s <- reshape_sym(s, new_rd, prod(out))
  s
}

#' @export
`[.rf_sym` <- function(x, ..., drop = TRUE) {
  call <- sys.call()
  n <- nargs() - 1L - !missing(drop)
  if (n == 0) return(x)
  dots <- match.call(expand.dots = FALSE)$...
  idx <- subscripts_of(dots, n, function(k) ...elt(k))
  index_sym(x, idx, drop, call)
}

# The mask (a constant of x's shape) of the elements the static subscripts select, and `value`
# spread to x's shape so that each selected element reads its own replacement (for repeated
# positions the last one, as R assigns them in order).
# x[idx] <- value keeps x's attributes (a base R x's too).
assign_sym <- function(x, idx, value, call) with_attrs(assign_positions(x, idx, value, call), sym_attrs(x))
assign_positions <- function(x, idx, value, call) {
  x <- as_sym(x, call)
  value <- as_sym(value, call)
  ints <- is_int_value(x) && is_int_value(value)
  want <- if (x$dtype == "i1" && value$dtype == "i1") "i1" else trace_float()
  x <- to_dtype(x, want, call); value <- to_dtype(value, want, call)
  shape <- sym_tshape(x)
  if (length(idx) == 1 && is_sym(idx[[1]])) { # x[mask] <- v, a traced mask of x's shape
    m <- idx[[1]]
    if (m$dtype != "i1" || m$len != x$len)
      rf_unsupported("[<-", call, paste("a traced subscript must be a logical mask of the assigned value's",
                                        "length;", data_dependent_why))
    if (value$len != 1)
      rf_unsupported("[<-", call, paste("under a traced mask only a single replacement value is supported",
                                        "(how many elements it replaces depends on the data); use ifelse()"))
    v <- spread_scalar(value, shape, call)
    mask <- reshape_sym(m, x$rdim, x$len)
    return(new_sym(emit(.rf_b_select, mask$id, v, x$id, call = call), x$rdim, x$len, want,
                   if (ints) int_bound("max", int_ref(x), int_ref(value))))
  }
  sp <- subscript_positions(x, idx, call)
  dims <- if (sp$flat) list(sp$pos) else sp$pos
  full <- if (sp$flat) x$len else as.integer(x$rdim)
  block <- lengths(dims)
  nsel <- prod(block)
  if (nsel == 0) return(x)
  if (value$len != 1 && value$len != nsel)
    rf_shape_error(sprintf("number of items to replace (%d) is not a multiple of replacement length (%d)",
                           nsel, value$len), call)
  # The selected elements as a constant mask over x (R dims, flattened as R stores them).
  sel <- lapply(seq_along(dims), function(k) seq_len(full[k]) %in% dims[[k]])
  mask_r <- Reduce(function(a, b) outer(a, b, "&"), sel)
  mask <- lift_constant(if (sp$flat) as.vector(mask_r) else array(mask_r, full), call)
  if (value$len == 1) {
    v <- spread_scalar(value, shape, call)
  } else {
    # value as the selected block (R dims block), then each dim gathered back to x's extent:
    # position p of dim k reads the block entry of its last occurrence (any entry where unselected).
    bshape <- rev(as.integer(block))
    v <- reshape_sym(value, if (length(block) > 1) block else NULL, nsel)$id
    for (k in seq_along(dims)) {
      d <- length(dims) - k
      inv <- integer(full[k])
      inv[dims[[k]]] <- seq_along(dims[[k]]) - 1L # later positions overwrite earlier ones
      v <- emit(.rf_b_gather, v, as.integer(inv), as.integer(d), call = call)
      bshape[d + 1] <- full[k]
    }
    if (sp$flat) v <- emit(.rf_b_reshape, v, shape, call = call)
  }
  mask_id <- if (sp$flat) reshape_sym(mask, x$rdim, x$len)$id else mask$id
  new_sym(emit(.rf_b_select, mask_id, v, x$id, call = call), x$rdim, x$len, want,
          if (ints) int_bound("max", int_ref(x), int_ref(value)))
}

#' @export
`[<-.rf_sym` <- function(x, ..., value) {
  call <- sys.call()
  n <- nargs() - 2L
  dots <- match.call(expand.dots = FALSE)$...
  idx <- subscripts_of(dots, n, function(k) ...elt(k))
  assign_sym(x, idx, value, call)
}

# `[` and `[<-` as bound in the traced function: a plain R array indexed by, or assigned, a
# traced value (base R would look inside the value's record).
rf_index <- function(x, ..., drop = TRUE) {
  call <- sys.call()
  n <- nargs() - 1L - !missing(drop)
  dots <- match.call(expand.dots = FALSE)$...
  idx <- subscripts_of(dots, n, function(k) ...elt(k))
  if (is_sym(x)) return(index_sym(x, idx, drop, call))
  # A constant (a lookup table) at computed positions.
  if (any(vapply(idx, is_sym, TRUE)) && (is.numeric(x) || is.logical(x)) && !is.object(x))
    return(index_sym(as_sym(x, call), idx, drop, call))
  if (any(vapply(idx, is_sym, TRUE))) rf_unsupported("[", call, data_dependent_why)
  # Base R's `[` on the values already computed (each subscript is evaluated once, as in R).
  base_call <- as.call(c(list(base::`[`, x), as_call_args(idx), if (!missing(drop)) list(drop = drop)))
  eval(base_call)
}
rf_subassign <- function(x, ..., value) {
  call <- sys.call()
  n <- nargs() - 2L
  dots <- match.call(expand.dots = FALSE)$...
  idx <- subscripts_of(dots, n, function(k) ...elt(k))
  if (is_tensor(x) || is_tensor(value)) return(tensor_subassign(x, idx, value, call))
  if (is_sym(x) || is_sym(value) || any(vapply(idx, is_sym, TRUE)))
    return(assign_sym(x, idx, value, call))
  base_call <- as.call(c(list(base::`[<-`, x), as_call_args(idx), list(value = value)))
  eval(base_call)
}

# x[i, j] <- value with an rf_tensor x or value (torch code filling a result tensor step by step:
# `outputs[, t] <- pred`): a recorded op giving the new tensor, which R binds to x (the gradient
# flows to value and the positions x keeps). Positions are R values, part of the op; negative
# ones are refused (R's exclude, torch for R's count from the end).
tensor_subassign <- function(x, idx, value, call) {
  pos <- lapply(idx, function(i) if (is_tensor(i)) tensor_values(i) else i)
  if (any(vapply(pos, is_sym, TRUE))) rf_unsupported("[<-", call, "positions computed by traced code, on a tensor")
  if (any(vapply(pos, function(i) is.numeric(i) && any(i < 0, na.rm = TRUE), TRUE)))
    rf_unsupported("[<-", call, "negative positions on a tensor (R's exclude them, torch for R's count from the end): write the positions")
  record(paste0("[<-", paste(deparse(pos), collapse = "")), function(x, value) assign_sym(x, pos, value, call),
         list(x = x, value = value))
}

# A length-1 value spread over tensor shape `shape`.
spread_scalar <- function(s, shape, call) {
  scalar <- emit(.rf_b_reshape, s$id, integer(), call = call)
  emit(.rf_b_broadcast, scalar, as.integer(shape), integer(), call = call)
}

# x[[i]] / x[[i, j]] of a traced value: one element, as x[i] / x[i, j]; x[[i]] <- v likewise.
rf_index2 <- function(x, ..., exact = TRUE) {
  call <- sys.call()
  idx <- list(...)
  if (!is_sym(x)) {
    if (any(vapply(idx, is_sym, TRUE))) rf_unsupported("[[", call, data_dependent_why)
    return(base::`[[`(x, ..., exact = exact))
  }
  if (length(idx) == 0 || any(vapply(idx, function(i) rlen(i) != 1, TRUE)))
    rf_shape_error("subscript out of bounds (`[[` takes one position per dimension)", call)
  if (any(vapply(idx, function(i) !is_sym(i) && is.numeric(i) && i < 1, TRUE)))
    rf_shape_error("invalid negative or zero subscript in get1index", call)
  index_sym(x, idx, TRUE, call)
}
rf_subassign2 <- function(x, ..., value) {
  call <- sys.call()
  idx <- list(...)
  if (!is_sym(x) && !(is_sym(value) && (is.numeric(x) || is.logical(x)))) # lists hold traced values as they are
    return(base::`[[<-`(x, ..., value = value))
  if (is_sym(value) && value$len != 1 || !is_sym(value) && length(value) != 1)
    rf_shape_error("more elements supplied than there are to replace", call)
  assign_sym(x, idx, value, call)
}

# unlist() of a list holding traced values (no names): their elements in order, as c() does.
rf_unlist <- function(x, recursive = TRUE, use.names = TRUE) {
  if (is_sym(x)) return(reshape_sym(x, NULL, x$len))
  has_sym <- function(v) is_sym(v) || (is.list(v) && !is_sym(v) && any(vapply(v, has_sym, TRUE)))
  if (!is.list(x) || !has_sym(x)) return(base::unlist(x, recursive, use.names))
  call <- sys.call()
  if (use.names && !is.null(names(x)) && any(nzchar(names(x))))
    rf_unsupported("unlist", call, "traced results carry no names; unlist(x, use.names = FALSE)")
  if (!isTRUE(recursive) && any(vapply(x, function(v) is.list(v) && !is_sym(v), TRUE)))
    rf_unsupported("unlist", call, "unlist(recursive = FALSE) of nested lists holding traced values")
  flat <- lapply(x, function(v) if (is.list(v) && !is_sym(v)) rf_unlist(v, recursive, use.names) else v)
  do.call(rf_c, unname(flat))
}

# ---- Building vectors and matrices ------------------------------------------------------------

refuse_names <- function(fname, args, call) {
  nm <- names(args)
  if (!is.null(nm) && any(nzchar(nm)))
    rf_unsupported(fname, call, paste("traced results carry no names or dimnames; drop the argument names",
                                      "(name the result after the call)"))
}

# The integer bound of a value built from `parts`, all integers, else NULL (a double).
parts_bound <- function(parts) {
  if (!all(vapply(parts, function(p) is_int_value(p), TRUE))) return(NULL)
  Reduce(function(a, b) int_bound("max", a, b), lapply(parts, int_ref))
}

rf_c <- function(...) {
  args <- list(...)
  if (!any(vapply(args, is_sym, TRUE))) return(base::c(...))
  call <- sys.call()
  # c() of a list and values (torch code collecting tensors: `blocks <- c(blocks, x)`) is a list
  # with each traced value one element, as base R's c() of a list and a tensor gives.
  if (any(vapply(args, function(a) is.list(a) && !is_sym(a) && !is.object(a), TRUE)))
    return(do.call(base::c, lapply(args, function(a) if (is_sym(a)) list(a) else a)))
  refuse_names("c", args, call)
  args <- args[lengths(args) > 0 | vapply(args, is_sym, TRUE)]
  syms <- lapply(args, as_sym, call = call)
  logical_only <- all(vapply(syms, function(s) s$dtype == "i1", TRUE))
  want <- if (logical_only) "i1" else trace_float()
  flat <- lapply(syms, function(s) reshape_sym(to_dtype(s, want, call), NULL, s$len))
  flat <- flat[vapply(flat, function(s) s$len > 0, TRUE)]
  len <- sum(vapply(flat, function(s) s$len, 0))
  id <- if (length(flat) == 1) flat[[1]]$id else emit(.rf_b_concat, vapply(flat, function(s) s$id, 0L), 0L, call = call)
  new_sym(id, NULL, len, want, if (!logical_only) parts_bound(args))
}

# cbind (columns) / rbind (rows) of vectors and matrices: R's matrix n x k is the tensor [k, n],
# so columns concatenate along tensor dim 0 and rows along tensor dim 1.
# The dimnames R's cbind / rbind give: along the bound dim the argument names, a symbol's name
# (deparse.level 1) or its deparsed expression (2), a matrix's own; across it the first names
# found among the arguments.
bind_dimnames <- function(args, exprs, columns, deparse.level) {
  along <- character(); named <- FALSE; across <- NULL
  tags <- names(args) %||% rep("", length(args))
  for (i in seq_along(args)) {
    a <- args[[i]]; at <- sym_attrs(a); d <- dim(a)
    if (length(d) == 2) {
      dn <- at$dimnames
      k <- d[if (columns) 2 else 1]
      mine <- dn[[if (columns) 2 else 1]]
      along <- c(along, mine %||% rep("", k)); named <- named || !is.null(mine)
      if (is.null(across)) across <- dn[[if (columns) 1 else 2]]
      next
    }
    e <- exprs[[i]]
    nm <- if (nzchar(tags[i])) tags[i]
          else if (deparse.level >= 1 && is.symbol(e)) as.character(e)
          else if (deparse.level == 2) paste(deparse(e, 500L, nlines = 1L), collapse = "")
          else ""
    along <- c(along, nm); named <- named || nzchar(nm)
    if (is.null(across) && !is.null(at$names) && length(a) > 1) across <- at$names
  }
  if (!named) along <- NULL
  if (is.null(along) && is.null(across)) return(NULL)
  if (columns) list(across, along) else list(along, across)
}

bind_syms <- function(fname, args, columns, call, exprs, deparse.level) {
  if (!is.numeric(deparse.level) || length(deparse.level) != 1 || !deparse.level %in% 0:2)
    rf_unsupported(fname, call, "deparse.level must be 0, 1 or 2")
  keep <- !vapply(args, is.null, TRUE)
  args <- args[keep]
  dn <- bind_dimnames(args, exprs[keep], columns, deparse.level)
  syms <- lapply(args, as_sym, call = call)
  mats <- Filter(function(s) length(s$rdim) == 2, syms)
  if (any(vapply(syms, function(s) length(s$rdim) > 2, TRUE)))
    rf_unsupported(fname, call, "binding arrays of more than two dimensions is not supported")
  n <- if (length(mats)) (if (columns) mats[[1]]$rdim[1] else mats[[1]]$rdim[2])
       else max(vapply(syms, function(s) s$len, 0))
  logical_only <- all(vapply(syms, function(s) s$dtype == "i1", TRUE)) # a logical matrix, as R's
  want <- if (logical_only) "i1" else trace_float()
  parts <- lapply(syms, function(s) {
    s <- to_dtype(s, want, call)
    if (length(s$rdim) == 2) {
      if ((if (columns) s$rdim[1] else s$rdim[2]) != n)
        rf_shape_error(sprintf("number of %s of matrices must match (see arg %d)",
                               if (columns) "rows" else "columns", 2), call)
      return(list(id = s$id, k = if (columns) s$rdim[2] else s$rdim[1]))
    }
    if (s$len != n && s$len != 1)
      rf_unsupported(fname, call, sprintf("a vector of length %d bound to %d %s is recycled by R; not supported",
                                          s$len, n, if (columns) "rows" else "columns"))
    target <- if (columns) c(1L, as.integer(n)) else c(as.integer(n), 1L)
    id <- if (s$len == 1) spread_scalar(s, target, call)
          else emit(.rf_b_broadcast, reshape_sym(s, NULL, s$len)$id, target, if (columns) 1L else 0L, call = call)
    list(id = id, k = 1L)
  })
  k <- sum(vapply(parts, function(p) p$k, 0))
  ids <- vapply(parts, function(p) p$id, 0L)
  id <- if (length(ids) == 1) ids else emit(.rf_b_concat, ids, if (columns) 0L else 1L, call = call)
  rd <- as.integer(if (columns) c(n, k) else c(k, n))
  with_attrs(new_sym(id, rd, prod(rd), want, if (!logical_only) parts_bound(args)), list(dimnames = dn))
}

rf_cbind <- function(..., deparse.level = 1) {
  args <- list(...)
  if (!any(vapply(args, is_sym, TRUE))) return(base::cbind(..., deparse.level = deparse.level))
  bind_syms("cbind", args, TRUE, sys.call(), as.list(substitute(list(...)))[-1], deparse.level)
}
rf_rbind <- function(..., deparse.level = 1) {
  args <- list(...)
  if (!any(vapply(args, is_sym, TRUE))) return(base::rbind(..., deparse.level = deparse.level))
  bind_syms("rbind", args, FALSE, sys.call(), as.list(substitute(list(...)))[-1], deparse.level)
}

rf_rev <- function(x) {
  if (!is_sym(x)) return(base::rev(x))
  call <- sys.call()
  v <- reshape_sym(x, NULL, x$len)
  new_sym(emit(.rf_b_reverse, v$id, 0L, call = call), NULL, x$len, x$dtype, x$ib)
}

# head / tail of a vector (n elements, or all but -n), or of a matrix's rows.
head_tail <- function(x, n, tail, call) {
  if (!is.numeric(n) || length(n) != 1 || is.na(n))
    rf_abort("rfuse_type_error", "invalid 'n' - must be a single number", call)
  len <- if (length(x$rdim) == 2) x$rdim[1] else x$len
  if (length(x$rdim) > 2) rf_unsupported(if (tail) "tail" else "head", call, "only vectors and matrices")
  k <- if (n >= 0) min(n, len) else max(len + n, 0)
  pos <- if (tail) seq_len(k) + (len - k) else seq_len(k)
  s <- if (length(x$rdim) == 2) index_sym(with_attrs(x, NULL), list(pos, all_of_dim), FALSE, call)
       else index_sym(with_attrs(reshape_sym(x, NULL, x$len), NULL), list(pos), TRUE, call)
  # R's names: x's kept (as base R computes them on a stand-in), and tail() of a matrix without
  # row names numbers its rows ("[9,]").
  if (has_attrs(x)) return(attrs_from_proxy(s, x, if (tail) utils::tail else utils::head, n))
  if (tail && length(x$rdim) == 2) with_attrs(s, list(dimnames = list(sprintf("[%d,]", pos), NULL))) else s
}
rf_head <- function(x, n = 6L, ...) {
  if (!is_sym(x)) return(utils::head(x, n, ...))
  if (...length()) rf_unsupported("head", sys.call(), "only head(x, n)")
  head_tail(x, n, FALSE, sys.call())
}
rf_tail <- function(x, n = 6L, ...) {
  if (!is_sym(x)) return(utils::tail(x, n, ...))
  if (...length()) rf_unsupported("tail", sys.call(), "only tail(x, n)")
  head_tail(x, n, TRUE, sys.call())
}

# diff(x, lag, differences) of a vector, or of a matrix's rows, as R's diff.default.
rf_diff <- function(x, lag = 1L, differences = 1L, ...) {
  if (!is_sym(x)) return(base::diff(x, lag, differences, ...))
  call <- sys.call()
  if (length(lag) != 1L || length(differences) != 1L || lag < 1L || differences < 1L)
    rf_abort("rfuse_shape_error", "'lag' and 'differences' must be integers >= 1", call)
  r <- if (length(x$rdim) == 2) x else reshape_sym(x, NULL, x$len)
  if (length(x$rdim) > 2) rf_unsupported("diff", call, "only vectors and matrices")
  for (k in seq_len(differences)) {
    n <- if (length(r$rdim) == 2) r$rdim[1] else r$len
    if (lag >= n) rf_unsupported("diff", call, "the result would be empty")
    hi <- seq.int(lag + 1L, n); lo <- seq_len(n - lag)
    a <- if (length(r$rdim) == 2) index_sym(r, list(hi, all_of_dim), FALSE, call) else index_sym(r, list(hi), TRUE, call)
    b <- if (length(r$rdim) == 2) index_sym(r, list(lo, all_of_dim), FALSE, call) else index_sym(r, list(lo), TRUE, call)
    r <- a - b
  }
  r
}

# rep(x, times, each, length.out): the positions base R's rep() would take, gathered.
rf_rep <- function(x, ...) {
  if (!is_sym(x)) return(base::rep(x, ...))
  call <- sys.call()
  args <- list(...)
  if (any(vapply(args, is_sym, TRUE))) rf_unsupported("rep", call, data_dependent_why)
  pos <- do.call(base::rep, c(list(seq_len(x$len)), args))
  index_sym(reshape_sym(x, NULL, x$len), list(pos), TRUE, call)
}
rf_rep_len <- function(x, length.out) {
  if (!is_sym(x)) return(base::rep_len(x, length.out))
  index_sym(reshape_sym(x, NULL, x$len), list(base::rep_len(seq_len(x$len), length.out)), TRUE, sys.call())
}

# outer(X, Y, FUN): the vectors spread over the result's grid (X down the rows, Y along the
# columns) and FUN applied to them, as base R's outer() does with its expanded copies.
rf_outer <- function(X, Y, FUN = "*", ...) {
  if (!is_sym(X) && !is_sym(Y)) return(base::outer(X, Y, FUN, ...))
  call <- sys.call()
  x <- as_sym(X, call); y <- as_sym(Y, call)
  if (!is.null(x$rdim) || !is.null(y$rdim))
    rf_unsupported("outer", call, "only outer products of vectors are supported")
  grid <- c(as.integer(y$len), as.integer(x$len)) # tensor [ny, nx] is R's nx x ny
  xb <- new_sym(emit(.rf_b_broadcast, x$id, grid, 1L, call = call), c(x$len, y$len), x$len * y$len, x$dtype, x$ib)
  yb <- new_sym(emit(.rf_b_broadcast, y$id, grid, 0L, call = call), c(x$len, y$len), x$len * y$len, y$dtype, y$ib)
  f <- match.fun(FUN)
  f(xb, yb, ...)
}
rf_outer_op <- function(X, Y) rf_outer(X, Y)

# diag(x): a matrix's diagonal, or a traced vector on the diagonal of a square matrix.
rf_diag <- function(x = 1, nrow, ncol, names = TRUE) {
  if (!is_sym(x)) { # base R's, on the values at hand (its answer depends on which are missing)
    args <- list(x = x) # (diag(n) is an identity only when n is its one argument)
    if (!missing(nrow)) args$nrow <- nrow
    if (!missing(ncol)) args$ncol <- ncol
    if (!missing(names)) args$names <- names
    return(do.call(base::diag, args))
  }
  call <- sys.call()
  if (!missing(nrow) || !missing(ncol)) { # diag(s, n): s on the diagonal of an n x n matrix
    if (x$len != 1)
      rf_unsupported("diag", call, "diag(x, nrow, ncol) of a traced value is supported for a single value x only")
    if (missing(ncol)) ncol <- nrow
    if (missing(nrow)) nrow <- ncol
    return(lift_constant(base::diag(1, nrow, ncol), call) * reshape_sym(x, NULL, 1L))
  }
  if (length(x$rdim) == 2) {
    m <- min(x$rdim)
    pos <- (seq_len(m) - 1L) * x$rdim[1] + seq_len(m)
    return(index_sym(reshape_sym(x, NULL, x$len), list(pos), TRUE, call))
  }
  if (!is.null(x$rdim)) rf_unsupported("diag", call, "only matrices and vectors")
  n <- x$len
  if (n == 1) rf_unsupported("diag", call, "diag() of a length-1 value is an identity matrix of that size")
  zero <- lift_constant(matrix(0, n, n), call)
  assign_sym(zero, list(base::diag(TRUE, n)), x, call)
}

# `diag<-`: the diagonal replaced.
rf_diag_assign <- function(x, value) {
  if (!is_sym(x) && !is_sym(value)) return(base::`diag<-`(x, value))
  call <- sys.call()
  x <- as_sym(x, call)
  if (length(x$rdim) != 2) rf_shape_error("only matrix diagonals can be replaced", call)
  m <- min(x$rdim)
  mask <- matrix(FALSE, x$rdim[1], x$rdim[2])
  mask[cbind(seq_len(m), seq_len(m))] <- TRUE
  assign_sym(x, list(mask), value, call)
}

# `dim<-` and array(): a traced value given dimensions (array() with R's recycling).
rf_dim_assign <- function(x, value) {
  if (!is_sym(x)) return(base::`dim<-`(x, value))
  call <- sys.call()
  if (is.null(value)) return(reshape_sym(x, NULL, x$len))
  if (is_sym(value) || !is.numeric(value) || anyNA(value) || prod(value) != x$len)
    rf_shape_error(sprintf("dims [product %s] do not match the length of object [%d]",
                           if (is.numeric(value)) format(prod(value)) else "?", x$len), call)
  reshape_sym(x, if (length(value) > 1) as.integer(value) else NULL, x$len)
}
rf_array <- function(data = NA, dim = length(data), dimnames = NULL) {
  if (!is_sym(data)) return(base::array(data, dim, dimnames))
  call <- sys.call()
  if (!is.null(dimnames)) rf_unsupported("array", call, "traced results carry no dimnames (set them after the call)")
  if (is_sym(dim)) rf_unsupported("array", call, data_dependent_why)
  pos <- base::array(seq_len(data$len), dim)
  flat <- if (prod(dim) == data$len) reshape_sym(data, NULL, data$len)
          else index_sym(reshape_sym(data, NULL, data$len), list(as.vector(pos)), TRUE, call)
  reshape_sym(flat, if (length(dim) > 1) as.integer(dim) else NULL, length(pos))
}

# max.col(m, "first" | "last"): per row the column of the (first / last) maximum; a row holding
# NaN is NA, as in R. (R's default, "random", breaks ties at random within a tolerance: refused.)
rf_max_col <- function(m, ties.method = c("random", "first", "last")) {
  if (!is_sym(m)) return(base::max.col(m, ties.method))
  call <- sys.call()
  ties <- match.arg(ties.method)
  if (ties == "random")
    rf_unsupported("max.col", call, "ties.method = \"random\" breaks ties at random; use \"first\" or \"last\"")
  if (length(m$rdim) != 2) rf_shape_error("'m' must be a matrix", call)
  nr <- m$rdim[1]; nc <- m$rdim[2]
  x <- to_dtype(m, trace_float(), call)
  best <- margin_reduce(x, "max", TRUE, 1L, call) # NaN where the row holds one
  at <- x == expand_to(best, list(rdim = m$rdim, len = m$len), call)
  cols <- lift_constant(matrix(rep(seq_len(nc), each = nr), nr, nc), call)
  pick <- if (ties == "first") margin_reduce(rf_ifelse(at, cols, nc + 1), "min", TRUE, 1L, call)
          else margin_reduce(rf_ifelse(at, cols, 0), "max", TRUE, 1L, call)
  out <- rf_ifelse(best != best, NaN, pick)
  out$ib <- int_bound("const", v = nc)
  out
}

# apply(X, MARGIN, FUN): R's reductions over the other margin as one reduction; any other
# traceable FUN applied to each row (column) in turn, up to apply_unroll_limit of them, and the
# results combined as R's apply() simplifies them.
apply_reductions <- c(sum = "sum", mean = "mean", max = "max", min = "min")
apply_unroll_limit <- 256L
rf_apply <- function(X, MARGIN, FUN, ..., simplify = TRUE) {
  if (!is_sym(X)) return(base::apply(X, MARGIN, FUN, ..., simplify = simplify))
  call <- sys.call()
  kind <- NULL
  if (is.character(FUN) && length(FUN) == 1) kind <- apply_reductions[FUN]
  else for (k in names(apply_reductions)) # base's function, or the S4 generic rfuse makes of it (mean)
    if (identical(FUN, get(k, baseenv())) || (methods::is(FUN, "standardGeneric") && identical(FUN@generic[[1]], k)))
      kind <- apply_reductions[k]
  if (length(X$rdim) != 2 || !(identical(MARGIN, 1) || identical(MARGIN, 1L) || identical(MARGIN, 2) ||
                                identical(MARGIN, 2L)))
    rf_unsupported("apply", call, "only apply(matrix, 1 or 2, f)")
  if (!is.null(kind) && !is.na(kind) && ...length() == 0)
    return(margin_reduce(X, kind[[1]], MARGIN == 1, 1L, call))
  n <- X$rdim[MARGIN]
  if (n > apply_unroll_limit)
    rf_unsupported("apply", call, sprintf(paste("apply() with a function other than sum, mean, max or min runs it once per",
                                                "row or column, at most %d of them (here %d); write it with matrix operations"),
                                          apply_unroll_limit, n))
  f <- match.fun(FUN)
  res <- lapply(seq_len(n), function(i) f(if (MARGIN == 1) index_sym(X, list(i, all_of_dim), TRUE, call)
                                          else index_sym(X, list(all_of_dim, i), TRUE, call), ...))
  simplify_traced("apply", seq_len(n), res, FALSE, call)
}
