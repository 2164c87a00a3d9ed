# torch for R's tensor functions (torch_*) and tensor methods (x$view(), x$sum(dim = 2), ...), on
# traced values, plain R arrays and rf_tensors alike.
#
# torch's dims are R's dims, 1-based as in torch for R (negative dims count from the end): an R
# array of dim c(N, C, H, W) is torch's N x C x H x W tensor. torch's reshapes are row-major,
# R's storage is column-major: rfuse's tensor of such an array is the reverse, [W, H, C, N]
# (architecture.md), so a traced row-major reshape is a reversing transpose, a reshape and a
# reversing transpose back (index maps: they fuse into their consumers). torch broadcasting
# (trailing dims aligned) is spelled out as explicit broadcasts here; R's own operators keep
# R's recycling (the porting table in docs/r-package.md says where the two differ).

# ---- Shapes --------------------------------------------------------------------------------

# torch's size of `x`: its R dims, or its length for a vector.
t_size <- function(x) {
  if (is_sym(x)) return(as.integer(x$rdim %||% x$len))
  if (is_tensor(x)) {
    materialize(x)
    return(as.integer(x@env$rdim %||% x@env$len))
  }
  as.integer(dim(x) %||% length(x))
}

in_trace <- function() !is.null(.rf_state$builder)

# A torch-for-R dim (1-based, negative from the end) as an index into 1..n (`n + 1` for the
# dims of unsqueeze/stack, which may name the position after the last).
t_dim <- function(dim, n, call, extra = 0L) {
  if (!is.numeric(dim) || length(dim) != 1 || is.na(dim) || dim != round(dim))
    rf_abort("rfuse_type_error", sprintf("`dim` must be one whole number, not %s", deparse1(dim)), call)
  m <- n + extra
  if (dim == 0)
    rf_shape_error("Indexing starts at 1 but found a 0 (torch for R's dims are 1-based)", call)
  d <- if (dim < 0) m + dim + 1 else dim
  if (d < 1 || d > m)
    rf_shape_error(sprintf("Dimension out of range (expected to be in range of [%d, %d], but got %d)",
                           -m, m, as.integer(dim)), call)
  as.integer(d)
}

t_dims <- function(dims, n, call) vapply(dims, function(d) t_dim(d, n, call), 1L)

# A shape given as c(...) or several numbers (x$view(2, -1) or x$view(c(2, -1))), with one -1
# inferred, checked against the element count.
t_shape_arg <- function(shape, total, call) {
  shape <- unlist(shape)
  if (!is.numeric(shape) || anyNA(shape) || any(shape != round(shape)) || any(shape < -1))
    rf_abort("rfuse_type_error", sprintf("a shape must be whole numbers (-1 for one inferred size), not %s",
                                         deparse1(shape)), call)
  shape <- as.integer(shape)
  neg <- which(shape == -1L)
  if (length(neg) > 1) rf_shape_error("only one dimension can be inferred", call)
  if (length(neg)) {
    rest <- prod(shape[-neg])
    if (rest == 0 || total %% rest != 0)
      rf_shape_error(sprintf("shape '[%s]' is invalid for input of size %d", paste(shape, collapse = ", "), total), call)
    shape[neg] <- as.integer(total / rest)
  }
  if (prod(shape) != total)
    rf_shape_error(sprintf("shape '[%s]' is invalid for input of size %d", paste(shape, collapse = ", "), total), call)
  shape
}

# A traced value as the tensor of torch's shape (row-major), and back.
sym_rowmajor <- function(s) {
  n <- length(t_size(s))
  if (n <= 1) s$id else emit(.rf_b_transpose, s$id, rev(seq_len(n)) - 1L)
}
sym_from_rowmajor <- function(id, shape, dtype) {
  n <- length(shape)
  out <- if (n <= 1) id else emit(.rf_b_transpose, id, rev(seq_len(n)) - 1L)
  new_sym(out, if (n <= 1) NULL else as.integer(shape), prod(shape), dtype)
}

# R's structure for a torch shape: a vector for rank 0 and 1, an array otherwise.
shaped <- function(v, shape) if (length(shape) <= 1) as.vector(v) else array(v, shape)

t_reshape <- function(x, shape, call = sys.call()) {
  d <- t_size(x)
  shape <- t_shape_arg(shape, prod(d), call)
  if (identical(shape, d)) return(x)
  if (is_sym(x)) return(sym_from_rowmajor(emit(.rf_b_reshape, sym_rowmajor(x), shape, call = call), shape, x$dtype))
  v <- if (length(d) > 1) aperm(unclass(x), rev(seq_along(d))) else as.vector(x)
  if (length(shape) <= 1) return(as.vector(v))
  aperm(array(v, rev(shape)), rev(seq_along(shape)))
}

# Inserting or removing size-1 dims moves no element in either order: a plain reshape.
t_set_dims <- function(x, shape) {
  if (is_sym(x)) return(reshape_sym(x, if (length(shape) <= 1) NULL else as.integer(shape), prod(shape)))
  shaped(unclass(x), shape)
}

# aperm() of an R array or vector: through .rf_aperm (fast, see permute.cpp) for plain numbers.
r_aperm <- function(x, perm) {
  x <- unclass(x)
  if ((is.double(x) || is.integer(x) || is.logical(x)) && is.null(dimnames(x)) && length(dim(x)) == length(perm))
    .rf_aperm(x, as.integer(perm))
  else aperm(x, perm)
}

t_permute <- function(x, perm, call = sys.call()) {
  d <- t_size(x); n <- length(d)
  perm <- t_dims(unlist(perm), n, call)
  if (length(perm) != n || anyDuplicated(perm))
    rf_shape_error(sprintf("permute needs each of the %d dims once, got c(%s)", n, paste(perm, collapse = ", ")), call)
  if (identical(perm, seq_len(n))) return(x)
  if (!is_sym(x)) return(r_aperm(x, perm))
  # R dim r is tensor dim n - r: the result's tensor dim k reads R dim perm[n - k].
  id <- emit(.rf_b_transpose, x$id, as.integer(n - rev(perm)), call = call)
  new_sym(id, d[perm], x$len, x$dtype, x$ib)
}

t_transpose <- function(x, dim0, dim1, call = sys.call()) {
  n <- length(t_size(x))
  a <- t_dim(dim0, n, call); b <- t_dim(dim1, n, call)
  p <- seq_len(n); p[c(a, b)] <- c(b, a)
  t_permute(x, p, call)
}

t_unsqueeze <- function(x, dim, call = sys.call()) {
  d <- t_size(x)
  k <- t_dim(dim, length(d), call, extra = 1L)
  t_set_dims(x, append(d, 1L, after = k - 1L))
}

t_squeeze <- function(x, dim = NULL, call = sys.call()) {
  d <- t_size(x)
  drop <- if (is.null(dim)) which(d == 1L) else {
    k <- t_dim(dim, length(d), call)
    if (d[k] == 1L) k else integer()
  }
  if (!length(drop)) return(x)
  t_set_dims(x, d[-drop])
}

t_flatten <- function(x, start_dim = 1, end_dim = -1, call = sys.call()) {
  d <- t_size(x); n <- length(d)
  s <- t_dim(start_dim, n, call); e <- t_dim(end_dim, n, call)
  if (s > e) rf_shape_error("flatten() has to have start_dim <= end_dim", call)
  t_reshape(x, c(d[seq_len(s - 1)], prod(d[s:e]), d[seq_len(n - e) + e]), call)
}

# Torch broadcasting of two shapes (trailing dims aligned).
broadcast_shapes <- function(a, b, call) {
  n <- max(length(a), length(b))
  a <- c(rep(1L, n - length(a)), a); b <- c(rep(1L, n - length(b)), b)
  if (any(a != b & a != 1L & b != 1L))
    rf_shape_error(sprintf("The size of tensor a (%s) must match the size of tensor b (%s) at a non-singleton dimension",
                           paste(a, collapse = "x"), paste(b, collapse = "x")), call)
  pmax(a, b)
}

t_expand <- function(x, shape, call = sys.call()) {
  shape <- as.integer(shape)
  d <- t_size(x); n <- length(shape)
  if (length(d) > n) rf_shape_error("expand: the number of sizes is smaller than the tensor's dims", call)
  dp <- c(rep(1L, n - length(d)), d)
  shape[shape == -1L] <- dp[shape == -1L]
  if (any(dp != shape & dp != 1L))
    rf_shape_error(sprintf("The expanded size of the tensor (%s) must match the existing size (%s) at non-singleton dimensions",
                           paste(shape, collapse = "x"), paste(dp, collapse = "x")), call)
  if (identical(dp, shape)) return(if (identical(d, shape)) x else t_set_dims(x, shape))
  if (!is_sym(x)) {
    strides <- cumprod(c(1, dp))[seq_len(n)]
    lin <- 1
    for (i in seq_len(n)) lin <- outer(lin, (seq_len(shape[i]) - 1) * (if (dp[i] == 1L) 0 else strides[i]), "+")
    return(shaped(as.vector(x)[as.vector(lin)], shape))
  }
  keep <- which(dp != 1L)
  squeezed <- reshape_sym(x, if (length(keep) <= 1) NULL else dp[keep], x$len)
  dims <- if (length(keep)) as.integer(n - rev(keep)) else n - 1L
  id <- emit(.rf_b_broadcast, squeezed$id, rev(shape), dims, call = call)
  new_sym(id, if (n <= 1) NULL else shape, prod(shape), x$dtype, x$ib)
}

# `op` (an R operator or function of two same-shaped values) under torch's broadcasting. Plain
# numbers stay numbers (R's recycling of a scalar is torch's).
t_binary <- function(op, a, b, call = sys.call()) {
  if (is.numeric(b) && !is.object(b) && length(b) == 1 && is.null(dim(b))) return(op(a, b))
  if (is.numeric(a) && !is.object(a) && length(a) == 1 && is.null(dim(a))) return(op(a, b))
  sa <- t_size(a); sb <- t_size(b)
  if (identical(sa, sb)) return(op(a, b))
  shape <- broadcast_shapes(sa, sb, call)
  op(t_expand(a, shape, call), t_expand(b, shape, call))
}

# torch's remainder: the sign of the divisor's, as R's %%. On floats a - b * floor(a / b) in the
# values' dtype (torch's formula for floats; R's %% of doubles works in long double and is not
# traced); on integers R's %% (an integer tensor's is torch's remainder).
t_remainder <- function(a, b) if (is_float_value(a) || is_float_value(b)) a - b * floor(a / b) else a %% b

reduce_fns <- list(sum = sum, mean = mean, max = max, min = min, prod = prod)

t_reduce <- function(kind, x, dim = NULL, keepdim = FALSE, call = sys.call()) {
  d <- t_size(x); n <- length(d)
  if (!is.logical(keepdim) || length(keepdim) != 1 || is.na(keepdim))
    rf_abort("rfuse_type_error", "`keepdim` must be TRUE or FALSE", call)
  dims <- if (is.null(dim)) seq_len(n) else sort(unique(t_dims(unlist(dim), n, call)))
  out_shape <- if (keepdim) replace(d, dims, 1L) else d[-dims]
  if (!is_sym(x)) {
    f <- reduce_fns[[kind]]
    keep <- setdiff(seq_len(n), dims)
    v <- if (!length(keep)) f(unclass(x)) else apply(array(unclass(x), d), keep, f)
    return(shaped(v, out_shape))
  }
  if (kind == "prod") rf_unsupported("prod", call, "a traced product along a dim is not available yet")
  s <- to_dtype(x, trace_float(), call)
  id <- emit(.rf_b_reduce, kind, s$id, as.integer(sort(n - dims)), isTRUE(keepdim), call = call)
  # A reduction over every dim is R's length-1 vector (as reduce_all), not a 0-d tensor: a
  # value that leaves the program as one feeds the next program as one.
  if (!length(out_shape)) id <- emit(.rf_b_reshape, id, 1L, call = call)
  new_sym(id, if (length(out_shape) <= 1) NULL else out_shape, prod(out_shape), s$dtype)
}

# torch's detach(): a traced value's gradient stops there (rfuse.stop_gradient); an R array has
# none to stop.
t_detach <- function(x, call = sys.call()) {
  if (!is_sym(x)) return(x)
  new_sym(emit(.rf_b_unary, "stop_gradient", x$id, call = call), x$rdim, x$len, x$dtype)
}

# The maximum a softmax subtracts does not change its value, so no gradient goes through it
# (computing one would cost a pass over the input whose sum is zero), as in torch's softmax.
t_softmax <- function(x, dim, call = sys.call()) {
  e <- exp(t_binary(`-`, x, t_detach(t_reduce("max", x, dim, TRUE, call), call), call))
  t_binary(`/`, e, t_reduce("sum", e, dim, TRUE, call), call)
}

t_log_softmax <- function(x, dim, call = sys.call()) {
  z <- t_binary(`-`, x, t_detach(t_reduce("max", x, dim, TRUE, call), call), call)
  t_binary(`-`, z, log(t_reduce("sum", exp(z), dim, TRUE, call)), call)
}

t_cat <- function(tensors, dim = 1, call = sys.call()) {
  if (!is.list(tensors) || !length(tensors))
    rf_abort("rfuse_type_error", "torch_cat() takes a non-empty list of tensors", call)
  sizes <- lapply(tensors, t_size)
  n <- length(sizes[[1]])
  k <- t_dim(dim, n, call)
  for (s in sizes)
    if (length(s) != n || any(s[-k] != sizes[[1]][-k]))
      rf_shape_error(sprintf("Sizes of tensors must match except in dimension %d: got %s", k,
                             paste(vapply(sizes, paste, "", collapse = "x"), collapse = " and ")), call)
  out <- sizes[[1]]; out[k] <- sum(vapply(sizes, `[`, 1L, k))
  if (length(tensors) == 1) return(tensors[[1]])
  if (!any(vapply(tensors, is_sym, TRUE))) {
    perm <- c(setdiff(seq_len(n), k), k)
    parts <- lapply(tensors, function(t) as.vector(if (n > 1) aperm(array(unclass(t), t_size(t)), perm) else t))
    v <- array(unlist(parts), out[perm])
    return(if (n > 1) aperm(v, order(perm)) else as.vector(v))
  }
  syms <- lapply(tensors, function(t) to_dtype(as_sym(t, call), trace_float(), call))
  id <- emit(.rf_b_concat, vapply(syms, function(s) as.integer(s$id), 1L), n - k, call = call)
  new_sym(id, if (n <= 1) NULL else out, prod(out), trace_float())
}

t_stack <- function(tensors, dim = 1, call = sys.call()) {
  if (!is.list(tensors) || !length(tensors))
    rf_abort("rfuse_type_error", "torch_stack() takes a non-empty list of tensors", call)
  k <- t_dim(dim, length(t_size(tensors[[1]])), call, extra = 1L)
  t_cat(lapply(tensors, t_unsqueeze, k, call), k, call)
}

# Elements start .. start + length - 1 along `dim` (torch's narrow, 1-based start).
t_narrow <- function(x, dim, start, length, call = sys.call()) {
  d <- t_size(x); n <- length(d)
  k <- t_dim(dim, n, call)
  if (start < 1 || start + length - 1 > d[k])
    rf_shape_error(sprintf("narrow: elements %d..%d are outside dim %d of size %d", start, start + length - 1, k, d[k]), call)
  if (start == 1 && length == d[k]) return(x)
  out <- d; out[k] <- length
  if (!is_sym(x)) {
    idx <- rep(list(TRUE), n); idx[[k]] <- seq.int(start, length.out = length)
    return(shaped(do.call(`[`, c(list(array(unclass(x), d)), idx, list(drop = FALSE))), out))
  }
  ts <- rev(d); lo <- integer(n); hi <- ts
  lo[n - k + 1] <- start - 1L; hi[n - k + 1] <- start - 1L + length
  id <- emit(.rf_b_slice, x$id, lo, hi, rep(1L, n), call = call)
  new_sym(id, if (n <= 1) NULL else out, prod(out), x$dtype, x$ib)
}

t_split_sizes <- function(x, sizes, dim, call) {
  starts <- cumsum(c(1L, sizes))[seq_along(sizes)]
  Map(function(s, l) t_narrow(x, dim, s, l, call), starts, sizes)
}

t_chunk <- function(x, chunks, dim = 1, call = sys.call()) {
  d <- t_size(x)[t_dim(dim, length(t_size(x)), call)]
  size <- ceiling(d / chunks)
  sizes <- rep(size, d %/% size)
  if (d %% size) sizes <- c(sizes, d %% size)
  t_split_sizes(x, sizes, dim, call)
}

t_split <- function(x, split_size, dim = 1, call = sys.call()) {
  d <- t_size(x)[t_dim(dim, length(t_size(x)), call)]
  sizes <- if (length(split_size) > 1) as.integer(split_size) else {
    s <- rep(as.integer(split_size), d %/% split_size)
    if (d %% split_size) c(s, as.integer(d %% split_size)) else s
  }
  if (sum(sizes) != d)
    rf_shape_error(sprintf("split sizes c(%s) do not add up to the dim's size %d", paste(sizes, collapse = ", "), d), call)
  t_split_sizes(x, sizes, dim, call)
}

# torch's matmul: dot, matrix-vector, matrix, and batched products (3-D with 3-D or 2-D).
t_matmul <- function(a, b, call = sys.call()) {
  da <- t_size(a); db <- t_size(b)
  if (length(da) == 1 && length(db) == 1) return(sum(a * b))
  if (length(da) <= 2 && length(db) <= 2) {
    r <- rf_matprod(a, b)
    return(if (length(da) == 1 || length(db) == 1) t_set_dims(r, prod(t_size(r))) else r)
  }
  if (length(da) == 3 && length(db) == 2) {
    # (B, n, k) %*% (k, m): merging R's leading dims moves nothing (column-major).
    r <- rf_matprod(t_set_dims(a, c(da[1] * da[2], da[3])), b)
    return(t_set_dims(r, c(da[1], da[2], db[2])))
  }
  if (length(da) == 3 && length(db) == 3 && da[1] == db[1]) return(t_bmm(a, b, call))
  # Batched products of any rank: a 1-d operand is a row (a) or a column (b) dropped again
  # afterwards, the batch dims broadcast, and the batch is flattened into one bmm.
  if (length(da) == 1) a <- t_set_dims(a, c(1L, da))
  if (length(db) == 1) b <- t_set_dims(b, c(db, 1L))
  ma <- t_size(a); mb <- t_size(b); na <- length(ma); nb <- length(mb)
  if (ma[na] != mb[nb - 1L])
    rf_shape_error(sprintf("matmul: the sizes %s and %s do not multiply (%d != %d)", paste(da, collapse = "x"),
                           paste(db, collapse = "x"), ma[na], mb[nb - 1L]), call)
  batch <- broadcast_shapes(ma[seq_len(na - 2L)], mb[seq_len(nb - 2L)], call)
  a3 <- t_reshape(t_expand(a, c(batch, ma[na - 1L], ma[na]), call), c(prod(batch), ma[na - 1L], ma[na]), call)
  b3 <- t_reshape(t_expand(b, c(batch, mb[nb - 1L], mb[nb]), call), c(prod(batch), mb[nb - 1L], mb[nb]), call)
  out <- c(batch, if (length(da) > 1) ma[na - 1L], if (length(db) > 1) mb[nb])
  t_reshape(t_bmm(a3, b3, call), out, call)
}

t_bmm <- function(a, b, call = sys.call()) {
  da <- t_size(a); db <- t_size(b)
  if (length(da) != 3 || length(db) != 3 || da[1] != db[1] || da[3] != db[2])
    rf_shape_error(sprintf("bmm: expected (B, n, k) and (B, k, m) tensors, got %s and %s",
                           paste(da, collapse = "x"), paste(db, collapse = "x")), call)
  out <- c(da[1], da[2], db[3])
  if (!any_sym(a, b)) {
    r <- array(0, out)
    for (i in seq_len(da[1])) r[i, , ] <- array(unclass(a), da)[i, , ] %*% array(unclass(b), db)[i, , ]
    return(r)
  }
  sa <- to_dtype(as_sym(a, call), trace_float(), call); sb <- to_dtype(as_sym(b, call), trace_float(), call)
  id <- emit(.rf_b_matmul, sym_rowmajor(sa), sym_rowmajor(sb), FALSE, FALSE, call = call)
  sym_from_rowmajor(id, out, trace_float())
}

t_where <- function(condition, self, other, call = sys.call()) {
  shape <- broadcast_shapes(broadcast_shapes(t_size(condition), t_size(self), call), t_size(other), call)
  cond <- t_expand(condition, shape, call)
  yes <- if (length(self) == 1 && !is_sym(self)) self else t_expand(self, shape, call)
  no <- if (length(other) == 1 && !is_sym(other)) other else t_expand(other, shape, call)
  rf_ifelse(cond, yes, no)
}

t_masked_fill <- function(x, mask, value, call = sys.call()) t_where(mask, value, x, call)

# tril / triu: the elements on and below (above) the `diagonal`-th diagonal of the last two dims
# (torch's: diagonal 0 the main one, positive above it), zeros elsewhere.
t_tri <- function(x, diagonal, lower, call) {
  s <- t_size(x)
  n <- length(s)
  if (n < 2) rf_abort("rfuse_shape_error", sprintf("%s needs a tensor of at least 2 dims, not %d",
                                                   if (lower) "tril" else "triu", n), call)
  if (!is.numeric(diagonal) || length(diagonal) != 1 || is.na(diagonal) || diagonal != round(diagonal))
    rf_abort("rfuse_type_error", "`diagonal` must be one whole number", call)
  keep <- outer(seq_len(s[n - 1]), seq_len(s[n]), function(i, j) if (lower) j - i <= diagonal else j - i >= diagonal)
  mask <- array(rep(keep, each = prod(s[seq_len(n - 2)])), s)
  rf_ifelse(mask, x, if (is.logical(x) || is_sym(x) && x$dtype == "i1") FALSE else 0)
}

t_clamp <- function(x, min = NULL, max = NULL) {
  if (!is.null(min)) x <- rf_pmax(x, min)
  if (!is.null(max)) x <- rf_pmin(x, max)
  x
}

# ---- torch_* functions ---------------------------------------------------------------------

# A torch function on traced values, plain arrays, and rf_tensors (recorded like every tensor
# op; `settings` are its non-data arguments).
torch_fn <- function(name, impl, settings = character()) {
  force(name); force(impl); force(settings)
  f <- function() NULL
  formals(f) <- formals(impl)
  body(f) <- bquote({
    args <- as.list(environment())
    if (any(vapply(args, is_tensor, TRUE))) return(record(.(name), impl, args, .(settings)))
    .(as.call(c(list(quote(impl)), lapply(names(formals(impl)), as.name))))
  })
  environment(f) <- list2env(list(impl = impl), parent = environment(record))
  f
}

# A torch function of a list of tensors (cat, stack).
torch_list_fn <- function(name, impl) {
  force(name); force(impl)
  function(tensors, dim = 1) {
    call <- sys.call()
    if (is_tensor(tensors) || !is.list(tensors))
      rf_abort("rfuse_type_error", sprintf("%s() takes a list of tensors", name), call)
    if (any(vapply(tensors, is_tensor, TRUE)))
      return(record(name, function(..., dim) impl(list(...), dim), c(unname(tensors), list(dim = dim)), "dim"))
    impl(tensors, dim, call)
  }
}

#' torch for R's tensor functions
#'
#' The `torch_*` functions of torch for R that models use, on traced values (in [rf_jit()] and
#' [rf_fit()]), plain R arrays and [rf_tensor]s. Dims are 1-based, negative from the end, as in
#' torch for R; reshapes are row-major and broadcasting aligns trailing dims, as in torch. The
#' porting table in the package's documentation (`docs/r-package.md`) lists every supported name
#' and every known difference.
#'
#' @param self,input A tensor (traced value, R array or `rf_tensor`).
#' @param dims A permutation of the dims.
#' @param length How many elements `torch_narrow()` keeps, from `start`.
#' @param other,mat2,condition Further tensors.
#' @param tensors A list of tensors.
#' @param dim,dim0,dim1,start_dim,end_dim Dims (1-based; negative counts from the end).
#' @param shape,size A shape (`-1` infers one size).
#' @param keepdim Keep reduced dims as size 1.
#' @param chunks,split_size How `torch_chunk()` / `torch_split()` cut.
#' @param min,max Bounds of `torch_clamp()`.
#' @param exponent Power.
#' @param alpha Multiplier of `other` in `torch_add()` / `torch_sub()`.
#' @param mask,value `torch_masked_fill()`: where to put `value`.
#' @param fill_value Value of `torch_full()`.
#' @param dtype,device,requires_grad Creation options: outside traced code the result is an
#'   `rf_tensor` (float32 on the default device unless told); inside traced code a constant of the
#'   program, `dtype`/`requires_grad` are refused and `device` is where the program runs.
#' @param start,end,step `torch_arange()`'s range (inclusive of `end`, as torch for R).
#' @param ... Sizes (creation functions) or dims (`torch_permute()`).
#' @return A tensor of the kind that came in (a list for chunk/split).
#' @examples
#' x <- array(1:24, c(2, 3, 4))
#' dim(torch_flatten(x, start_dim = 2))
#' torch_sum(x, dim = 3)
#' torch_cat(list(matrix(1:4, 2), matrix(5:8, 2)), dim = 2)
#' @name torch_functions
NULL

#' @rdname torch_functions
#' @export
torch_flatten <- torch_fn("torch_flatten", function(input, start_dim = 1, end_dim = -1)
  t_flatten(input, start_dim, end_dim, sys.call()), c("start_dim", "end_dim"))
#' @rdname torch_functions
#' @export
torch_reshape <- torch_fn("torch_reshape", function(self, shape) t_reshape(self, shape, sys.call()), "shape")
#' @rdname torch_functions
#' @export
torch_squeeze <- torch_fn("torch_squeeze", function(self, dim = NULL) t_squeeze(self, dim, sys.call()), "dim")
#' @rdname torch_functions
#' @export
torch_unsqueeze <- torch_fn("torch_unsqueeze", function(self, dim) t_unsqueeze(self, dim, sys.call()), "dim")
#' @rdname torch_functions
#' @export
torch_transpose <- torch_fn("torch_transpose", function(self, dim0, dim1) t_transpose(self, dim0, dim1, sys.call()),
                            c("dim0", "dim1"))
#' @rdname torch_functions
#' @export
torch_t <- torch_fn("torch_t", function(self) {
  if (length(t_size(self)) < 2) self else t_transpose(self, 1, 2, sys.call())
})
#' @rdname torch_functions
#' @export
torch_permute <- torch_fn("torch_permute", function(self, dims) t_permute(self, dims, sys.call()), "dims")
#' @rdname torch_functions
#' @param seed `torch_manual_seed()`: seeds R's random number generator (`set.seed()`), which
#'   rfuse's random values (`torch_randn()`, initializers, dropout masks) are drawn from; torch's
#'   own generator gives other numbers for the same seed.
#' @export
torch_manual_seed <- function(seed) {
  if (!is.numeric(seed) || length(seed) != 1 || is.na(seed) || seed != round(seed))
    rf_abort("rfuse_type_error", "torch_manual_seed() takes one whole number", sys.call())
  set.seed(seed)
  invisible(NULL)
}
#' @rdname torch_functions
#' @param diagonal Which diagonal `torch_tril()` / `torch_triu()` keep from (0: the main one).
#' @export
torch_tril <- torch_fn("torch_tril", function(self, diagonal = 0) t_tri(self, diagonal, TRUE, sys.call()), "diagonal")
#' @rdname torch_functions
#' @export
torch_triu <- torch_fn("torch_triu", function(self, diagonal = 0) t_tri(self, diagonal, FALSE, sys.call()), "diagonal")
#' @rdname torch_functions
#' @export
torch_cat <- torch_list_fn("torch_cat", t_cat)
#' @rdname torch_functions
#' @export
torch_stack <- torch_list_fn("torch_stack", t_stack)
#' @rdname torch_functions
#' @export
torch_chunk <- function(self, chunks, dim = 1) t_chunk_any(self, chunks, dim, sys.call(), t_chunk)
#' @rdname torch_functions
#' @export
torch_split <- function(self, split_size, dim = 1) t_chunk_any(self, split_size, dim, sys.call(), t_split)
#' @rdname torch_functions
#' @export
torch_unbind <- function(self, dim = 1) {
  call <- sys.call()
  d <- t_dim(dim, length(t_size(self)), call)
  lapply(torch_split(self, 1, d), function(p) torch_squeeze(p, d))
}
# chunk/split on an rf_tensor: one recorded narrow per piece.
t_chunk_any <- function(self, n, dim, call, how) {
  if (!is_tensor(self)) return(how(self, n, dim, call))
  sizes <- vapply(how(array(0, t_size(self)), n, dim, call), function(p) t_size(p)[t_dim(dim, length(t_size(self)), call)], 1L)
  starts <- cumsum(c(1L, sizes))[seq_along(sizes)]
  Map(function(s, l) record("torch_narrow", function(x, dim, start, length) t_narrow(x, dim, start, length),
                            list(self, dim = dim, start = s, length = l), c("dim", "start", "length")), starts, sizes)
}
#' @rdname torch_functions
#' @export
torch_narrow <- torch_fn("torch_narrow", function(self, dim, start, length) t_narrow(self, dim, start, length, sys.call()),
                         c("dim", "start", "length"))
#' @rdname torch_functions
#' @param tensors `torch_meshgrid()`: a list of 1-d tensors (or R vectors).
#' @param indexing `torch_meshgrid()`: `"ij"` (matrix indexing: result k varies along dim k) or
#'   `"xy"` (Cartesian: the first two dims swapped), as torch's.
#' @export
torch_meshgrid <- function(tensors, indexing = "ij") {
  call <- sys.call()
  if (!is.list(tensors) || is_tensor(tensors) || !length(tensors))
    rf_abort("rfuse_type_error", "torch_meshgrid() takes a list of 1-d tensors", call)
  indexing <- match_choice(indexing, c("ij", "xy"), "indexing", call)
  lens <- vapply(tensors, function(t) {
    d <- t_size(t)
    if (length(d) > 1) rf_abort("rfuse_shape_error", sprintf("torch_meshgrid() takes 1-d tensors, not one of %d dims", length(d)), call)
    as.integer(prod(d))
  }, 1L)
  shape <- lens
  where <- seq_along(lens)
  if (indexing == "xy" && length(lens) >= 2) {
    shape[1:2] <- lens[2:1]
    where[1:2] <- 2:1
  }
  Map(function(t, k) meshgrid_one(t, k, shape), tensors, where)
}
# One tensor of a mesh grid: its values along dim `position` of `shape`.
meshgrid_one <- torch_fn("torch_meshgrid", function(self, position, shape) {
  along <- rep(1L, length(shape))
  along[position] <- shape[position]
  t_expand(t_reshape(self, along, sys.call()), shape, sys.call())
}, c("position", "shape"))

#' @rdname torch_functions
#' @param vec2 `torch_outer()`: the second vector (the product is `length(self)` x `length(vec2)`).
#' @export
torch_outer <- torch_fn("torch_outer", function(self, vec2) {
  n <- t_size(self); m <- t_size(vec2)
  if (length(n) != 1 || length(m) != 1) rf_shape_error("outer() takes two 1-d tensors", sys.call())
  t_binary(`*`, t_set_dims(self, c(n, 1L)), t_set_dims(vec2, c(1L, m)), sys.call())
})
#' @rdname torch_functions
#' @export
torch_mm <- torch_fn("torch_mm", function(self, mat2) {
  if (length(t_size(self)) != 2 || length(t_size(mat2)) != 2)
    rf_shape_error("torch_mm() takes two matrices (use torch_matmul() for other ranks)", sys.call())
  rf_matprod(self, mat2)
})
#' @rdname torch_functions
#' @export
torch_matmul <- torch_fn("torch_matmul", function(self, other) t_matmul(self, other, sys.call()))
#' @rdname torch_functions
#' @export
torch_bmm <- torch_fn("torch_bmm", function(self, mat2) t_bmm(self, mat2, sys.call()))
#' @rdname torch_functions
#' @export
torch_where <- torch_fn("torch_where", function(condition, self, other) t_where(condition, self, other, sys.call()))
#' @rdname torch_functions
#' @export
torch_masked_fill <- torch_fn("torch_masked_fill", function(self, mask, value) t_masked_fill(self, mask, value, sys.call()))
#' @rdname torch_functions
#' @export
torch_clamp <- torch_fn("torch_clamp", function(self, min = NULL, max = NULL) t_clamp(self, min, max))
#' @rdname torch_functions
#' @export
torch_add <- torch_fn("torch_add", function(self, other, alpha = 1)
  t_binary(`+`, self, if (identical(alpha, 1)) other else other * alpha, sys.call()), "alpha")
#' @rdname torch_functions
#' @export
torch_sub <- torch_fn("torch_sub", function(self, other, alpha = 1)
  t_binary(`-`, self, if (identical(alpha, 1)) other else other * alpha, sys.call()), "alpha")
#' @rdname torch_functions
#' @export
torch_mul <- torch_fn("torch_mul", function(self, other) t_binary(`*`, self, other, sys.call()))
#' @rdname torch_functions
#' @export
torch_div <- torch_fn("torch_div", function(self, other) t_binary(`/`, self, other, sys.call()))
#' @rdname torch_functions
#' @export
torch_pow <- torch_fn("torch_pow", function(self, exponent) t_binary(`^`, self, exponent, sys.call()))
#' @rdname torch_functions
#' @export
torch_remainder <- torch_fn("torch_remainder", function(self, other) t_binary(t_remainder, self, other, sys.call()))
#' @rdname torch_functions
#' @export
torch_maximum <- torch_fn("torch_maximum", function(self, other) t_binary(rf_pmax, self, other, sys.call()))
#' @rdname torch_functions
#' @export
torch_minimum <- torch_fn("torch_minimum", function(self, other) t_binary(rf_pmin, self, other, sys.call()))

unary_torch <- function(name, f) torch_fn(name, function(self) f(self))
#' @rdname torch_functions
#' @export
torch_exp <- unary_torch("torch_exp", exp)
#' @rdname torch_functions
#' @export
torch_log <- unary_torch("torch_log", log)
#' @rdname torch_functions
#' @export
torch_sqrt <- unary_torch("torch_sqrt", sqrt)
#' @rdname torch_functions
#' @export
torch_rsqrt <- unary_torch("torch_rsqrt", function(x) 1 / sqrt(x))
#' @rdname torch_functions
#' @export
torch_abs <- unary_torch("torch_abs", abs)
#' @rdname torch_functions
#' @export
torch_tanh <- unary_torch("torch_tanh", tanh)
#' @rdname torch_functions
#' @export
torch_sin <- unary_torch("torch_sin", sin)
#' @rdname torch_functions
#' @export
torch_cos <- unary_torch("torch_cos", cos)
#' @rdname torch_functions
#' @export
torch_sigmoid <- unary_torch("torch_sigmoid", function(x) nnf_sigmoid(x))
#' @rdname torch_functions
#' @export
torch_relu <- unary_torch("torch_relu", function(x) nnf_relu(x))
#' @rdname torch_functions
#' @export
torch_neg <- unary_torch("torch_neg", function(x) -x)
#' @rdname torch_functions
#' @export
torch_acos <- unary_torch("torch_acos", acos)
#' @rdname torch_functions
#' @export
torch_asin <- unary_torch("torch_asin", asin)
#' @rdname torch_functions
#' @export
torch_atan <- unary_torch("torch_atan", atan)
#' @rdname torch_functions
#' @export
torch_tan <- unary_torch("torch_tan", tan)
#' @rdname torch_functions
#' @param approximate `torch_gelu()`: `"none"` (the exact GELU) or `"tanh"`, as [nnf_gelu()].
#' @export
torch_gelu <- torch_fn("torch_gelu", function(self, approximate = "none") nnf_gelu(self, approximate), "approximate")

reduce_torch <- function(name, kind) {
  force(kind)
  torch_fn(name, function(self, dim = NULL, keepdim = FALSE) t_reduce(kind, self, dim, keepdim, sys.call()),
           c("dim", "keepdim"))
}
#' @rdname torch_functions
#' @export
torch_sum <- reduce_torch("torch_sum", "sum")
#' @rdname torch_functions
#' @export
torch_mean <- reduce_torch("torch_mean", "mean")
#' @rdname torch_functions
#' @export
torch_amax <- reduce_torch("torch_amax", "max")
#' @rdname torch_functions
#' @export
torch_amin <- reduce_torch("torch_amin", "min")
#' @rdname torch_functions
#' @export
torch_prod <- reduce_torch("torch_prod", "prod")
#' @rdname torch_functions
#' @export
#' @details `torch_max(self, other = )` / `torch_min(self, other = )`: the elementwise maximum
#'   (minimum) of the two, broadcast, as `torch_maximum()` (`dim` and `other` exclude each other).
torch_max <- function(self, dim = NULL, keepdim = FALSE, other = NULL) {
  if (!is.null(other)) {
    if (!is.null(dim)) rf_abort("rfuse_type_error", "torch_max() takes `dim` or `other`, not both", sys.call())
    return(torch_maximum(self, other))
  }
  t_max_min("torch_max", "max", self, dim, keepdim, sys.call())
}
#' @rdname torch_functions
#' @export
torch_min <- function(self, dim = NULL, keepdim = FALSE, other = NULL) {
  if (!is.null(other)) {
    if (!is.null(dim)) rf_abort("rfuse_type_error", "torch_min() takes `dim` or `other`, not both", sys.call())
    return(torch_minimum(self, other))
  }
  t_max_min("torch_min", "min", self, dim, keepdim, sys.call())
}
# Without `dim` the value; with it list(values, indices), as torch.
t_max_min <- function(name, kind, self, dim, keepdim, call) {
  if (is.null(dim)) {
    if (!isFALSE(keepdim)) rf_unsupported(name, call, "`keepdim` needs `dim`")
    return(if (is_tensor(self)) record(name, function(x) t_reduce(kind, x), list(self)) else t_reduce(kind, self, NULL, FALSE, call))
  }
  if (is_tensor(self))
    return(list(record(name, function(x, dim, keepdim) t_reduce(kind, x, dim, keepdim), list(self, dim = dim, keepdim = keepdim), c("dim", "keepdim")),
                record(name, function(x, dim, keepdim) t_argext(kind, x, dim, keepdim), list(self, dim = dim, keepdim = keepdim), c("dim", "keepdim"))))
  list(t_reduce(kind, self, dim, keepdim, call), t_argext(kind, self, dim, keepdim, call))
}

# The 1-based index of the first maximum (minimum) along `dim`, as torch for R's argmax: a NaN
# counts as the extreme. Traced, it is the smallest index where the value equals the
# reduction (or is NaN): a comparison, a select and a min reduction, which fuse.
t_argext <- function(kind, x, dim, keepdim = FALSE, call = sys.call()) {
  d <- t_size(x); n <- length(d)
  k <- t_dim(dim, n, call)
  out_shape <- if (keepdim) replace(d, k, 1L) else d[-k]
  if (!is_sym(x)) {
    pick <- function(v) { nan <- which(is.nan(v)); if (length(nan)) nan[1] else if (kind == "max") which.max(v) else which.min(v) }
    v <- if (n == 1) pick(as.vector(x)) else apply(array(unclass(x), d), setdiff(seq_len(n), k), pick)
    return(shaped(as.integer(v), out_shape))
  }
  s <- to_dtype(x, trace_float(), call)
  ext <- t_reduce(kind, s, k, TRUE, call)
  hit <- t_binary(`==`, s, ext, call) | is.nan(s)
  pos <- t_expand(t_set_dims(seq_len(d[k]) + 0, replace(rep(1L, n), k, d[k])), d, call)
  idx <- t_reduce("min", rf_ifelse(hit, pos, Inf), k, keepdim, call)
  idx$ib <- int_bound("const", v = d[k]) # an R integer (1..size)
  idx
}

#' @rdname torch_functions
#' @export
torch_argmax <- torch_fn("torch_argmax", function(self, dim, keepdim = FALSE) t_argext("max", self, dim, keepdim, sys.call()),
                         c("dim", "keepdim"))
#' @rdname torch_functions
#' @export
torch_argmin <- torch_fn("torch_argmin", function(self, dim, keepdim = FALSE) t_argext("min", self, dim, keepdim, sys.call()),
                         c("dim", "keepdim"))
# The lines of plain array `x` (dims d) along dim k, as the columns of a matrix `m`, and `back()`,
# which puts a matrix of such columns (or their values in that order) back in x's layout.
lines_along <- function(x, d, k) {
  perm <- c(k, setdiff(seq_along(d), k))
  list(m = matrix(aperm(array(unclass(x), d), perm), d[k]),
       back = function(m) shaped(aperm(array(m, d[perm]), order(perm)), d))
}

# torch_cumsum / torch_cumprod along a 1-based dim (rfuse.scan); integer tensors sum in int64, as
# torch's.
t_cumulative <- function(kind, x, dim, call) {
  d <- t_size(x); n <- length(d)
  k <- t_dim(dim, n, call)
  if (!is_sym(x)) {
    l <- lines_along(x, d, k)
    return(l$back(apply(l$m, 2, if (kind == "sum") cumsum else cumprod)))
  }
  s <- if (is_native_int(x)) to_dtype(x, "i64", call) else to_dtype(x, trace_float(), call)
  if (prod(d) == 0) return(s)
  new_sym(emit(.rf_b_scan, s$id, as.integer(n - k), kind, call = call), s$rdim, s$len, s$dtype)
}
#' @rdname torch_functions
#' @export
torch_cumsum <- torch_fn("torch_cumsum", function(self, dim, dtype = NULL) {
  if (!is.null(dtype)) rf_unsupported("torch_cumsum", sys.call(), "`dtype` (the sum is in the tensor's own dtype, int64 for integers)")
  t_cumulative("sum", self, dim, sys.call())
}, c("dim", "dtype"))
#' @rdname torch_functions
#' @export
torch_cumprod <- torch_fn("torch_cumprod", function(self, dim, dtype = NULL) {
  if (!is.null(dtype)) rf_unsupported("torch_cumprod", sys.call(), "`dtype` (the product is in the tensor's own dtype)")
  t_cumulative("prod", self, dim, sys.call())
}, c("dim", "dtype"))
#' @rdname torch_functions
#' @export
torch_softmax <- torch_fn("torch_softmax", function(input, dim) t_softmax(input, dim, sys.call()), "dim")
#' @rdname torch_functions
#' @export
torch_log_softmax <- torch_fn("torch_log_softmax", function(input, dim) t_log_softmax(input, dim, sys.call()), "dim")

# Creation: rf_tensors, as torch's (float32 on the default device unless told), so torch code's
# methods work on them (`torch_ones(n, n)$tril()`); inside traced code constants of the program.
create <- function(name, values, shape, dtype, device, requires_grad, call) {
  v <- shaped(values, shape)
  if (in_trace()) {
    if (!isFALSE(requires_grad)) rf_unsupported(name, call, "`requires_grad` inside traced code")
    # Integer and boolean constants keep their dtype (a causal mask, positions for an
    # embedding: torch_arange(1, n, dtype = torch_int())); floats compute in the trace's own.
    d <- if (!is.null(dtype)) check_dtype(dtype)
    if (!is.null(d) && d %in% c("int32", "int64", "bool"))
      return(lift_constant(if (d == "bool") v != 0 else v, call, dtype = ir_dtype(d)))
    if (!is.null(d) && !identical(d, r_dtype(trace_float())))
      rf_unsupported(name, call, sprintf("`dtype = \"%s\"` inside traced code (values compute in the trace's dtype, %s)",
                                         dtype, r_dtype(trace_float())))
    # A constant of the program, on the device it runs on, as a traced value: torch code calls
    # methods on it (torch_arange(1, n)$unsqueeze(1)).
    return(as_sym(v, call))
  }
  rf_tensor(v, dtype = dtype, device = if (is.null(device)) rf_default_device() else as.character(device),
            requires_grad = requires_grad)
}
size_args <- function(...) {
  s <- unlist(list(...))
  if (!is.numeric(s) || anyNA(s) || any(s < 0 | s != round(s)))
    rf_abort("rfuse_type_error", "sizes must be non-negative whole numbers", sys.call(-1))
  as.integer(s)
}
creation_fn <- function(name, values) {
  force(name); force(values)
  function(..., dtype = NULL, device = NULL, requires_grad = FALSE) {
    s <- size_args(...)
    if ((name == "torch_randn" || name == "torch_rand") && in_trace())
      return(traced_creation_draw(name, s, dtype, requires_grad, sys.call()))
    create(name, values(prod(s)), s, dtype, device, requires_grad, sys.call())
  }
}
# torch_randn / torch_rand(_like) in traced code (a VAE's reparameterization): values drawn
# afresh at every call and training step, an input of the program (traced_random), in the
# trace's dtype.
traced_creation_draw <- function(name, shape, dtype, requires_grad, call) {
  if (!is.null(dtype) && !identical(check_dtype(dtype), r_dtype(trace_float())))
    rf_unsupported(name, call, sprintf("`dtype = \"%s\"` inside traced code (values compute in the trace's dtype, %s)",
                                       dtype, r_dtype(trace_float())))
  if (!isFALSE(requires_grad)) rf_unsupported(name, call, "`requires_grad` inside traced code")
  kind <- if (grepl("randn", name)) "normal" else "uniform"
  traced_random(name, kind, if (length(shape) > 1) shape, as.integer(prod(shape)), trace_float(), call)
}
refuse_rng_in_trace <- function(name, call)
  if (in_trace()) rf_unsupported(name, call, paste("it draws random numbers: they would be constants of the program,",
                                                   "the same on every call"))
#' @rdname torch_functions
#' @export
torch_zeros <- creation_fn("torch_zeros", function(n) rep(0, n))
#' @rdname torch_functions
#' @export
#' @details `torch_empty()` gives zeros (torch leaves its values unspecified).
torch_empty <- creation_fn("torch_empty", function(n) rep(0, n))
#' @rdname torch_functions
#' @export
torch_ones <- creation_fn("torch_ones", function(n) rep(1, n))
#' @rdname torch_functions
#' @export
torch_randn <- creation_fn("torch_randn", function(n) stats::rnorm(n))
#' @rdname torch_functions
#' @export
torch_rand <- creation_fn("torch_rand", function(n) stats::runif(n))
#' @rdname torch_functions
#' @export
torch_full <- function(size, fill_value, dtype = NULL, device = NULL, requires_grad = FALSE) {
  s <- size_args(size)
  create("torch_full", rep(fill_value, prod(s)), s, dtype, device, requires_grad, sys.call())
}
#' @rdname torch_functions
#' @export
#' @details `torch_scalar_tensor(value)`: a tensor of that one value, of length 1 (rfuse's tensors
#'   have at least one dim; torch's has none).
torch_scalar_tensor <- function(value, dtype = NULL, device = NULL, requires_grad = FALSE) {
  call <- sys.call()
  if (!(is.numeric(value) || is.logical(value)) || is.object(value) || length(value) != 1)
    rf_abort("rfuse_type_error", "torch_scalar_tensor() takes one number (`value`)", call)
  if (is.null(dtype) && is.logical(value)) dtype <- "bool"
  create("torch_scalar_tensor", as.vector(value), 1L, dtype, device, requires_grad, call)
}
#' @rdname torch_functions
#' @export
torch_arange <- function(start = 0, end, step = 1, dtype = NULL, device = NULL, requires_grad = FALSE)
  create("torch_arange", seq(start, end, by = step), length(seq(start, end, by = step)), dtype, device,
         requires_grad, sys.call())

#' @rdname torch_functions
#' @param low,high `torch_randint()`: whole numbers drawn uniformly from `low` to `high - 1`
#'   (int64 unless `dtype` says otherwise, as torch's).
#' @param generator Must be `NULL`: rfuse's random numbers come from R's generator (`set.seed`).
#' @export
torch_randint <- function(low, high, size, generator = NULL, dtype = NULL, device = NULL, requires_grad = FALSE) {
  call <- sys.call()
  # torch_randint(high, size): low defaults to 0.
  if (missing(size) && !missing(high)) { size <- high; high <- low; low <- 0 }
  else if (missing(high) && !missing(size)) { high <- low; low <- 0 }
  if (missing(size) || missing(high)) rf_abort("rfuse_type_error", "torch_randint() needs `high` and `size`", call)
  if (!is.null(generator)) rf_unsupported("torch_randint(generator = )", call, "random numbers come from R's generator (set.seed)")
  refuse_rng_in_trace("torch_randint", call)
  bounds <- c(low, high)
  if (!is.numeric(bounds) || length(bounds) != 2 || anyNA(bounds) || any(bounds != round(bounds)) || high <= low)
    rf_abort("rfuse_type_error", "`low` and `high` must be whole numbers with low < high", call)
  s <- size_args(size)
  n <- prod(s)
  values <- low + floor(stats::runif(n) * (high - low))
  create("torch_randint", pmin(values, high - 1), s, dtype %||% "int64", device, requires_grad, call)
}
#' @rdname torch_functions
#' @param steps `torch_linspace()`: the number of evenly spaced values from `start` to `end`.
#' @export
torch_linspace <- function(start, end, steps, dtype = NULL, device = NULL, requires_grad = FALSE) {
  call <- sys.call()
  if (!is.numeric(steps) || length(steps) != 1 || is.na(steps) || steps < 0 || steps != round(steps))
    rf_abort("rfuse_type_error", "`steps` must be a non-negative whole number", call)
  v <- if (steps == 1) start else seq(start, end, length.out = steps)
  create("torch_linspace", v, as.integer(steps), dtype, device, requires_grad, call)
}

like_fn <- function(name, fill) {
  force(name); force(fill)
  function(input, dtype = NULL, device = NULL, requires_grad = FALSE) {
    call <- sys.call()
    s <- t_size(input)
    if ((name == "torch_randn_like" || name == "torch_rand_like") && in_trace())
      return(traced_creation_draw(name, s, dtype, requires_grad, call))
    if (is_tensor(input) && is.null(device)) device <- input@env$device
    if (is_tensor(input) && is.null(dtype)) dtype <- input@env$dtype
    create(name, fill(prod(s)), s, dtype, device, requires_grad, call)
  }
}
#' @rdname torch_functions
#' @export
torch_zeros_like <- like_fn("torch_zeros_like", function(n) rep(0, n))
#' @rdname torch_functions
#' @export
torch_ones_like <- like_fn("torch_ones_like", function(n) rep(1, n))
#' @rdname torch_functions
#' @export
torch_randn_like <- like_fn("torch_randn_like", function(n) stats::rnorm(n))
#' @rdname torch_functions
#' @export
torch_rand_like <- like_fn("torch_rand_like", function(n) stats::runif(n))

#' @rdname torch_functions
#' @param type A device type, `"cpu"` or `"cuda"` (optionally `"cuda:0"`).
#' @export
torch_device <- function(type) {
  if (!is.character(type) || length(type) != 1)
    rf_abort("rfuse_type_error", "torch_device() takes a device type such as \"cpu\" or \"cuda\"", sys.call())
  base_type <- sub(":0$", "", type)
  if (grepl(":", base_type))
    rf_unsupported("torch_device", sys.call(), sprintf("device '%s': rfuse uses one GPU per process", type))
  check_device(base_type)
}

#' @rdname torch_functions
#' @return `cuda_is_available()`: whether a CUDA device is usable.
#' @export
cuda_is_available <- function() .rf_device() == "cuda"

#' Evaluate without recording gradients
#'
#' As torch's `with_no_grad()`: operations on [rf_tensor]s inside `code` record no graph for
#' `$backward()`, so in-place parameter updates (`w$sub_(lr * w$grad)`) are not differentiated.
#' @param code Code to evaluate.
#' @return The value of `code`.
#' @examples
#' w <- rf_tensor(c(1, 2), requires_grad = TRUE)
#' with_no_grad(w$mul_(2))
#' as.array(w)
#' @export
with_no_grad <- function(code) {
  old <- .rf_counters$no_grad
  .rf_counters$no_grad <- TRUE
  on.exit(.rf_counters$no_grad <- old)
  code
}

# ---- Tensor methods ------------------------------------------------------------------------

# x$name for traced values, rf_tensors and module parameters: torch for R's methods, as closures
# over `x` (fields such as $shape are values).
tensor_method <- function(x, name, call = NULL) {
  dims <- function(...) unlist(list(...))
  inplace <- function(f) function(...) {
    if (is_sym(x)) return(rebind_inplace(x, name, f(x, ...), sys.call(), parent.frame(), sys.function(sys.parent())))
    if (is_tensor(x) && records_graph(x)) return(record_inplace(x, name, function(old) f(old, ...)))
    if (!is_tensor(x)) return(write_back_inplace(name, f(x, ...), sys.call(), parent.frame()))
    assign_inplace(x, name, f(x, ...))
  }
  m <- switch(name,
    shape = return(t_size(x)),
    ndim = return(length(t_size(x))),
    data = function() x, # a method in torch for R: x$data()
    is_cuda = return(is_tensor(x) && x@env$device == "cuda"),
    # (on an rf_tensor `$` has its own $to/$cpu/$cuda; here: traced values and parameters)
    to = function(device = NULL, dtype = NULL, ...) {
      no_more_args("$to", ...)
      if (!is.null(device)) torch_device(as.character(device)) # checked; values compute on the program's device
      if (is.null(dtype)) x else cast_torch(x, dtype, call)
    },
    cpu = , cuda = function() x,
    float = , double = , half = function() cast_torch(x, "float", call),
    long = , int = function() cast_torch(x, "int", call),
    bool = function() cast_torch(x, "bool", call),
    norm = function(p = 2, dim = NULL, keepdim = FALSE) {
      if (!identical(p, 2) && !identical(p, 2L)) rf_unsupported("$norm", call, "only the 2-norm (p = 2) is supported yet")
      torch_sqrt(torch_sum(x * x, dim, keepdim))
    },
    repeat_interleave = function(repeats, dim = NULL) repeat_interleave(x, repeats, dim, call),
    `repeat` = function(...) repeat_tensor(x, dims(...), call),
    device = return(torch_device(if (is_tensor(x)) x@env$device else current_device())),
    size = function(dim = NULL) if (is.null(dim)) t_size(x) else t_size(x)[t_dim(dim, length(t_size(x)), call)],
    dim = function() length(t_size(x)),
    numel = function() prod(t_size(x)),
    view = , reshape = function(...) torch_reshape(x, dims(...)),
    flatten = function(start_dim = 1, end_dim = -1) torch_flatten(x, start_dim, end_dim),
    permute = function(...) torch_permute(x, dims(...)),
    transpose = function(dim0, dim1) torch_transpose(x, dim0, dim1),
    t = function() torch_t(x),
    squeeze = function(dim = NULL) torch_squeeze(x, dim),
    unsqueeze = function(dim) torch_unsqueeze(x, dim),
    contiguous = , clone = function() x,
    detach = function() t_detach(x, call),
    expand = function(...) expand_any(x, dims(...)),
    expand_as = function(other) expand_any(x, t_size(other)),
    view_as = , reshape_as = function(other) torch_reshape(x, t_size(other)),
    matmul = function(other) torch_matmul(x, other),
    outer = function(vec2) torch_outer(x, vec2),
    mm = function(mat2) torch_mm(x, mat2),
    bmm = function(mat2) torch_bmm(x, mat2),
    add = function(other, alpha = 1) torch_add(x, other, alpha),
    sub = function(other, alpha = 1) torch_sub(x, other, alpha),
    mul = function(other) torch_mul(x, other),
    div = function(other) torch_div(x, other),
    pow = function(exponent) torch_pow(x, exponent),
    remainder = function(other) torch_remainder(x, other),
    add_ = inplace(function(x, other, alpha = 1) torch_add(x, other, alpha)),
    sub_ = inplace(function(x, other, alpha = 1) torch_sub(x, other, alpha)),
    mul_ = inplace(function(x, other) torch_mul(x, other)),
    div_ = inplace(function(x, other) torch_div(x, other)),
    zero_ = inplace(function(x) torch_zeros_like(x)),
    fill_ = inplace(function(x, value) torch_full_like_values(x, value)),
    copy_ = inplace(function(x, src) torch_reshape(src, t_size(x))),
    uniform_ = inplace(function(x, from = 0, to = 1) random_fill(x, "uniform_", call, function(n) stats::runif(n, from, to))),
    normal_ = inplace(function(x, mean = 0, std = 1) random_fill(x, "normal_", call, function(n) stats::rnorm(n, mean, std))),
    exp = function() torch_exp(x), log = function() torch_log(x), sqrt = function() torch_sqrt(x),
    abs = function() torch_abs(x), tanh = function() torch_tanh(x), sigmoid = function() torch_sigmoid(x),
    relu = function() torch_relu(x), neg = function() torch_neg(x), rsqrt = function() torch_rsqrt(x),
    sin = function() torch_sin(x), cos = function() torch_cos(x),
    clamp = function(min = NULL, max = NULL) torch_clamp(x, min, max),
    softmax = function(dim) torch_softmax(x, dim),
    log_softmax = function(dim) torch_log_softmax(x, dim),
    masked_fill = function(mask, value) torch_masked_fill(x, mask, value),
    tril = function(diagonal = 0) torch_tril(x, diagonal), triu = function(diagonal = 0) torch_triu(x, diagonal),
    chunk = function(chunks, dim = 1) torch_chunk(x, chunks, dim),
    split = function(split_size, dim = 1) torch_split(x, split_size, dim),
    narrow = function(dim, start, length) torch_narrow(x, dim, start, length),
    sum = function(dim = NULL, keepdim = FALSE) torch_sum(x, dim, keepdim),
    mean = function(dim = NULL, keepdim = FALSE) torch_mean(x, dim, keepdim),
    amax = function(dim = NULL, keepdim = FALSE) torch_amax(x, dim, keepdim),
    amin = function(dim = NULL, keepdim = FALSE) torch_amin(x, dim, keepdim),
    prod = function(dim = NULL, keepdim = FALSE) torch_prod(x, dim, keepdim),
    max = function(dim = NULL, keepdim = FALSE) torch_max(x, dim, keepdim),
    min = function(dim = NULL, keepdim = FALSE) torch_min(x, dim, keepdim),
    argmax = function(dim, keepdim = FALSE) torch_argmax(x, dim, keepdim),
    argmin = function(dim, keepdim = FALSE) torch_argmin(x, dim, keepdim),
    sort = function(dim = -1L, descending = FALSE, stable = FALSE) torch_sort(x, dim, descending, stable),
    topk = function(k, dim = -1L, largest = TRUE, sorted = TRUE) torch_topk(x, k, dim, largest, sorted),
    gather = function(dim, index, sparse_grad = FALSE) torch_gather(x, dim, index, sparse_grad),
    scatter_add = function(dim, index, src) torch_scatter_add(x, dim, index, src),
    cumsum = function(dim, dtype = NULL) torch_cumsum(x, dim, dtype),
    cumprod = function(dim, dtype = NULL) torch_cumprod(x, dim, dtype),
    argsort = function(dim = -1L, descending = FALSE, stable = FALSE) torch_argsort(x, dim, descending, stable),
    item = function() {
      if (is_sym(x)) rf_unsupported("$item", call, "it reads a traced value into R: the program would hold one value for every call")
      if (prod(t_size(x)) != 1) rf_abort("rfuse_shape_error", "item() needs a tensor of one element", call)
      as.vector(if (is_tensor(x)) tensor_values(x) else unclass(x))
    },
    NULL)
  if (is.null(m))
    rf_abort("rfuse_unsupported", sprintf(paste("rfuse has no tensor method `$%s` (yet): the porting table in",
                                                "docs/r-package.md lists the supported ones"), name), call)
  m
}

expand_any <- function(x, shape) {
  if (is_tensor(x)) record("expand", function(a, shape) t_expand(a, shape), list(x, shape = shape), "shape")
  else t_expand(x, shape)
}

# x$add_(y): an rf_tensor takes the new value (its buffer, like torch's storage); a traced value or
# an R array cannot change in place, where a program that relies on it would go wrong silently.
# An in-place method on a traced value (`out$add_(identity)` in a forward): the variable it was
# called on names the new value, as torch's tensor would hold it. Refused where torch's change would
# also reach another name for the same value (an argument of the function, which its caller
# holds, or a second variable holding it): rebinding would leave those with the old value.
rebind_inplace <- function(x, name, value, call, env, fn) {
  target <- if (is.call(call[[1]]) && identical(call[[1]][[1]], as.name("$"))) call[[1]][[2]]
  refuse <- function(why) rf_unsupported(paste0("$", name), call, paste0(why, "; write x <- x$", sub("_$", "", name), "(...)"))
  # x$mul_(a)$add_(b): the chain changes x each time.
  while (is_inplace_call(target)) target <- target[[1]][[2]]
  # On a new tensor (eps$mul(std)$add_(mu): a VAE's reparameterization) nothing else sees the
  # change: the method's value is all there is.
  if (!is.symbol(target) && makes_new_tensor(target)) return(invisible(value))
  if (!is.symbol(target)) refuse("in traced code an in-place method changes a variable it is called on, not this expression")
  nm <- as.character(target)
  if (nm %in% names(formals(fn))) refuse(sprintf("`%s` is an argument: the caller's value would change too in torch", nm))
  for (other in setdiff(ls(env), nm)) {
    v <- get0(other, envir = env, inherits = FALSE)
    if (is_sym(v) && identical(v$id, x$id)) refuse(sprintf("`%s` is also `%s`, which torch's change would reach too", nm, other))
  }
  assign(nm, value, envir = env)
  invisible(value)
}

# `recv$name_(...)`: a call of an in-place method.
is_inplace_call <- function(e)
  is.call(e) && is.call(e[[1]]) && identical(e[[1]][[1]], as.name("$")) && grepl("_$", as.character(e[[1]][[3]]))

# Whether expression `e` computes a new tensor (not a view of another one, which torch's
# in-place change would reach): arithmetic, and the methods and torch functions that allocate.
new_tensor_methods <- c("add", "sub", "mul", "div", "pow", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "sigmoid",
                        "tanh", "relu", "clamp", "matmul", "mm", "sum", "mean", "clone", "softmax", "log_softmax")
new_tensor_functions <- c("+", "-", "*", "/", "^", "torch_exp", "torch_log", "torch_sqrt", "torch_abs", "torch_mul",
                          "torch_add", "torch_sub", "torch_div", "torch_matmul", "torch_mm", "torch_cat", "torch_stack",
                          "torch_sigmoid", "torch_tanh", "torch_relu", "torch_clamp", "torch_sum", "torch_mean",
                          "torch_randn_like", "torch_rand_like", "torch_zeros_like", "torch_ones_like", "torch_randn",
                          "torch_rand", "torch_zeros", "torch_ones", "torch_full", "torch_arange")
makes_new_tensor <- function(e) {
  if (!is.call(e)) return(FALSE)
  head <- e[[1]]
  if (is.call(head) && identical(head[[1]], as.name("$")) && is.symbol(head[[3]]))
    return(as.character(head[[3]]) %in% new_tensor_methods)
  if (is.call(head) && identical(head[[1]], as.name("::"))) head <- head[[3]]
  is.symbol(head) && as.character(head) %in% new_tensor_functions
}

# An in-place method on an R array (a module's parameter: `self$weight$data()$uniform_(-s, s)`,
# `conv$parameters$weight$data()$fill_(v)`): the new value is assigned back to the place the call
# names, as nn_init_* does; a parameter stays one.
write_back_inplace <- function(name, value, call, env) {
  place <- place_of_data(if (is.call(call[[1]]) && identical(call[[1]][[1]], as.name("$"))) call[[1]][[2]])
  refuse <- function() rf_unsupported(paste0("$", name), call, paste("in-place methods need an rf_tensor, or an R array",
                                                                    "named by a place it can be assigned back to (self$fc$weight)"))
  if (is.null(place)) refuse()
  # m$parameters$weight / m$parameters[["fc.weight"]]: the module's own parameter at that path.
  if (is.call(place) && as.character(place[[1]]) %in% c("$", "[[") && is.call(place[[2]]) &&
      identical(place[[2]][[1]], as.name("$")) && identical(place[[2]][[3]], as.name("parameters"))) {
    module <- eval(place[[2]][[2]], env)
    path <- if (is.name(place[[3]])) as.character(place[[3]]) else eval(place[[3]], env)
    if (!is_module(module)) refuse()
    store_parameter(self_of(module), path, value)
    return(invisible(value))
  }
  if (!(is.symbol(place) || (is.call(place) && as.character(place[[1]])[1] %in% c("$", "[[")))) refuse()
  old <- eval(place, env)
  if (inherits(old, "rf_parameter")) {
    # Only through a module (or its `self`): a parameter copied into a list or a variable is
    # not the module's, which torch's in-place change would reach.
    root <- place
    while (is.call(root)) root <- root[[2]]
    holder <- eval(root, env)
    if (is.symbol(place) || !(is_module(holder) || is.environment(holder))) refuse()
    value <- nn_parameter(value, !parameter_frozen(old))
  }
  eval(call("<-", place, value), env)
  invisible(value)
}

torch_full_like_values <- function(x, value) {
  if (is_sym(x)) return(x * 0 + value)
  d <- t_size(x)
  if (length(d) > 1) array(as.double(value), d) else rep(as.double(value), d)
}

random_fill <- function(x, name, call, draw) {
  if (is_sym(x)) rf_unsupported(paste0("$", name), call, "it draws random numbers: initialize parameters outside traced code")
  d <- t_size(x)
  v <- draw(prod(d))
  if (length(d) > 1) array(v, d) else v
}

# A tensor that records for backward(): an in-place op is recorded (the tensor's node becomes
# the op's, computed from a snapshot of its old state), unless the tensor already feeds a
# recorded op, which would then see the new value (torch stops there too).
records_graph <- function(x) isTRUE(x@env$requires_grad) && !isTRUE(.rf_counters$no_grad)
record_inplace <- function(x, name, f) {
  if (is.null(x@env$node))
    rf_abort("rfuse_autodiff_error", sprintf("$%s(): a leaf tensor that requires grad cannot change in place (as in torch); use with_no_grad()", name))
  if (isTRUE(x@env$uses > 0))
    rf_abort("rfuse_autodiff_error", sprintf("$%s(): this tensor is already used by a recorded operation, which needs its old value (torch fails here too); write x <- x$%s(...)",
                                             name, sub("_$", "", name)))
  old <- make_tensor(buf = x@env$buf, node = x@env$node, dtype = x@env$dtype, device = x@env$device,
                     rdim = x@env$rdim, len = x@env$len)
  old@env$requires_grad <- TRUE
  v <- f(old)
  for (field in c("buf", "node", "dtype", "rdim", "len", "requires_grad")) assign(field, get0(field, v@env), envir = x@env)
  x@env$uses <- 0
  invisible(x)
}

assign_inplace <- function(x, name, value) {
  if (!is_tensor(x))
    rf_unsupported(paste0("$", name), NULL, paste("in-place methods need an rf_tensor: a traced value or an R array",
                                                  "cannot change in place (write x <- x$", sub("_$", "", name), "(...))"))
  value <- materialize(if (is_tensor(value)) value else rf_tensor(value, dtype = x@env$dtype, device = x@env$device))
  x@env$buf <- value@env$buf
  x@env$dtype <- value@env$dtype
  x@env$rdim <- value@env$rdim
  x@env$len <- value@env$len
  invisible(x)
}

# torch's dtypes as rfuse's names (torch_long() is "int64", ...), and conversions to them on
# traced values and R arrays: floats keep the computation's float dtype, integers truncate
# toward zero (as torch's casts), bool is x != 0.
dtype_kind <- function(dtype, call) {
  d <- tolower(as.character(dtype)[1])
  # (traced code's x$dtype is the IR's name of it: x$to(dtype = y$dtype) with "f32")
  if (d %in% tensor_dtypes) d <- r_dtype(d)
  if (d %in% c("float", "float32", "float64", "double", "half", "float16", "bfloat16")) return("float")
  if (d %in% c("long", "int", "int64", "int32", "int16", "int8", "uint8", "short")) return("int")
  if (d %in% c("bool", "logical")) return("bool")
  rf_unsupported("dtype", call, sprintf("dtype '%s' is not one rfuse knows (float32, float64, int32, int64, bool, ...)", d))
}
cast_torch <- function(x, dtype, call) {
  kind <- dtype_kind(dtype, call)
  if (is_sym(x)) return(switch(kind, float = to_dtype(x, trace_float(), call), int = trunc(x), bool = x != 0))
  v <- unclass(x)
  attr(v, "requires_grad") <- NULL
  switch(kind, float = { storage.mode(v) <- "double"; v }, int = { v <- trunc(v); storage.mode(v) <- "integer"; v }, bool = v != 0)
}

# x$`repeat`(sizes): torch's tiling — the whole tensor repeated sizes[i] times along dim i, with
# leading dims of 1 when sizes has more than x's dims. As a reshape to (1, d1, 1, d2, ...), an
# expand to (r1, d1, r2, d2, ...) and a reshape to (r1 d1, r2 d2, ...): row-major, as torch's.
repeat_tensor <- function(x, sizes, call) {
  r <- sizes
  d <- t_size(x)
  if (!is.numeric(r) || !length(r) || anyNA(r) || any(r < 0 | r != round(r)))
    rf_abort("rfuse_type_error", "$repeat() takes a whole, non-negative number of repeats per dim", call)
  if (any(r == 0)) rf_unsupported("$repeat", call, "0 repeats (an empty tensor) are not supported")
  if (length(r) < length(d))
    rf_shape_error("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor", call)
  r <- as.integer(r)
  d <- c(rep(1L, length(r) - length(d)), d)
  y <- torch_reshape(x, as.vector(rbind(1L, d)))
  torch_reshape(expand_any(y, as.vector(rbind(r, d))), r * d)
}

# x$repeat_interleave(k, dim): each slice along `dim` repeated k times in place (k one number).
repeat_interleave <- function(x, repeats, dim, call) {
  if (!is.numeric(repeats) || length(repeats) != 1 || repeats < 1 || repeats != round(repeats))
    rf_unsupported("$repeat_interleave", call, "only one whole number of repeats is supported yet")
  if (is.null(dim)) { x <- torch_flatten(x); dim <- 1L }
  d <- t_size(x); k <- t_dim(dim, length(d), call)
  y <- torch_unsqueeze(x, k + 1L)
  reps <- d; reps <- append(reps, as.integer(repeats), k)
  torch_reshape(expand_any(y, reps), replace(d, k, d[k] * as.integer(repeats)))
}

#' torch's dtypes
#'
#' `torch_float()`, `torch_double()`, `torch_long()`, `torch_int()`, `torch_bool()`,
#' `torch_float16()` / `torch_half()`, `torch_bfloat16()` give the dtype names rfuse uses
#' (`"float32"`, `"float64"`, `"int64"`, `"int32"`, `"bool"`, `"float16"`, `"bfloat16"`), for
#' `dtype =` arguments, `$to(dtype =)` and [with_autocast()].
#' @return A dtype name.
#' @examples
#' rf_tensor(1:3, dtype = torch_long())
#' @name torch_dtypes
NULL
#' @rdname torch_dtypes
#' @export
torch_float <- function() "float32"
#' @rdname torch_dtypes
#' @export
torch_float32 <- torch_float
#' @rdname torch_dtypes
#' @export
torch_double <- function() "float64"
#' @rdname torch_dtypes
#' @export
torch_float64 <- torch_double
#' @rdname torch_dtypes
#' @export
torch_long <- function() "int64"
#' @rdname torch_dtypes
#' @export
torch_int64 <- torch_long
#' @rdname torch_dtypes
#' @export
torch_int <- function() "int32"
#' @rdname torch_dtypes
#' @export
torch_int32 <- torch_int
#' @rdname torch_dtypes
#' @export
torch_bool <- function() "bool"
#' @rdname torch_dtypes
#' @export
torch_float16 <- function() "float16"
#' @rdname torch_dtypes
#' @export
torch_half <- torch_float16
#' @rdname torch_dtypes
#' @export
torch_bfloat16 <- function() "bfloat16"

#' @rdname torch_functions
#' @export
torch_divide <- function(self, other) torch_div(self, other)

# Internal fields of a traced value (sym.R) stay fields; any other name is a tensor method.

#' @export
`$.rf_sym` <- function(x, name) {
  if (match(name, sym_fields, 0L)) return(.subset2(x, name)) # (on every field read: not %in%)
  tensor_method(x, name, sys.call())
}

# torch code freezes a parameter with `p$requires_grad <- FALSE` (written back into the module by
# `$<-` on the module, as R assigns nested replacements).
#' @export
`$<-.rf_parameter` <- function(x, name, value) {
  if (!identical(name, "requires_grad"))
    rf_unsupported(paste0("$", name, "<-"), sys.call(), "a parameter's only assignable field is `requires_grad`")
  if (!is.logical(value) || length(value) != 1 || is.na(value))
    rf_abort("rfuse_type_error", "requires_grad must be TRUE or FALSE", sys.call())
  attr(x, "requires_grad") <- if (!value) FALSE
  x
}

#' @export
`$.rf_parameter` <- function(x, name) {
  if (identical(name, "requires_grad")) return(!parameter_frozen(x))
  if (name %in% c("data", "detach")) return(function() x) # still the parameter (nn_init_*(m$weight$data()))
  tensor_method(unclass(x), name, sys.call())
}

# ---- Functional ops on rf_tensors ----------------------------------------------------------
# The nnf_* functions take rf_tensors too: a call with a tensor argument is recorded like any
# tensor op (and runs as a compiled program, eagerly or lazily); other arguments (dims, shapes,
# reductions) are settings of the op.
nnf_data_args <- c("input", "input1", "input2", "x", "weight", "bias", "target", "running_mean", "running_var", "anchor", "positive", "negative")
for (nm in c("nnf_relu", "nnf_relu6", "nnf_gelu", "nnf_sigmoid", "nnf_tanh", "nnf_leaky_relu", "nnf_elu", "nnf_selu",
             "nnf_silu", "nnf_softplus", "nnf_hardtanh", "nnf_softmax", "nnf_log_softmax", "nnf_linear",
             "nnf_layer_norm", "nnf_batch_norm", "nnf_batch_norm2d", "nnf_conv1d", "nnf_embedding",
             "nnf_flatten", "nnf_mse_loss", "nnf_l1_loss", "nnf_cross_entropy", "nnf_nll_loss",
             "nnf_binary_cross_entropy", "nnf_binary_cross_entropy_with_logits", "nnf_group_norm",
             "nnf_interpolate", "nnf_triplet_margin_loss", "nnf_bilinear")) local({
  f <- get(nm)
  g <- torch_fn(nm, f, setdiff(names(formals(f)), nnf_data_args))
  # Labels become a one-hot matrix before the call is recorded (a recorded vector is data).
  if (nm %in% c("nnf_cross_entropy", "nnf_nll_loss"))
    g <- local({
      recorded <- g
      function(input, target, weight = NULL, ignore_index = -100, reduction = "mean") {
        if (is_tensor(input)) target <- class_targets(input, target)
        recorded(input, target, weight, ignore_index, reduction)
      }
    })
  assign(nm, g, envir = topenv())
})
rm(nm)

# ---- R's operators in torch code -----------------------------------------------------------

# Inside the methods of a user's module (torch code: `x + self$bias`, `scores + mask`, a
# positional encoding's `position * div_term`), R's operators broadcast as torch's do (trailing
# dims aligned) where the operands' shapes differ; where torch has no broadcast of the two
# shapes, R's own rule applies (a vector recycled over an array, as rfuse-style modules on R
# arrays write it). Outside modules the operators are R's. A plain number is R's and torch's
# scalar alike (and stays an op setting: x^2, x %/% 3).

torch_broadcast_op <- function(op, a, b, call) {
  sa <- t_size(a); sb <- t_size(b)
  if (identical(sa, sb)) return(op(a, b))
  shape <- tryCatch(broadcast_shapes(sa, sb, call), rfuse_shape_error = function(e) NULL)
  if (is.null(shape)) return(op(a, b))
  op(t_expand(a, shape, call), t_expand(b, shape, call))
}

is_plain_number <- function(x) (is.numeric(x) || is.logical(x)) && !is.object(x) && length(x) == 1L && is.null(dim(x))

torch_operator <- function(op) {
  force(op)
  base_op <- get(op, envir = baseenv())
  name <- paste("torch", op)
  impl <- function(e1, e2) torch_broadcast_op(base_op, e1, e2, NULL)
  function(e1, e2) {
    if (missing(e2)) return(base_op(e1))
    if (is_plain_number(e1) || is_plain_number(e2)) return(base_op(e1, e2))
    if (is_tensor(e1) || is_tensor(e2)) return(record(name, impl, list(e1, e2)))
    torch_broadcast_op(base_op, e1, e2, sys.call())
  }
}
torch_operators <- function() {
  if (is.null(.rf_state$torch_operators))
    .rf_state$torch_operators <- c(stats::setNames(lapply(binary_operator_names, torch_operator), binary_operator_names),
                                   list(`[` = torch_index, `[<-` = torch_subassign))
  .rf_state$torch_operators
}

# ---- torch:: in ported code ----------------------------------------------------------------

#' `torch::name` in ported code
#'
#' Code written for torch for R often calls `torch::nn_module()`, `torch::torch_randn()`, ...
#' While the torch package is not installed, `library(rfuse)` puts a `::` on the search path
#' (in `package:rfuse`) that resolves `torch::name` to rfuse's function of that name
#' (`torch::torch_tensor` to [rf_tensor()]), so such code runs after the port's two replacements;
#' a name rfuse does not have is a classed `rfuse_unsupported` error naming it. Every other
#' `pkg::name`, and `torch::` once torch is installed, is base R's.
#' @name torch-namespace
#' @aliases ::
#' @keywords internal
NULL

# `torch::name` in ported code: torch-for-R code often calls torch::nn_module(),
# torch::torch_randn(), ... When the torch package is not installed, library(rfuse) puts this
# `::` on the search path (in package:rfuse, see .onAttach; not in rfuse's namespace, whose own
# `stats::` calls stay base R's), resolving torch::name to rfuse's function of that name, so such
# code runs after the port's two replacements; a name rfuse does not have is a classed
# rfuse_unsupported error naming it. With torch installed torch:: is torch's, and every other
# pkg::name is base R's (getExportedValue is what base's `::` calls).
torch_double_colon <- function(pkg, name) {
  pkg <- as.character(substitute(pkg))
  name <- as.character(substitute(name))
  if (identical(pkg, "torch") && !torch_installed()) return(torch_alias(name, sys.call()))
  getExportedValue(pkg, name)
}

torch_installed <- function() {
  if (is.null(.rf_state$torch_installed))
    .rf_state$torch_installed <- nzchar(system.file(package = "torch"))
  .rf_state$torch_installed
}

torch_alias <- function(name, call) {
  ns <- rfuse_namespace()
  if (name == "torch_tensor") return(rf_tensor) # the port's own replacement
  if (name %in% getNamespaceExports(ns)) return(getExportedValue(ns, name))
  rf_unsupported(paste0("torch::", name), call, "rfuse has no function of that name (see the porting table in docs/r-package.md)")
}

# torch for R's subscripts of an array of dims `d` as positive positions per dim (all_of_dim
# for whole dims): `..` expanded, dims left off at the end taken whole, negatives from the end,
# logical masks as positions; which dims got a single index, and where NULLs add new dims.
torch_positions <- function(idx, d, call) {
  nd <- length(d)
  ell <- which(vapply(idx, inherits, TRUE, "rf_ellipsis"))
  if (length(ell) > 1) rf_shape_error("only one `..` may appear in an index", call)
  # NULL adds a dim of size 1 there (Python's None), using none of x's.
  if (length(ell)) {
    fill <- nd - (length(idx) - 1L - sum(vapply(idx, is.null, TRUE)))
    idx <- c(idx[seq_len(ell - 1L)], rep(list(all_of_dim), max(0L, fill)), idx[-seq_len(ell)])
  }
  new_dim <- vapply(idx, is.null, TRUE)
  if (sum(!new_dim) > nd)
    rf_shape_error(sprintf("too many indices for a tensor of dimension %d (got %d)", nd, sum(!new_dim)), call)
  idx <- c(idx, rep(list(all_of_dim), nd - sum(!new_dim)))
  new_dim <- c(new_dim, rep(FALSE, length(idx) - length(new_dim)))
  at <- cumsum(!new_dim) # the dims of x the entries before each new one index
  idx <- idx[!new_dim]
  single <- logical(nd)
  for (k in seq_len(nd)) {
    i <- idx[[k]]
    if (is_all_of_dim(i)) next
    if (is.logical(i)) {
      if (length(i) != d[k] || anyNA(i))
        rf_shape_error(sprintf("a logical index along dim %d must have its size (%d), not %d", k, d[k], length(i)), call)
      idx[[k]] <- which(i)
      next
    }
    if (!is.numeric(i) || anyNA(i) || any(i != round(i)))
      rf_abort("rfuse_type_error", sprintf("index %d must be whole numbers, logicals or empty", k), call)
    if (any(i == 0)) rf_shape_error("Indexing starts at 1 but found a 0 (torch for R's indices are 1-based)", call)
    i <- ifelse(i < 0, d[k] + i + 1, i)
    if (any(i < 1 | i > d[k]))
      rf_shape_error(sprintf("index %s is out of bounds for dim %d with size %d", deparse1(idx[[k]]), k, d[k]), call)
    idx[[k]] <- as.integer(i)
    single[k] <- length(i) == 1L && is.null(dim(idx[[k]]))
  }
  list(idx = idx, single = single, new_dim = new_dim, at = at)
}

# ---- `[` in torch code ---------------------------------------------------------------------

# torch for R's indexing, for `[` on tensors (traced values, rf_tensors) inside a user's module's
# methods: a tensor comes back (an rf_tensor's index is a recorded op); a single index drops its
# dim and only that one (R's drop = TRUE drops every size-1 dim); negative indices count from the
# end (x[, -1] is the last column; R's would exclude the first); `..` stands for the dims not
# named; dims left off at the end are taken whole. `drop = FALSE` keeps every dim. R arrays
# with dims index the same way (a model's eager call on R arrays equals its jitted one); other
# values (shapes such as dim(x) or x$shape, lists, R vectors) index as R's.
# Values torch code indexes as tensors: traced values, rf_tensors, R arrays with dims (a
# module's parameters among them).
torch_indexed <- function(x) is_tensor(x) || is_sym(x) ||
  ((is.numeric(x) || is.logical(x)) && (!is.object(x) || inherits(x, "rf_parameter")) && !is.null(dim(x)))

torch_index <- function(x, ..., drop = TRUE) {
  call <- sys.call()
  n <- nargs() - 1L - !missing(drop)
  dots <- match.call(expand.dots = FALSE)$...
  if (!torch_indexed(x) || n == 0) {
    idx <- subscripts_of(dots, n, function(k) ...elt(k))
    return(do.call(rf_index, c(list(x), as_call_args(idx), if (!missing(drop)) list(drop = drop))))
  }
  idx <- torch_subscripts(dots, n, x, parent.frame(), function(k) ...elt(k))
  if (any(vapply(idx, is_sym, TRUE))) # positions the traced code computes: R's gather (keeps dims)
    return(do.call(rf_index, c(list(x), as_call_args(idx), list(drop = drop))))
  drop <- isTRUE(drop)
  impl <- function(x) torch_index_impl(x, idx, drop, call)
  if (is_tensor(x)) return(record(paste0("torch[", paste(deparse(c(idx, drop = drop)), collapse = "")), impl, list(x = x)))
  impl(x)
}

torch_index_impl <- function(x, idx, drop, call) {
  d <- t_size(x); nd <- length(d)
  tp <- torch_positions(idx, d, call)
  idx <- tp$idx; single <- tp$single; new_dim <- tp$new_dim; at <- tp$at
  r <- if (is_sym(x)) index_sym(x, if (nd <= 1) idx[1] else idx, FALSE, call)
       else do.call(base::`[`, c(list(unclass(x)), as_call_args(idx), list(drop = FALSE)))
  out <- lengths(lapply(seq_len(nd), function(k) if (is_all_of_dim(idx[[k]])) seq_len(d[k]) else idx[[k]]))
  keep <- if (drop) !single else rep(TRUE, nd)
  shape <- integer()
  for (k in seq_len(nd)) {
    shape <- c(shape, rep(1L, sum(new_dim & at == k - 1L)), if (keep[k]) out[k])
  }
  shape <- c(shape, rep(1L, sum(new_dim & at == nd)))
  t_set_dims(r, if (length(shape)) shape else 1L)
}

# The subscripts of a torch-code `[` / `[<-` (after x): all_of_dim for empty ones, a marker for
# `..`, values otherwise (tensors as R values). torch for R's `N` in a subscript is the size of
# the dim it indexes (x[, 2:N]), and a slice a:b counts each negative end from the end (x[, -n:N]:
# the last n; R's -n:N would run through 0).
torch_subscripts <- function(dots, n, x, env, elt) {
  ell <- which(vapply(seq_len(n), function(k) k <= length(dots) && identical(dots[[k]], as.name("..")), TRUE))
  lapply(seq_len(n), function(k) {
    if (k <= length(dots) && identical(dots[[k]], quote(expr = ))) return(all_of_dim)
    e <- if (k <= length(dots)) dots[[k]]
    if (k %in% ell) return(structure(list(), class = "rf_ellipsis"))
    size <- function() {
      d <- t_size(x)
      # the dim this subscript indexes: counted from the front, or from the end after a `..`
      dim_k <- if (length(ell) && k > ell[1]) length(d) - (n - k) else k
      if (dim_k < 1 || dim_k > length(d)) rf_shape_error("too many indices for the tensor", NULL)
      d[dim_k]
    }
    v <- if (is.call(e) && identical(e[[1]], as.name(":"))) {
      # a slice a:b, each end counted from the end when negative (torch for R's -n:N: the last n)
      len <- size()
      ends <- vapply(list(e[[2]], e[[3]]), function(part) {
        p <- eval(part, list(N = len), env)
        if (is_tensor(p)) p <- tensor_values(p)
        if (!is.numeric(p) || length(p) != 1 || is.na(p)) rf_abort("rfuse_type_error", sprintf("a slice's end must be one number, in %s", deparse1(e)), NULL)
        if (p < 0) len + p + 1 else p
      }, 0)
      seq(ends[1], ends[2])
    } else if ((is.call(e) || is.symbol(e)) && "N" %in% all.names(e)) eval(e, list(N = size()), env) else elt(k)
    if (is_tensor(v)) v <- tensor_values(v)
    v
  })
}

# x[i, j] <- value in torch code: torch for R's positions (as `[`'s), then R's assignment of the
# block (value recycled over it, which is torch's broadcast of a value of the block's trailing
# shape).
# Whether index `i` is a boolean mask of x's shape (of rank 2 or more: along one dim a logical
# vector is an ordinary index).
full_mask <- function(i, x) {
  d <- as.integer(t_size(x))
  if (length(d) < 2) return(FALSE)
  if (is_sym(i)) return(i$dtype == "i1" && identical(as.integer(t_size(i)), d)) # (a traced mask's dtype)
  if (is_tensor(i)) return(identical(i$dtype, "bool") && identical(as.integer(t_size(i)), d))
  is.logical(i) && identical(as.integer(dim(i)), d)
}

torch_subassign <- function(x, ..., value) {
  call <- sys.call()
  n <- nargs() - 2L
  dots <- match.call(expand.dots = FALSE)$...
  if (!torch_indexed(x) || n == 0) {
    idx <- subscripts_of(dots, n, function(k) ...elt(k))
    return(do.call(rf_subassign, c(list(x), as_call_args(idx), list(value = value))))
  }
  idx <- torch_subscripts(dots, n, x, parent.frame(), function(k) ...elt(k))
  # One boolean index of the tensor's own shape: torch's masked assignment (x[mask] <- v).
  if (n == 1 && full_mask(idx[[1]], x)) {
    if (prod(t_size(value)) != 1)
      rf_abort("rfuse_unsupported", "x[mask] <- value with a mask of x's shape takes one value (torch's masked_fill)", call)
    out <- torch_masked_fill(x, idx[[1]], value)
    # The tensor keeps its dtype (a boolean mask filled with 1 stays boolean), as torch's.
    if (is_sym(x) && is_sym(out) && out$dtype != x$dtype) out <- cast_sym(out, x$dtype)
    if (is_tensor(x) && is_tensor(out) && out$dtype != x$dtype) out <- out$to(dtype = x$dtype)
    return(out)
  }
  if (any(vapply(idx, is.null, TRUE))) rf_shape_error("NULL (a new dim) in an assigned index", call)
  if (any(vapply(idx, is_sym, TRUE))) return(do.call(rf_subassign, c(list(x), as_call_args(idx), list(value = value))))
  d <- t_size(x)
  pos <- torch_positions(idx, d, call)$idx
  # The value broadcasts over the block as torch's does (trailing dims aligned).
  block <- vapply(seq_along(d), function(k) if (is_all_of_dim(pos[[k]])) d[k] else length(pos[[k]]), 1L)
  vs <- t_size(value)
  if (prod(vs) != 1 && !identical(as.integer(vs), block) && !identical(as.integer(vs), block[block != 1L]))
    value <- t_expand(value, block, call)
  if (is_tensor(x) || is_tensor(value)) return(tensor_subassign(x, pos, value, call))
  do.call(rf_subassign, c(list(x), as_call_args(pos), list(value = value)))
}
