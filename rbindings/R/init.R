# Parameter initializers, torch for R's nn_init_* (torch.nn.init): the same distributions, fans
# and gains, drawn from R's random number generator (set.seed() makes them repeatable).
#
# torch changes the tensor in place. An rf_tensor is changed in place too (its buffer). An R
# array has no place of its own: the initializer assigns the new value back where the argument
# came from — `self$fc$weight`, `m$weight` inside `$apply()`, `self$w`, or a variable — in the
# caller's frame. A parameter reached only through a copy (`for (p in model$parameters)`) has no
# way back into its module: refused, rather than leave the model unchanged.

#' Parameter initializers
#'
#' torch for R's `nn_init_*` functions: each fills `tensor` (a parameter such as
#' `self$fc$weight`, an `rf_tensor`, or an R array) from its distribution and returns it
#' invisibly. `calculate_gain()` gives the recommended gain for a nonlinearity, as torch's.
#'
#' Fans are torch's: for a tensor of size `[out, in, k...]`, `fan_in = in * prod(k)` and
#' `fan_out = out * prod(k)`. The values come from R's random number generator (so
#' `set.seed()` repeats them; they are not torch's streams). An `rf_tensor` is changed in place;
#' an R array (a module's parameter) is assigned back where the argument came from
#' (`nn_init_zeros_(self$fc$bias)`, `m$weight` inside `$apply()`, a variable); a parameter reached
#' only through a copy (`for (p in model$parameters)`) is refused (`rfuse_unsupported`),
#' since nothing could write it back into the model.
#'
#' @param tensor The tensor or parameter to fill.
#' @param a,b Bounds of the uniform distribution; for `nn_init_kaiming_*`, `a` is the negative
#'   slope of the leaky ReLU that follows (0: ReLU).
#' @param mean,std Mean and standard deviation of the normal distribution.
#' @param val The constant.
#' @param gain A scaling factor (see `calculate_gain()`).
#' @param mode `"fan_in"` (preserves the forward pass's variance) or `"fan_out"` (the backward's).
#' @param nonlinearity The nonlinearity after the layer: `"relu"` or `"leaky_relu"` (torch's
#'   default for kaiming), or any that `calculate_gain()` knows.
#' @param param For `"leaky_relu"`, the negative slope (default 0.01).
#' @return The filled tensor, invisibly; `calculate_gain()` a number.
#' @examples
#' fc <- nn_linear(4, 3)
#' nn_init_xavier_uniform_(fc$weight)
#' nn_init_zeros_(fc$bias)
#' calculate_gain("leaky_relu", 0.2)
#' @name nn_init
NULL

#' @rdname nn_init
#' @export
calculate_gain <- function(nonlinearity, param = NULL) {
  call <- sys.call()
  if (!is.character(nonlinearity) || length(nonlinearity) != 1)
    rf_abort("rfuse_type_error", "'nonlinearity' must be a string", call)
  linear <- c("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
  if (nonlinearity %in% linear) return(1)
  switch(nonlinearity,
         tanh = 5 / 3,
         relu = sqrt(2),
         leaky_relu = {
           slope <- if (is.null(param)) 0.01 else param
           if (!is.numeric(slope) || length(slope) != 1 || is.na(slope))
             rf_abort("rfuse_type_error", sprintf("negative_slope %s is not a valid number", deparse1(slope)), call)
           sqrt(2 / (1 + slope^2))
         },
         selu = 3 / 4,
         rf_abort("rfuse_type_error", sprintf("Unsupported nonlinearity %s", nonlinearity), call))
}

#' @rdname nn_init
#' @export
nn_init_calculate_gain <- calculate_gain

#' @rdname nn_init
#' @export
nn_init_uniform_ <- function(tensor, a = 0, b = 1)
  init_fill(substitute(tensor), tensor, parent.frame(), sys.call(), function(n, size) stats::runif(n, a, b))

#' @rdname nn_init
#' @export
nn_init_normal_ <- function(tensor, mean = 0, std = 1)
  init_fill(substitute(tensor), tensor, parent.frame(), sys.call(), function(n, size) stats::rnorm(n, mean, std))

#' @rdname nn_init
#' @details `nn_init_trunc_normal_()` draws from the normal distribution `N(mean, std)` truncated
#'   to `[a, b]` (torch's defaults: -2 and 2, absolute bounds, not in standard deviations), by
#'   inverting the normal distribution function over the bounds' probabilities.
#' @export
nn_init_trunc_normal_ <- function(tensor, mean = 0, std = 1, a = -2, b = 2) {
  p <- c(mean, std, a, b)
  if (!is.numeric(p) || length(p) != 4 || anyNA(p) || std < 0 || a >= b)
    rf_abort("rfuse_type_error", "nn_init_trunc_normal_() needs numbers with std >= 0 and a < b", sys.call())
  init_fill(substitute(tensor), tensor, parent.frame(), sys.call(), function(n, size) {
    lo <- stats::pnorm(a, mean, std); hi <- stats::pnorm(b, mean, std)
    pmin(pmax(stats::qnorm(stats::runif(n, lo, hi), mean, std), a), b)
  })
}

#' @rdname nn_init
#' @export
nn_init_constant_ <- function(tensor, val) {
  if (!is.numeric(val) || length(val) != 1) rf_abort("rfuse_type_error", "'val' must be a single number", sys.call())
  init_fill(substitute(tensor), tensor, parent.frame(), sys.call(), function(n, size) rep(as.double(val), n))
}

#' @rdname nn_init
#' @export
nn_init_zeros_ <- function(tensor)
  init_fill(substitute(tensor), tensor, parent.frame(), sys.call(), function(n, size) numeric(n))

#' @rdname nn_init
#' @export
nn_init_ones_ <- function(tensor)
  init_fill(substitute(tensor), tensor, parent.frame(), sys.call(), function(n, size) rep(1, n))

#' @rdname nn_init
#' @export
nn_init_eye_ <- function(tensor) {
  call <- sys.call()
  init_fill(substitute(tensor), tensor, parent.frame(), call, function(n, size) {
    if (length(size) != 2) rf_abort("rfuse_shape_error", "Only tensors with 2 dimensions are supported", call)
    as.vector(diag(1, size[1], size[2]))
  })
}

#' @rdname nn_init
#' @export
nn_init_xavier_uniform_ <- function(tensor, gain = 1) {
  call <- sys.call()
  init_fill(substitute(tensor), tensor, parent.frame(), call, function(n, size) {
    f <- fans(size, call)
    bound <- gain * sqrt(6 / (f[["in"]] + f[["out"]]))
    stats::runif(n, -bound, bound)
  })
}

#' @rdname nn_init
#' @export
nn_init_xavier_normal_ <- function(tensor, gain = 1) {
  call <- sys.call()
  init_fill(substitute(tensor), tensor, parent.frame(), call, function(n, size) {
    f <- fans(size, call)
    stats::rnorm(n, 0, gain * sqrt(2 / (f[["in"]] + f[["out"]])))
  })
}

#' @rdname nn_init
#' @export
nn_init_kaiming_uniform_ <- function(tensor, a = 0, mode = "fan_in", nonlinearity = "leaky_relu") {
  call <- sys.call()
  init_fill(substitute(tensor), tensor, parent.frame(), call, function(n, size) {
    bound <- sqrt(3) * kaiming_std(size, a, mode, nonlinearity, call)
    stats::runif(n, -bound, bound)
  })
}

#' @rdname nn_init
#' @export
nn_init_kaiming_normal_ <- function(tensor, a = 0, mode = "fan_in", nonlinearity = "leaky_relu") {
  call <- sys.call()
  init_fill(substitute(tensor), tensor, parent.frame(), call, function(n, size)
    stats::rnorm(n, 0, kaiming_std(size, a, mode, nonlinearity, call)))
}

#' @rdname nn_init
#' @export
nn_init_orthogonal_ <- function(tensor, gain = 1) {
  call <- sys.call()
  if (!is.numeric(gain) || length(gain) != 1 || !is.finite(gain))
    rf_abort("rfuse_type_error", "`gain` must be a finite number", call)
  init_fill(substitute(tensor), tensor, parent.frame(), call, function(n, size) {
    if (length(size) < 2) rf_abort("rfuse_shape_error", "Only tensors with 2 or more dimensions are supported", call)
    # torch's: the tensor as a rows x (the rest) matrix, from the QR factorization of normal
    # draws with R's diagonal made positive; orthonormal rows (or columns, whichever fit).
    rows <- size[1]
    cols <- n %/% rows
    if (n == 0) return(numeric())
    a <- matrix(stats::rnorm(n), rows, cols)
    if (rows < cols) a <- t(a)
    f <- qr(a)
    q <- qr.Q(f) %*% diag(sign(diag(qr.R(f))), min(rows, cols))
    if (rows < cols) q <- t(q)
    as.vector(gain * q)
  })
}

# torch's _calculate_fan_in_and_fan_out.
fans <- function(size, call) {
  if (length(size) < 2)
    rf_abort("rfuse_shape_error", "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions", call)
  receptive <- prod(size[-(1:2)])
  c("in" = size[2] * receptive, "out" = size[1] * receptive)
}

kaiming_std <- function(size, a, mode, nonlinearity, call) {
  if (!is.character(mode) || length(mode) != 1 || !mode %in% c("fan_in", "fan_out"))
    rf_abort("rfuse_type_error", sprintf("Mode %s not supported, please use one of fan_in, fan_out", deparse1(mode)), call)
  f <- fans(size, call)
  calculate_gain(nonlinearity, a) / sqrt(f[[if (mode == "fan_in") "in" else "out"]])
}

# torch code fills `m$weight$data()` (or `$detach()`): the same values, so the same place —
# the expression with those calls taken off.
place_of_data <- function(expr) {
  while (is.call(expr) && length(expr) == 1 && is.call(expr[[1]]) && identical(expr[[1]][[1]], as.name("$")) &&
         as.character(expr[[1]][[3]]) %in% c("data", "detach"))
    expr <- expr[[1]][[2]]
  expr
}

# Fills `value` (whose expression in the caller is `expr`, evaluated in `env`) with draw(n, size)
# and puts the result where the argument came from (see the top of this file).
init_fill <- function(expr, value, env, call, draw) {
  fname <- as.character(call[[1]])
  expr <- place_of_data(expr)
  if (is_sym(value))
    rf_unsupported(fname, call, "it draws random numbers: initialize parameters outside traced code")
  size <- t_size(value)
  if (!(is_tensor(value) || is.numeric(value) || is.logical(value)))
    rf_abort("rfuse_type_error", sprintf("%s() fills a tensor or a numeric array, not %s", fname, class(value)[1]), call)
  v <- as.double(draw(prod(size), size))
  filled <- if (length(size) > 1) array(v, size) else v
  if (is_tensor(value)) return(assign_inplace(value, fname, filled))
  if (inherits(value, "rf_parameter")) {
    filled <- nn_parameter(filled, !identical(attr(value, "requires_grad"), FALSE))
    # A parameter passed along unchanged (to a helper, through named_parameters()) is still the
    # very object its module holds (R copies only on change): written back there, as torch's
    # in-place fill would reach it.
    if (write_back_parameter(value, filled)) {
      if (is.symbol(expr)) eval(call("<-", expr, filled), env)
      return(invisible(filled))
    }
    if (is.symbol(expr))
      rf_unsupported(fname, call, paste("its argument is a parameter held in a variable, perhaps a copy (as in",
                                        "`for (p in model$parameters)`), which nothing could write back into the",
                                        "module: name its place instead (nn_init_...(self$fc$weight), or m$weight",
                                        "inside model$apply(function(m) ...))"))
  } else {
    attributes(filled) <- attributes(value)
  }
  assignable <- is.symbol(expr) || (is.call(expr) && as.character(expr[[1]])[1] %in% c("$", "[[", "@"))
  if (!assignable)
    rf_unsupported(fname, call, sprintf("its argument `%s` is not a place its new value can be assigned to; name the parameter (self$fc$weight)",
                                        deparse1(expr)))
  eval(call("<-", expr, filled), env)
  invisible(filled)
}

# The modules holding `value` itself (the same R object, not an equal one) get `filled` in its
# place; FALSE when none does.
write_back_parameter <- function(value, filled) {
  addr <- .rf_obj_address(value)
  found <- FALSE
  for (self in live_module_selves()) {
    for (nm in ls(self)) {
      if (bindingIsActive(nm, self)) next
      v <- get(nm, envir = self)
      if (inherits(v, "rf_parameter") && identical(.rf_obj_address(v), addr)) {
        assign(nm, filled, envir = self)
        found <- TRUE
      }
    }
  }
  if (found) module_changed()
  found
}
