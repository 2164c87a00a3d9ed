# Symbolic values: what traced R code computes with while rf_jit traces it.
#
# An R value of dim c(d1, ..., dn) is the row-major tensor of shape c(dn, ..., d1) (docs/
# architecture.md): R's column-major data is exactly that tensor's data, so nothing is copied or
# transposed at the boundary. A plain vector of length n is the tensor [n].

.rf_state <- new.env(parent = emptyenv())

new_sym <- function(id, rdim, len, dtype) {
  structure(list(id = id, rdim = rdim, len = len, dtype = dtype), class = "rf_sym")
}

is_sym <- function(x) inherits(x, "rf_sym")

# The tensor shape of an R-level (rdim, len).
tshape <- function(rdim, len) if (is.null(rdim)) as.integer(len) else rev(as.integer(rdim))
sym_tshape <- function(s) tshape(s$rdim, s$len)

current_builder <- function() {
  b <- .rf_state$builder
  if (is.null(b)) rf_abort("rfuse_trace_error", "symbolic values can only be used while rf_jit traces a function")
  b
}

trace_float <- function() .rf_state$dtype %||% "f32"

`%||%` <- function(a, b) if (is.null(a)) b else a

# Lifts an R constant (numeric, integer or logical vector/array) into the trace.
lift_constant <- function(x, call = NULL) {
  if (!(is.numeric(x) || is.logical(x)) || is.object(x))
    rf_abort("rfuse_type_error", sprintf("rfuse can only trace numeric or logical values, not %s",
                                         paste(class(x), collapse = "/")), call)
  rdim <- dim(x)
  dtype <- if (is.logical(x)) "i1" else trace_float()
  vals <- as.double(x)
  if (anyNA(vals) && dtype == "i1")
    rf_abort("rfuse_type_error", "logical NA cannot be traced (rfuse masks have no NA)", call)
  id <- rf_guard(.rf_b_constant(current_builder(), vals, tshape(rdim, length(x)), dtype), call)
  new_sym(id, rdim, length(x), dtype)
}

as_sym <- function(x, call = NULL) if (is_sym(x)) x else lift_constant(x, call)

# Records an op through the builder. The R call it came from becomes the op's location, which
# generated kernels quote in their leading comment.
emit <- function(fun, ..., call = NULL) {
  b <- current_builder()
  where <- if (is.null(call)) "" else paste(deparse(call, width.cutoff = 60L), collapse = " ")
  if (!identical(where, .rf_state$location)) {
    .rf_b_set_location(b, where)
    .rf_state$location <- where
  }
  rf_guard(fun(b, ...), call)
}

cast_sym <- function(s, dtype) {
  if (s$dtype == dtype) return(s)
  new_sym(emit(.rf_b_cast, s$id, dtype), s$rdim, s$len, dtype)
}

reshape_sym <- function(s, rdim, len = if (is.null(rdim)) s$len else prod(rdim)) {
  target <- tshape(rdim, len)
  id <- if (identical(target, sym_tshape(s))) s$id else emit(.rf_b_reshape, s$id, target)
  new_sym(id, rdim, len, s$dtype)
}

#' @export
print.rf_sym <- function(x, ...) {
  cat("<rfuse symbolic ", x$dtype, if (is.null(x$rdim)) sprintf(" vector[%d]", x$len)
      else sprintf(" array[%s]", paste(x$rdim, collapse = "x")), ">\n", sep = "")
  invisible(x)
}

#' @export
length.rf_sym <- function(x) as.integer(x$len)

#' @export
dim.rf_sym <- function(x) if (is.null(x$rdim)) NULL else as.integer(x$rdim)
