# Symbolic values: what traced R code computes with while rf_jit traces it.
#
# An R value of dim c(d1, ..., dn) is the row-major tensor of shape c(dn, ..., d1) (docs/
# architecture.md): R's column-major data is exactly that tensor's data, so nothing is copied or
# transposed at the boundary. A plain vector of length n is the tensor [n].

.rf_state <- new.env(parent = emptyenv())

# `ib`: for a value R types as integer (computed in the trace's float dtype), its magnitude bound
# (an entry of the trace's integer guard, see int_bound); NULL for doubles and logicals.
new_sym <- function(id, rdim, len, dtype, ib = NULL) {
  s <- list(id = id, rdim = rdim, len = len, dtype = dtype, ib = ib)
  class(s) <- "rf_sym" # (not structure(): 4x slower, and every traced op makes one)
  s
}

is_sym <- function(x) inherits(x, "rf_sym")
# A symbolic value's own fields (`$` gives every other name to the torch-style tensor methods).
sym_fields <- c("id", "rdim", "len", "dtype", "ib", "attrs")

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
lift_constant <- function(x, call = NULL, dtype = NULL) {
  if (inherits(x, "rf_parameter")) x <- state_value(x) # a frozen parameter: a constant
  x <- buffer_value(x) # an nn_buffer() field before its module adopted it
  if (is_tensor(x)) x <- tensor_values(x) # a tensor from outside the traced code: a constant too
  if (!(is.numeric(x) || is.logical(x)) || is.object(x))
    rf_abort("rfuse_type_error", sprintf("rfuse can only trace numeric or logical values, not %s",
                                         paste(class(x), collapse = "/")), call)
  rdim <- dim(x)
  dtype <- if (is.logical(x)) "i1" else dtype %||% trace_float()
  vals <- as.double(x)
  if (anyNA(vals) && dtype == "i1")
    rf_abort("rfuse_type_error", "logical NA cannot be traced (rfuse masks have no NA)", call)
  id <- rf_guard(.rf_b_constant(current_builder(), vals, tshape(rdim, length(x)), dtype), call)
  with_attrs(new_sym(id, rdim, length(x), dtype), sym_attrs(x))
}

as_sym <- function(x, call = NULL) if (is_sym(x)) x else lift_constant(x, call)

# Records an op through the builder. The R call it came from becomes the op's location, which
# generated kernels quote in their leading comment.
emit <- function(fun, ..., call = NULL) {
  b <- current_builder()
  # One R call records several ops (its constants, broadcasts, the op): its text is made once.
  where <- if (is.null(call)) "" else if (identical(call, .rf_state$text_of[[1]])) .rf_state$text_of[[2]] else {
    text <- call_text(call)
    .rf_state$text_of <- list(call, text)
    text
  }
  if (!identical(where, .rf_state$location)) {
    .rf_b_set_location(b, where)
    .rf_state$location <- where
  }
  autocast <- autocast_for(.rf_state$device %||% "")
  if (!identical(autocast, .rf_state$builder_autocast)) {
    .rf_b_set_autocast(b, autocast)
    .rf_state$builder_autocast <- autocast
  }
  # (a failure names `call`: rf_glue_failure reads it; no handler around the call)
  .rf_state$glue_call <- call
  id <- fun(b, ...)
  .rf_state$glue_call <- NULL
  id
}

cast_sym <- function(s, dtype) {
  if (s$dtype == dtype) return(s)
  new_sym(emit(.rf_b_cast, s$id, dtype), s$rdim, s$len, dtype, if (dtype == "i1") NULL else s$ib)
}

reshape_sym <- function(s, rdim, len = if (is.null(rdim)) s$len else prod(rdim)) {
  target <- tshape(rdim, len)
  id <- if (identical(target, sym_tshape(s))) s$id else emit(.rf_b_reshape, s$id, target)
  new_sym(id, rdim, len, s$dtype, s$ib)
}

# ---- R's integers ------------------------------------------------------------------------------
# Traced code computes R's integers in the trace's float dtype, where they are exact as long as
# they stay small: below 2^31 (R's range) in float64, below 2^24 in float32. Each integer-typed
# value carries a bound on its magnitude, an entry of the trace's integer guard written in terms
# of the inputs' magnitudes; before each call the guard evaluates the bounds on the actual
# inputs, and a call that could leave the exact range (overflow, where R gives NA and a warning)
# or divide an integer by zero (R: NA) is answered by base R instead.
int_bound <- function(kind, a = NULL, b = NULL, v = NULL, n = NULL, i = NULL) {
  k <- length(.rf_state$int_bounds) + 1L
  .rf_state$int_bounds[[k]] <- list(kind = kind, a = a, b = b, v = v, n = n, i = i)
  k
}
# Whether R types `x` as integer in arithmetic (logicals count: TRUE + TRUE is 2L).
is_int_value <- function(x)
  if (is_sym(x)) !is.null(x$ib) || x$dtype %in% c("i1", int_dtypes) else is.integer(x) || is.logical(x)
# The bound entry of an integer-typed value (see is_int_value). An integer tensor's value has
# no bound the guard could evaluate: where one would be needed the op computes in its integer
# dtype (native_int_dtype) instead.
int_ref <- function(x) {
  if (is_sym(x)) return(x$ib %||% int_bound("const", v = if (x$dtype == "i1") 1 else Inf))
  int_bound("const", v = if (length(x) && !all(is.na(x))) max(abs(as.double(x)), na.rm = TRUE) else 0)
}
# ---- Integer tensors --------------------------------------------------------------------------
# An int32/int64 rf_tensor's values compute in their own dtype, exactly, as torch computes them
# (wrapping around on overflow, where R would give NA): + - * and unary minus, abs, comparisons,
# sum/max/min, pmax/pmin, ifelse, cumsum/cummax/cummin, %/% and %% by a constant. Everything R
# computes in doubles (/, ^, exp, ...) computes in the trace's float dtype, as torch's float ops.
int_dtypes <- c("i32", "i64")
is_native_int <- function(x) is_sym(x) && x$dtype %in% int_dtypes
# The integer dtype an op on these operands computes in: when one is an integer tensor's value
# and all are integers (tensors', R integers or logicals without NA, masks); NULL otherwise.
native_int_dtype <- function(...) {
  xs <- list(...)
  if (!any(vapply(xs, is_native_int, TRUE))) return(NULL)
  intlike <- function(x) if (is_sym(x)) x$dtype %in% c("i1", int_dtypes) else (is.integer(x) || is.logical(x)) && !anyNA(x)
  if (!all(vapply(xs, intlike, TRUE))) return(NULL)
  if (any(vapply(xs, function(x) is_sym(x) && x$dtype == "i64", TRUE))) "i64" else "i32"
}

# The magnitude up to which a float dtype holds every integer exactly (float32: 2^24 - 1, so
# that floor(x / y) is exact too).
int_limit <- function(dtype)
  switch(dtype, f64 = .Machine$integer.max, f32 = 2^24 - 1, f16 = 2^11 - 1, bf16 = 2^8 - 1, 0)

# Whether a call's inputs keep every integer value of the trace within `guard$limit`.
int_guard_holds <- function(guard, args) {
  ents <- guard$entries
  b <- numeric(length(ents))
  for (k in seq_along(ents)) {
    e <- ents[[k]]
    b[k] <- switch(e$kind,
      const = e$v,
      input = {
        x <- args[[e$i]]
        if (!length(x) || all(is.na(x))) 0 else max(abs(range(x, na.rm = TRUE)))
      },
      nonzero = if (any(args[[e$i]] == 0L, na.rm = TRUE)) Inf else 0,
      add = , sub = b[e$a] + b[e$b],
      mul = b[e$a] * b[e$b],
      same = b[e$a],
      mod = b[e$b],
      max = max(b[e$a], b[e$b]),
      sum = e$n * b[e$a])
  }
  all(b <= guard$limit)
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

# ---- Static attributes -------------------------------------------------------------------------
# A traced value may carry the attributes R would give it besides its dims: names (a vector),
# dimnames (an array) and a class (I()'s "AsIs"), as `attrs`, a named list of R values known when
# tracing. The call's results get them. R keeps them through arithmetic, math and subsetting
# (propagated here) and drops them in reductions and products; a traced function that does not
# handle them refuses such a value (attrs_guard) rather than return a result without them.
sym_attrs <- function(x) if (is_sym(x)) x$attrs else {
  a <- attributes(x)
  a[intersect(names(a), c("names", "dimnames", "class"))]
}
with_attrs <- function(s, attrs) {
  if (is.null(attrs) && is.null(.subset2(s, "attrs"))) return(s) # (most values: nothing to do)
  attrs <- attrs[!vapply(attrs, is.null, NA)]
  s$attrs <- if (length(attrs)) attrs
  s
}
has_attrs <- function(x) is_sym(x) && length(x$attrs) > 0

# A stand-in R value of a traced value's shape and attributes (zeros): base R computes on it what
# the attributes of a result of a shape-only function (subsetting, drop, head) are.
attrs_proxy <- function(s) {
  if (s$len > 5e7) rf_unsupported("<attributes>", NULL, "a value this large with names or dimnames")
  p <- integer(s$len)
  if (!is.null(s$rdim)) dim(p) <- s$rdim
  a <- s$attrs
  if (!is.null(a$dimnames)) dimnames(p) <- a$dimnames
  if (!is.null(a$names)) names(p) <- a$names
  p
}
# The attributes of base R's `fun(proxy, ...)` for a result `s` of the same length.
attrs_from_proxy <- function(s, x, fun, ...) {
  if (!has_attrs(x)) return(s)
  r <- fun(attrs_proxy(x), ...)
  with_attrs(s, list(names = names(r), dimnames = dimnames(r), class = x$attrs$class))
}

# A value with attributes reaching a traced function that does not keep them as R would.
attrs_guard <- function(fname, env) {
  f <- sys.function(-1)
  for (a in setdiff(names(formals(f)), "...")) {
    if (eval(call("missing", as.name(a)), env)) next
    if (has_attrs(get(a, envir = env))) attrs_refusal(fname, sys.call(-1))
  }
  if ("..." %in% names(formals(f)))
    for (v in eval(quote(list(...)), env)) if (has_attrs(v)) attrs_refusal(fname, sys.call(-1))
}
attrs_refusal <- function(fname, call)
  rf_unsupported(fname, call, paste("its argument carries names, dimnames or a class (from cbind/rbind's argument names,",
                                    "I() or a named constant), which rfuse does not carry through it; drop them first",
                                    "(unname(), cbind(..., deparse.level = 0))"))
