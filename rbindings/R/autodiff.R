# Reverse-mode differentiation of traced R code (rfuse-autodiff), losses, and SGD training with the
# whole step (forward, backward, update) compiled into one program.

#' Gradients of an R function
#'
#' `rf_value_and_grad()` returns a function that computes `f`'s value and its gradient with
#' respect to the arguments named in `wrt`; `rf_grad()` returns only the gradient(s). `f` is
#' plain base-R code (whatever [rf_jit()] traces) returning one number, e.g. a loss. It is traced
#' once per input signature; rfuse differentiates the traced program (each op's
#' vector-Jacobian product, in reverse order), fuses forward and backward together and compiles
#' them, on the GPU or the CPU.
#'
#' @param f A function of numeric arrays returning a single number.
#' @param wrt Names of the arguments to differentiate by (default: every numeric argument).
#' @param dtype `"float32"` (default) or `"float64"`.
#' @param pipeline Fusion pipeline, as for [rf_jit()].
#' @param static Arguments used as R values while tracing, as for [rf_jit()].
#' @param recompute Recompute cheap pointwise values in the backward pass instead of keeping
#'   them (the pass option `recompute-pointwise`).
#' @return A function with `f`'s arguments. `rf_value_and_grad()`'s returns `list(value, grad)`
#'   where `grad` is a named list of arrays shaped like the arguments; `rf_grad()`'s returns the
#'   gradient array (one `wrt` name) or the named list.
#' @details Differentiating with respect to a logical argument, through an operation without a
#'   vector-Jacobian product, or a function that does not return a
#'   single number raises an error of class `rfuse_autodiff_error` naming the cause. With
#'   `options(rfuse.detect_anomaly = TRUE)` a non-finite gradient raises `rfuse_anomaly_error`.
#' @examples
#' f <- function(x, w) sum(tanh(x %*% w)^2)
#' x <- matrix(rnorm(12), 3); w <- matrix(rnorm(8), 4)
#' g <- rf_grad(f, wrt = "w", dtype = "float64")
#' g(x, w)
#' @export
rf_value_and_grad <- function(f, wrt = NULL, dtype = c("float32", "float64"), pipeline = "default",
                              static = character(), recompute = FALSE) {
  state <- grad_state(f, wrt, match.arg(dtype), pipeline, static, list(optimizer = "none", recompute = recompute))
  vg <- function(...) {
    out <- grad_call(state, list(...))
    list(value = out$value, grad = out$rest)
  }
  structure(vg, class = c("rf_grad_function", "function"), rfuse = state)
}

#' @rdname rf_value_and_grad
#' @export
rf_grad <- function(f, wrt = NULL, dtype = c("float32", "float64"), pipeline = "default",
                    static = character(), recompute = FALSE) {
  vg <- rf_value_and_grad(f, wrt, match.arg(dtype), pipeline, static, recompute)
  g <- function(...) {
    r <- vg(...)
    if (length(r$grad) == 1) r$grad[[1]] else r$grad
  }
  structure(g, class = c("rf_grad_function", "function"), rfuse = attr(vg, "rfuse"))
}

#' @export
print.rf_grad_function <- function(x, ...) {
  st <- attr(x, "rfuse")
  cat(sprintf("<rfuse gradient function: d f / d (%s), dtype %s>\n",
              if (is.null(st$wrt)) "every numeric argument" else paste(st$wrt, collapse = ", "),
              if (st$dtype == "f32") "float32" else "float64"))
  invisible(x)
}

grad_state <- function(f, wrt, dtype, pipeline, static, mode) {
  if (!is.function(f)) rf_abort("rfuse_type_error", "`f` must be a function")
  if (!is.null(wrt) && (!is.character(wrt) || !length(wrt)))
    rf_abort("rfuse_type_error", "`wrt` must name arguments of `f`")
  check_pipeline(pipeline)
  list(f = f, formals = names(formals(f)) %||% character(), dots = "..." %in% names(formals(f)),
       dtype = if (dtype == "float32") "f32" else "f64", pipeline = pipeline, static = static,
       wrt = wrt, mode = mode, cache = new.env(parent = emptyenv()))
}

# Traces f, checks it returns one number, and compiles its gradient (or training step) program.
grad_entry <- function(state, args) {
  k <- call_key(state, args)
  device <- call_device(args)
  autocast <- autocast_for(device)
  if (nzchar(autocast)) k$key <- paste0(k$key, "|autocast ", autocast)
  names(args) <- k$names
  entry <- current_entry(state$cache[[k$key]])
  if (!is.null(entry)) return(list(entry = entry, args = args))
  for (i in seq_along(args))
    check_arg(args[[i]], if (nzchar(k$names[i])) k$names[i] else paste0("#", i), k$static[i])
  tr <- trace_function(state$f, args, state$dtype, k$static, device)
  if (!tr$out$single || !is_sym(tr$out$items[[1]]) || tr$out$items[[1]]$len != 1)
    rf_abort("rfuse_autodiff_error",
             "`f` must return a single number (a scalar loss) to be differentiated")
  traced <- k$names[tr$input_index]
  wrt <- state$wrt %||% traced[tr$input_dtypes != "i1"]
  for (w in wrt) {
    i <- match(w, k$names)
    if (is.na(i))
      rf_abort("rfuse_autodiff_error", sprintf("`wrt` names '%s', which is not an argument of `f`", w))
    if (k$static[i] || is.logical(args[[i]]))
      rf_abort("rfuse_autodiff_error",
               sprintf("cannot differentiate with respect to '%s': it is %s (only numeric arguments have gradients)",
                       w, if (k$static[i]) "static" else "logical"))
  }
  m <- state$mode
  apply_r_options()
  program <- rf_guard(.rf_compile_grad(tr$text, state$pipeline, match(wrt, traced) - 1L, isTRUE(m$recompute),
                                       m$optimizer, m$lr %||% 0, m$momentum %||% 0, m$weight_decay %||% 0,
                                       m$betas[1] %||% 0.9, m$betas[2] %||% 0.999, m$eps %||% 1e-8,
                                       isTRUE(m$lr_input),
                                       if (is.null(m$tf32)) "options" else if (m$tf32) "allowed" else "exact",
                                       m$all_reduce %||% "none", m$autocast %||% "none", isTRUE(m$loss_scale)))
  entry <- list(program = program, trace = tr, wrt = wrt,
                rdims = lapply(wrt, function(w) dim(args[[w]])), lens = lapply(wrt, function(w) length(args[[w]])))
  assign(k$key, entry, envir = state$cache)
  list(entry = entry, args = args)
}

# Runs the gradient (or step) program: list(value, rest = named outputs after the value).
grad_call <- function(state, args, extra = list()) {
  je <- grad_entry(state, args)
  run_grad_entry(state, je$entry, je$args, extra)
}

run_grad_entry <- function(state, e, args, extra = list()) {
  tr <- e$trace
  ci <- call_inputs(tr, args)
  inputs <- c(ci$values, extra)
  dtypes <- c(ci$dtypes, rep(if (state$dtype == "f32") "f32" else "f64", length(extra)))
  n_rest <- length(e$wrt) * (1 + state_buffers(state$mode))
  rdims <- c(list(NULL), rep(e$rdims, length.out = n_rest))
  tensors <- Filter(is_tensor, inputs)
  if (length(tensors)) {
    # On rf_tensors: the program runs on their device and gives tensors.
    device <- common_device(tensors)
    values <- lapply(inputs, function(v) if (is_tensor(v)) tensor_buffer(v) else v)
    bufs <- .rf_run_tensors(e$program, values, dtypes, device, NULL)
    if (inherits(bufs, "rfuse_failure")) rf_abort(bufs[[1]], bufs[[2]])
    lens <- c(1, vapply(rep(e$lens, length.out = n_rest), as.double, 0))
    dt <- r_dtype(if (state$dtype == "f32") "f32" else "f64")
    outs <- lapply(seq_len(1 + n_rest), function(k)
      make_tensor(buf = bufs[[k]], dtype = dt, device = device, rdim = rdims[[k]], len = lens[k]))
    if (length(bufs) > 1 + n_rest)
      apply_aux(tr, c(outs, lapply(bufs[-seq_len(1 + n_rest)], function(b) rf_guard(.rf_tensor_to_r(b, NULL)))),
                1 + n_rest)
    rest <- outs[-1]
    names(rest) <- rep(e$wrt, length.out = n_rest)
    return(list(value = outs[[1]], rest = rest, wrt = e$wrt))
  }
  outs <- .rf_run(e$program, inputs, dtypes, rdims, current_device())
  if (inherits(outs, "rfuse_failure")) rf_abort(outs[[1]], outs[[2]])
  outs <- apply_aux(tr, outs, 1 + n_rest)
  rest <- outs[-1]
  names(rest) <- rep(e$wrt, length.out = n_rest)
  if (isTRUE(getOption("rfuse.detect_anomaly")))
    for (i in seq_along(rest))
      if (any(!is.finite(rest[[i]])))
        rf_abort("rfuse_anomaly_error",
                 sprintf("a non-finite value (NaN or Inf) in the gradient with respect to '%s'%s",
                         names(rest)[i], anomaly_origin(e$program, inputs, dtypes)))
  list(value = as.vector(outs[[1]]), rest = rest, wrt = e$wrt)
}

# Optimizer state arrays per parameter: sgd's momentum buffer, adam's two moments.
state_buffers <- function(mode)
  switch(mode$optimizer, sgd = if ((mode$momentum %||% 0) != 0) 1L else 0L, adam = , adamw = 2L, 0L)

# Where the first non-finite value appears (the op and its R expression), when rfuse can tell.
anomaly_origin <- function(program, inputs, dtypes) {
  where <- tryCatch(.rf_first_nonfinite(program, inputs, dtypes), error = function(e) "")
  if (nzchar(where)) paste0("; it first appears in ", where) else ""
}

# ---- Losses ----
# (Package code is not masked when traced: it calls rfuse's traced versions, rf_rowSums and
# rf_pmax, explicitly; operators and math functions dispatch on symbolic values by themselves.)-----------------------------------------------------------------------------------

#' Losses
#'
#' Loss functions for training, usable in traced code ([rf_value_and_grad()], [rf_train()]) and
#' on plain R values. Inputs are R matrices with one sample per row.
#'
#' @param input Predictions: for `nnf_cross_entropy()` unnormalized scores (logits), one row per
#'   sample and one column per class; for `nnf_binary_cross_entropy_with_logits()` logits.
#' @param target For `nnf_mse_loss()` values shaped like `input`; for `nnf_cross_entropy()` a
#'   one-hot (or probability) matrix like `input` (see [rf_one_hot()]), or, outside traced code,
#'   class labels `1..ncol(input)`; for the binary loss 0/1 targets shaped like `input`.
#' @param ... The `nn_*_loss()` modules' arguments: `reduction`; for `nn_cross_entropy_loss()`
#'   and `nn_nll_loss()` also `weight` and `ignore_index`.
#' @param weight `nnf_cross_entropy()`, `nnf_nll_loss()`: `NULL`, or a weight per class (torch's:
#'   each sample's loss is scaled by its class's weight, and `"mean"` divides by the weights' sum).
#' @param ignore_index The class label whose samples torch leaves out (default -100). Labels are
#'   classes `1..K`, so an `ignore_index` outside them changes nothing (a label equal to it is
#'   refused by the labels' check); one naming a class is refused for now.
#' @param reduction `"mean"`, `"sum"` or `"none"` (the per-element, or for the cross-entropies
#'   per-sample, losses).
#' @return A single number.
#' @details `nnf_cross_entropy()` is log-softmax and negative log-likelihood fused, computed
#'   stably (each row shifted by its maximum); the binary loss uses
#'   `max(x, 0) - x t + log(1 + exp(-|x|))`, which never overflows.
#' @examples
#' logits <- matrix(rnorm(12), 4)
#' nnf_cross_entropy(logits, c(1, 3, 2, 3))
#' nnf_mse_loss(logits, logits + 0.1)
#' @name losses
NULL

#' @rdname losses
#' @export
nnf_mse_loss <- function(input, target, reduction = "mean") {
  d <- input - target
  reduce_loss(d * d, reduction, sys.call())
}

# Class targets as a one-hot matrix like `input`: labels (a plain vector) are encoded. Traced
# labels (a custom loss's target in rf_fit, a jitted function's argument) are compared with 1..K
# in the program; since a label outside 1..K would give a row of zeros there (torch refuses it),
# they must be an argument of the traced function, whose values each call (and a training loop's
# data, once) are checked on the host (label_checks).
class_targets <- function(input, target) {
  if (is_sym(target) && length(target$rdim) <= 1) {
    k <- as.integer(ncol(input))
    note_labels(target, k, sys.call(-1))
    return(nnf_one_hot(target, k))
  }
  # Labels as a tensor (a batch's int64 labels, torch style) are data, not part of any graph.
  if (is_tensor(target) && length(target$shape) == 1) target <- as.vector(tensor_values(target))
  if (!is_sym(target) && !is_tensor(target) && is.null(dim(target))) rf_one_hot(target, ncol(input)) else target
}

# torch's reductions of a loss: "mean", "sum" or "none" (the elementwise losses).
reduce_loss <- function(l, reduction, call) {
  reduction <- match_choice(reduction, c("mean", "sum", "none"), "reduction", call)
  switch(reduction, mean = mean(l), sum = sum(l), none = l)
}

#' @rdname losses
#' @export
nnf_l1_loss <- function(input, target, reduction = "mean") reduce_loss(abs(input - target), reduction, sys.call())

#' @rdname losses
#' @export
nnf_binary_cross_entropy <- function(input, target, reduction = "mean") {
  # torch clamps each log at -100, so a probability of exactly 0 or 1 gives a finite loss.
  l <- -(target * rf_pmax(log(input), -100) + (1 - target) * rf_pmax(log(1 - input), -100))
  reduce_loss(l, reduction, sys.call())
}

#' @rdname losses
#' @export
nnf_nll_loss <- function(input, target, weight = NULL, ignore_index = -100, reduction = "mean") {
  if (!is.null(rows <- class_rows(input, target, sys.call())))
    return(class_loss_over_rows(nnf_nll_loss, rows, weight, ignore_index, reduction))
  target <- class_targets(input, target)
  class_loss(-rf_rowSums(input * target), target, weight, ignore_index, reduction, ncol(input), sys.call())
}

# torch's reduction of a per-sample class loss `l` with class weights (`weight[y]` per sample;
# "mean" divides by their sum, as torch's weighted mean) and ignore_index. Labels are classes
# 1..K, so an ignore_index outside them (torch's default -100) leaves every sample in (a label
# equal to it fails the labels' check); one naming a class is refused.
class_loss <- function(l, target, weight, ignore_index, reduction, k, call) {
  if (!is.numeric(ignore_index) || length(ignore_index) != 1 || is.na(ignore_index))
    rf_abort("rfuse_type_error", "`ignore_index` must be one number", call)
  if (ignore_index >= 1 && ignore_index <= k && ignore_index == round(ignore_index))
    rf_abort("rfuse_unsupported", sprintf(paste0(
      "ignore_index = %d names one of the %d classes: rfuse does not leave classes out of a loss yet ",
      "(an ignore_index outside 1..%d, torch's default -100, is accepted)"), as.integer(ignore_index), k, k), call)
  if (is.null(weight)) return(reduce_loss(l, reduction, call))
  if (is_tensor(weight)) weight <- as.vector(tensor_values(weight))
  ok <- if (is_sym(weight)) weight$len == k else is.numeric(weight) && length(weight) == k && !anyNA(weight)
  if (!ok) rf_abort("rfuse_type_error", sprintf("`weight` must be %d numbers, a weight per class", k), call)
  w <- rf_rowSums(rf_sweep(target, 2, if (is_sym(weight)) weight else as.vector(weight), "*"))
  reduction <- match_choice(reduction, c("mean", "sum", "none"), "reduction", call)
  switch(reduction, mean = sum(w * l) / sum(w), sum = sum(w * l), none = w * l)
}

# torch's K-dimensional class losses: an input (N, C, d1, ...) with labels (N, d1, ...) (or
# probabilities of the input's shape) is the 2-d loss over N * d1 * ... rows, the classes along
# dim 2 moved last; reduction "none" gives the loss in the labels' shape. NULL for an input of
# 2 dims or fewer.
class_rows <- function(input, target, call) {
  d <- as.integer(dim(input))
  if (length(d) <= 2) return(NULL)
  perm <- c(1L, seq.int(3L, length(d)), 2L)
  dt <- as.integer(dim(target) %||% length(target))
  rows <- torch_reshape(torch_permute(input, perm), c(-1L, d[2]))
  target <- if (identical(dt, d)) torch_reshape(torch_permute(target, perm), c(-1L, d[2]))
    else if (identical(dt, d[-2]) && is_sym(target)) { # traced labels: checked as the argument they are, then one-hot
      note_labels(target, d[2], call)
      torch_reshape(nnf_one_hot(target, d[2]), c(-1L, d[2]))
    } else if (identical(dt, d[-2])) torch_reshape(target, -1L)
    else rf_abort("rfuse_shape_error", sprintf(paste0(
      "the target is %s but the input is %s: class labels must have the input's shape without its ",
      "class dim 2 (%s), or probabilities the input's"), paste(dt, collapse = " x "), paste(d, collapse = " x "),
      paste(d[-2], collapse = " x ")), call)
  list(input = rows, target = target, dims = d[-2])
}

# A class loss over K dims through its 2-d form (class_rows).
class_loss_over_rows <- function(loss, rows, weight, ignore_index, reduction) {
  l <- loss(rows$input, rows$target, weight, ignore_index, reduction)
  if (identical(reduction, "none")) torch_reshape(l, rows$dims) else l
}

#' @rdname losses
#' @export
nnf_cross_entropy <- function(input, target, weight = NULL, ignore_index = -100, reduction = "mean") {
  if (!is.null(rows <- class_rows(input, target, sys.call())))
    return(class_loss_over_rows(nnf_cross_entropy, rows, weight, ignore_index, reduction))
  probabilities <- length(dim(target)) == 2 # (not labels, which class_targets one-hot encodes)
  target <- class_targets(input, target)
  if (length(dim(input)) == 2 && length(dim(target)) == 2 && !identical(as.integer(dim(input)), as.integer(dim(target))))
    rf_abort("rfuse_shape_error", sprintf(paste0(
      "nnf_cross_entropy(): the target is %d x %d (%d classes) but the input, the model's output, is ",
      "%d x %d (%d classes): labels and model outputs must agree"),
      dim(target)[1], dim(target)[2], dim(target)[2], dim(input)[1], dim(input)[2], dim(input)[2]))
  # torch's -sum(target * log_softmax(input)) per row: with z = input - max, that is
  # sum(target) * log(sum(exp(z))) - sum(target * z), where the maximum cancels (no gradient goes
  # through it: t_detach) whatever the targets sum to; one-hot labels sum to 1.
  m <- if (is_sym(input)) t_detach(margin_reduce(input, "max", TRUE, 1L, sys.call())) else apply(input, 1, max)
  z <- input - m
  lse <- log(rf_rowSums(exp(z)))
  nll <- (if (probabilities) rf_rowSums(target) * lse else lse) - rf_rowSums(z * target)
  class_loss(nll, target, weight, ignore_index, reduction, ncol(input), sys.call())
}

#' @rdname losses
#' @export
nnf_binary_cross_entropy_with_logits <- function(input, target, reduction = "mean") {
  l <- rf_pmax(input, 0) - input * target + log(1 + exp(-abs(input)))
  reduce_loss(l, reduction, sys.call())
}


#' One-hot encoding of class labels
#'
#' @param labels Class labels `1..num_classes` (integer or numeric).
#' @param num_classes Number of classes.
#' @return A `length(labels)` x `num_classes` 0/1 matrix.
#' @examples
#' rf_one_hot(c(2, 1, 3), 3)
#' @export
rf_one_hot <- function(labels, num_classes = max(labels)) {
  if (is_sym(labels))
    rf_abort("rfuse_unsupported",
             "class labels inside traced code must come as a one-hot matrix: call rf_one_hot() on them first")
  check_label_values(labels, num_classes)
  outer(labels, seq_len(num_classes), "==") * 1
}

# Traced labels `s` of `k` classes: an input of the traced function (or of the traced helper
# being traced, whose calls pass the check on to their arguments: see trace_helper), recorded
# for the host-side check; anything computed is refused.
note_labels <- function(s, k, call) {
  pos <- match(s$id, .rf_state$scope_ids)
  if (is.na(pos))
    rf_abort("rfuse_unsupported", paste("class labels computed inside traced code cannot be checked against",
                                        "1..K: pass them as an argument, or as a one-hot matrix (rf_one_hot())"), call)
  if (isTRUE(.rf_state$in_helper))
    .rf_state$scope_label_checks <- c(.rf_state$scope_label_checks, list(list(pos = pos, classes = k)))
  else
    .rf_state$label_checks <- c(.rf_state$label_checks, list(list(arg = .rf_state$input_args[pos], classes = k)))
}

# Labels must be whole numbers in 1..K (torch for R's classes are 1-based).
check_label_values <- function(labels, num_classes, what = "labels", call = NULL) {
  v <- if (is_tensor(labels)) as.vector(tensor_values(labels)) else as.vector(unclass(labels))
  bad <- is.na(v) | v < 1 | v > num_classes | v != round(v)
  if (any(bad))
    rf_abort("rfuse_type_error", sprintf("%s must be whole numbers in 1..%d (torch for R's classes are 1-based), not %s (element %d)",
                                         what, num_classes, format(v[which(bad)[1]]), which(bad)[1]), call)
}

# The label checks a trace recorded (class_targets): argument `arg` of the traced call holds
# labels of `classes` classes.
check_traced_labels <- function(tr, args) {
  for (c in tr$label_checks)
    check_label_values(args[[c$arg]], c$classes,
                       sprintf("class labels ('%s')", names(args)[c$arg] %||% paste0("#", c$arg)))
}

#' @rdname rf_one_hot
#' @param tensor `nnf_one_hot()`: class indices 1..K of any shape (torch for R's are 1-based); the
#'   result has a last dim of size `num_classes` (`-1`: the largest index, outside traced code).
#'   On an rf_tensor an int64 rf_tensor, as torch's; in traced code the classes are compared with
#'   1..K, so an index outside that range gives a row of zeros there (torch refuses it).
#' @export
nnf_one_hot <- function(tensor, num_classes = -1) {
  call <- sys.call()
  if (!is.numeric(num_classes) || length(num_classes) != 1 || is.na(num_classes) || num_classes != round(num_classes) ||
      (num_classes < 1 && num_classes != -1))
    rf_abort("rfuse_type_error", "`num_classes` must be a positive whole number or -1", call)
  d <- t_size(tensor)
  if (is_sym(tensor)) {
    if (num_classes == -1) rf_unsupported("nnf_one_hot", call, "num_classes = -1 in traced code (the classes are data): give num_classes")
    k <- as.integer(num_classes)
    idx <- t_expand(t_set_dims(tensor, c(d, 1L)), c(d, k), call)
    classes <- t_expand(as_sym(shaped(seq_len(k), c(rep(1L, length(d)), k)), call), c(d, k), call)
    return((idx == classes) * 1)
  }
  v <- if (is_tensor(tensor)) as.vector(tensor_values(tensor)) else as.vector(tensor)
  k <- if (num_classes == -1) max(v) else num_classes
  out <- shaped(rf_one_hot(v, k), c(d, k))
  if (is_tensor(tensor)) rf_tensor(out, dtype = "int64", device = tensor@env$device) else out
}

# ---- Training -------------------------------------------------------------------------------------

#' Train with SGD or Adam, one compiled program per step
#'
#' Minimizes `loss(params..., data...)` with stochastic gradient descent (momentum, weight decay)
#' or Adam / AdamW.
#' Forward, backward and the parameter update are traced and compiled into one program: on a GPU
#' it runs as one CUDA graph launch per step.
#'
#' @param loss A function of the parameters and the data (by name) returning one number.
#' @param params Named list of initial parameter arrays.
#' @param data Named list of data arrays (one sample per row for matrices, per element for
#'   vectors).
#' @param steps Number of optimizer steps.
#' @param batch_size Samples per step (default: all); batches cycle through the data in order.
#'   When it does not divide the samples, each epoch ends with a smaller batch of the rest (a
#'   second compiled step), as torch's DataLoader does.
#' @param drop_last `TRUE`: drop that smaller last batch instead (each epoch then leaves the
#'   remaining samples out, as `DataLoader(drop_last = TRUE)`). A [dataloader()]'s own setting
#'   is used when `data` is one.
#' @param optimizer `"sgd"`, `"adam"` or `"adamw"` (PyTorch's semantics; AdamW's weight decay is
#'   decoupled).
#' @param lr,momentum,weight_decay Learning rate (a number, or a schedule: a function of the
#'   step number 1, 2, ... returning it; either way an input of the compiled step, so a schedule
#'   compiles nothing new), SGD momentum, weight decay.
#' @param betas,eps Adam's coefficients.
#' @param dtype `"float32"` (default) or `"float64"`.
#' @param tf32 `TRUE` (default): on a GPU with tensor cores, the step's float32 matrix products
#'   and convolutions use TF32 (float32 values and sums, products of inputs rounded to 10 mantissa
#'   bits), as TensorFlow and JAX train by default and PyTorch does for convolutions; about 4x
#'   faster on an H200. `FALSE`: exact float32 products. Training steps follow this argument, not
#'   `rf_options(tf32 =)` (which applies to [rf_jit()] and tensor code); on the CPU, and in
#'   float64, products are exact either way.
#' @param precision `"32"` (default): float32 throughout (with `tf32`). `"bf16-mixed"`: mixed
#'   precision as Lightning's and luz's setting of that name (torch's autocast): every matrix
#'   product and convolution of the step, forward and backward, runs in bfloat16 with float32
#'   accumulation (its inputs cast, its result rounded to bfloat16 and cast back), while
#'   everything else (activations' math, reductions, softmax, normalization statistics, the loss)
#'   and the parameters and optimizer state stay float32 (master weights). Needs `dtype =
#'   "float32"`. On the CPU the bfloat16 products are exact-rounded emulations (slow).
#'   `"16-mixed"`: the same in float16, with dynamic loss scaling as torch's `GradScaler` (the
#'   loss scaled by 2^16 at first; a step whose gradients are not finite is skipped and halves
#'   the scale, 2000 finite steps in a row double it; all on the device; Adam's step number counts
#'   the steps taken); the result's `loss_scale` is the final scale, and a scale that underflows
#'   to 0 gives an `rfuse_loss_scale_warning`.
#' @param progress Show a progress bar (the cli package).
#' @param device Where the loop runs (default [rf_default_device()]). Parameters, gradients,
#'   optimizer state (momentum, Adam's moments and step count), the data and the loss history
#'   stay there for the whole loop; values come back to R once, at the end.
#' @param shuffle Draw each epoch's batches in a new random order (on the device).
#' @param write_back A function called with the trained parameters (a named list of arrays) when
#'   the loop ends, and with the last completed step's parameters when it is interrupted
#'   (`rf_fit()` writes them into the model this way).
#' @param strategy `"none"` (default), or `"ddp"`: data-parallel training, one process per GPU
#'   (PyTorch's DistributedDataParallel). Each process is a rank of a process group that NCCL
#'   connects: it reads `WORLD_SIZE`, `RANK`, `MASTER_ADDR` and `MASTER_PORT` from the environment
#'   (as [rf_launch()] and torchrun set them; without them, a group of one), takes rank 0's initial
#'   parameters, trains on its shard of every epoch (sample `rank + 1`, then every
#'   `WORLD_SIZE`-th, of the epoch's order, as torch's DistributedSampler; shuffled epochs use
#'   one permutation on every rank, from `getOption("rfuse.ddp_seed", 0)` and the epoch), and
#'   averages the gradients over the ranks inside the compiled step (in buckets, overlapping the
#'   backward pass) before the optimizer update, so every rank ends with the same parameters. The
#'   loss history is averaged over the ranks. On the CPU the group has one rank. The rendezvous
#'   waits `getOption("rfuse.ddp_timeout", 300)` seconds for every rank.
#' @param devices With `strategy = "ddp"`: the number of processes (GPUs) expected, checked
#'   against `WORLD_SIZE` (default: `WORLD_SIZE`, or 1). More than one needs the processes started
#'   by [rf_launch()] (or another launcher).
#' @param compiled A file that keeps the compiled step (`NULL`, the default: none), for training
#'   again in a new R session without tracing or compiling. When the file does not exist, the step
#'   is traced and compiled as usual and also written there as an ahead-of-time artifact (see
#'   [rf_export()]; for this machine's GPU, or for its CPU when training there). When it exists, the
#'   step is loaded from it through rfuse's runtime library (no trace, no pass pipeline, no NVRTC or
#'   LLVM), once rfuse has checked that it was written for a call like this one: the parameters',
#'   data batches' and buffers' names, dtypes and dims, `dtype`, `optimizer` and its settings,
#'   `tf32` and `precision`, and with `rf_fit()` the values the step reads of the model as
#'   constants (frozen parameters, other buffers and numbers, train/eval mode) (else an
#'   `rfuse_artifact_error` names the difference). The file holds the step as it was traced: rfuse
#'   does not compare the code of `loss` (or of `rf_fit()`'s model), nor values `loss` reads from
#'   outside, with it, so remove the file after changing those. An epoch's smaller last batch has its
#'   own step in the file too; `strategy = "ddp"` is not supported. The learning rate (and its
#'   schedule) and `steps` may differ from the exporting call's.
#' @return An object of class `rf_training`: `params` (trained), `history` (the loss per step),
#'   `step_seconds` (wall time per step after the first, which traces and compiles), `device`,
#'   with `precision = "16-mixed"` `loss_scale` (the final loss scale), and with `strategy =
#'   "ddp"`, `distributed` (`rank`, `world_size`, `backend`).
#'   `plot()` draws the loss curve.
#' @examples
#' x <- matrix(rnorm(200), 100); y <- x %*% c(2, -1) + 0.5
#' fit <- rf_train(function(w, b, x, y) nnf_mse_loss(x %*% w + b, y),
#'                 params = list(w = matrix(0, 2, 1), b = 0), data = list(x = x, y = y),
#'                 steps = 200, lr = 0.1, progress = FALSE)
#' fit$params$w
#' @export
rf_train <- function(loss, params, data = list(), steps = 100, batch_size = NULL,
                     optimizer = c("sgd", "adam", "adamw"), lr = 0.01, momentum = 0,
                     weight_decay = 0, betas = c(0.9, 0.999), eps = 1e-8,
                     dtype = c("float32", "float64"), tf32 = TRUE, progress = interactive(),
                     device = rf_default_device(), shuffle = FALSE, write_back = NULL,
                     strategy = c("none", "ddp"), devices = NULL, drop_last = FALSE,
                     precision = c("32", "bf16-mixed", "16-mixed"), compiled = NULL) {
  train_loop(loss, params, data, steps, batch_size, optimizer, lr, momentum, weight_decay, betas, eps, dtype,
             tf32, progress, device, shuffle, write_back, strategy = strategy, devices = devices,
             drop_last = drop_last, precision = precision, compiled = compiled)
}

# rf_train()'s `precision` as the step's autocast dtype ("none", "bf16", "f16") and whether it
# scales the loss (float16), or a classed refusal.
training_precision <- function(precision, dtype) {
  choices <- c("32", "bf16-mixed", "16-mixed")
  if (identical(precision, choices)) precision <- "32" # the default, as match.arg
  if (!is.character(precision) || length(precision) != 1 || is.na(precision) || !precision %in% choices)
    rf_abort("rfuse_type_error", sprintf("`precision` is %s; it must be one of \"32\", \"bf16-mixed\" and \"16-mixed\"",
                                         paste(format(precision), collapse = " ")))
  if (precision == "32") return(list(autocast = "none", loss_scale = FALSE))
  if (dtype != "float32")
    rf_abort("rfuse_type_error", sprintf(
      "precision = \"%s\" keeps float32 master weights: it needs dtype = \"float32\", not \"%s\"", precision, dtype))
  if (precision == "bf16-mixed") return(list(autocast = "bf16", loss_scale = FALSE))
  # Float16 needs its loss scaled (float16's range ends at 65504, and small gradients underflow).
  list(autocast = "f16", loss_scale = TRUE)
}

# strategy = "ddp": this process's rank in the group the launcher's environment describes
# (WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT; none: a group of one), started for the loop.
ddp_start <- function(devices, device) {
  env <- Sys.getenv(c("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"), unset = NA)
  number <- function(name, default) {
    v <- env[[name]]
    if (is.na(v) || !nzchar(v)) return(default)
    k <- suppressWarnings(as.integer(v))
    if (is.na(k) || as.character(k) != trimws(v))
      rf_abort("rfuse_distributed_error", sprintf("the environment's %s is '%s', not an integer", name, v))
    k
  }
  launched <- !is.na(env[["WORLD_SIZE"]])
  world <- number("WORLD_SIZE", 1L)
  rank <- number("RANK", 0L)
  if (!is.null(devices)) {
    if (!is.numeric(devices) || length(devices) != 1 || is.na(devices) || devices < 1 || devices != round(devices))
      rf_abort("rfuse_type_error", "`devices` must be a positive whole number")
    if (devices != world && !launched)
      rf_abort("rfuse_distributed_error", sprintf(paste0(
        "strategy = \"ddp\" with devices = %d runs one process per GPU: start the script with ",
        "rf_launch(\"script.R\", devices = %d) (or a launcher that sets WORLD_SIZE, RANK, MASTER_ADDR ",
        "and MASTER_PORT)"), as.integer(devices), as.integer(devices)))
    if (devices != world)
      rf_abort("rfuse_distributed_error", sprintf("devices = %d, but this process was launched as rank %d of WORLD_SIZE = %d",
                                                  as.integer(devices), rank, world))
  }
  timeout <- getOption("rfuse.ddp_timeout", 300)
  if (!is.numeric(timeout) || length(timeout) != 1 || is.na(timeout) || timeout <= 0)
    rf_abort("rfuse_option_error", "option rfuse.ddp_timeout must be a positive number of seconds")
  addr <- if (is.na(env[["MASTER_ADDR"]]) || !nzchar(env[["MASTER_ADDR"]])) "127.0.0.1" else env[["MASTER_ADDR"]]
  rf_guard(.rf_process_group_init(rank, world, addr, number("MASTER_PORT", 29500L), as.double(timeout), device))
  .rf_process_group_info()
}

# The samples of an epoch this rank trains on: all of them in order (or shuffled by R's generator)
# without a group; with one, its share of an order every rank draws alike (torch's
# DistributedSampler: padded to a multiple of the world size by repeating from the start).
epoch_rows <- function(n, shuffle, ddp, epoch) {
  world <- if (is.null(ddp)) 1L else ddp$world_size
  if (world == 1L) return(if (shuffle) sample.int(n) else seq_len(n))
  order <- if (shuffle) seeded_permutation(n, getOption("rfuse.ddp_seed", 0) + epoch) else seq_len(n)
  total <- ceiling(n / world) * world
  rep_len(order, total)[seq(ddp$rank + 1L, total, by = world)]
}

# sample.int(n) from set.seed(seed), leaving the user's generator as it was.
seeded_permutation <- function(n, seed) {
  had <- exists(".Random.seed", envir = globalenv(), inherits = FALSE)
  old <- if (had) get(".Random.seed", envir = globalenv(), inherits = FALSE)
  on.exit(if (had) assign(".Random.seed", old, envir = globalenv()) else rm(".Random.seed", envir = globalenv()))
  set.seed(seed)
  sample.int(n)
}

# rf_train()'s loop, and rf_fit()'s: `buffers` (a named list of arrays) are inputs of the loss that
# its traced code may replace with new values at every step (batch norms' running statistics: see
# track_batch_stats); they alternate between two sets on the device like the parameters, and
# `write_buffers(values, steps_done, replaced)` gets the last completed step's (and the names of
# those the steps replaced) at the end or on an interrupt.
train_loop <- function(loss, params, data, steps, batch_size, optimizer, lr, momentum, weight_decay, betas, eps,
                       dtype, tf32, progress, device, shuffle, write_back, buffers = list(), write_buffers = NULL,
                       strategy = "none", devices = NULL, drop_last = FALSE, precision = "32",
                       download = tensor_like, compiled = NULL, key_extra = NULL) {
  optimizer <- match.arg(optimizer, c("sgd", "adam", "adamw"))
  dtype <- match.arg(dtype, c("float32", "float64"))
  mixed <- training_precision(precision, dtype)
  strategy <- match.arg(strategy, c("none", "ddp"))
  device <- check_device(device)
  if (device == "cuda") .rf_warm_libraries() # (cuDNN's and cuBLASLt's start overlaps the trace below)
  if (!is.null(devices) && strategy != "ddp")
    rf_abort("rfuse_type_error", "`devices` is for strategy = \"ddp\" (data-parallel training)")
  if (!is.null(compiled)) {
    if (!is.character(compiled) || length(compiled) != 1 || is.na(compiled) || !nzchar(compiled))
      rf_abort("rfuse_type_error", "`compiled` must be one file name")
    if (strategy != "none")
      rf_abort("rfuse_unsupported", "a compiled step file (`compiled`) trains in one process: not with strategy = \"ddp\"")
  }
  if (!is.list(params) || is.null(names(params)) || any(!nzchar(names(params))))
    rf_abort("rfuse_type_error", "`params` must be a named list of numeric arrays")
  if (inherits(data, "rf_dataloader")) {
    loader <- data
    data <- loader$dataset$tensors
    batch_size <- batch_size %||% loader$batch_size
    shuffle <- loader$shuffle
    drop_last <- loader$drop_last
  }
  if (!is.logical(drop_last) || length(drop_last) != 1 || is.na(drop_last))
    rf_abort("rfuse_type_error", "`drop_last` must be TRUE or FALSE")
  if (length(data) && (!is.list(data) || is.null(names(data))))
    rf_abort("rfuse_type_error", "`data` must be a named list (or a dataloader())")
  if (!is.numeric(steps) || length(steps) != 1 || is.na(steps) || steps < 1)
    rf_abort("rfuse_type_error", "`steps` must be a positive number")
  if (!is.function(lr) && !(is.numeric(lr) && length(lr) == 1 && !is.na(lr) && lr >= 0))
    rf_abort("rfuse_type_error", "`lr` must be a non-negative number or a function of the step number")
  # The learning rate is an input of the step program (a schedule runs the same program).
  if (!is.logical(tf32) || length(tf32) != 1 || is.na(tf32))
    rf_abort("rfuse_type_error", "`tf32` must be TRUE or FALSE")
  n <- if (length(data)) NROW(data[[1]]) else 1L
  for (nm in names(data)) if (NROW(data[[nm]]) != n)
    rf_abort("rfuse_shape_error", sprintf("data '%s' has %d samples but '%s' has %d", nm, NROW(data[[nm]]),
                                          names(data)[1], n))
  # Data-parallel: this process's rank; the step averages the gradients over the ranks.
  ddp <- if (strategy == "ddp") ddp_start(devices, device)
  if (!is.null(ddp)) on.exit(.rf_process_group_destroy(), add = TRUE)
  world <- if (is.null(ddp)) 1L else ddp$world_size
  mode <- list(optimizer = optimizer, lr = 0, momentum = momentum, weight_decay = weight_decay,
               betas = betas, eps = eps, lr_input = TRUE, tf32 = tf32,
               all_reduce = if (is.null(ddp)) "none" else "mean", autocast = mixed$autocast,
               loss_scale = mixed$loss_scale)
  state <- grad_state(loss, names(params), dtype, "default", character(), mode)
  n_rank <- as.integer(ceiling(n / world)) # the samples of an epoch this rank trains on
  bs <- as.integer(batch_size %||% n_rank)
  if (bs < 1 || bs > n_rank)
    rf_abort("rfuse_type_error", sprintf("`batch_size` must be in 1..%d%s", n_rank,
                                         if (world > 1) sprintf(" (the samples per rank of %d)", world) else ""))
  batches <- max(1L, n_rank %/% bs)
  # The epoch's smaller last batch, unless dropped: a second step program, traced for its size.
  tail_n <- if (drop_last) 0L else n_rank - batches * bs
  spe <- batches + (tail_n > 0L) # steps per epoch
  nb <- state_buffers(mode)
  steps <- as.integer(steps)
  # Everything the loop touches lives on the device: parameters and optimizer state in two
  # alternating sets (each step reads one and writes the other, so on a GPU each set's step is a
  # replayed CUDA graph), the data (uploaded once), two batch buffers, the loss history.
  to_dev <- function(v) if (is_tensor(v)) tensor_to(v, device, dtype) else
    rf_tensor(if (is.logical(v)) v * 1 else unclass(v), dtype = dtype, device = device)
  P <- list(lapply(params, to_dev), NULL)
  B <- list(lapply(buffers, to_dev), NULL)
  # Every rank starts from rank 0's parameters and buffers (as DistributedDataParallel does).
  if (world > 1) rf_guard(.rf_broadcast(lapply(c(P[[1]], B[[1]]), tensor_buffer), 0L))
  S <- list(lapply(seq_len(nb), function(j) lapply(P[[1]], zeros_like)), NULL) # distinct tensors per kind
  # Data that fit the budget go to the device once; larger data stream a batch per step from R
  # memory (through pinned staging, overlapping the step before).
  data_bytes <- sum(vapply(data, function(d) if (is_tensor(d)) d@env$len else length(d), 0)) * (if (dtype == "float64") 8 else 4)
  stream <- device == "cuda" && data_bytes > data_budget()
  D <- if (stream) lapply(data, function(d) if (is_tensor(d)) tensor_values(d) else d) else lapply(data, to_dev)
  empty <- function(dt, len, rdim) make_tensor(buf = rf_guard(.rf_tensor_empty(tshape(rdim, len), ir_dtype(dt), device)),
                                               dtype = dt, device = device, rdim = rdim, len = len)
  empty_like <- function(d, len, rdim) empty(d@env$dtype, len, rdim)
  whole <- batches == 1L && tail_n == 0L && !shuffle && bs == n && !stream && world == 1L
  batch_sets <- function(size) if (stream) lapply(1:2, function(k) lapply(D, function(d) {
    rd <- if (is.null(dim(d))) NULL else c(size, dim(d)[-1])
    empty(dtype, length(d) / n * size, rd)
  })) else lapply(1:2, function(k) lapply(D, function(d)
    empty_like(d, d@env$len / n * size, if (is.null(d@env$rdim)) NULL else c(size, d@env$rdim[-1]))))
  X <- if (whole) list(D, D) else batch_sets(bs)
  XT <- if (tail_n > 0L) batch_sets(tail_n)
  adam <- optimizer != "sgd"
  step_no <- if (adam) {
    table <- rf_tensor(as.double(seq_len(steps)), dtype = dtype, device = device)
    list(table = table, t = lapply(1:2, function(k) empty_like(table, 1, NULL)))
  }
  history <- empty_like(P[[1]][[1]], steps, NULL)
  lr_values <- if (is.function(lr)) vapply(seq_len(steps), function(s) as.double(lr(s)), 0) else lr
  if (anyNA(lr_values) || any(lr_values < 0))
    rf_abort("rfuse_type_error", "the learning-rate schedule gave a negative or missing value")
  lr_table <- rf_tensor(lr_values, dtype = dtype, device = device) # uploaded once
  lr_t <- lapply(1:2, function(k) { t <- empty(dtype, 1, NULL); if (!is.function(lr))
    rf_guard(.rf_tensor_copy_elements(tensor_buffer(t), 0, tensor_buffer(lr_table), 0, 1)); t })
  bar <- if (isTRUE(progress) && requireNamespace("cli", quietly = TRUE))
    cli::cli_progress_bar("Training", total = steps) else NULL
  # Traced and compiled once (every step has the same signature); then the second set and what
  # each step passes.
  make_entry <- function() grad_entry(state, c(P[[1]], X[[1]], B[[1]]))$entry
  make_tail <- if (tail_n > 0L) function() grad_entry(state, c(P[[1]], XT[[1]], B[[1]]))$entry
  kept <- if (!is.null(compiled))
    compiled_step(compiled, c(step_key(mode, dtype, P[[1]], X[[1]], B[[1]], if (tail_n > 0L) XT[[1]]), key_extra),
                  make_entry, device, make_tail)
  entry <- if (is.null(compiled)) make_entry() else kept$main
  tr <- entry$trace
  # Labels the step one-hot encodes are checked once, in R's data (see class_targets).
  for (c in tr$label_checks) {
    j <- c$arg - length(P[[1]])
    if (j >= 1 && j <= length(data))
      check_label_values(data[[j]], c$classes, if (names(data)[j] == ".target") "the class labels `y`"
                         else sprintf("class labels ('%s')", names(data)[j]))
  }
  P[[2]] <- lapply(P[[1]], function(p) empty_like(p, p@env$len, p@env$rdim))
  S[[2]] <- lapply(S[[1]], function(set) lapply(set, function(p) empty_like(p, p@env$len, p@env$rdim)))
  L <- lapply(1:2, function(j) empty_like(history, 1, NULL))
  # The step's auxiliary outputs: new values of buffers (into the other set's buffer tensors), or
  # batch statistics for R-side updates (into histories, see aux_buffers).
  buffer_ids <- tr$input_ids[match(length(P[[1]]) + length(X[[1]]) + seq_along(buffers), tr$input_index)]
  replaced <- integer()
  for (a in tr$aux) if (!is.null(a$replaces)) replaced <- c(replaced, match(a$replaces, buffer_ids))
  if (anyNA(replaced)) rf_abort("rfuse_error", "internal: a traced update replaces no buffer of the step")
  B[[2]] <- B[[1]] # buffers the step only reads are the same tensors in both sets
  for (i in replaced) B[[2]][[i]] <- empty_like(B[[1]][[i]], B[[1]][[i]]@env$len, B[[1]][[i]]@env$rdim)
  aux <- aux_buffers(Filter(function(a) is.null(a$replaces), tr$aux), empty, dtype)
  aux_outputs <- function(j) { # in the order of tr$aux: set j's step writes set 3 - j's buffers
    out <- list()
    k <- 0L
    r <- 0L
    for (a in tr$aux) {
      if (is.null(a$replaces)) {
        out <- c(out, aux$out[[j]][k + seq_along(a$ids)])
        k <- k + length(a$ids)
      } else {
        out <- c(out, B[[3L - j]][replaced[r + seq_along(a$ids)]])
        r <- r + length(a$ids)
      }
    }
    out
  }
  # Random inputs: drawn by R's generator into tensors of the set. When they are all dropout
  # keys (two integers a step each) and the batches live on the device, R draws every step's keys
  # up front into tables the loop reads from on the device (as it reads the step number), so the
  # steps still run in chunks without R in between; else R feeds each step.
  masks <- lapply(1:2, function(j) lapply(tr$random, function(r) empty(r_dtype(r$dtype), r$len, r$rdim)))
  keyed <- length(tr$random) > 0 && !stream && all(vapply(tr$random, function(r) r$kind == "seed", TRUE))
  key_tables <- if (keyed) lapply(seq_along(tr$random), function(i) {
    list(table = rf_tensor(draw_seed(steps), dtype = "int32", device = device), values = list(masks[[1]][[i]], masks[[2]][[i]]))
  })
  # Float16's dynamic loss scale (torch's GradScaler: 2^16 at first, halved after a step whose
  # gradients are not finite, which the step skips, doubled after 2000 finite steps in a row) and
  # its count of finite steps: state of the step, alternating like the parameters.
  SC <- if (mixed$loss_scale) list(list(rf_tensor(65536, dtype = dtype, device = device), rf_tensor(0, dtype = dtype, device = device)),
                                   lapply(1:2, function(i) empty(dtype, 1, NULL)))
  # With loss scaling, Adam's step number is state too: the count of steps taken, which a skipped
  # step leaves as it was (rfuse-autodiff's loss-scale); otherwise a per-step table gives it.
  counted <- adam && mixed$loss_scale
  CN <- if (counted) list(rf_tensor(0, dtype = dtype, device = device), empty(dtype, 1, NULL))
  step_input <- function(j) if (counted) list(CN[[j]]) else if (adam) list(step_no$t[[j]])
  set_inputs <- lapply(1:2, function(j) c(c(P[[j]], X[[j]], B[[j]])[tr$input_index], masks[[j]], unname(unlist(S[[j]], recursive = FALSE)),
                                          step_input(j), list(lr_t[[j]]), SC[[j]]))
  # Set j's step writes the other set (and its own loss and batch statistics).
  set_outputs <- lapply(1:2, function(j) c(list(L[[j]]), P[[3L - j]], unlist(S[[3L - j]], recursive = FALSE),
                                           aux_outputs(j), SC[[3L - j]], if (counted) list(CN[[3L - j]])))
  # The last batch's step: traced for its size; its sets share everything but the batch (and
  # its dropout masks) with the main ones.
  if (tail_n > 0L) {
    tail_entry <- if (is.null(compiled)) make_tail() else kept$tail
    ttr <- tail_entry$trace
    if (!identical(ttr$input_index, tr$input_index) || length(ttr$aux) != length(tr$aux) ||
        length(ttr$random) != length(tr$random))
      rf_abort("rfuse_unsupported", sprintf(paste0("the step traced for the last batch of %d samples differs from the ",
                                                   "one for %d (use drop_last = TRUE)"), tail_n, bs))
    # (With keys from tables, the last batch's step reads the main sets' key tensors.)
    tmasks <- if (keyed) masks else lapply(1:2, function(j) lapply(ttr$random, function(r) empty(r_dtype(r$dtype), r$len, r$rdim)))
    tail_inputs <- lapply(1:2, function(j) c(c(P[[j]], XT[[j]], B[[j]])[ttr$input_index], tmasks[[j]],
                                             unname(unlist(S[[j]], recursive = FALSE)),
                                             step_input(j), list(lr_t[[j]]), SC[[j]]))
  }
  bufs <- function(ts) lapply(ts, tensor_buffer)
  gathered <- !whole && !stream
  tables <- c(if (adam && !counted) list(list(table = step_no$table, values = step_no$t)),
              if (is.function(lr)) list(list(table = lr_table, values = lr_t)), key_tables)
  loop <- rf_guard(.rf_training_loop(
    entry$program, bufs(set_inputs[[1]]), bufs(set_inputs[[2]]), bufs(set_outputs[[1]]), bufs(set_outputs[[2]]),
    if (gathered) bufs(D) else list(), if (gathered) bufs(X[[1]]) else list(), if (gathered) bufs(X[[2]]) else list(),
    bs, batches, bufs(lapply(tables, `[[`, "table")), bufs(lapply(tables, function(t) t$values[[1]])),
    bufs(lapply(tables, function(t) t$values[[2]])), tensor_buffer(history), tensor_buffer(L[[1]]),
    tensor_buffer(L[[2]]), if (aux$n) bufs(aux$hist) else list(), if (aux$n) bufs(aux$out[[1]]) else list(),
    if (aux$n) bufs(aux$out[[2]]) else list(), device,
    if (tail_n > 0L) tail_entry$program, if (tail_n > 0L) bufs(tail_inputs[[1]]) else list(),
    if (tail_n > 0L) bufs(tail_inputs[[2]]) else list(), if (tail_n > 0L) bufs(set_outputs[[1]]) else list(),
    if (tail_n > 0L) bufs(set_outputs[[2]]) else list(), if (tail_n > 0L && gathered) bufs(XT[[1]]) else list(),
    if (tail_n > 0L && gathered) bufs(XT[[2]]) else list(), tail_n))
  # R feeds each step itself only when it must: batches streamed from R memory, random inputs
  # other than dropout keys in tables.
  per_step <- stream || (length(tr$random) > 0 && !keyed)
  done <- 0L
  last <- 1L
  # The values the last completed step wrote into a set's tensors, shaped like the R arrays given.
  # (the parameters through `download`: rf_fit's filters come back in R's layout)
  latest_of <- function(sets, like, get = download) stats::setNames(lapply(seq_along(like), function(i)
    get(sets[[last]][[i]], like[[i]], names(like)[i])), names(like))
  latest <- function() latest_of(P, params)
  latest_buffers <- function() latest_of(B, buffers, tensor_like)
  # An interrupt (or an error) leaves write_back() the last completed step's parameters (and
  # write_buffers() its buffers).
  on.exit(if (!is.null(write_back) && done > 0) write_back(latest()), add = TRUE)
  on.exit(if (!is.null(write_buffers) && done > 0) write_buffers(latest_buffers(), done, names(buffers)[replaced]),
          add = TRUE)
  on.exit(aux$flush(), add = TRUE, after = FALSE) # before write_back
  t_first <- NULL
  s <- 1L
  while (s <= steps) {
    k <- 2L - s %% 2L   # this step's set: 1, 2, 1, ...
    b <- (s - 1L) %% spe
    last_batch <- tail_n > 0L && b == batches
    if (b == 0L && (stream || gathered)) {
      rows <- epoch_rows(n, shuffle, ddp, (s - 1L) %/% spe)
      if (gathered) rf_guard(.rf_training_loop_rows(loop, tensor_buffer(rf_tensor(rows - 1L, dtype = "int32", device = device))))
    }
    # The chunk of steps run without R: to the end (step 1 alone, to time the others), the epoch
    # (a shuffled one draws a new order) and the room left in the batch-statistics history.
    e <- if (s == 1L || per_step) s else min(steps, s + aux$room() - 1L,
                                             if (shuffle && gathered) s + spe - b - 1L else steps)
    if (stream) {
      sel <- rows[b * bs + seq_len(if (last_batch) tail_n else bs)]
      for (nm in names(D)) rf_guard(.rf_tensor_copy_from_r(tensor_buffer((if (last_batch) XT else X)[[k]][[nm]]),
                                                           take_rows(D[[nm]], sel)))
    }
    rnd <- if (keyed) list() else if (last_batch) ttr$random else tr$random
    for (i in seq_along(rnd))
      rf_guard(.rf_tensor_copy_from_r(tensor_buffer((if (last_batch) tmasks else masks)[[k]][[i]]),
                                      as.vector(draw_random(rnd[[i]]))))
    ran <- as.integer(rf_guard(.rf_training_loop_run(loop, s, e, aux$slot(), 0.02)))
    aux$kept(s, ran)
    done <- ran
    last <- 2L - (done + 1L) %% 2L # the set the next step reads: the last step's outputs
    if (s == 1L) { .rf_synchronize(); t_first <- Sys.time() }
    if (!is.null(bar)) cli::cli_progress_update(id = bar, set = done)
    Sys.sleep(0) # R looks at the user's interrupt (and a time limit) here, every 20 ms at most
    s <- done + 1L
  }
  aux$flush()
  if (world > 1) rf_guard(.rf_all_reduce(list(tensor_buffer(history)), TRUE)) # the ranks' mean loss
  .rf_synchronize()
  step_s <- if (steps > 1) as.double(difftime(Sys.time(), t_first, units = "secs")) / (steps - 1) else NA
  if (!is.null(bar)) cli::cli_progress_done(id = bar)
  on.exit()
  if (!is.null(ddp)) on.exit(.rf_process_group_destroy(), add = TRUE) # the group ends with the loop
  trained <- latest()
  if (!is.null(write_back)) write_back(trained)
  if (!is.null(write_buffers)) write_buffers(latest_buffers(), done, names(buffers)[replaced])
  loss_scale <- if (mixed$loss_scale) as.vector(tensor_values(SC[[last]][[1]]))
  if (isTRUE(loss_scale == 0))
    warning(structure(class = c("rfuse_loss_scale_warning", "warning", "condition"), list(message = paste0(
      "the float16 loss scale underflowed to 0: the gradients were not finite at any scale, so the last ",
      "steps were skipped and the parameters are those of the last finite step"), call = NULL)))
  structure(list(params = trained, history = as.vector(tensor_values(history)),
                 step_seconds = step_s, device = device, loss_scale = loss_scale,
                 distributed = if (!is.null(ddp)) ddp[c("rank", "world_size", "backend")]), class = "rf_training")
}

# A step program's auxiliary outputs that R applies (`entries`: batch statistics, for running
# statistics that are not the step's own state) in a training loop: written into two alternating
# sets of tensors (so the step stays one replayed graph), copied on the device into a history of
# up to `chunk` steps (by the loop: slot() is where the next step goes, room() how many more fit,
# kept() records the steps run), and handed to the updates, in step order, when the history is
# full, at the end, or on an interrupt: no download, so no wait for the device, per step.
aux_buffers <- function(entries, empty, dtype, chunk = 64L) {
  lens <- as.integer(unlist(lapply(entries, function(a) a$lens)))
  n <- length(lens)
  if (n != length(unlist(lapply(entries, `[[`, "ids"))))
    rf_abort("rfuse_error", "internal: the batch statistics' shapes are unknown")
  self <- new.env(parent = emptyenv())
  self$n <- n
  self$pending <- integer()
  self$slot <- function() length(self$pending)
  self$room <- function() if (n) chunk - length(self$pending) else Inf
  self$flush <- function() invisible()
  self$kept <- function(first, last) {
    if (!n) return(invisible())
    self$pending <- c(self$pending, seq.int(first, last))
    if (length(self$pending) >= chunk) self$flush()
  }
  if (!n) return(self)
  self$out <- lapply(1:2, function(k) lapply(lens, function(len) empty(dtype, len, NULL)))
  self$hist <- lapply(lens, function(len) empty(dtype, len * chunk, NULL))
  self$flush <- function() {
    m <- length(self$pending)
    if (!m) return(invisible())
    values <- lapply(self$hist, function(h) as.vector(tensor_values(h)))
    for (slot in seq_len(m)) {
      j <- 0L
      for (a in entries) {
        vals <- lapply(seq_along(a$ids), function(q) {
          jj <- j + q
          values[[jj]][(slot - 1L) * lens[jj] + seq_len(lens[jj])]
        })
        a$update(vals)
        j <- j + length(a$ids)
      }
    }
    self$pending <- integer()
    invisible()
  }
  self
}

# Bytes of training data rf_train() keeps on the GPU: options(rfuse.data_budget), else half the
# device memory free now.
data_budget <- function() {
  b <- getOption("rfuse.data_budget")
  if (!is.null(b)) {
    if (!is.numeric(b) || length(b) != 1 || is.na(b) || b < 0)
      rf_abort("rfuse_option_error", "options(rfuse.data_budget) must be a number of bytes")
    return(b)
  }
  .rf_device_memory()[["free"]] / 2
}

# Rows (the first index) of a vector, matrix or array.
take_rows <- function(d, rows) {
  if (is.null(dim(d))) return(d[rows])
  do.call(`[`, c(list(d, rows), rep(list(TRUE), length(dim(d)) - 1L), list(drop = FALSE)))
}

#' Train a module
#'
#' Fits an [nn_module()] to inputs `x` and targets `y`: the model's forward pass, the loss, the
#' backward pass and the optimizer update are traced and compiled into one program per step (see
#' [rf_train()], which does the work). The trained parameters are written back into the model.
#' Batch-norm layers normalize by each batch's statistics while training, and every step updates
#' their running statistics as torch does: they are state of the step program, kept on the device
#' with the parameters (with `momentum = NULL`, the cumulative average, the step returns the batch
#' statistics and R updates them).
#'
#' @param model An [nn_module()] (in training mode unless you called `$eval()`).
#' @param x Inputs, one sample per row (first index); or a [dataloader()] of inputs and targets
#'   (then `y` is not given).
#' @param y Targets: class labels 1..K (or a factor) for [nnf_cross_entropy()], which become a
#'   one-hot matrix; otherwise an array passed to `loss` as it is.
#' @param loss A function of the model's output and the targets returning one number.
#' @param ... Passed to [rf_train()]: `steps`, `batch_size`, `drop_last`, `optimizer`, `lr`, `momentum`,
#'   `weight_decay`, `betas`, `eps`, `dtype`, `tf32`, `precision`, `progress`, `device`, `shuffle`,
#'   `compiled` (the compiled step kept in a file, for new sessions), `strategy` and `devices` (`strategy = "ddp"`: data-parallel training over the processes
#'   [rf_launch()] starts, one per GPU; every rank's model ends with the trained weights).
#' @return The [rf_train()] result (`history`, and `params` by name); the model is updated in
#'   place.
#' @examples
#' set.seed(1)
#' x <- matrix(rnorm(200), 100); y <- ifelse(x[, 1] > x[, 2], 1, 2)
#' net <- nn_sequential(nn_linear(2, 8), nn_relu(), nn_linear(8, 2))
#' fit <- rf_fit(net, x, y, steps = 100, lr = 0.5, progress = FALSE)
#' mean(max.col(net(x)) == y)
#' @export
rf_fit <- function(model, x, y = NULL, loss = nnf_cross_entropy, ...) {
  if (!inherits(model, "nn_module"))
    rf_abort("rfuse_type_error", "`model` must be an nn_module")
  loader <- NULL
  if (inherits(x, "rf_dataloader")) { # its first array is the input, its second the target
    loader <- x
    arrays <- x$dataset$tensors
    if (length(arrays) < 2) rf_abort("rfuse_type_error", "rf_fit() needs a dataloader of inputs and targets")
    x <- arrays[[1]]; y <- arrays[[2]]
  }
  takes_labels <- identical(loss, nnf_cross_entropy) || identical(loss, nnf_nll_loss) ||
    inherits(loss, c("nn_cross_entropy_loss", "nn_nll_loss"))
  # Labels stay labels: the traced loss one-hot encodes them against the model's output width
  # (a batch, or a whole data set, may lack the highest class), and their values are checked
  # against it once (class_targets).
  if (takes_labels && is.null(dim(y)))
    y <- label_values(y)
  if (NROW(x) != NROW(y))
    rf_abort("rfuse_shape_error", sprintf("`x` has %d samples but `y` has %d", NROW(x), NROW(y)))
  # Frozen parameters ($requires_grad_(FALSE), nn_parameter(requires_grad = FALSE)) are constants.
  params <- Filter(function(p) !parameter_frozen(p), model$parameters)
  if (!length(params)) rf_abort("rfuse_type_error", "the model has no trainable parameters (all are frozen)")
  paths <- names(params)
  self <- attr(model, "self")
  # Batch norms' running statistics are the step's state too (see track_batch_stats).
  tracked <- running_stat_buffers(model)
  bpaths <- names(tracked)
  # loss(model(.input), .target) as a function of the parameters and buffers (named by path) and
  # the data.
  # Convolution filters train in the layout the step's convolutions read (see filter_layouts).
  layouts <- list()
  from_layout <- function(p, v) if (is.null(layouts[[p]])) v else t_permute(v, order(layouts[[p]]))
  f <- function(...) {
    a <- list(...)
    # (the running statistics' updates replace these inputs: see track_batch_stats)
    .rf_state$replace_buffers <- TRUE
    on.exit(.rf_state$replace_buffers <- NULL, add = TRUE)
    saved <- c(model$parameters, tracked)
    on.exit(for (p in c(paths, bpaths)) set_parameter(self, p, saved[[p]]), add = TRUE)
    for (p in paths) set_parameter(self, p, from_layout(p, a[[p]]))
    for (p in bpaths) set_parameter(self, p, a[[p]])
    loss(do.call(model, list(a$.input)), a$.target)
  }
  write_back <- function(trained) # (filters in R's layout already: see download below)
    for (p in paths) store_parameter(self, p, trained[[p]])
  # The running statistics the steps computed, and as many batches counted as steps were run by
  # the batch norms that tracked them (those in training mode).
  write_buffers <- function(values, done, replaced) {
    for (p in replaced) set_parameter(self, p, values[[p]])
    for (m in unique(sub("[.]?running_(mean|var)$", "", replaced))) {
      s <- if (nzchar(m)) module_at(self, m) else self
      s$num_batches_tracked <- s$num_batches_tracked + done
    }
  }
  data <- list(.input = x, .target = y)
  if (!is.null(loader)) {
    loader$dataset$tensors <- data
    data <- loader
  }
  # rf_train()'s arguments, matched and with its defaults, as R would for a call of it.
  settings <- rf_train
  body(settings) <- quote(as.list(environment()))
  a <- settings(f, lapply(params, function(p) if (is_tensor(p)) state_value(p) else p), data = data,
                write_back = write_back, ...)
  dtype <- match.arg(a$dtype, c("float32", "float64"))
  if (dtype == "float32") layouts <- filter_layouts(model, paths)
  # A filter goes to the device in its training layout straight from the parameter (no permuted
  # copy in R), and comes back in R's layout in one step; the other parameters as R arrays.
  device <- check_device(a$device)
  .rf_timeline_mark("rf_fit: the parameters into tensors begin")
  # cuDNN's and cuBLASLt's start (their libraries loaded, handles made) overlaps the parameters'
  # conversion below and the step's load or trace, instead of the first convolution's wait.
  if (device == "cuda") .rf_warm_libraries()
  # A parameter an earlier rf_fit left on the device (its values not yet read in R: see download
  # below) starts from a copy of that tensor there, with no trip through the host.
  for (p in names(a$params)) {
    v <- a$params[[p]]
    perm <- if (!is.null(layouts[[p]])) order(layouts[[p]])
    rdim <- if (!is.null(perm)) as.integer(dim(v)[layouts[[p]]]) else if (!is.null(dim(v))) as.integer(dim(v))
    kept <- if (is.double(v)) rf_guard(.rf_deferred_tensor_copy(v, ir_dtype(dtype), device, rdim, perm))
    a$params[[p]] <- if (!is.null(kept)) make_tensor(buf = kept, dtype = dtype, device = device, rdim = rdim, len = length(v))
      else if (is.null(perm) || !is.double(v)) unclass(v) else
      make_tensor(buf = rf_guard(.rf_tensor_from_r_permuted(v, layouts[[p]], ir_dtype(dtype), device)),
                  dtype = dtype, device = device, rdim = rdim, len = length(v))
  }
  .rf_timeline_mark("rf_fit: the parameters into tensors end")
  # The trained values become the parameters write_back stores (nn_parameter() takes them as
  # they are) without being read: doubles over the last step's tensors, made when R first reads
  # them (.rf_deferred_values; a filter then in R's layout). A fit's end allocates nothing in R,
  # and a later fit starts from the tensors.
  download <- function(t, like, p) {
    perm <- if (!is.null(layouts[[p]])) order(layouts[[p]])
    buf <- tensor_buffer(t)
    rdim <- if (!is.null(perm)) as.integer(t@env$rdim) else if (!is.null(dim(like))) as.integer(dim(like))
    out_dims <- if (!is.null(perm)) rdim[perm] else rdim
    # (the class nn_parameter() gives such doubles, so that it takes them as they are)
    rf_guard(.rf_deferred_values(buf, rdim, perm, c("rf_parameter", implicit_class(0, out_dims))))
  }
  # A step kept in a file holds what it read of the model besides these as constants: the file
  # must have been written for the same values.
  constants <- if (!is.null(a$compiled)) list(model_constants = model_constants(model, c(paths, bpaths)))
  train_loop(a$loss, a$params, a$data, a$steps, a$batch_size, a$optimizer, a$lr, a$momentum, a$weight_decay,
             a$betas, a$eps, dtype, a$tf32, a$progress, device, a$shuffle, a$write_back,
             buffers = tracked, write_buffers = write_buffers, strategy = a$strategy, devices = a$devices,
             drop_last = a$drop_last, precision = a$precision, download = download, compiled = a$compiled,
             key_extra = constants)
}

# A hash of what a traced training step reads of `model` as constants: every numeric or logical
# field of every module that is not at a path in `skip` (the trained parameters and the tracked
# running statistics, which are the step's inputs) — frozen parameters, other buffers, numbers —
# and each module's training flag.
model_constants <- function(model, skip) {
  vals <- list()
  tree <- module_tree(model)
  for (i in seq_along(tree)) { # (by position: the root's path is "")
    prefix <- names(tree)[i]
    s <- self_of(tree[[i]])
    vals[[paste0(prefix, "#training")]] <- isTRUE(s$training)
    for (nm in field_names(s)) {
      path <- if (nzchar(prefix)) paste0(prefix, ".", nm) else nm
      if (path %in% skip) next
      v <- buffer_value(get(nm, envir = s))
      if (is_tensor(v)) v <- tensor_values(v)
      if (is.numeric(v) || is.logical(v)) vals[[path]] <- unclass(v)
    }
  }
  .rf_hash(vals)
}

# The layout each trainable nn_conv2d filter trains in: R keeps a filter as dim c(O, I, kH, kW),
# the tensor [kW, kH, I, O], which every step would transpose for the convolution and whose
# gradient it would transpose back for the update. rfuse-channels-last runs float32 convolutions
# in NHWC with OHWI filters, so the step takes each filter as aperm(w, c(2, 4, 3, 1)) (dim c(I,
# kW, kH, O): the tensor [O, kH, kW, I]) and its traced code permutes it back, where the two
# transposes cancel; its update then fuses into the backward-filter call's epilogue. The momentum
# buffers follow the filters; fit$params and the model get R's layout back.
filter_layouts <- function(model, paths) {
  out <- list()
  tree <- module_tree(model)
  for (prefix in names(tree)) {
    if (!inherits(tree[[prefix]], "nn_conv2d")) next
    p <- if (nzchar(prefix)) paste0(prefix, ".weight") else "weight"
    if (p %in% paths && length(dim(self_of(tree[[prefix]])$weight)) == 4) out[[p]] <- c(2L, 4L, 3L, 1L)
  }
  out
}

# The running statistics of the model's batch norms that track them with a momentum (torch's
# default 0.1), by path: "layer1.0.bn1.running_mean", ... With momentum NULL (the cumulative
# average, which needs the step count) they are left to the R-side updates.
running_stat_buffers <- function(model) {
  out <- list()
  tree <- module_tree(model)
  for (prefix in names(tree)) {
    s <- self_of(tree[[prefix]])
    if (isTRUE(s$track_running_stats) && !is.null(s$momentum) &&
        all(c("running_mean", "running_var") %in% s$.buffer_names))
      for (nm in c("running_mean", "running_var"))
        out[[if (nzchar(prefix)) paste0(prefix, ".", nm) else nm]] <- get(nm, envir = s)
  }
  out
}

# The environment of the submodule at `path` ("layer1.0.bn1").
module_at <- function(self, path) {
  for (p in strsplit(path, ".", fixed = TRUE)[[1]]) self <- self_of(get(p, envir = self))
  self
}

# Class labels as a one-hot matrix with one column per class: a factor's levels, or 1..max(y)
# over all of `y` (so every batch has the same width, whatever classes it happens to hold).
label_values <- function(y) {
  if (is.factor(y)) return(as.double(as.integer(y)))
  if (!is.numeric(y) || anyNA(y) || any(y < 1 | y != round(y)))
    rf_abort("rfuse_type_error", "class labels must be whole numbers 1..K or a factor (torch for R's are 1-based)")
  as.double(y)
}

# A tensor's values as an R array shaped like `like` (a training loop's download; `name`, the
# parameter's, is for downloads that treat some differently: rf_fit's filters).
tensor_like <- function(t, like, name = NULL) restore_shape(tensor_values(t), like)

restore_shape <- function(v, like) {
  if (is.null(dim(like))) as.vector(v)
  else if (identical(attributes(v), list(dim = dim(like)))) v # already so (array() would copy)
  else array(v, dim(like))
}

#' @export
print.rf_training <- function(x, ...) {
  h <- x$history
  cat(sprintf("<rfuse training: %d steps, loss %.4g -> %.4g>\n", length(h), h[1], h[length(h)]))
  invisible(x)
}

#' @export
plot.rf_training <- function(x, ...) {
  graphics::plot(seq_along(x$history), x$history, type = "l", xlab = "step", ylab = "loss", ...)
}

# ---- Optimizers over rf_tensors (torch style) ------------------------------------------------------

#' Optimizers for rf_tensor parameters, torch style
#'
#' `optim_sgd()`, `optim_adam()` and `optim_adamw()` take `rf_tensor`s made with
#' `requires_grad = TRUE`. After `loss$backward()`, `opt$step()` updates every parameter from its
#' `$grad` in one compiled program (the update rfuse-autodiff's `optimizer` option generates, so
#' the arithmetic is the same as [rf_train()]'s: PyTorch's), keeping momentum or Adam's moments
#' between steps; `opt$zero_grad()` clears the gradients.
#'
#' @param params An `rf_tensor` or a list of them.
#' @param lr Learning rate.
#' @param momentum,weight_decay SGD momentum; weight decay (AdamW: decoupled).
#' @param betas,eps Adam's coefficients.
#' @return An optimizer: an environment with `step()`, `zero_grad()` and `lr` (assign
#'   `opt$lr <- value` to change the learning rate: an input of the compiled update, so nothing
#'   recompiles).
#' @examples
#' w <- rf_tensor(matrix(0, 2, 1), dtype = "float64", requires_grad = TRUE)
#' x <- matrix(rnorm(20), 10); y <- x %*% c(1, -2)
#' opt <- optim_sgd(w, lr = 0.1, momentum = 0.9)
#' for (i in 1:50) {
#'   opt$zero_grad()
#'   loss <- mean((x %*% w - y)^2)
#'   loss$backward()
#'   opt$step()
#' }
#' as.array(w)
#' @export
optim_sgd <- function(params, lr, momentum = 0, weight_decay = 0)
  new_optimizer(params, list(optimizer = "sgd", lr = lr, momentum = momentum, weight_decay = weight_decay),
                "optim_sgd")

#' @rdname optim_sgd
#' @export
optim_adam <- function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-8, weight_decay = 0)
  new_optimizer(params, list(optimizer = "adam", lr = lr, betas = betas, eps = eps, weight_decay = weight_decay),
                "optim_adam")

#' @rdname optim_sgd
#' @export
optim_adamw <- function(params, lr = 0.001, betas = c(0.9, 0.999), eps = 1e-8, weight_decay = 0.01)
  new_optimizer(params, list(optimizer = "adamw", lr = lr, betas = betas, eps = eps, weight_decay = weight_decay),
                "optim_adamw")

new_optimizer <- function(params, mode, class) {
  if (is_tensor(params)) params <- list(params)
  if (inherits(params, "rf_parameter_list")) params <- take_module_parameters(params)
  if (!is.list(params) || !length(params) ||
      !all(vapply(params, function(p) is_tensor(p) && isTRUE(p@env$requires_grad), logical(1))))
    rf_abort("rfuse_type_error", paste("an optimizer takes rf_tensors made with requires_grad = TRUE, or a module's",
                                       "parameters as `model$parameters` gives them"))
  if (!is.numeric(mode$lr) || length(mode$lr) != 1 || mode$lr < 0)
    rf_abort("rfuse_type_error", "`lr` must be a non-negative number")
  n <- length(params)
  dtypes <- unique(vapply(params, function(p) materialize(p)@env$dtype, ""))
  if (length(dtypes) != 1)
    rf_abort("rfuse_type_error", "an optimizer's parameters must share one dtype")
  # d/dp sum(p * g) = g exactly: the gradient program of this function with the optimizer
  # option is the update itself, for every parameter at once.
  update <- function(...) {
    a <- list(...)
    s <- 0
    for (i in seq_len(n)) s <- s + sum(a[[i]] * a[[n + i]])
    s
  }
  mode$lr_input <- TRUE # the learning rate is an input: opt$lr <- value takes effect at the next step
  lr <- mode$lr
  mode$lr <- 0
  state <- grad_state(update, paste0("p", seq_len(n)), dtypes, "default", character(), mode)
  self <- new.env(parent = emptyenv())
  self$lr <- lr
  self$params <- params
  self$steps <- 0L
  self$buffers <- NULL
  self$step <- function() {
    values <- lapply(params, function(p) { materialize(p); p })
    # As torch, a parameter without a gradient (not used by the loss) is left as it is, silently
    # unless values autograd records were read into R since the last step: then the forward may
    # have cut the graph there (rfuse's hazard, not torch's), which the warning names.
    idle <- which(vapply(params, function(p) is.null(p@env$grad), logical(1)))
    if (length(idle) == n)
      rf_abort("rfuse_autodiff_error", "no parameter has a gradient: call loss$backward() before step()")
    graph_read <- isTRUE(.rf_counters$graph_read)
    .rf_counters$graph_read <- FALSE
    if (length(idle) && graph_read && !isTRUE(self$warned_idle)) {
      self$warned_idle <- TRUE
      msg <- sprintf(paste("parameter(s) %s got no gradient from loss$backward() and stay as they are (as in torch);",
                           "if forward() uses them, a value on the way was converted to an R array, which cuts",
                           "the graph (keep it an rf_tensor)"), paste(idle, collapse = ", "))
      warning(structure(class = c("rfuse_no_gradient_warning", "warning", "condition"), list(message = msg, call = NULL)))
    }
    grads <- lapply(seq_len(n), function(i) params[[i]]@env$grad %||% zeros_like(values[[i]]))
    nb <- state_buffers(mode)
    # Momentum / Adam moments live beside the parameters, on their device.
    if (is.null(self$buffers)) self$buffers <- lapply(seq_len(nb), function(j) lapply(values, zeros_like))
    self$steps <- self$steps + 1L
    extra <- unname(unlist(self$buffers, recursive = FALSE))
    if (mode$optimizer != "sgd") extra <- c(extra, list(self$steps))
    if (!is.numeric(self$lr) || length(self$lr) != 1 || is.na(self$lr) || self$lr < 0)
      rf_abort("rfuse_type_error", "opt$lr must be a non-negative number")
    extra <- c(extra, list(as.double(self$lr)))
    out <- grad_call(state, stats::setNames(c(values, grads), c(paste0("p", seq_len(n)), paste0("g", seq_len(n)))),
                     extra)
    for (i in setdiff(seq_len(n), idle)) params[[i]]@env$buf <- out$rest[[i]]@env$buf
    for (k in seq_len(nb))
      for (i in setdiff(seq_len(n), idle)) self$buffers[[k]][[i]] <- out$rest[[k * n + i]]
    invisible(NULL)
  }
  self$zero_grad <- function() {
    for (p in params) p@env$grad <- NULL
    .rf_counters$graph_read <- FALSE
    invisible(NULL)
  }
  class(self) <- c(class, "rf_optimizer")
  self
}

# torch's `optim_adam(model$parameters)`: the module's trainable parameters become rf_tensor
# leaves (float32 on rf_default_device(), as torch's parameters) held by the module in their
# place; frozen ones stay R arrays (constants of the graph) and out of the optimizer.
take_module_parameters <- function(params) {
  homes <- attr(params, "homes")
  params <- unclass(params)
  taken <- list()
  for (i in seq_along(params)) {
    p <- params[[i]]
    if (is_tensor(p)) { if (isTRUE(p@env$requires_grad)) taken[[length(taken) + 1]] <- p; next }
    if (parameter_frozen(p)) next
    if (is.null(homes[[i]]))
      rf_abort("rfuse_type_error", sprintf(paste("parameter '%s' is an R array that belongs to no module: an optimizer",
                                                 "takes rf_tensors with requires_grad = TRUE or `model$parameters`"),
                                           names(params)[i] %||% i))
    t <- rf_tensor(state_value(p), requires_grad = TRUE)
    t@env$parameter <- TRUE
    assign(homes[[i]][[2]], t, envir = homes[[i]][[1]])
    taken[[length(taken) + 1]] <- t
  }
  .rf_counters$module_tensors <- TRUE
  module_changed()
  taken
}

#' @export
print.rf_optimizer <- function(x, ...) {
  cat(sprintf("<%s: %d parameter tensor(s), %d step(s)>\n", class(x)[1], length(x$params), x$steps))
  invisible(x)
}
