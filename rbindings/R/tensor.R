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
rf_tensor <- function(x, dtype = c("float32", "float64"), device = rf_default_device(),
                      requires_grad = FALSE) {
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
  t <- make_tensor(value = v, dtype = dtype, device = device)
  t@env$requires_grad <- isTRUE(requires_grad)
  t
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
  # A tensor on the way from a requires_grad leaf keeps its recorded operation for backward().
  t@env$requires_grad <- any(vapply(tensors, function(x) isTRUE(x@env$requires_grad), logical(1)))
  if (!isTRUE(getOption("gpu.kernel.fusion", FALSE))) materialize(t)
  t
}

.rf_lazy <- new.env(parent = emptyenv()) # jitted evaluators by graph structure

# The graph under `t` as steps over leaves: `pending = TRUE` stops at tensors that already have
# values (what materialize() must still compute); FALSE goes back to the tensors without a
# recorded operation (what backward() differentiates).
flatten_graph <- function(t, pending = TRUE) {
  leaves <- list(); leaf_tensors <- list(); steps <- list(); seen <- new.env(parent = emptyenv())
  visit <- function(x) {
    if (is_tensor(x) && !is.null(x@env$node) && !(pending && !is.null(x@env$value))) {
      key <- format(x@env)
      if (!is.null(seen[[key]])) return(c(1L, seen[[key]]))
      refs <- lapply(x@env$node$args, visit)
      steps[[length(steps) + 1]] <<- list(name = x@env$node$name, fn = x@env$node$fn, refs = refs)
      assign(key, length(steps), envir = seen)
      return(c(1L, length(steps)))
    }
    leaves[[length(leaves) + 1]] <<- if (is_tensor(x)) materialize(x)@env$value else x
    leaf_tensors[length(leaves)] <<- list(if (is_tensor(x)) x else NULL)
    c(0L, length(leaves))
  }
  visit(t)
  list(leaves = leaves, tensors = leaf_tensors, steps = steps)
}

# A cache key of a flattened graph's structure.
graph_key <- function(steps, prefix)
  paste(prefix, vapply(steps, function(s)
    paste0(s$name, "(", paste(vapply(s$refs, paste, "", collapse = ":"), collapse = ","), ")"), ""),
    collapse = ";")

# A function of the leaves (positional or named l1, l2, ...) computing the graph's last step.
graph_evaluator <- function(steps) {
  fns <- lapply(steps, `[[`, "fn")
  refs <- lapply(steps, `[[`, "refs")
  function(...) {
    L <- list(...)
    V <- vector("list", length(fns))
    for (i in seq_along(fns))
      V[[i]] <- do.call(fns[[i]], lapply(refs[[i]], function(r) if (r[1] == 0L) L[[r[2]]] else V[[r[2]]]))
    V[[length(fns)]]
  }
}

# Flattens the pending graph under `t` into steps over leaves, traces and runs it.
materialize <- function(t) {
  if (!is.null(t@env$value)) return(invisible(t))
  g <- flatten_graph(t, pending = TRUE)
  leaves <- g$leaves
  key <- graph_key(g$steps, t@env$dtype)
  jf <- .rf_lazy[[key]]
  if (is.null(jf)) {
    jf <- rf_jit(graph_evaluator(g$steps), dtype = t@env$dtype)
    assign(key, jf, envir = .rf_lazy)
  }
  old <- if (t@env$device == "cpu") options(rfuse.device = "cpu") else NULL
  on.exit(if (!is.null(old)) options(old))
  t@env$value <- do.call(jf, leaves)
  if (!isTRUE(t@env$requires_grad)) t@env$node <- NULL
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
  key <- graph_key(g$steps, paste(t@env$dtype, paste(wants, collapse = ",")))
  vg <- .rf_backward[[key]]
  if (is.null(vg)) {
    # Called with the leaves as named arguments l1, l2, ... (wrt names them).
    evaluator <- graph_evaluator(g$steps)
    vg <- rf_value_and_grad(evaluator, wrt = paste0("l", wants), dtype = t@env$dtype)
    assign(key, vg, envir = .rf_backward)
  }
  old <- if (t@env$device == "cpu") options(rfuse.device = "cpu") else NULL
  on.exit(if (!is.null(old)) options(old))
  r <- do.call(vg, stats::setNames(g$leaves, paste0("l", seq_along(g$leaves))))
  t@env$value <- r$value
  for (i in wants) {
    leaf <- g$tensors[[i]]
    gi <- r$grad[[paste0("l", i)]]
    if (!is.null(dim(leaf@env$value))) dim(gi) <- dim(leaf@env$value) else gi <- as.vector(gi)
    leaf@env$grad <- if (is.null(leaf@env$grad)) gi else leaf@env$grad + gi
  }
  invisible(NULL)
}

#' Autograd on rf tensors, torch style
#'
#' Tensors made with `rf_tensor(x, requires_grad = TRUE)` record the operations applied to them
#' (whatever `options(gpu.kernel.fusion)` says). `loss$backward()` differentiates the recorded
#' computation of a one-number `loss` with rfuse-autodiff and adds the gradient into each such
#' tensor's `$grad` (an R array); `$zero_grad()` clears it; `$requires_grad` tells.
#'
#' @param x An `rf_tensor`.
#' @param name `backward`, `grad`, `zero_grad` or `requires_grad`.
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
    rf_abort("rfuse_error", sprintf("rf_tensor has no field '%s' (backward, grad, zero_grad, requires_grad)", name)))
})
