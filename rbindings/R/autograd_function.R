#' A function with its own gradient, as torch's `autograd_function()`
#'
#' `forward(ctx, ...)` computes the function's value from its arguments; `backward(ctx,
#' grad_output)` gives the gradient of each argument from the gradient of that value, and rfuse's
#' differentiation (`rf_grad()`, `rf_train()`, `rf_fit()`, `loss$backward()`) uses it instead of
#' differentiating `forward` — for a function whose own derivative is wrong, unstable or costly
#' (tabnet's sparsemax, a straight-through estimator, a clipped gradient).
#'
#' As in torch: `ctx$save_for_backward(name = value, ...)` in `forward` keeps values for
#' `backward`, which reads them as `ctx$saved_variables$name`; other fields set on `ctx`
#' (`ctx$dim <- dim`) are there in `backward` too. `backward` returns a named list with the
#' gradient of each argument of `forward` by name (or in their order when unnamed); a missing or
#' `NULL` entry is a zero gradient. With several outputs (a list from `forward`), `grad_output` is
#' the list of their gradients.
#'
#' In traced code (`rf_jit()`, training steps) both functions are traced: the forward into the
#' program, the backward into its gradient (rfuse's `rfuse.custom_vjp` op). Arguments that are not
#' arrays or tensors (a `dim`, a flag) are constants of the trace. On tensors it records one
#' operation for `$backward()`; on plain R arrays it is `forward` called on them.
#'
#' @param forward A function `(ctx, ...)` returning an array (or a list of arrays).
#' @param backward A function `(ctx, grad_output)` returning a list of gradients.
#' @return A function taking `forward`'s arguments (without `ctx`).
#' @examples
#' # exp whose gradient is scaled by 2
#' scaled_exp <- autograd_function(
#'   forward = function(ctx, x) { y <- exp(x); ctx$save_for_backward(y = y); y },
#'   backward = function(ctx, grad_output) list(x = 2 * grad_output * ctx$saved_variables$y))
#' g <- rf_grad(function(x) sum(scaled_exp(x)))
#' g(c(0, 1)) # 2 * exp(x)
#' @export
autograd_function <- function(forward, backward) {
  if (!is.function(forward) || !is.function(backward))
    rf_abort("rfuse_type_error", "autograd_function() takes two functions, `forward` and `backward`")
  arg_names <- names(formals(forward))[-1]
  if (!length(formals(forward)) || "..." %in% arg_names)
    rf_abort("rfuse_type_error", "`forward` must take `ctx` and then named arguments (not ...)")
  if (length(formals(backward)) != 2)
    rf_abort("rfuse_type_error", "`backward` must take two arguments: `ctx` and `grad_output`")
  # Its recorded operations' name, its own: the cache of eager programs keys on names and code,
  # and every autograd_function's recorded closure has the same code.
  .rf_state$autograd_functions <- (.rf_state$autograd_functions %||% 0L) + 1L
  op_name <- paste0("autograd_function#", .rf_state$autograd_functions)
  fn <- function(...) {
    call <- sys.call()
    args <- match_forward_args(list(...), arg_names, call)
    if (any(vapply(args, is_sym, TRUE))) return(trace_custom_vjp(forward, backward, args, call))
    tensors <- vapply(args, is_tensor, TRUE)
    if (any(tensors)) # one recorded operation, traced as above when it runs or is differentiated
      return(record(op_name, function(...) trace_custom_vjp(forward, backward, list(...), call), args,
                    settings = names(args)[!tensors]))
    do.call(forward, c(list(autograd_context()), args))
  }
  structure(fn, class = c("rf_autograd_function", "function"))
}

# The arguments of a call by forward's names (positional ones in order), as R would match them.
match_forward_args <- function(args, arg_names, call) {
  given <- names(args) %||% rep("", length(args))
  unknown <- setdiff(given[nzchar(given)], arg_names)
  if (length(unknown))
    rf_abort("rfuse_type_error", sprintf("this autograd function has no argument '%s'", unknown[1]), call)
  free <- setdiff(arg_names, given)
  if (sum(!nzchar(given)) > length(free))
    rf_abort("rfuse_type_error", sprintf("this autograd function takes %d arguments, got %d", length(arg_names), length(args)), call)
  given[!nzchar(given)] <- free[seq_len(sum(!nzchar(given)))]
  names(args) <- given
  args
}

# torch's ctx: fields the user sets, save_for_backward() and saved_variables.
autograd_context <- function() {
  ctx <- new.env(parent = emptyenv())
  ctx$saved_variables <- list()
  ctx$save_for_backward <- function(...) {
    ctx$saved_variables <- list(...)
    invisible(NULL)
  }
  ctx
}

# In a trace: `forward` traced as a function of the symbolic arguments (returning its outputs and
# the symbolic values it saved), `backward` as a function of those saved values and the outputs'
# cotangents (returning the float arguments' cotangents), and the op that applies the one with
# the other as its gradient.
trace_custom_vjp <- function(forward, backward, args, call) {
  b <- current_builder()
  ctx <- autograd_context()
  syms <- vapply(args, is_sym, TRUE)
  .rf_state$nhelpers <- .rf_state$nhelpers + 1L
  tag <- .rf_state$nhelpers
  masked_forward <- mask_function(forward, torch_ops = TRUE)
  masked_backward <- mask_function(backward, torch_ops = TRUE)
  fwd <- trace_scoped_function(b, paste0("autograd_forward_", tag), args[syms], function(inner) {
    a <- args
    a[syms] <- inner
    res <- do.call(masked_forward, c(list(ctx), a))
    outputs <- if (is_sym(res)) list(res) else if (is.list(res)) res else list(as_sym(res, call))
    outputs <- lapply(outputs, as_sym, call = call)
    if (!all(vapply(outputs, function(s) is_float_dtype(r_dtype(s$dtype)), TRUE)))
      rf_unsupported("autograd_function", call, "a forward result that is not a float array has no gradient")
    at <- which(vapply(ctx$saved_variables, is_sym, TRUE)) # (R values saved stay as they are)
    list(ids = vapply(c(outputs, ctx$saved_variables[at]), function(s) as.integer(s$id), 0L),
         value = list(outputs = outputs, single = !is.list(res) || is_sym(res), names = names(res), at = at))
  }, call)
  # Class labels the forward one-hot encodes are this call's arguments to check (as a helper's).
  for (c in fwd$label_checks) note_labels(args[syms][[c$pos]], c$classes, call)
  outs <- fwd$value$outputs
  at <- fwd$value$at
  saved <- ctx$saved_variables[at]
  float_inputs <- names(args)[syms][vapply(args[syms], function(s) is_float_dtype(r_dtype(s$dtype)), TRUE)]
  bwd <- trace_scoped_function(b, paste0("autograd_backward_", tag), c(saved, outs), function(inner) {
    ctx$saved_variables[at] <- inner[seq_along(saved)]
    grads_in <- inner[length(saved) + seq_along(outs)]
    grads <- do.call(masked_backward, list(ctx, if (fwd$value$single) grads_in[[1]] else grads_in))
    if (!is.list(grads) || is_sym(grads)) grads <- list(grads)
    if (is.null(names(grads))) names(grads) <- names(args)[seq_along(grads)]
    results <- lapply(float_inputs, function(nm) {
      g <- grads[[nm]]
      s <- args[[nm]]
      if (is.null(g)) return(lift_constant(if (is.null(s$rdim)) rep(0, s$len) else array(0, s$rdim), call, s$dtype))
      g <- as_sym(g, call)
      if (g$len != s$len)
        rf_abort("rfuse_shape_error", sprintf("the backward's gradient of '%s' has dims %s; '%s' has %s", nm,
                                              paste(g$rdim %||% g$len, collapse = "x"), nm,
                                              paste(s$rdim %||% s$len, collapse = "x")), call)
      reshape_sym(cast_sym(g, s$dtype), s$rdim, s$len)
    })
    list(ids = vapply(results, function(s) as.integer(s$id), 0L), value = NULL)
  }, call)
  if (length(bwd$label_checks))
    rf_unsupported("autograd_function", call, "a backward that one-hot encodes class labels (check them in the forward)")
  input_ids <- vapply(args[syms], function(s) as.integer(s$id), 0L)
  ids <- rf_guard(.rf_b_custom_vjp(b, fwd$fid, bwd$fid, input_ids, length(outs)), call)
  results <- Map(function(id, s) with_attrs(new_sym(id, s$rdim, s$len, s$dtype, s$ib), s$attrs), ids[seq_along(outs)], outs)
  if (fwd$value$single) results[[1]] else stats::setNames(results, fwd$value$names)
}
