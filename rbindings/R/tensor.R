# rf tensors: R arrays that rfuse computes with. With options(gpu.kernel.fusion = TRUE) operations
# on them are recorded, not run; the recorded graph is traced, fused, compiled (cached by its
# structure and shapes) and run when a value is needed (as.array(), print(), dim(), rf_sync()).
# With FALSE (the default) each operation runs at once, through the same machinery, so both modes
# give the same numbers.

#' The rf_tensor class and its methods
#'
#' An `rf_tensor` holds its values (or, in lazy mode, the recorded operation producing them) in
#' an environment. Methods: the `Ops` (`Arith`, `Compare`, `Logic`, `!`), `Math` and `Summary`
#' groups, `\%*\%`, `t`, `mean`, `dim`, `length`, `as.array`, `as.vector`, `as.numeric`,
#' `as.logical`, `[` (the values, indexed as in R), `show`; `$` is described in
#' [rf_tensor-autograd].
#'
#' @slot env Environment with the values, the pending operation, dtype and device.
#' @param x,e1,e2,y,object,mode,na.rm,i,j,drop,... As for the base generics.
#' @docType class
#' @name rf_tensor-class
#' @aliases rf_tensor-class Ops,rf_tensor,rf_tensor-method Ops,rf_tensor,ANY-method
#'   Ops,ANY,rf_tensor-method Arith,rf_tensor,missing-method Logic,rf_tensor,missing-method
#'   !,rf_tensor-method Math,rf_tensor-method Math2,rf_tensor-method Summary,rf_tensor-method
#'   %*%,rf_tensor,ANY-method %*%,ANY,rf_tensor-method %*%,rf_tensor,rf_tensor-method
#'   t,rf_tensor-method mean,rf_tensor-method dim,rf_tensor-method length,rf_tensor-method
#'   as.array,rf_tensor-method as.vector,rf_tensor-method as.numeric,rf_tensor-method
#'   as.logical,rf_tensor-method [,rf_tensor-method [<-,rf_tensor-method show,rf_tensor-method
#' @keywords classes
NULL

setClass("rf_tensor", representation(env = "environment"))

# dtypes by their R names, and the IR's.
tensor_dtypes <- c(float32 = "f32", float64 = "f64", float16 = "f16", bfloat16 = "bf16",
                   int32 = "i32", int64 = "i64", bool = "i1")
ir_dtype <- function(dtype) tensor_dtypes[[dtype]]
r_dtype <- function(ir) names(tensor_dtypes)[match(ir, tensor_dtypes)]
is_float_dtype <- function(dtype) dtype %in% c("float32", "float64", "float16", "bfloat16")
# Whether a value (a traced one, or R's) holds floating-point numbers.
is_float_value <- function(v) if (is_sym(v)) is_float_dtype(r_dtype(v$dtype)) else is.double(v)

check_device <- function(device) {
  device <- as.vector(device)
  if (!is.character(device) || length(device) != 1 || !device %in% c("cpu", "cuda"))
    rf_abort("rfuse_error", sprintf("unknown device '%s' (use \"cpu\" or \"cuda\")", paste(device, collapse = " ")))
  if (device == "cuda" && .rf_device() != "cuda")
    rf_abort("rfuse_runtime_error", paste("no CUDA device:", .rf_device_description()))
  device
}

# torch's own names for dtypes, as torch for R accepts them in strings (dtype = "long").
torch_dtype_names <- c(float = "float32", double = "float64", half = "float16", int = "int32",
                       long = "int64", short = "int16", bool = "bool", uint8 = "uint8", int8 = "int8")
check_dtype <- function(dtype) {
  if (is.character(dtype) && length(dtype) == 1 && dtype %in% names(torch_dtype_names) &&
      torch_dtype_names[[dtype]] %in% names(tensor_dtypes)) dtype <- torch_dtype_names[[dtype]]
  # (traced code's x$dtype is the IR's name of it: "f32")
  if (is.character(dtype) && length(dtype) == 1 && dtype %in% tensor_dtypes) dtype <- r_dtype(dtype)
  if (!is.character(dtype) || length(dtype) != 1 || !dtype %in% names(tensor_dtypes))
    rf_abort("rfuse_type_error", sprintf("unknown dtype '%s' (one of %s)", paste(dtype, collapse = " "),
                                         paste(names(tensor_dtypes), collapse = ", ")))
  dtype
}

#' rfuse tensors
#'
#' `rf_tensor()` copies a numeric or logical vector, matrix or array onto a device, where it
#' stays: its values live in device (or, for `"cpu"`, host) memory in their own dtype and come
#' back to R only when R asks (`as.array()`, `as.vector()`, `print()`, `[`). Arithmetic,
#' comparisons, the Math and Summary groups, `\%*\%`, `t()`, `mean()` and the base-R functions
#' [rf_jit()] traces (`pmax`, `ifelse`, `sweep`, `rowSums`, `crossprod`, ...) work on tensors
#' and give tensors on the same device; so do functions from [rf_jit()] and jitted models.
#' With `options(gpu.kernel.fusion = TRUE)` operations are recorded and run fused when a value
#' is needed; with `FALSE` (default) each runs at once. Both give the same numbers.
#'
#' Tensors follow torch's conventions where R's and torch's differ: they hold `NaN` but not R's
#' `NA`, which is refused (class `rfuse_type_error`, naming the element) where R values become
#' tensors; float16/bfloat16 tensors compute in float32. Integer tensors compute exactly in
#' their dtype, as torch's (`+ - *`, comparisons, `sum` in int64, `%/%` by a constant; overflow
#' wraps); what R computes in doubles (`/`, `exp`) gives float32.
#' `$to(device =, dtype =)`, `$cpu()`, `$cuda()` copy; `$dtype`, `$device`, `$shape` describe.
#' Tensors on different devices in one operation are an error (class `rfuse_device_error`),
#' never a silent copy.
#'
#' @param x A numeric or logical vector, matrix or array (or an `rf_tensor`).
#' @param dtype `"float32"` (default; `"bool"` for logical `x`), `"float64"`, `"float16"`,
#'   `"bfloat16"`, `"int32"`, `"int64"` or `"bool"`.
#' @param device `"cuda"` or `"cpu"`; defaults to [rf_default_device()].
#' @param requires_grad Record operations on this tensor for `loss$backward()` (see
#'   [rf_tensor-autograd]).
#' @return An `rf_tensor`.
#' @examples
#' a <- rf_tensor(matrix(1:6, 2))
#' old <- options(gpu.kernel.fusion = TRUE)
#' b <- exp(a / 6) * 2 + 1   # recorded, not run
#' as.array(b)                # traced, fused into one kernel, run
#' options(old)
#' @export
rf_tensor <- function(x, dtype = NULL, device = rf_default_device(), requires_grad = FALSE) {
  device <- check_device(device)
  if (is_tensor(x)) {
    t <- tensor_to(x, device, dtype %||% materialize(x)@env$dtype)
    if (isTRUE(requires_grad)) t@env$requires_grad <- TRUE
    return(t)
  }
  if (!(is.numeric(x) || is.logical(x)) || is.object(x) && !is.array(x))
    rf_abort("rfuse_type_error", sprintf("rf_tensor() needs a numeric vector, matrix or array, not %s",
                                         paste(class(x), collapse = "/")))
  dtype <- check_dtype(dtype %||% if (is.logical(x)) "bool" else "float32")
  buf <- rf_guard(.rf_tensor_from_r(x, ir_dtype(dtype), device))
  if (device == "cuda") .rf_counters$device_used <- TRUE
  t <- make_tensor(buf = buf, dtype = dtype, device = device, rdim = dim(x), len = length(x))
  t@env$requires_grad <- isTRUE(requires_grad)
  t
}

make_tensor <- function(buf = NULL, node = NULL, dtype, device, rdim = NULL, len = NA) {
  env <- new.env(parent = emptyenv())
  env$buf <- buf
  env$node <- node
  env$dtype <- dtype
  env$device <- device
  env$rdim <- if (!is.null(rdim)) as.integer(rdim)
  env$len <- len
  # A copy of the prototype with its slot set directly: methods::new() (validity checks, class
  # lookups) costs tens of microseconds, on the path of every call.
  t <- .rf_tensor_prototype$value
  attr(t, "env") <- env
  t
}
.rf_tensor_prototype <- new.env(parent = emptyenv())
is_tensor <- function(x) inherits(x, "rf_tensor")

# The handle of a computed tensor; a classed error when its memory is gone.
tensor_buffer <- function(t) {
  materialize(t)
  b <- t@env$buf
  if (!.rf_tensor_valid(b))
    rf_abort("rfuse_invalid_tensor", paste("this rf_tensor's memory is gone (it was saved and restored in a",
                                           "new session, or freed): create it again from its R values"))
  b
}

# The tensor's values as an R vector/array (the one place values cross into R). Values of a
# tensor autograd records (more than one: not a loss printed) read into R take what is computed
# from them off the graph: noted, so that the optimizer's step can say why a parameter got no
# gradient (see new_optimizer).
tensor_values <- function(t) {
  buf <- tensor_buffer(t)
  if (records_graph(t) && !isTRUE(t@env$len == 1)) .rf_counters$graph_read <- TRUE
  rf_guard(.rf_tensor_to_r(buf, t@env$rdim))
}

# Zeros shaped as `v` (optimizer state): on v's device in its dtype for an rf_tensor, set there
# (no program, no host values); R's zeros with v's attributes for an R array.
zeros_like <- function(v) {
  if (!is_tensor(v)) {
    v[] <- 0
    return(v)
  }
  materialize(v)
  e <- v@env
  make_tensor(buf = rf_guard(.rf_tensor_zeros(tshape(e$rdim, e$len), ir_dtype(e$dtype), e$device)),
              dtype = e$dtype, device = e$device, rdim = e$rdim, len = e$len)
}

# A copy on `device` in `dtype` (the tensor itself when nothing changes).
tensor_to <- function(t, device = t@env$device, dtype = t@env$dtype) {
  materialize(t) # (a pending tensor's dtype is known once it is computed)
  device <- check_device(device)
  dtype <- check_dtype(dtype)
  buf <- tensor_buffer(t)
  if (dtype != t@env$dtype) buf <- rf_guard(.rf_tensor_cast(buf, ir_dtype(dtype)))
  if (device != t@env$device) buf <- rf_guard(.rf_tensor_to_device(buf, device))
  if (identical(buf, t@env$buf)) return(t)
  make_tensor(buf = buf, dtype = dtype, device = device, rdim = t@env$rdim, len = t@env$len)
}

# The one device of the tensors among `args`; an error naming both when they differ.
common_device <- function(tensors) {
  devices <- unique(vapply(tensors, function(t) t@env$device, ""))
  if (length(devices) > 1)
    rf_abort("rfuse_device_error", sprintf(paste0("tensors on different devices in one operation: %s and %s ",
                                                  "(move one with $to(device = ...); rfuse never copies silently)"),
                                           devices[1], devices[2]))
  devices[1]
}

# Data operands of an op become graph leaves (numbers too, so `x * i` in a loop runs one
# program); an op's settings (`settings`: MARGIN, na.rm, dims, ...), logical scalars and
# non-numeric values are part of the op itself, and of its cache key.
is_data_arg <- function(a) is_tensor(a) || is.numeric(a) || (is.logical(a) && (length(a) != 1 || !is.null(dim(a))))

# Records `name` applied to `args` (tensors or R values); runs it now unless fusion is lazy.
record <- function(name, fn, args, settings = character()) {
  # An nn_buffer() field not yet adopted by its module (code in initialize computing with it) is
  # its value, as torch's buffer is a tensor there.
  if (any(vapply(args, inherits, TRUE, "rf_buffer"))) args <- lapply(args, buffer_value)
  # Inside traced code a tensor met beside symbolic values (a module's field, a global) is a
  # constant of the program, as R arrays are there.
  if (in_trace() && any(vapply(args, is_sym, TRUE)))
    return(do.call(fn, lapply(args, function(a) if (is_tensor(a)) tensor_values(a) else a)))
  tensors <- Filter(is_tensor, args)
  for (a in tensors) a@env$uses <- (a@env$uses %||% 0) + 1 # (see record_inplace)
  device <- common_device(tensors)
  t <- make_tensor(node = list(name = name, fn = fn, args = args, settings = settings), dtype = NA_character_,
                   device = device)
  # A tensor on the way from a requires_grad leaf keeps its recorded operation for backward().
  t@env$requires_grad <- !isTRUE(.rf_counters$no_grad) &&
    any(vapply(tensors, function(x) isTRUE(x@env$requires_grad), logical(1)))
  if (!isTRUE(getOption("gpu.kernel.fusion", FALSE))) materialize(t)
  t
}

.rf_lazy <- new.env(parent = emptyenv()) # jitted evaluators by graph structure

# The graph under `t` as steps over leaves: `pending = TRUE` stops at tensors that already have
# values (what materialize() must still compute); FALSE goes back to the tensors without a
# recorded operation (what backward() differentiates). Refs: c(0, i) leaf i, c(1, j) step j,
# c(2, k) the step's own constant k.
flatten_graph <- function(t, pending = TRUE) {
  leaves <- list(); leaf_tensors <- list(); steps <- list(); seen <- new.env(parent = emptyenv())
  visit <- function(x) {
    if (is_tensor(x) && !is.null(x@env$node) && !(pending && !is.null(x@env$buf))) {
      key <- format(x@env)
      if (!is.null(seen[[key]])) return(c(1L, seen[[key]]))
      consts <- list()
      args <- x@env$node$args
      setting <- (names(args) %||% rep("", length(args))) %in% x@env$node$settings
      refs <- lapply(seq_along(args), function(i) {
        a <- args[[i]]
        if (!setting[i] && is_data_arg(a)) return(visit(a))
        consts[length(consts) + 1] <<- list(a)
        c(2L, length(consts))
      })
      names(refs) <- names(args)
      if (is.null(x@env$node$fn_key)) x@env$node$fn_key <- fn_key(x@env$node$name, x@env$node$fn)
      steps[[length(steps) + 1]] <<- list(name = x@env$node$name, fn = x@env$node$fn, fn_key = x@env$node$fn_key,
                                          refs = refs, consts = consts)
      assign(key, length(steps), envir = seen)
      return(c(1L, length(steps)))
    }
    if (is_tensor(x)) materialize(x)
    leaves[[length(leaves) + 1]] <<- x
    leaf_tensors[length(leaves)] <<- list(if (is_tensor(x)) x else NULL)
    c(0L, length(leaves))
  }
  visit(t)
  list(leaves = leaves, tensors = leaf_tensors, steps = steps)
}

# A cache key of a flattened graph's structure (with the ops' constants and code: see fn_key).
graph_key <- function(steps, prefix)
  paste(prefix, vapply(steps, function(s)
    paste0(s$name, "[", s$fn_key, "](", paste(vapply(s$refs, paste, "", collapse = ":"), collapse = ","), ")",
           if (length(s$consts)) paste(deparse(s$consts), collapse = "") else ""), ""),
    collapse = ";")

# A key of a recorded op's code: two ops recorded under one name with different code (torch_max's
# values and indices) must not share a program. Ops whose closures capture what they compute
# (a reduction's kind) carry it in their names. Memoized per name by the body itself (the
# closures one `function` expression makes share it; identical() sees that first).
.rf_fn_keys <- new.env(parent = emptyenv())
fn_key <- function(name, fn) {
  b <- body(fn); f <- formals(fn)
  seen <- .rf_fn_keys[[name]]
  for (e in seen) if (identical(e$body, b) && identical(e$formals, f)) return(e$key)
  k <- .rf_hash(list(b, f))
  assign(name, c(seen, list(list(body = b, formals = f, key = k))), envir = .rf_fn_keys)
  k
}

# A graph's key as a name for the caches' environments (R limits names to 10000 bytes; a model's
# recorded forward and backward is much longer): its 128-bit hash.
graph_hash <- function(key) .rf_hash(key)

# A function of the leaves (positional or named l1, l2, ...) computing the graph's last step.
graph_evaluator <- function(steps) {
  fns <- lapply(steps, `[[`, "fn")
  refs <- lapply(steps, `[[`, "refs")
  consts <- lapply(steps, `[[`, "consts")
  function(...) {
    L <- list(...)
    V <- vector("list", length(fns))
    for (i in seq_along(fns))
      V[[i]] <- do.call(fns[[i]], lapply(refs[[i]], function(r)
        switch(r[1] + 1L, L[[r[2]]], V[[r[2]]], consts[[i]][[r[2]]])))
    V[[length(fns)]]
  }
}

# The compute dtype of a graph over these leaves (see tensors_dtype()).
leaves_dtype <- function(leaves) r_dtype(tensors_dtype(leaves) %||% "f32")

# Flattens the pending graph under `t` into steps over leaves, traces and runs it.
materialize <- function(t) {
  if (!is.null(t@env$buf)) return(invisible(t))
  g <- flatten_graph(t, pending = TRUE)
  dtype <- leaves_dtype(g$leaves)
  key <- graph_hash(graph_key(g$steps, dtype))
  jf <- .rf_lazy[[key]]
  if (is.null(jf)) {
    jf <- rf_jit(graph_evaluator(g$steps), dtype = dtype)
    assign("internal", TRUE, envir = attr(jf, "rfuse")$notes) # rfuse's own: no recompile warning
    assign(key, jf, envir = .rf_lazy)
  }
  r <- do.call(jf, stats::setNames(g$leaves, paste0("l", seq_along(g$leaves))))
  if (!is_tensor(r))
    rf_abort("rfuse_unsupported", sprintf("'%s' on an rf_tensor did not give one tensor", t@env$node$name))
  t@env$buf <- r@env$buf
  t@env$dtype <- r@env$dtype
  t@env$rdim <- r@env$rdim
  t@env$len <- r@env$len
  if (!isTRUE(t@env$requires_grad)) t@env$node <- NULL
  invisible(t)
}

#' @rdname rf_tensor
#' @param t A tensor (or a list of them, or any R value).
#' @details `rf_sync(t)` computes a pending (lazily recorded) tensor and waits until the device
#'   has finished the work queued so far (device work is asynchronous: calls return once it is
#'   queued); it returns `t`.
#' @export
rf_sync <- function(t = NULL) {
  if (is_tensor(t)) materialize(t) else if (is.list(t)) for (x in t) if (is_tensor(x)) materialize(x)
  if (.rf_counters$device_used %||% FALSE) .rf_synchronize()
  invisible(t)
}

tensor_ops <- function(e1, e2) {
  op <- .Generic
  if (missing(e2)) {
    fn <- switch(op, "-" = function(a) -a, "+" = function(a) a, "!" = function(a) !a)
    return(record(op, fn, list(e1)))
  }
  # x ^ 2, x ^ 3, x ^ 4: the exponent is part of the op (a constant of its program, which then
  # multiplies: see rfuse.pow's canonicalization), not a leaf as other numbers are.
  number_setting <- is_tensor(e1) && is.numeric(e2) && length(e2) == 1 && is.null(attributes(e2)) && !is.na(e2)
  if (op == "^" && number_setting && e2 %in% c(2, 3, 4))
    return(record(op, function(a, exponent) a^exponent, list(e1, exponent = as.double(e2)), settings = "exponent"))
  # A constant divisor of %/% and %% is part of the op too (an integer tensor's divisor must be
  # known to be nonzero: see tensor_integer_division).
  if (op %in% c("%/%", "%%") && number_setting)
    return(record(op, function(a, divisor) get(op, envir = baseenv())(a, divisor), list(e1, divisor = e2),
                  settings = "divisor"))
  record(op, tensor_binary_fns[[op]], list(e1, e2))
}
# R's operator, except that two arrays of different dims (R's "non-conformable arrays") broadcast
# as torch's tensors do (`p / p$sum(dim = 2, keepdim = TRUE)`): no R program has a meaning there.
tensor_binary <- function(op) {
  base_op <- get(op, envir = baseenv())
  function(e1, e2) {
    da <- if (is_sym(e1)) e1$rdim else dim(e1)
    db <- if (is_sym(e2)) e2$rdim else dim(e2)
    if (is.null(da) || is.null(db) || identical(as.integer(da), as.integer(db))) return(base_op(e1, e2))
    torch_broadcast_op(base_op, e1, e2, NULL)
  }
}
binary_operator_names <- c("+", "-", "*", "/", "^", "%%", "%/%", "==", "!=", "<", "<=", ">", ">=", "&", "|")
tensor_binary_fns <- sapply(binary_operator_names, tensor_binary, simplify = FALSE)
setMethod("Ops", signature("rf_tensor", "rf_tensor"), tensor_ops)
setMethod("Ops", signature("rf_tensor", "ANY"), tensor_ops)
setMethod("Ops", signature("ANY", "rf_tensor"), tensor_ops)
setMethod("Arith", signature("rf_tensor", "missing"), tensor_ops)
setMethod("Logic", signature("rf_tensor", "missing"), tensor_ops)
setMethod("!", "rf_tensor", function(x) record("!", function(a) !a, list(x)))
setMethod("Math", "rf_tensor", function(x) {
  op <- .Generic
  record(op, function(a) get(op, envir = baseenv())(a), list(x))
})
setMethod("Math2", "rf_tensor", function(x, digits) # round(), signif()
  rf_abort("rfuse_unsupported", sprintf("%s() on an rf_tensor is not supported yet", .Generic)))
setMethod("Summary", "rf_tensor", function(x, ..., na.rm = FALSE) {
  op <- .Generic
  if (!identical(na.rm, FALSE))
    rf_abort("rfuse_unsupported", sprintf("%s(na.rm = TRUE) on an rf_tensor: tensors hold NaN, not NA (drop them first)", op))
  record(op, function(...) get(op, envir = baseenv())(...), c(list(x), list(...)))
})
setMethod("%*%", signature("rf_tensor", "ANY"), function(x, y) record("%*%", rf_matprod, list(x, y)))
setMethod("%*%", signature("ANY", "rf_tensor"), function(x, y) record("%*%", rf_matprod, list(x, y)))
setMethod("%*%", signature("rf_tensor", "rf_tensor"), function(x, y) record("%*%", rf_matprod, list(x, y)))
setMethod("t", "rf_tensor", function(x) record("t", function(a) t(a), list(x)))
# Arguments these methods have no use for (mean's trim, as.array's dimnames) are refused.
no_more_args <- function(name, ...) {
  if (...length())
    rf_abort("rfuse_unsupported", sprintf("%s() on an rf_tensor takes no further arguments (got %s)", name,
                                          paste(...names() %||% rep("an unnamed one", ...length()), collapse = ", ")))
}
setMethod("mean", "rf_tensor", function(x, ...) {
  no_more_args("mean", ...)
  record("mean", function(a) mean(a), list(x))
})
setMethod("dim", "rf_tensor", function(x) materialize(x)@env$rdim)
setMethod("length", "rf_tensor", function(x) as.integer(materialize(x)@env$len))
setMethod("as.array", "rf_tensor", function(x, ...) {
  no_more_args("as.array", ...)
  v <- tensor_values(x)
  if (is.null(dim(v))) array(v, length(v)) else v
})
setMethod("as.vector", "rf_tensor", function(x, mode = "any") as.vector(tensor_values(x), mode))
setMethod("as.numeric", "rf_tensor", function(x, ...) { no_more_args("as.numeric", ...); as.numeric(tensor_values(x)) })
setMethod("as.logical", "rf_tensor", function(x, ...) { no_more_args("as.logical", ...); as.logical(tensor_values(x)) })
setMethod("[", "rf_tensor", function(x, i, j, ..., drop = TRUE) {
  if (isTRUE(x@env$requires_grad) && !isTRUE(.rf_counters$no_grad)) return(record_index(x, sys.call(), parent.frame(), drop))
  v <- tensor_values(x)
  if (missing(i) && missing(j) && !...length()) return(v)
  if (is.null(dim(v)) || length(dim(v)) == 1) return(v[i])
  v[i, j, ..., drop = drop]
})
setReplaceMethod("[", "rf_tensor", function(x, i, j, ..., value) {
  call <- sys.call()
  dots <- as.list(call)[-c(1L, 2L)]
  dots <- dots[names(dots) %||% rep("", length(dots)) != "value"]
  env <- parent.frame()
  idx <- lapply(dots, function(a) if (identical(a, quote(expr = ))) all_of_dim else eval(a, env))
  tensor_subassign(x, idx, value, call)
})
# `[` on a tensor that records for backward() is a recorded op (its value an rf_tensor), so that
# the gradient flows through it; the positions are R values, part of the op.
record_index <- function(x, call, env, drop) {
  args <- as.list(call)[-c(1L, 2L)]
  args <- args[names(args) %||% rep("", length(args)) != "drop"]
  idx <- lapply(args, function(a) {
    if (identical(a, quote(expr = ))) return(a)
    v <- eval(a, env)
    if (is_tensor(v)) v <- tensor_values(v)
    v
  })
  drop <- isTRUE(drop)
  record(paste0("[", paste(deparse(c(idx, drop = drop)), collapse = "")),
         function(x) do.call(`[`, c(list(x), idx, list(drop = drop))), list(x = x))
}

setMethod("show", "rf_tensor", function(object) {
  materialize(object)
  e <- object@env
  cat(sprintf("<rf_tensor %s on %s, %s>\n", e$dtype, e$device,
              if (is.null(e$rdim)) sprintf("length %d", as.integer(e$len)) else paste(e$rdim, collapse = "x")))
  print(tensor_values(object))
})

# The base-R functions rf_jit traces, on rf_tensors too: these mask base's (library(rfuse) says
# so) and call base's own unchanged unless an argument is an rf_tensor.
any_tensor <- function(...) {
  for (a in list(...)) if (is_tensor(a)) return(TRUE)
  FALSE
}
# `check`: the arguments that make a call a tensor call (all of `...` for "..."), tested first and
# alone, so a call on plain values costs one test more than base's, and no argument base would
# leave unevaluated (ifelse's unused branch) is forced.
tensor_fn <- function(name, traced, base_fn, check, settings = character()) {
  force(name); force(traced); force(base_fn)
  f <- function() NULL
  formals(f) <- formals(base_fn)
  nms <- names(formals(base_fn))
  # base's function called with the arguments as given (by name after `...`).
  base_call <- as.call(c(list(as.name("base_fn")), stats::setNames(lapply(nms, as.name), base::ifelse(nms == "...", "", nms))))
  tests <- lapply(check, function(a) if (a == "...") quote(any_tensor(...)) else
    bquote(inherits(.(as.name(a)), "rf_tensor")))
  is_tensor_call <- Reduce(function(a, b) call("||", a, b), tests)
  body(f) <- bquote({
    if (!.(is_tensor_call)) return(.(base_call))
    args <- mget(.(nms[nms != "..."]), inherits = FALSE)
    record(.(name), traced, .(if ("..." %in% nms) quote(c(list(...), args)) else quote(args)), .(settings))
  })
  # base's function and the traced one live in the closure's own frame (printing shows names).
  environment(f) <- list2env(list(base_fn = base_fn, traced = traced), parent = environment(record))
  f
}

#' Base R functions on rf tensors
#'
#' rfuse's versions of these base-R functions take [rf_tensor]s as well: on tensors they run
#' on the tensors' device (or are recorded, under `options(gpu.kernel.fusion = TRUE)`) and return a
#' tensor; on anything else they are base R's own, called unchanged. A call is a tensor call when
#' `x` (or `STATS` for `sweep`, `y` for the cross products, any argument of `pmax`/`pmin`) is an
#' `rf_tensor`; `ifelse` looks at `test` only, so its unused branch stays unevaluated, as in base R.
#'
#' @param x,y,test,yes,no,MARGIN,STATS,FUN,check.margin,na.rm,dims,... As for base R.
#' @return As base R's, or an `rf_tensor`.
#' @examples
#' x <- rf_tensor(matrix(c(-1, 2, -3, 4, 5, -6), 2))
#' as.array(pmax(x, 0))
#' as.array(rowSums(x))
#' as.array(sweep(x, 2, colMeans(x)))
#' rowSums(matrix(1:6, 2))   # not a tensor: base R's rowSums()
#' @name rf_tensor-base
#' @aliases pmax pmin ifelse sweep rowSums colSums rowMeans colMeans crossprod tcrossprod
NULL

#' @rdname rf_tensor-base
#' @export
pmax <- tensor_fn("pmax", function(..., na.rm = FALSE) rf_pmax(..., na.rm = na.rm), base::pmax, "...", "na.rm")
#' @rdname rf_tensor-base
#' @export
pmin <- tensor_fn("pmin", function(..., na.rm = FALSE) rf_pmin(..., na.rm = na.rm), base::pmin, "...", "na.rm")
#' @rdname rf_tensor-base
#' @export
ifelse <- tensor_fn("ifelse", function(test, yes, no) rf_ifelse(test, yes, no), base::ifelse, "test")
#' @rdname rf_tensor-base
#' @export
sweep <- tensor_fn("sweep", function(x, MARGIN, STATS, FUN = "-", check.margin = TRUE, ...)
  rf_sweep(x, MARGIN, STATS, FUN, check.margin, ...), base::sweep, c("x", "STATS"),
  c("MARGIN", "FUN", "check.margin"))
#' @rdname rf_tensor-base
#' @export
rowSums <- tensor_fn("rowSums", function(x, na.rm = FALSE, dims = 1L) rf_rowSums(x, na.rm, dims), base::rowSums, "x",
  c("na.rm", "dims"))
#' @rdname rf_tensor-base
#' @export
colSums <- tensor_fn("colSums", function(x, na.rm = FALSE, dims = 1L) rf_colSums(x, na.rm, dims), base::colSums, "x",
  c("na.rm", "dims"))
#' @rdname rf_tensor-base
#' @export
rowMeans <- tensor_fn("rowMeans", function(x, na.rm = FALSE, dims = 1L) rf_rowMeans(x, na.rm, dims), base::rowMeans, "x",
  c("na.rm", "dims"))
#' @rdname rf_tensor-base
#' @export
colMeans <- tensor_fn("colMeans", function(x, na.rm = FALSE, dims = 1L) rf_colMeans(x, na.rm, dims), base::colMeans, "x",
  c("na.rm", "dims"))
#' @rdname rf_tensor-base
#' @export
crossprod <- tensor_fn("crossprod", function(x, y = NULL) rf_crossprod(x, y), base::crossprod, c("x", "y"))
#' @rdname rf_tensor-base
#' @export
tcrossprod <- tensor_fn("tcrossprod", function(x, y = NULL) rf_tcrossprod(x, y), base::tcrossprod, c("x", "y"))

# ---- Autograd, torch style: requires_grad leaves, loss$backward(), $grad, $zero_grad() ----------
# The recorded graph under the loss is the same one materialize() traces; backward() traces it as
# a function of its leaves and differentiates it with rfuse-autodiff (rf_value_and_grad), so both
# API styles share one machinery. Gradients accumulate into the leaves' $grad, as in torch.

.rf_backward <- new.env(parent = emptyenv()) # gradient evaluators by graph structure

backward_tensor <- function(t) {
  if (is.null(t@env$node))
    rf_abort("rfuse_autodiff_error", "backward() needs a value computed from tensors with requires_grad = TRUE")
  g <- flatten_graph(t, pending = FALSE)
  wants <- which(vapply(seq_along(g$leaves), function(i)
    i <= length(g$tensors) && !is.null(g$tensors[[i]]) && isTRUE(g$tensors[[i]]@env$requires_grad),
    logical(1)))
  if (!length(wants))
    rf_abort("rfuse_autodiff_error", "no tensor in the graph has requires_grad = TRUE")
  dtype <- leaves_dtype(g$leaves)
  key <- graph_hash(graph_key(g$steps, paste(dtype, paste(wants, collapse = ","))))
  vg <- .rf_backward[[key]]
  if (is.null(vg)) {
    # Called with the leaves as named arguments l1, l2, ... (wrt names them).
    evaluator <- graph_evaluator(g$steps)
    vg <- rf_value_and_grad(evaluator, wrt = paste0("l", wants), dtype = dtype)
    assign(key, vg, envir = .rf_backward)
  }
  r <- do.call(vg, stats::setNames(g$leaves, paste0("l", seq_along(g$leaves))))
  t@env$buf <- r$value@env$buf
  t@env$dtype <- r$value@env$dtype
  t@env$rdim <- NULL
  t@env$len <- 1
  # Gradients are tensors on the parameters' device, accumulated there as torch does.
  for (i in wants) {
    leaf <- g$tensors[[i]]
    gi <- r$grad[[paste0("l", i)]]
    leaf@env$grad <- if (is.null(leaf@env$grad)) gi else leaf@env$grad + gi
  }
  invisible(NULL)
}

#' Autograd on rf tensors, torch style
#'
#' Tensors made with `rf_tensor(x, requires_grad = TRUE)` record the operations applied to them
#' (whatever `options(gpu.kernel.fusion)` says). `loss$backward()` differentiates the recorded
#' computation of a one-number `loss` with rfuse-autodiff and adds the gradient into each such
#' tensor's `$grad` (an `rf_tensor` on the same device); `$zero_grad()` clears it;
#' `$requires_grad` tells. `$to(device =, dtype =)`, `$cpu()` and `$cuda()` copy a tensor;
#' `$dtype`, `$device` and `$shape` describe it.
#'
#' @param x An `rf_tensor`.
#' @param name `backward`, `grad`, `zero_grad`, `requires_grad`, `to`, `cpu`, `cuda`, `dtype`,
#'   `device` or `shape`.
#' @return For `$backward` and `$zero_grad`, a function to call; for `$grad` the accumulated
#'   gradient (or `NULL`); for `$requires_grad` a logical.
#' @examples
#' w <- rf_tensor(matrix(c(0.5, -1), 2), dtype = "float64", requires_grad = TRUE)
#' x <- matrix(rnorm(6), 3)
#' loss <- sum(tanh(x %*% w)^2)
#' loss$backward()
#' w$grad
#' @name rf_tensor-autograd
#' @aliases $,rf_tensor-method
NULL

setMethod("$", "rf_tensor", function(x, name) {
  switch(name,
    backward = function() backward_tensor(x),
    grad = x@env$grad,
    zero_grad = function() { x@env$grad <- NULL; invisible(x) },
    requires_grad = isTRUE(x@env$requires_grad),
    # torch's detach(): the same values, with no recorded operation and no gradient.
    detach = function() {
      buf <- tensor_buffer(x) # (computed first: its dtype and dims are known then)
      make_tensor(buf = buf, dtype = x@env$dtype, device = x@env$device, rdim = x@env$rdim, len = x@env$len)
    },
    to = function(device = x@env$device, dtype = NULL) tensor_to(x, device, dtype %||% materialize(x)@env$dtype),
    cpu = function() tensor_to(x, "cpu"),
    cuda = function() tensor_to(x, "cuda"),
    # torch's casts: copies in the named dtype (the tensor itself when it has it).
    float = function() tensor_to(x, dtype = "float32"), double = function() tensor_to(x, dtype = "float64"),
    half = function() tensor_to(x, dtype = "float16"), long = function() tensor_to(x, dtype = "int64"),
    int = function() tensor_to(x, dtype = "int32"), bool = function() tensor_to(x, dtype = "bool"),
    dtype = materialize(x)@env$dtype,
    device = x@env$device,
    shape = { materialize(x); if (is.null(x@env$rdim)) as.integer(x@env$len) else x@env$rdim },
    requires_grad_ = function(requires_grad = TRUE) {
      if (!is.logical(requires_grad) || length(requires_grad) != 1 || is.na(requires_grad))
        rf_abort("rfuse_type_error", "requires_grad_() takes TRUE or FALSE")
      x@env$requires_grad <- requires_grad
      invisible(x)
    },
    tensor_method(x, name, sys.call()))
})
