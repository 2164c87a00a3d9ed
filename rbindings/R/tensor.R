# rf tensors: R arrays that rfuse computes with. With options(gpu.kernel.fusion = TRUE) operations
# on them are recorded, not run; the recorded graph is traced, fused, compiled (cached by its
# structure and shapes) and run when a value is needed (as.array(), print(), dim(), rf_sync()).
# With FALSE (the default) each operation runs at once, through the same machinery, so both modes
# give the same numbers.

#' The rf_tensor class and its methods
#'
#' An `rf_tensor` holds its values (or, in lazy mode, the recorded operation producing them) in
#' an environment. Methods: the `Ops` (`Arith`, `Compare`, `Logic`, `!`), `Math` and `Summary`
#' groups, `%*%`, `t`, `mean`, `dim`, `length`, `as.array`, `as.vector`, `show`.
#'
#' @slot env Environment with the values, the pending operation, dtype and device.
#' @param x,e1,e2,y,object,mode,na.rm,... As for the base generics.
#' @docType class
#' @name rf_tensor-class
#' @aliases rf_tensor-class Ops,rf_tensor,rf_tensor-method Ops,rf_tensor,ANY-method
#'   Ops,ANY,rf_tensor-method Arith,rf_tensor,missing-method Logic,rf_tensor,missing-method
#'   !,rf_tensor-method Math,rf_tensor-method Summary,rf_tensor-method
#'   %*%,rf_tensor,ANY-method %*%,ANY,rf_tensor-method %*%,rf_tensor,rf_tensor-method
#'   t,rf_tensor-method mean,rf_tensor-method dim,rf_tensor-method length,rf_tensor-method
#'   as.array,rf_tensor-method as.vector,rf_tensor-method show,rf_tensor-method
#' @keywords classes
NULL

setClass("rf_tensor", representation(env = "environment"))

#' rfuse tensors
#'
#' `rf_tensor()` wraps a numeric vector, matrix or array. Arithmetic, comparisons, the Math and
#' Summary groups, `%*%`, `t()` and `mean()` work on tensors; `as.array()` returns the values.
#' With `options(gpu.kernel.fusion = TRUE)` operations are recorded lazily and run fused when a
#' value is needed; with `FALSE` (default) each runs at once. Both give the same numbers.
#'
#' @param x A numeric (or integer) vector, matrix or array.
#' @param dtype `"float32"` (default) or `"float64"`.
#' @param device `"cuda"` or `"cpu"`; defaults to [rf_default_device()].
#' @return An `rf_tensor`.
#' @examples
#' a <- rf_tensor(matrix(1:6, 2))
#' old <- options(gpu.kernel.fusion = TRUE)
#' b <- exp(a / 6) * 2 + 1   # recorded, not run
#' as.array(b)                # traced, fused into one kernel, run
#' options(old)
#' @export
rf_tensor <- function(x, dtype = c("float32", "float64"), device = rf_default_device()) {
  dtype <- match.arg(dtype)
  device <- as.vector(device)
  if (!(is.numeric(x) || is.logical(x)) || is.object(x) && !is.array(x))
    rf_abort("rfuse_type_error", sprintf("rf_tensor() needs a numeric vector, matrix or array, not %s",
                                         paste(class(x), collapse = "/")))
  if (!device %in% c("cpu", "cuda"))
    rf_abort("rfuse_error", sprintf("unknown device '%s' (use \"cpu\" or \"cuda\")", device))
  if (device == "cuda" && .rf_device() != "cuda")
    rf_abort("rfuse_runtime_error", paste("no CUDA device:", .rf_device_description()))
  v <- x
  storage.mode(v) <- "double"
  make_tensor(value = v, dtype = dtype, device = device)
}

make_tensor <- function(value = NULL, node = NULL, dtype, device) {
  env <- new.env(parent = emptyenv())
  env$value <- value
  env$node <- node
  env$dtype <- dtype
  env$device <- device
  methods::new("rf_tensor", env = env)
}

is_tensor <- function(x) methods::is(x, "rf_tensor")

# Records `name` applied to `args` (tensors or R constants); runs it now unless fusion is lazy.
record <- function(name, fn, args) {
  tensors <- Filter(is_tensor, args)
  dtype <- if (any(vapply(tensors, function(t) t@env$dtype == "float64", logical(1)))) "float64" else "float32"
  device <- if (any(vapply(tensors, function(t) t@env$device == "cpu", logical(1)))) "cpu" else tensors[[1]]@env$device
  t <- make_tensor(node = list(name = name, fn = fn, args = args), dtype = dtype, device = device)
  if (!isTRUE(getOption("gpu.kernel.fusion", FALSE))) materialize(t)
  t
}

.rf_lazy <- new.env(parent = emptyenv()) # jitted evaluators by graph structure

# Flattens the pending graph under `t` into steps over leaves, traces and runs it.
materialize <- function(t) {
  if (!is.null(t@env$value)) return(invisible(t))
  leaves <- list(); steps <- list(); seen <- new.env(parent = emptyenv())
  visit <- function(x) {
    if (is_tensor(x) && is.null(x@env$value)) {
      key <- format(x@env)
      if (!is.null(seen[[key]])) return(c(1L, seen[[key]]))
      refs <- lapply(x@env$node$args, visit)
      steps[[length(steps) + 1]] <<- list(name = x@env$node$name, fn = x@env$node$fn, refs = refs)
      assign(key, length(steps), envir = seen)
      return(c(1L, length(steps)))
    }
    leaves[[length(leaves) + 1]] <<- if (is_tensor(x)) x@env$value else x
    c(0L, length(leaves))
  }
  visit(t)
  key <- paste(t@env$dtype, vapply(steps, function(s)
    paste0(s$name, "(", paste(vapply(s$refs, paste, "", collapse = ":"), collapse = ","), ")"), ""),
    collapse = ";")
  jf <- .rf_lazy[[key]]
  if (is.null(jf)) {
    fns <- lapply(steps, `[[`, "fn")
    refs <- lapply(steps, `[[`, "refs")
    evaluator <- function(...) {
      L <- list(...)
      V <- vector("list", length(fns))
      for (i in seq_along(fns))
        V[[i]] <- do.call(fns[[i]], lapply(refs[[i]], function(r) if (r[1] == 0L) L[[r[2]]] else V[[r[2]]]))
      V[[length(fns)]]
    }
    jf <- rf_jit(evaluator, dtype = t@env$dtype)
    assign(key, jf, envir = .rf_lazy)
  }
  old <- if (t@env$device == "cpu") options(rfuse.device = "cpu") else NULL
  on.exit(if (!is.null(old)) options(old))
  t@env$value <- do.call(jf, leaves)
  t@env$node <- NULL
  invisible(t)
}

#' @rdname rf_tensor
#' @param t A tensor.
#' @export
rf_sync <- function(t) materialize(t)

tensor_ops <- function(e1, e2) {
  op <- .Generic
  if (missing(e2)) {
    fn <- switch(op, "-" = function(a) -a, "+" = function(a) a, "!" = function(a) !a)
    return(record(op, fn, list(e1)))
  }
  fn <- get(op, envir = baseenv())
  record(op, fn, list(e1, e2))
}
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
setMethod("Summary", "rf_tensor", function(x, ..., na.rm = FALSE) {
  op <- .Generic
  record(op, function(...) get(op, envir = baseenv())(...), c(list(x), list(...)))
})
setMethod("%*%", signature("rf_tensor", "ANY"), function(x, y) record("%*%", rf_matprod, list(x, y)))
setMethod("%*%", signature("ANY", "rf_tensor"), function(x, y) record("%*%", rf_matprod, list(x, y)))
setMethod("%*%", signature("rf_tensor", "rf_tensor"), function(x, y) record("%*%", rf_matprod, list(x, y)))
setMethod("t", "rf_tensor", function(x) record("t", function(a) t(a), list(x)))
setMethod("mean", "rf_tensor", function(x, ...) record("mean", function(a) mean(a), list(x)))
setMethod("dim", "rf_tensor", function(x) dim(materialize(x)@env$value))
setMethod("length", "rf_tensor", function(x) length(materialize(x)@env$value))
setMethod("as.array", "rf_tensor", function(x, ...) {
  v <- materialize(x)@env$value
  if (is.null(dim(v))) array(v, length(v)) else v
})
setMethod("as.vector", "rf_tensor", function(x, mode = "any") as.vector(materialize(x)@env$value, mode))
setMethod("show", "rf_tensor", function(object) {
  v <- materialize(object)@env$value
  cat(sprintf("<rf_tensor %s on %s, %s>\n", object@env$dtype, object@env$device,
              if (is.null(dim(v))) sprintf("length %d", length(v)) else paste(dim(v), collapse = "x")))
  print(v)
})
