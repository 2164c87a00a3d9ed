# Model definitions in the style of torch for R: nn_module() generators, layers, and the
# functional ops they use. A model is traced as a whole by rf_jit(model), its parameters becoming
# inputs of the compiled program (new weights never recompile).
#
# Layout: R arrays keep torch's dim order (N, C, H, W for images; a linear layer's weight is
# out x in) and R's own column-major storage; nnf_conv2d() and the pools reorder dims around the
# NCHW convolution (rfuse views an R array of dim c(N, C, H, W) as the tensor [W, H, C, N]).

#' Functional neural-network ops
#'
#' The building blocks of the `nn_*` layers, usable in any function traced by [rf_jit()]. On
#' plain R arrays they compute the same in base R (convolution and pooling through a cached
#' float64 rfuse program).
#'
#' @param x Input: a matrix (batch x features) or, for 2-D ops, an array of dim c(N, C, H, W).
#' @param weight,bias Parameters; `bias` may be `NULL`.
#' @param stride,padding,dilation,groups As in torch: scalars or length-2 vectors.
#' @param kernel_size Pooling window (scalar or length 2).
#' @param eps Layer-norm epsilon.
#' @return An array like base R's.
#' @examples
#' x <- matrix(rnorm(6), 2)
#' nnf_relu(x)
#' nnf_linear(x, matrix(rnorm(12), 4), rnorm(4))
#' @name nnf
NULL

pair <- function(v) as.integer(if (length(v) == 1) c(v, v) else v)

#' @rdname nnf
#' @export
nnf_linear <- function(x, weight, bias = NULL) {
  # rf_matprod / rf_sweep trace symbolic values and fall back to base R otherwise.
  y <- rf_matprod(x, t(weight))
  if (is.null(bias)) y else rf_sweep(y, 2, bias, "+")
}

unary_sym_or <- function(x, op, fallback) {
  if (!is_sym(x)) return(fallback(x))
  s <- to_dtype(x, trace_float(), sys.call(-1))
  new_sym(emit(.rf_b_unary, op, s$id), s$rdim, s$len, s$dtype)
}

#' @rdname nnf
#' @export
nnf_relu <- function(x) unary_sym_or(x, "relu", function(v) pmax(v, 0))
#' @rdname nnf
#' @export
nnf_gelu <- function(x) unary_sym_or(x, "gelu", function(v) v * stats::pnorm(v))
#' @rdname nnf
#' @export
nnf_sigmoid <- function(x) unary_sym_or(x, "sigmoid", function(v) 1 / (1 + exp(-v)))

#' @rdname nnf
#' @export
nnf_layer_norm <- function(x, weight = NULL, bias = NULL, eps = 1e-5) {
  xc <- rf_sweep(x, 1, rf_rowMeans(x), "-")
  y <- rf_sweep(xc, 1, sqrt(rf_rowMeans(xc * xc) + eps), "/")
  if (!is.null(weight)) y <- rf_sweep(y, 2, weight, "*")
  if (!is.null(bias)) y <- rf_sweep(y, 2, bias, "+")
  y
}

# The tensor permutation that turns rfuse's view of an R array of dim c(N, C, H, W) ([W, H, C, N])
# into NCHW and back.
reverse4 <- c(3L, 2L, 1L, 0L)

to_nchw <- function(s, call) {
  s <- to_dtype(as_sym(s, call), trace_float(), call)
  if (length(s$rdim) != 4)
    rf_shape_error(sprintf("expected an array of dim c(N, C, H, W), got dim c(%s)",
                           paste(s$rdim %||% s$len, collapse = ", ")), call)
  emit(.rf_b_transpose, s$id, reverse4, call = call)
}
from_nchw <- function(id, call) {
  t <- emit(.rf_b_shape, id)
  out <- emit(.rf_b_transpose, id, reverse4, call = call)
  new_sym(out, as.integer(t), prod(t), trace_float())
}

# Runs a 2-D op on plain R arrays through a cached float64 program (base R has no convolution).
eager_cache <- new.env(parent = emptyenv())
run_eagerly <- function(key, f, args) {
  jf <- eager_cache[[key]]
  if (is.null(jf)) {
    jf <- rf_jit(f, dtype = "float64")
    assign("no_base_r", TRUE, envir = attr(jf, "rfuse")$notes) # f itself comes back here
    assign(key, jf, envir = eager_cache)
  }
  do.call(jf, args)
}

#' @rdname nnf
#' @export
nnf_conv2d <- function(x, weight, bias = NULL, stride = 1, padding = 0, dilation = 1, groups = 1) {
  call <- sys.call()
  st <- pair(stride); pd <- pair(padding); dl <- pair(dilation)
  if (!any_sym(x, weight, bias)) {
    key <- paste("conv2d", deparse(list(st, pd, dl, groups, is.null(bias))))
    f <- if (is.null(bias)) function(x, weight) nnf_conv2d(x, weight, NULL, st, pd, dl, groups)
         else function(x, weight, bias) nnf_conv2d(x, weight, bias, st, pd, dl, groups)
    return(run_eagerly(key, f, if (is.null(bias)) list(x, weight) else list(x, weight, bias)))
  }
  xi <- to_nchw(x, call)
  wi <- to_nchw(weight, call)
  bi <- if (is.null(bias)) -1L else to_dtype(as_sym(bias, call), trace_float(), call)$id
  y <- emit(.rf_b_conv2d, xi, wi, bi, st, c(pd[1], pd[1], pd[2], pd[2]), dl, as.integer(groups),
            call = call)
  from_nchw(y, call)
}

pool2d <- function(kind, x, kernel_size, stride, padding, call) {
  k <- pair(kernel_size); st <- pair(stride %||% kernel_size); pd <- pair(padding)
  if (!is_sym(x)) {
    key <- paste(kind, deparse(list(k, st, pd)))
    return(run_eagerly(key, function(x) pool2d(kind, x, k, st, pd, call), list(x)))
  }
  xi <- to_nchw(x, call)
  from_nchw(emit(.rf_b_pool2d, kind, xi, k, st, c(pd[1], pd[1], pd[2], pd[2]), call = call), call)
}

#' @rdname nnf
#' @export
nnf_max_pool2d <- function(x, kernel_size, stride = NULL, padding = 0)
  pool2d("max", x, kernel_size, stride, padding, sys.call())
#' @rdname nnf
#' @export
nnf_avg_pool2d <- function(x, kernel_size, stride = NULL, padding = 0)
  pool2d("avg", x, kernel_size, stride, padding, sys.call())

# Per-channel mean of an array of dim c(N, C, H, W) (rfuse's view: [W, H, C, N]).
channel_mean <- function(x, call = NULL) {
  if (!is_sym(x)) return(colMeans(aperm(x, c(1, 3, 4, 2)), dims = 3))
  s <- to_dtype(as_sym(x, call), trace_float(), call)
  if (length(s$rdim) != 4)
    rf_shape_error(sprintf("expected an array of dim c(N, C, H, W), got dim c(%s)",
                           paste(s$rdim %||% s$len, collapse = ", ")), call)
  new_sym(emit(.rf_b_reduce, "mean", s$id, c(0L, 1L, 3L), FALSE, call = call), NULL, s$rdim[2], s$dtype)
}

#' @rdname nnf
#' @param running_mean,running_var Per-channel statistics used in evaluation mode.
#' @param training Batch norm: normalize by the batch's statistics (`TRUE`) or the running ones.
#' @export
nnf_batch_norm2d <- function(x, running_mean = NULL, running_var = NULL, weight = NULL, bias = NULL,
                             training = FALSE, eps = 1e-5) {
  call <- sys.call()
  if (training) {
    xc <- rf_sweep(x, 2, channel_mean(x, call), "-")
    v <- channel_mean(xc * xc, call)
  } else {
    if (is.null(running_mean) || is.null(running_var))
      rf_abort("rfuse_type_error", "batch norm in evaluation mode needs `running_mean` and `running_var`", call)
    xc <- rf_sweep(x, 2, running_mean, "-")
    v <- running_var
  }
  y <- rf_sweep(xc, 2, 1 / sqrt(v + eps), "*")
  if (!is.null(weight)) y <- rf_sweep(y, 2, weight, "*")
  if (!is.null(bias)) y <- rf_sweep(y, 2, bias, "+")
  y
}

#' @rdname nnf
#' @param output_size Adaptive pooling's output height and width (scalar or length 2); each must
#'   divide the input's.
#' @export
nnf_adaptive_avg_pool2d <- function(x, output_size) {
  call <- sys.call()
  os <- pair(output_size)
  d <- if (is_sym(x)) x$rdim else dim(x)
  if (length(d) != 4)
    rf_shape_error(sprintf("expected an array of dim c(N, C, H, W), got dim c(%s)", paste(d, collapse = ", ")), call)
  if (all(os == 1)) { # global average pooling: a reduction (fuses with what follows)
    if (!is_sym(x)) return(array(rowMeans(x, dims = 2), c(d[1:2], 1, 1)))
    s <- to_dtype(as_sym(x, call), trace_float(), call)
    id <- emit(.rf_b_reduce, "mean", s$id, c(0L, 1L), TRUE, call = call)
    return(new_sym(id, c(d[1:2], 1L, 1L), d[1] * d[2], s$dtype))
  }
  if (any(d[3:4] %% os != 0))
    rf_unsupported("nnf_adaptive_avg_pool2d", call,
                   sprintf("output size %s does not divide the input's %dx%d", paste(os, collapse = "x"), d[3], d[4]))
  nnf_avg_pool2d(x, d[3:4] %/% os)
}

#' @rdname nnf
#' @param p Dropout: the probability of zeroing an element.
#' @details `nnf_dropout()` in training mode zeroes each element with probability `p` and scales
#'   the rest by 1 / (1 - p). Masks come from R's random number generator (`set.seed()` makes
#'   them reproducible): a traced program takes each mask as an extra input, drawn afresh at
#'   every call, so compiled training steps see a new mask per step.
#' @export
nnf_dropout <- function(x, p = 0.5, training = TRUE) {
  call <- sys.call()
  if (!is.numeric(p) || length(p) != 1 || is.na(p) || p < 0 || p >= 1)
    rf_abort("rfuse_type_error", "dropout's `p` must be a probability in [0, 1)", call)
  if (!isTRUE(training) || p == 0) return(x)
  if (!is_sym(x)) return(x * dropout_mask(length(x), p))
  if (isTRUE(.rf_state$in_helper))
    rf_unsupported("nnf_dropout", call,
                   "dropout in a helper function traced on its own; call it in the traced function or a module's forward")
  s <- to_dtype(as_sym(x, call), trace_float(), call)
  id <- rf_guard(.rf_b_input(current_builder(), sym_tshape(s), s$dtype, "dropout mask"), call)
  .rf_state$random <- c(.rf_state$random, list(list(p = p, len = s$len, rdim = s$rdim, dtype = s$dtype)))
  s * new_sym(id, s$rdim, s$len, s$dtype)
}

dropout_mask <- function(n, p) (stats::runif(n) >= p) / (1 - p)

#' @rdname nnf
#' @export
nnf_flatten <- function(x) {
  # torch's flatten(start_dim = 2): row-major over (C, H, W).
  if (!is_sym(x)) {
    d <- dim(x)
    return(matrix(aperm(x, c(1, 4, 3, 2)), d[1]))
  }
  call <- sys.call()
  xi <- to_nchw(x, call)
  t <- emit(.rf_b_shape, xi)
  flat <- emit(.rf_b_reshape, xi, c(t[1], prod(t[-1])), call = call)
  out <- emit(.rf_b_transpose, flat, c(1L, 0L), call = call)
  new_sym(out, c(t[1], prod(t[-1])), prod(t), trace_float())
}

# ---- Modules --------------------------------------------------------------------------------

#' Define a module, torch-for-R style
#'
#' `nn_module()` returns a generator: calling it runs `initialize` on a new instance, whose
#' methods see it as `self`. Calling the instance runs `forward`. Fields that are
#' [nn_parameter()]s or modules make up `$parameters`; `$eval()` and `$train()` set `$training`.
#'
#' @param classname Class name of the instances.
#' @param initialize,forward Methods; more methods may be given in `...`.
#' @param ... Further methods.
#' @return A generator function.
#' @examples
#' Net <- nn_module("Net",
#'   initialize = function() { self$fc <- nn_linear(4, 2) },
#'   forward = function(x) nnf_relu(self$fc(x)))
#' net <- Net()
#' net(matrix(rnorm(8), 2))
#' names(net$parameters)
#' @export
nn_module <- function(classname = "nn_module", initialize = function(...) NULL,
                      forward = function(...) stop("no forward method"), ...) {
  methods <- c(list(initialize = initialize, forward = forward), list(...))
  function(...) {
    self <- new.env(parent = emptyenv())
    self$training <- TRUE
    for (nm in names(methods)) {
      # Methods see `self`, and rfuse's traced versions of the base functions they call (which
      # fall back to base R on plain values), so a model traces like any function.
      m <- mask_function(methods[[nm]], side_effect_guards = FALSE)
      menv <- new.env(parent = environment(m))
      menv$self <- self
      environment(m) <- menv
      assign(nm, m, envir = self)
    }
    self$eval <- function() { set_training(self, FALSE); invisible(instance) }
    self$train <- function(mode = TRUE) { set_training(self, mode); invisible(instance) }
    makeActiveBinding("parameters", function() module_parameters(self), self)
    instance <- structure(function(...) self$forward(...), class = c(classname, "nn_module"),
                          self = self)
    self$initialize(...)
    instance
  }
}

set_training <- function(self, mode) {
  self$training <- mode
  for (nm in ls(self)) {
    v <- get(nm, envir = self)
    if (inherits(v, "nn_module")) set_training(attr(v, "self"), mode)
  }
}

#' Mark an array as a module parameter
#' @param x A numeric array.
#' @return `x`, classed `rf_parameter`.
#' @examples
#' nn_parameter(matrix(0.5, 2, 2))
#' @export
nn_parameter <- function(x) structure(x, class = c("rf_parameter", class(unclass(x))))

#' @export
print.rf_parameter <- function(x, ...) {
  cat("rfuse parameter\n")
  print(unclass(x), ...)
  invisible(x)
}

# Parameters of a module and its submodules, as a named list (names: paths like "fc.weight").
module_parameters <- function(self, prefix = "") {
  out <- list()
  for (nm in sort(ls(self))) {
    if (nm == "parameters") next
    v <- get(nm, envir = self)
    if (inherits(v, "rf_parameter")) out[[paste0(prefix, nm)]] <- v
    else if (inherits(v, "nn_module"))
      out <- c(out, module_parameters(attr(v, "self"), paste0(prefix, nm, ".")))
  }
  out
}

# Where each parameter lives (its module's environment and name), in module_parameters()'s
# order: a jitted model reads its parameters through these on every call, which costs no walk.
parameter_slots <- function(self) {
  out <- list()
  for (nm in sort(ls(self))) {
    if (nm == "parameters") next
    v <- get(nm, envir = self)
    if (inherits(v, "rf_parameter")) out[[length(out) + 1]] <- list(self, nm)
    else if (inherits(v, "nn_module")) out <- c(out, parameter_slots(attr(v, "self")))
  }
  out
}

# A model's parameter values, through slots cached in `notes` (made again after any module's
# fields were assigned with `$<-`: the structure may have changed).
model_parameter_values <- function(model, notes) {
  if (is.null(notes$slots) || !identical(notes$slots_version, .rf_counters$module_version)) {
    notes$slots <- parameter_slots(attr(model, "self"))
    notes$slots_version <- .rf_counters$module_version
  }
  lapply(notes$slots, function(s) s[[1]][[s[[2]]]])
}

#' @export
`$.nn_module` <- function(x, name) get(name, envir = attr(x, "self"))

#' @export
`$<-.nn_module` <- function(x, name, value) {
  .rf_counters$module_version <- (.rf_counters$module_version %||% 0) + 1
  assign(name, value, envir = attr(x, "self"))
  x
}

#' @export
print.nn_module <- function(x, ...) {
  p <- x$parameters
  cat(sprintf("<%s> %d parameter arrays, %d values\n", class(x)[1], length(p),
              sum(vapply(p, length, integer(1)))))
  invisible(x)
}

# Sets parameter `path` ("fc.weight") of a module to `value` (used while tracing).
set_parameter <- function(self, path, value) {
  parts <- strsplit(path, ".", fixed = TRUE)[[1]]
  for (p in parts[-length(parts)]) self <- attr(get(p, envir = self), "self")
  assign(parts[length(parts)], value, envir = self)
}

init_uniform <- function(dims, fan_in) {
  bound <- 1 / sqrt(fan_in)
  v <- stats::runif(prod(dims), -bound, bound)
  if (length(dims) > 1) array(v, dim = dims) else v
}

#' Layers
#'
#' torch-for-R style layers; each is a generator (see [nn_module()]) whose arguments are:
#' \itemize{
#'   \item `nn_linear(in_features, out_features, bias = TRUE)`: weight `out x in`, bias `out`.
#'   \item `nn_conv2d(in_channels, out_channels, kernel_size, stride = 1, padding = 0,
#'     dilation = 1, groups = 1, bias = TRUE)`.
#'   \item `nn_max_pool2d(kernel_size, stride = kernel_size, padding = 0)`, likewise
#'     `nn_avg_pool2d` (padding counted, as torch's default).
#'   \item `nn_layer_norm(normalized_shape, eps = 1e-5)` over the last dim of a matrix.
#'   \item `nn_batch_norm2d(num_features, eps = 1e-5, momentum = 0.1)`: batch statistics in
#'     training mode, running ones after `$eval()`; every training-mode call — eager, jitted, or
#'     a compiled [rf_fit()] step — updates the running statistics as torch does.
#'   \item `nn_adaptive_avg_pool2d(output_size)`; output size 1 is global average pooling.
#'   \item `nn_basic_block(in_channels, out_channels, stride = 1)`: ResNet's residual block;
#'     `nn_resnet(blocks, widths, num_classes = 10, in_channels = 3)` and `nn_resnet18()`.
#'   \item `nn_dropout(p = 0.5)`: [nnf_dropout()] in training mode, the identity after `$eval()`.
#'   \item `nn_relu()`, `nn_gelu()`, `nn_sigmoid()`, `nn_tanh()`, `nn_flatten()`.
#'   \item `nn_sequential(...)`: modules applied in order.
#' }
#' Weights are initialized like torch's defaults (uniform in +-1/sqrt(fan_in)); use
#' [set.seed()] for reproducibility.
#'
#' @param ... The layer's arguments, as listed above.
#' @return A module.
#' @examples
#' set.seed(1)
#' net <- nn_sequential(nn_linear(3, 5), nn_relu(), nn_linear(5, 1))
#' net(matrix(rnorm(6), 2))
#' @name nn_layers
NULL

#' @rdname nn_layers
#' @export
nn_linear <- nn_module("nn_linear",
  initialize = function(in_features, out_features, bias = TRUE) {
    self$weight <- nn_parameter(init_uniform(c(out_features, in_features), in_features))
    if (bias) self$bias <- nn_parameter(init_uniform(out_features, in_features))
  },
  forward = function(x) nnf_linear(x, self$weight, if (exists("bias", envir = self)) self$bias))

#' @rdname nn_layers
#' @export
nn_conv2d <- nn_module("nn_conv2d",
  initialize = function(in_channels, out_channels, kernel_size, stride = 1, padding = 0,
                        dilation = 1, groups = 1, bias = TRUE) {
    k <- pair(kernel_size)
    fan_in <- in_channels / groups * prod(k)
    self$weight <- nn_parameter(init_uniform(c(out_channels, in_channels / groups, k), fan_in))
    if (bias) self$bias <- nn_parameter(init_uniform(out_channels, fan_in))
    self$stride <- stride; self$padding <- padding; self$dilation <- dilation; self$groups <- groups
  },
  forward = function(x) nnf_conv2d(x, self$weight, if (exists("bias", envir = self)) self$bias,
                                   self$stride, self$padding, self$dilation, self$groups))

#' @rdname nn_layers
#' @export
nn_relu <- nn_module("nn_relu", forward = function(x) nnf_relu(x))
#' @rdname nn_layers
#' @export
nn_gelu <- nn_module("nn_gelu", forward = function(x) nnf_gelu(x))
#' @rdname nn_layers
#' @export
nn_sigmoid <- nn_module("nn_sigmoid", forward = function(x) nnf_sigmoid(x))
#' @rdname nn_layers
#' @export
nn_tanh <- nn_module("nn_tanh", forward = function(x) tanh(x))
#' @rdname nn_layers
#' @export
nn_max_pool2d <- nn_module("nn_max_pool2d",
  initialize = function(kernel_size, stride = NULL, padding = 0) {
    self$kernel_size <- kernel_size; self$stride <- stride; self$padding <- padding
  },
  forward = function(x) nnf_max_pool2d(x, self$kernel_size, self$stride, self$padding))
#' @rdname nn_layers
#' @export
nn_avg_pool2d <- nn_module("nn_avg_pool2d",
  initialize = function(kernel_size, stride = NULL, padding = 0) {
    self$kernel_size <- kernel_size; self$stride <- stride; self$padding <- padding
  },
  forward = function(x) nnf_avg_pool2d(x, self$kernel_size, self$stride, self$padding))
#' @rdname nn_layers
#' @export
nn_flatten <- nn_module("nn_flatten", forward = function(x) nnf_flatten(x))
#' @rdname nn_layers
#' @export
nn_dropout <- nn_module("nn_dropout",
  initialize = function(p = 0.5) { self$p <- p },
  forward = function(x) nnf_dropout(x, self$p, self$training))
#' @rdname nn_layers
#' @export
nn_layer_norm <- nn_module("nn_layer_norm",
  initialize = function(normalized_shape, eps = 1e-5) {
    self$weight <- nn_parameter(rep(1, normalized_shape))
    self$bias <- nn_parameter(rep(0, normalized_shape))
    self$eps <- eps
  },
  forward = function(x) nnf_layer_norm(x, self$weight, self$bias, self$eps))
#' @rdname nn_layers
#' @export
nn_batch_norm2d <- nn_module("nn_batch_norm2d",
  initialize = function(num_features, eps = 1e-5, momentum = 0.1) {
    self$weight <- nn_parameter(rep(1, num_features))
    self$bias <- nn_parameter(rep(0, num_features))
    self$running_mean <- rep(0, num_features)
    self$running_var <- rep(1, num_features)
    self$num_batches_tracked <- 0
    self$eps <- eps
    self$momentum <- momentum
  },
  forward = function(x) {
    if (self$training) track_batch_stats(self, x)
    nnf_batch_norm2d(x, self$running_mean, self$running_var, self$weight, self$bias, self$training, self$eps)
  })

# Training-mode batch norm updates its running statistics from the batch's, as torch does. On
# plain arrays at once; in traced code the batch statistics become extra outputs of the program
# (the same reductions nnf_batch_norm2d computes: CSE merges them), applied after every call.
track_batch_stats <- function(self, x) {
  m <- channel_mean(x)
  xc <- rf_sweep(x, 2, m, "-")
  v <- channel_mean(xc * xc)
  n <- (if (is_sym(x)) x$len else length(x)) / (if (is_sym(x)) x$rdim[2] else dim(x)[2])
  if (!is_sym(x)) return(update_running_stats(self, m, v, n))
  if (isTRUE(.rf_state$in_helper)) return(invisible()) # a helper's values cannot leave it
  .rf_state$aux <- c(.rf_state$aux, list(list(ids = c(m$id, v$id), lens = c(m$len, v$len),
                                              update = function(vals) update_running_stats(self, vals[[1]], vals[[2]], n))))
}

# Running mean and (unbiased) variance; momentum NULL: the cumulative average.
update_running_stats <- function(self, m, v, n) {
  self$num_batches_tracked <- self$num_batches_tracked + 1
  mom <- self$momentum %||% (1 / self$num_batches_tracked)
  self$running_mean <- (1 - mom) * self$running_mean + mom * as.vector(m)
  self$running_var <- (1 - mom) * self$running_var + mom * as.vector(v) * n / max(n - 1, 1)
}

#' @rdname nn_layers
#' @export
nn_adaptive_avg_pool2d <- nn_module("nn_adaptive_avg_pool2d",
  initialize = function(output_size) { self$output_size <- output_size },
  forward = function(x) nnf_adaptive_avg_pool2d(x, self$output_size))

#' @rdname nn_layers
#' @export
nn_sequential <- nn_module("nn_sequential",
  initialize = function(...) {
    mods <- list(...)
    self$n_modules <- length(mods)
    for (i in seq_along(mods)) assign(sprintf("m%03d", i), mods[[i]], envir = self)
  },
  forward = function(x) {
    for (i in seq_len(self$n_modules)) x <- get(sprintf("m%03d", i), envir = self)(x)
    x
  })
