# torch_gather / torch_scatter_add (and the $gather / $scatter_add methods): values at positions
# along one dim, and values added at positions along one dim. Positions are 1-based, as torch for
# R's. Traced, they are rfuse.take_along and rfuse.scatter_add (each the other's gradient);
# positions a program computes are checked on every call (runtime_check: a position out of range
# sends the call to R, whose arrays give torch's error).

# The positions `index` for a dim of length `len`: whole numbers 1..len, or torch's error.
check_positions <- function(index, len, k, call) {
  v <- as.vector(index)
  if (!is.numeric(v) || anyNA(v) || any(v != round(v)))
    rf_abort("rfuse_type_error", "`index` must hold whole numbers (torch_long() positions, 1-based)", call)
  bad <- v < 1 | v > len
  if (any(bad))
    rf_abort("rfuse_index_error", sprintf("index %s is out of bounds for dimension %d with size %d (positions are 1-based)",
                                          format(v[which(bad)[1]]), k, len), call)
}

# For each element of an array of dims `di` (R's order), its index into the array `index` points
# into along dim k: one row per element (plain arrays' gather and scatter_add).
positions_at <- function(index, di, k) {
  at <- arrayInd(seq_len(prod(di)), di)
  at[, k] <- as.vector(index)
  at
}

# The positions as a traced value, 0-based i64, checked on every call when the program computes
# them.
traced_positions <- function(index, len, k, call) {
  if (!is_sym(index)) {
    check_positions(index, len, k, call)
    return(lift_constant(array(as.double(index) - 1, t_size(index)), call, "i64"))
  }
  if (index$dtype == "i1")
    rf_abort("rfuse_type_error", "`index` must hold whole numbers (torch_long() positions), not a mask", call)
  runtime_check(any_all("any", list((index < 1) | (index > len)), call),
                sprintf("hold positions outside 1..%d along dim %d", len, k))
  to_dtype(index - 1L, "i64", call)
}

t_gather <- function(x, dim, index, call) {
  d <- t_size(x); n <- length(d)
  k <- t_dim(dim, n, call)
  di <- t_size(index)
  if (length(di) != n)
    rf_shape_error(sprintf("Index tensor must have the same number of dimensions as input tensor (%d and %d)",
                           length(di), n), call)
  wide <- which(di > d & seq_len(n) != k)
  if (length(wide))
    rf_shape_error(sprintf("Size does not match at dimension %d: index %d, input %d (index may not be larger than input in dims other than %d)",
                           wide[1], di[wide[1]], d[wide[1]], k), call)
  # Only the part of `x` the index reaches in the other dims takes part.
  for (j in setdiff(seq_len(n), k)) if (di[j] < d[j]) x <- t_narrow(x, j, 1L, di[j], call)
  if (!is_sym(x) && !is_sym(index)) {
    check_positions(index, d[k], k, call)
    return(shaped(array(unclass(x), t_size(x))[positions_at(index, di, k)], di))
  }
  xs <- as_sym(x, call)
  pos <- traced_positions(index, d[k], k, call)
  id <- emit(.rf_b_take_along, xs$id, pos$id, as.integer(n - k), call = call)
  new_sym(id, if (n <= 1) NULL else di, prod(di), xs$dtype)
}

#' @rdname torch_functions
#' @export
torch_gather <- function(self, dim, index, sparse_grad = FALSE) {
  call <- sys.call()
  if (!identical(sparse_grad, FALSE))
    rf_unsupported("torch_gather", call, "sparse_grad = TRUE (rfuse has no sparse tensors; the gradient is dense)")
  if (is_tensor(self) || is_tensor(index))
    return(record("torch_gather", function(x, dim, index) t_gather(x, dim, index, call),
                  list(self, dim = dim, index = index), "dim"))
  t_gather(self, dim, index, call)
}

t_scatter_add <- function(x, dim, index, src, call) {
  d <- t_size(x); n <- length(d)
  k <- t_dim(dim, n, call)
  di <- t_size(index); ds <- t_size(src)
  if (length(di) != n || length(ds) != n)
    rf_shape_error("Index and src must have the same number of dimensions as self", call)
  if (!identical(di, ds))
    rf_unsupported("torch_scatter_add", call, "an index smaller than src (rfuse adds all of src: give them one shape)")
  if (!identical(di[-k], d[-k]))
    rf_unsupported("torch_scatter_add", call, sprintf("an index of another size than self in dims other than %d", k))
  if (!is_float_value(x) || !is_float_value(src))
    rf_unsupported("torch_scatter_add", call, "integer or logical values (rfuse adds floats: cast self and src first)")
  if (!is_sym(x) && !is_sym(index) && !is_sym(src)) {
    check_positions(index, d[k], k, call)
    lin <- as.vector((positions_at(index, di, k) - 1) %*% cumprod(c(1, d))[seq_len(n)]) + 1
    sums <- rowsum(as.vector(unclass(src)), lin) # in src's order within each position
    out <- as.vector(unclass(x))
    at_pos <- as.integer(rownames(sums))
    out[at_pos] <- out[at_pos] + sums[, 1]
    return(shaped(out, d))
  }
  ss <- as_sym(src, call)
  pos <- traced_positions(index, d[k], k, call)
  id <- emit(.rf_b_scatter_add, ss$id, pos$id, as.integer(n - k), as.integer(d[k]), call = call)
  as_sym(x, call) + new_sym(id, if (n <= 1) NULL else d, prod(d), ss$dtype)
}

#' @rdname torch_functions
#' @export
torch_scatter_add <- function(self, dim, index, src) {
  call <- sys.call()
  if (is_tensor(self) || is_tensor(index) || is_tensor(src))
    return(record("torch_scatter_add", function(x, dim, index, src) t_scatter_add(x, dim, index, src, call),
                  list(self, dim = dim, index = index, src = src), "dim"))
  t_scatter_add(self, dim, index, src, call)
}
