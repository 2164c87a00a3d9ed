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
#' @param input Input: a matrix (batch x features) or, for 2-D ops, an array of dim c(N, C, H, W).
#' @param weight,bias Parameters; `bias` may be `NULL`.
#' @param stride,padding,dilation,groups As in torch: scalars or length-2 vectors.
#' @param kernel_size Pooling window (scalar or length 2).
#' @param eps Layer-norm epsilon; for `nnf_normalize()` the smallest norm divided by.
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
nnf_linear <- function(input, weight, bias = NULL) {
  # rf_matprod / rf_sweep trace symbolic values and fall back to base R otherwise. Inputs of any
  # rank apply to their last dim: merging R's leading dims into rows moves nothing.
  d <- t_size(input)
  x <- if (length(d) > 2) t_set_dims(input, c(prod(d[-length(d)]), d[length(d)])) else input
  y <- rf_matprod(x, t(weight))
  if (!is.null(bias)) y <- rf_sweep(y, 2, bias, "+")
  if (length(d) > 2) return(t_set_dims(y, c(d[-length(d)], t_size(weight)[1])))
  if (length(d) == 1) t_set_dims(y, prod(t_size(y))) else y
}

#' @rdname nnf
#' @param input1,input2 `nnf_bilinear()`: inputs of dims `c(..., in1)` and `c(..., in2)` (the
#'   same leading dims); `weight` is `out x in1 x in2`, the result `c(..., out)`.
#' @export
nnf_bilinear <- function(input1, input2, weight, bias = NULL) {
  d1 <- t_size(input1); d2 <- t_size(input2); w <- t_size(weight)
  if (length(w) != 3 || d1[length(d1)] != w[2] || d2[length(d2)] != w[3] ||
      !identical(as.integer(d1[-length(d1)]), as.integer(d2[-length(d2)])))
    rf_shape_error(sprintf(paste0("nnf_bilinear(): inputs of dims c(%s) and c(%s) do not fit a weight of dims c(%s) ",
                                  "(out x in1 x in2, with the inputs' leading dims equal)"),
                           paste(d1, collapse = ", "), paste(d2, collapse = ", "), paste(w, collapse = ", ")), sys.call())
  lead <- d1[-length(d1)]
  m <- prod(lead)
  # y[r, o] = sum_ij x1[r, i] W[o, i, j] x2[r, j]: one product with W as an in1 x (out in2)
  # matrix, then each row's out x in2 block times x2, summed over in2.
  x1 <- t_set_dims(input1, c(m, w[2]))
  x2 <- t_set_dims(input2, c(m, w[3]))
  wm <- t_set_dims(t_permute(weight, c(2, 1, 3)), c(w[2], w[1] * w[3]))
  blocks <- t_set_dims(rf_matprod(x1, wm), c(m, w[1], w[3]))
  y <- torch_sum(torch_mul(blocks, torch_unsqueeze(x2, 2)), dim = 3)
  if (!is.null(bias)) y <- rf_sweep(y, 2, bias, "+")
  t_set_dims(y, c(lead, w[1]))
}

#' @rdname nnf
#' @param out `nnf_normalize()`: must be `NULL` (rfuse writes no tensor in place).
#' @export
nnf_normalize <- function(input, p = 2, dim = 2, eps = 1e-12, out = NULL) {
  if (!is.null(out)) rf_abort("rfuse_unsupported", "nnf_normalize(out =): rfuse returns the result instead", sys.call())
  if (!is.numeric(p) || length(p) != 1 || is.na(p) || p <= 0)
    rf_abort("rfuse_type_error", "nnf_normalize(): `p` must be a positive number (or Inf)", sys.call())
  if (!is.numeric(eps) || length(eps) != 1 || is.na(eps) || eps < 0)
    rf_abort("rfuse_type_error", "nnf_normalize(): `eps` must be a non-negative number", sys.call())
  a <- torch_abs(input)
  norm <- if (is.infinite(p)) torch_amax(a, dim = dim, keepdim = TRUE)
          else if (p == 2) torch_sqrt(torch_sum(torch_mul(a, a), dim = dim, keepdim = TRUE))
          else if (p == 1) torch_sum(a, dim = dim, keepdim = TRUE)
          else torch_pow(torch_sum(torch_pow(a, p), dim = dim, keepdim = TRUE), 1 / p)
  torch_div(input, torch_clamp(norm, min = eps)) # torch's x / max(||x||_p, eps)
}

unary_sym_or <- function(x, op, fallback) {
  if (!is_sym(x)) return(fallback(x))
  s <- to_dtype(x, trace_float(), sys.call(-1))
  new_sym(emit(.rf_b_unary, op, s$id), s$rdim, s$len, s$dtype)
}

#' @rdname nnf
#' @export
#' @param inplace Accepted as torch's (`TRUE` or `FALSE`); rfuse returns the result and leaves the
#'   input as it was (its values are never overwritten), which differs from torch only for code
#'   that reads the input again after the call.
nnf_relu <- function(input, inplace = FALSE) {
  check_inplace(inplace, sys.call())
  unary_sym_or(input, "relu", function(v) pmax(v, 0))
}
#' @rdname nnf
#' @export
nnf_relu6 <- function(input, inplace = FALSE) {
  check_inplace(inplace, sys.call())
  nnf_hardtanh(input, 0, 6)
}
check_inplace <- function(inplace, call)
  if (!is.logical(inplace) || length(inplace) != 1 || is.na(inplace))
    rf_abort("rfuse_type_error", "`inplace` must be TRUE or FALSE", call)
#' @rdname nnf
#' @export
#' @param approximate GELU: `"none"` (exact, with the normal CDF) or `"tanh"` (torch's tanh
#'   approximation).
nnf_gelu <- function(input, approximate = "none") {
  approximate <- match_choice(approximate, c("none", "tanh"), "approximate", sys.call())
  if (approximate == "tanh")
    return(0.5 * input * (1 + tanh(sqrt(2 / pi) * (input + 0.044715 * input^3))))
  unary_sym_or(input, "gelu", function(v) v * stats::pnorm(v))
}

# One of `choices`, or a classed error naming the argument.
match_choice <- function(value, choices, arg, call) {
  if (!is.character(value) || length(value) != 1 || !value %in% choices)
    rf_abort("rfuse_type_error", sprintf("`%s` must be one of %s, not %s", arg,
                                         paste0("\"", choices, "\"", collapse = ", "), deparse1(value)), call)
  value
}

#' @rdname nnf
#' @param negative_slope,alpha,beta,threshold,min_val,max_val As in torch.
#' @export
nnf_leaky_relu <- function(input, negative_slope = 0.01, inplace = FALSE) {
  check_inplace(inplace, sys.call())
  rf_ifelse(input > 0, input, input * negative_slope)
}
#' @rdname nnf
#' @export
nnf_elu <- function(input, alpha = 1, inplace = FALSE) {
  check_inplace(inplace, sys.call())
  rf_ifelse(input > 0, input, alpha * (exp(rf_pmin(input, 0)) - 1))
}
#' @rdname nnf
#' @export
nnf_selu <- function(input, inplace = FALSE) {
  check_inplace(inplace, sys.call())
  alpha <- 1.6732632423543772848170429916717; scale <- 1.0507009873554804934193349852946
  scale * rf_ifelse(input > 0, input, alpha * (exp(rf_pmin(input, 0)) - 1))
}
#' @rdname nnf
#' @export
nnf_silu <- function(input) input * nnf_sigmoid(input)
#' @rdname nnf
#' @export
nnf_softplus <- function(input, beta = 1, threshold = 20) {
  # torch's: linear above threshold; log1p(exp(-|z|)) + max(z, 0) is exact and never overflows.
  z <- input * beta
  rf_ifelse(z > threshold, input, (log(1 + exp(-abs(z))) + rf_pmax(z, 0)) / beta)
}
#' @rdname nnf
#' @export
nnf_hardtanh <- function(input, min_val = -1, max_val = 1, inplace = FALSE) {
  check_inplace(inplace, sys.call())
  rf_pmin(rf_pmax(input, min_val), max_val)
}
#' @rdname nnf
#' @param dim Softmax: the dim (1-based, negative from the end) that sums to one; `nnf_normalize()`: the dim the norm is taken along.
#' @export
nnf_softmax <- function(input, dim) t_softmax(input, dim, sys.call())
#' @rdname nnf
#' @export
nnf_log_softmax <- function(input, dim) t_log_softmax(input, dim, sys.call())
#' @rdname nnf
#' @export
nnf_tanh <- function(input) tanh(input)
#' @rdname nnf
#' @export
nnf_sigmoid <- function(input) unary_sym_or(input, "sigmoid", function(v) 1 / (1 + exp(-v)))

#' @rdname nnf
#' @param normalized_shape Layer norm: the trailing dims normalized over (their sizes).
#' @export
nnf_layer_norm <- function(input, normalized_shape, weight = NULL, bias = NULL, eps = 1e-5) {
  call <- sys.call()
  d <- t_size(input); k <- length(normalized_shape)
  if (k > length(d) || any(d[length(d) - k + seq_len(k)] != normalized_shape))
    rf_shape_error(sprintf("layer norm over trailing dims %s, but the input has dims %s",
                           paste(normalized_shape, collapse = "x"), paste(d, collapse = "x")), call)
  # Leading and trailing dims each merge into one (R's column-major order moves nothing).
  m <- prod(normalized_shape)
  x <- t_set_dims(input, c(prod(d) / m, m))
  xc <- rf_sweep(x, 1, rf_rowMeans(x), "-")
  y <- rf_sweep(xc, 1, sqrt(rf_rowMeans(xc * xc) + eps), "/")
  flat <- function(p) if (is_sym(p)) reshape_sym(p, NULL, p$len) else as.vector(p)
  if (!is.null(weight)) y <- rf_sweep(y, 2, flat(weight), "*")
  if (!is.null(bias)) y <- rf_sweep(y, 2, flat(bias), "+")
  if (length(d) == 2) y else t_set_dims(y, d)
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

# Runs a 2-D op on plain R arrays through a cached float64 program (base R has no convolution);
# on rf_tensors it is recorded like any tensor op (so that backward() sees it).
eager_cache <- new.env(parent = emptyenv())
run_eagerly <- function(key, f, args) {
  if (any(vapply(args, is_tensor, TRUE))) return(record(key, f, args))
  jf <- eager_cache[[key]]
  if (is.null(jf)) {
    jf <- rf_jit(f, dtype = "float64")
    assign("no_base_r", TRUE, envir = attr(jf, "rfuse")$notes) # f itself comes back here
    assign("internal", TRUE, envir = attr(jf, "rfuse")$notes) # rfuse's own: no recompile warning
    assign(key, jf, envir = eager_cache)
  }
  do.call(jf, args)
}

#' @rdname nnf
#' @export
#' @details `padding` may also be `"valid"` (none) or `"same"` (output size of the input's, for
#'   stride 1; an odd total padding puts the extra row or column after, as torch does).
nnf_conv2d <- function(input, weight, bias = NULL, stride = 1, padding = 0, dilation = 1, groups = 1) {
  call <- sys.call()
  x <- input
  st <- pair(stride); dl <- pair(dilation)
  pd <- conv_padding(padding, t_size(weight)[3:4], st, dl, call)
  if (!any_sym(x, weight, bias)) {
    key <- paste("conv2d", deparse(list(st, pd, dl, groups, is.null(bias))))
    resolved <- structure(pd, class = "rf_padding")
    f <- if (is.null(bias)) function(x, weight) nnf_conv2d(x, weight, NULL, st, resolved, dl, groups)
         else function(x, weight, bias) nnf_conv2d(x, weight, bias, st, resolved, dl, groups)
    return(run_eagerly(key, f, if (is.null(bias)) list(x, weight) else list(x, weight, bias)))
  }
  xi <- to_nchw(x, call)
  wi <- to_nchw(weight, call)
  bi <- if (is.null(bias)) -1L else to_dtype(as_sym(bias, call), trace_float(), call)$id
  y <- emit(.rf_b_conv2d, xi, wi, bi, st, pd, dl, as.integer(groups), call = call)
  from_nchw(y, call)
}

# A convolution's padding as c(top, bottom, left, right): numbers (one or per dim, a vector or a
# list as torch code writes them), "valid", "same", or (internally) that vector already, classed
# rf_padding.
conv_padding <- function(padding, k, stride, dilation, call) {
  if (inherits(padding, "rf_padding")) return(unclass(padding))
  if (is.list(padding) && all(vapply(padding, function(p) is.numeric(p) && length(p) == 1, TRUE))) padding <- unlist(padding)
  if (is.character(padding)) {
    padding <- match_choice(padding, c("valid", "same"), "padding", call)
    if (padding == "valid") return(c(0L, 0L, 0L, 0L))
    if (any(stride != 1))
      rf_abort("rfuse_type_error", "padding = \"same\" is not supported for strided convolutions (as in torch)", call)
    total <- dilation * (k - 1L)
    lo <- total %/% 2L
    return(as.integer(c(lo[1], total[1] - lo[1], lo[2], total[2] - lo[2])))
  }
  if (!is.numeric(padding) || anyNA(padding) || any(padding < 0) || !length(padding) %in% 1:2)
    rf_abort("rfuse_type_error", "`padding` must be one or two non-negative numbers, \"valid\" or \"same\"", call)
  pd <- pair(padding)
  c(pd[1], pd[1], pd[2], pd[2])
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
#' @param ceil_mode,return_indices Max pooling: only torch's defaults (`FALSE`) are supported.
nnf_max_pool2d <- function(input, kernel_size, stride = NULL, padding = 0, dilation = 1, ceil_mode = FALSE,
                           return_indices = FALSE) {
  x <- input
  call <- sys.call()
  if (any(dilation != 1)) rf_unsupported("nnf_max_pool2d", call, "`dilation` other than 1 is not supported yet")
  if (!isFALSE(ceil_mode)) rf_unsupported("nnf_max_pool2d", call, "`ceil_mode = TRUE` is not supported yet")
  if (!isFALSE(return_indices)) rf_unsupported("nnf_max_pool2d", call, "`return_indices = TRUE` is not supported yet")
  pool2d("max", x, kernel_size, stride, padding, call)
}
#' @rdname nnf
#' @export
nnf_avg_pool2d <- function(input, kernel_size, stride = NULL, padding = 0)
  pool2d("avg", input, kernel_size, stride, padding, sys.call())

# Per-channel (R dim 2) mean of an array of dim c(N, C, ...).
channel_mean <- function(x, call = NULL) {
  d <- t_size(x)
  if (length(d) < 2)
    rf_shape_error(sprintf("batch norm expects dims c(N, C, ...), got c(%s)", paste(d, collapse = ", ")), call)
  # (statistics of an rf_tensor are read back per channel; they are not part of its graph)
  if (is_tensor(x)) return(as.vector(tensor_values(with_no_grad(torch_mean(x, dim = setdiff(seq_along(d), 2L))))))
  if (!is_sym(x)) return(apply(unclass(x), 2, mean))
  s <- to_dtype(as_sym(x, call), trace_float(), call)
  n <- length(d)
  new_sym(emit(.rf_b_reduce, "mean", s$id, setdiff(seq_len(n) - 1L, n - 2L), FALSE, call = call), NULL, d[2], s$dtype)
}

#' @rdname nnf
#' @param running_mean,running_var Per-channel statistics used in evaluation mode.
#' @param training Batch norm: normalize by the batch's statistics (`TRUE`) or the running ones.
#' @export
nnf_batch_norm2d <- function(input, running_mean = NULL, running_var = NULL, weight = NULL, bias = NULL,
                             training = FALSE, eps = 1e-5) {
  x <- input
  call <- sys.call()
  if (length(t_size(x)) != 4)
    rf_shape_error(sprintf("expected an array of dim c(N, C, H, W), got dim c(%s)", paste(t_size(x), collapse = ", ")), call)
  nnf_batch_norm(x, running_mean, running_var, weight, bias, training, eps)
}

#' @rdname nnf
#' @export
nnf_batch_norm <- function(input, running_mean = NULL, running_var = NULL, weight = NULL, bias = NULL,
                           training = FALSE, eps = 1e-5) {
  x <- input
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
nnf_adaptive_avg_pool2d <- function(input, output_size) {
  call <- sys.call()
  x <- input
  # A 3-d input is one sample c(C, H, W), as torch takes it.
  if (length(t_size(x)) == 3) return(torch_squeeze(nnf_adaptive_avg_pool2d(torch_unsqueeze(x, 1), output_size), 1))
  os <- pair(output_size)
  d <- if (is_sym(x)) x$rdim else dim(x)
  if (length(d) != 4)
    rf_shape_error(sprintf("expected an array of dim c(N, C, H, W), got dim c(%s)", paste(d, collapse = ", ")), call)
  if (all(os == 1)) { # global average pooling: a reduction (fuses with what follows)
    if (is_tensor(x)) return(torch_mean(x, dim = c(3L, 4L), keepdim = TRUE))
    if (!is_sym(x)) return(array(rowMeans(x, dims = 2), c(d[1:2], 1, 1)))
    s <- to_dtype(as_sym(x, call), trace_float(), call)
    id <- emit(.rf_b_reduce, "mean", s$id, c(0L, 1L), TRUE, call = call)
    return(new_sym(id, c(d[1:2], 1L, 1L), d[1] * d[2], s$dtype))
  }
  if (all(d[3:4] %% os == 0)) return(nnf_avg_pool2d(x, d[3:4] %/% os))
  # torch's windows (start floor(i * H / oh), end ceil((i + 1) * H / oh)) may overlap: the means
  # are P_h X P_w^T per channel, with the windows' averaging matrices (an exact linear map).
  n <- d[1] * d[2]
  y <- torch_matmul(torch_reshape(x, c(n * d[3], d[4])), t(adaptive_pool_matrix(d[4], os[2]))) # (n H) x ow
  y <- torch_reshape(torch_transpose(torch_reshape(y, c(n, d[3], os[2])), 2, 3), c(n * os[2], d[3]))
  y <- torch_matmul(y, t(adaptive_pool_matrix(d[3], os[1])))                                       # (n ow) x oh
  torch_transpose(torch_reshape(y, c(d[1:2], os[2], os[1])), 3, 4)
}

# The (out x n) matrix whose row i averages torch's adaptive-pooling window i of n inputs.
adaptive_pool_matrix <- function(n, out) {
  m <- matrix(0, out, n)
  for (i in seq_len(out) - 1L) {
    lo <- (i * n) %/% out; hi <- -((-(i + 1L) * n) %/% out) # floor and ceiling
    m[i + 1L, (lo + 1L):hi] <- 1 / (hi - lo)
  }
  m
}

#' @rdname nnf
#' @param p Dropout: the probability of zeroing an element; `nnf_normalize()`: the norm's order (a positive number or `Inf`).
#' @details `nnf_dropout()` in training mode zeroes each element with probability `p` and scales
#'   the rest by 1 / (1 - p). Each mask comes from a counter-based generator (Philox4x32-10, as
#'   torch's and cuRAND's) keyed by a seed that R's random number generator draws at each call,
#'   so `set.seed()` makes masks reproducible, a compiled program draws a new mask per call and
#'   training step on the device (no mask is drawn in R or copied), and eager code draws the same
#'   mask its compiled program would. (Like torch's, the masks are not R's `runif()` numbers.)
#' @export
nnf_dropout <- function(input, p = 0.5, training = TRUE, inplace = FALSE) {
  call <- sys.call()
  check_inplace(inplace, call)
  x <- input
  check_dropout_p(p, call)
  if (!isTRUE(training) || p == 0) return(x)
  if (!is_sym(x)) return(x * dropout_mask(length(x), p))
  s <- to_dtype(as_sym(x, call), trace_float(), call)
  s * traced_dropout_mask("nnf_dropout", s$rdim, s$len, p, s$dtype, call)
}

check_dropout_p <- function(p, call)
  if (!is.numeric(p) || length(p) != 1 || is.na(p) || p < 0 || p >= 1)
    rf_abort("rfuse_type_error", "dropout's `p` must be a probability in [0, 1)", call)

# Dropout keeps an element where its uniform draw is at least `p` rounded up to the generator's
# grid (multiples of 2^-24): the same decision in double (eager) and in float32 (programs).
dropout_threshold <- function(p) ceiling(p * 2^24) / 2^24
# `n` generator keys from R's generator, one after another: two integers in [0, 2^31 - 1) each.
draw_seed <- function(n = 1L) as.integer(floor(stats::runif(2L * n) * 2147483647))
dropout_mask <- function(n, p) (.rf_random_uniform(draw_seed(), n) >= dropout_threshold(p)) / (1 - p)

# A dropout mask of R structure (rdim, len) in traced code: uniform draws computed by the program
# (rfuse.random_uniform) from a seed, an extra input drawn by R at every call (see call_inputs).
traced_dropout_mask <- function(name, rdim, len, p, dtype, call) {
  seed <- traced_random(name, "seed", 2L, 2L, "i32", call)
  u <- new_sym(emit(.rf_b_random_uniform, seed$id, tshape(rdim, len), call = call), rdim, len, "f32")
  to_dtype(cast_sym(u >= dropout_threshold(p), "f32") * (1 / (1 - p)), dtype, call)
}

# Random values in traced code (`kind`: a dropout's generator seed, two integers; standard normal
# or uniform on [0, 1) values) of R structure (rdim, len): an extra input of the program, drawn
# by R's generator afresh before every call (and every training step), in the order the traced
# code draws them, so a jitted function draws what the function itself would.
traced_random <- function(name, kind, rdim, len, dtype, call, p = NULL) {
  if (isTRUE(.rf_state$in_helper))
    rf_unsupported(name, call,
                   "random draws in a helper function traced on its own; call it in the traced function or a module's forward")
  id <- rf_guard(.rf_b_input(current_builder(), tshape(rdim, len), dtype, paste(kind, "draw")), call)
  .rf_state$random <- c(.rf_state$random, list(list(kind = kind, p = p, len = len, rdim = rdim, dtype = dtype)))
  new_sym(id, rdim, len, dtype)
}

# One call's (or step's) values of a traced random input (traced_random), shaped.
draw_random <- function(r) {
  v <- switch(r$kind, seed = draw_seed(), normal = stats::rnorm(r$len), uniform = stats::runif(r$len))
  if (length(r$rdim) > 1) dim(v) <- r$rdim
  v
}

#' @rdname nnf
#' @param start_dim,end_dim Flatten: the dims merged (1-based; negative from the end), row-major
#'   as torch's.
#' @export
nnf_flatten <- function(input, start_dim = 2, end_dim = -1) t_flatten(input, start_dim, end_dim, sys.call())

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
#'   \item `nn_bilinear(in1_features, in2_features, out_features, bias = TRUE)`: weight
#'     `out x in1 x in2` ([nnf_bilinear()]).
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
nn_bilinear <- nn_module("nn_bilinear",
  initialize = function(in1_features, in2_features, out_features, bias = TRUE) {
    self$weight <- nn_parameter(init_uniform(c(out_features, in1_features, in2_features), in1_features))
    if (bias) self$bias <- nn_parameter(init_uniform(out_features, in1_features))
  },
  forward = function(input1, input2) nnf_bilinear(input1, input2, self$weight,
                                                  if (exists("bias", envir = self)) self$bias))

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
nn_relu <- nn_module("nn_relu",
  initialize = function(inplace = FALSE) { check_inplace(inplace, sys.call()); self$inplace <- inplace },
  forward = function(x) nnf_relu(x))
#' @rdname nn_layers
#' @export
nn_relu6 <- nn_module("nn_relu6",
  initialize = function(inplace = FALSE) { check_inplace(inplace, sys.call()); self$inplace <- inplace },
  forward = function(x) nnf_relu6(x))
#' @rdname nn_layers
#' @export
nn_gelu <- nn_module("nn_gelu",
  initialize = function(approximate = "none") {
    self$approximate <- match_choice(approximate, c("none", "tanh"), "approximate", sys.call())
  },
  forward = function(x) nnf_gelu(x, self$approximate))
#' @rdname nn_layers
#' @export
nn_sigmoid <- nn_module("nn_sigmoid", forward = function(x) nnf_sigmoid(x))
#' @rdname nn_layers
#' @export
nn_tanh <- nn_module("nn_tanh", forward = function(x) tanh(x))
#' @rdname nn_layers
#' @export
nn_max_pool2d <- nn_module("nn_max_pool2d",
  initialize = function(kernel_size, stride = NULL, padding = 0, dilation = 1, return_indices = FALSE,
                        ceil_mode = FALSE) {
    self$kernel_size <- kernel_size; self$stride <- stride; self$padding <- padding
    self$dilation <- dilation; self$return_indices <- return_indices; self$ceil_mode <- ceil_mode
    # (checked now, as torch would fail at the first forward)
    nnf_max_pool2d(array(0, c(1, 1, 1, 1)), 1, 1, 0, dilation, ceil_mode, return_indices)
  },
  forward = function(x) nnf_max_pool2d(x, self$kernel_size, self$stride, self$padding, self$dilation, self$ceil_mode,
                                       self$return_indices))
#' @rdname nn_layers
#' @export
nn_avg_pool2d <- nn_module("nn_avg_pool2d",
  initialize = function(kernel_size, stride = NULL, padding = 0) {
    self$kernel_size <- kernel_size; self$stride <- stride; self$padding <- padding
  },
  forward = function(x) nnf_avg_pool2d(x, self$kernel_size, self$stride, self$padding))
#' @rdname nn_layers
#' @export
nn_flatten <- nn_module("nn_flatten",
  initialize = function(start_dim = 2, end_dim = -1) { self$start_dim <- start_dim; self$end_dim <- end_dim },
  forward = function(x) nnf_flatten(x, self$start_dim, self$end_dim))
#' @rdname nn_layers
#' @export
nn_dropout <- nn_module("nn_dropout",
  initialize = function(p = 0.5, inplace = FALSE) { check_inplace(inplace, sys.call()); self$p <- p; self$inplace <- inplace },
  forward = function(x) nnf_dropout(x, self$p, self$training))
#' @rdname nn_layers
#' @export
nn_layer_norm <- nn_module("nn_layer_norm",
  initialize = function(normalized_shape, eps = 1e-5, elementwise_affine = TRUE) {
    self$normalized_shape <- as.integer(normalized_shape)
    shape_of <- function(v) if (length(normalized_shape) > 1) array(v, normalized_shape) else v
    if (elementwise_affine) {
      self$weight <- nn_parameter(shape_of(rep(1, prod(normalized_shape))))
      self$bias <- nn_parameter(shape_of(rep(0, prod(normalized_shape))))
    }
    self$eps <- eps
  },
  forward = function(x) nnf_layer_norm(x, self$normalized_shape, self$weight, self$bias, self$eps))
batch_norm_module <- function(name, ranks) {
  force(ranks)
  nn_module(name,
    initialize = function(num_features, eps = 1e-5, momentum = 0.1, affine = TRUE, track_running_stats = TRUE) {
      if (affine) {
        self$weight <- nn_parameter(rep(1, num_features))
        self$bias <- nn_parameter(rep(0, num_features))
      }
      self$track_running_stats <- track_running_stats
      if (track_running_stats) {
        self$running_mean <- nn_buffer(rep(0, num_features))
        self$running_var <- nn_buffer(rep(1, num_features))
        self$num_batches_tracked <- nn_buffer(0)
      }
      self$eps <- eps
      self$momentum <- momentum
    },
    forward = function(x) {
      if (!length(t_size(x)) %in% ranks)
        rf_shape_error(sprintf("%s expects %s-d input, got dims c(%s)", class(self$.instance)[1],
                               paste(ranks, collapse = " or "), paste(t_size(x), collapse = ", ")))
      batch_stats <- self$training || !self$track_running_stats
      if (self$training && self$track_running_stats) track_batch_stats(self, x)
      nnf_batch_norm(x, self$running_mean, self$running_var, self$weight, self$bias, batch_stats, self$eps)
    })
}
#' @rdname nn_layers
#' @export
nn_batch_norm2d <- batch_norm_module("nn_batch_norm2d", 4L)
#' @rdname nn_layers
#' @export
nn_batch_norm1d <- batch_norm_module("nn_batch_norm1d", 2:3)

# Training-mode batch norm updates its running statistics from the batch's, as torch does. On
# plain arrays at once; in traced code the batch statistics become extra outputs of the program
# (the same reductions nnf_batch_norm2d computes: CSE merges them), applied after every call.
track_batch_stats <- function(self, x) {
  m <- channel_mean(x)
  xc <- rf_sweep(x, 2, m, "-")
  v <- channel_mean(xc * xc)
  n <- prod(t_size(x)) / t_size(x)[2]
  if (!is_sym(x)) return(update_running_stats(self, m, v, n))
  if (isTRUE(.rf_state$in_helper)) return(invisible()) # a helper's values cannot leave it
  run_m <- self$running_mean
  run_v <- self$running_var
  if (isTRUE(.rf_state$replace_buffers) && is_sym(run_m) && is_sym(run_v) && !is.null(self$momentum)) {
    # The running statistics are inputs of the traced code (a training step's state, which
    # rf_fit() keeps on the device): their updates are outputs that replace them, as torch
    # updates them in place.
    mom <- self$momentum
    new_m <- (1 - mom) * run_m + mom * m
    new_v <- (1 - mom) * run_v + mom * v * (n / max(n - 1, 1))
    .rf_state$aux <- c(.rf_state$aux, list(list(ids = c(new_m$id, new_v$id), lens = c(new_m$len, new_v$len),
                                                replaces = c(run_m$id, run_v$id))))
    return(invisible())
  }
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

#' @rdname nnf
#' @export
nnf_conv1d <- function(input, weight, bias = NULL, stride = 1, padding = 0, dilation = 1, groups = 1) {
  call <- sys.call()
  d <- t_size(input); w <- t_size(weight)
  if (length(d) != 3 || length(w) != 3)
    rf_shape_error(sprintf("conv1d expects input c(N, C, L) and weight c(out, in / groups, k), got c(%s) and c(%s)",
                           paste(d, collapse = ", "), paste(w, collapse = ", ")), call)
  # A 1-d convolution is a 2-d one over height 1 (inserting a size-1 dim moves nothing).
  pad <- if (is.character(padding)) padding else c(0, padding)
  y <- nnf_conv2d(t_set_dims(input, c(d[1:2], 1L, d[3])), t_set_dims(weight, c(w[1:2], 1L, w[3])), bias,
                  c(1, stride), pad, c(1, dilation), groups)
  t_set_dims(y, t_size(y)[-3])
}

#' @rdname nnf
#' @param padding_idx Embedding: the index (1-based) whose row is zero and gets no gradient.
#' @details `nnf_embedding(input, weight)` looks up rows `input` (1-based, as torch for R) of
#'   `weight`; traced, the lookup is a one-hot matrix product (so its gradient reaches `weight`).
#' @export
nnf_embedding <- function(input, weight, padding_idx = NULL) {
  call <- sys.call()
  w <- t_size(weight)
  if (length(w) != 2) rf_shape_error("an embedding's weight must be a matrix (num_embeddings x embedding_dim)", call)
  d <- t_size(input); m <- prod(d)
  if (!is.null(padding_idx)) weight <- rf_sweep(weight, 1, as.numeric(seq_len(w[1]) != padding_idx), "*")
  if (!is_sym(input)) {
    idx <- as.vector(unclass(input))
    if (any(is.na(idx) | idx < 1 | idx > w[1] | idx != round(idx)))
      rf_abort("rfuse_shape_error", sprintf("embedding indices must be whole numbers in 1..%d (torch for R's are 1-based)", w[1]), call)
    if (!is_sym(weight)) return(shaped(unclass(weight)[idx, , drop = FALSE], c(d, w[2])))
  }
  flat <- t_set_dims(input, c(m, 1L))
  onehot <- t_binary(`==`, flat, t_set_dims(seq_len(w[1]) + 0, c(1L, w[1])), call)
  y <- rf_matprod(onehot * 1, weight)
  t_set_dims(y, c(d, w[2]))
}

#' @rdname nn_layers
#' @export
nn_conv1d <- nn_module("nn_conv1d",
  initialize = function(in_channels, out_channels, kernel_size, stride = 1, padding = 0,
                        dilation = 1, groups = 1, bias = TRUE) {
    fan_in <- in_channels / groups * kernel_size
    self$weight <- nn_parameter(init_uniform(c(out_channels, in_channels / groups, kernel_size), fan_in))
    if (bias) self$bias <- nn_parameter(init_uniform(out_channels, fan_in))
    self$stride <- stride; self$padding <- padding; self$dilation <- dilation; self$groups <- groups
  },
  forward = function(x) nnf_conv1d(x, self$weight, self$bias, self$stride, self$padding, self$dilation, self$groups))

#' @rdname nn_layers
#' @export
nn_embedding <- nn_module("nn_embedding",
  initialize = function(num_embeddings, embedding_dim, padding_idx = NULL) {
    w <- matrix(stats::rnorm(num_embeddings * embedding_dim), num_embeddings)
    if (!is.null(padding_idx)) {
      if (padding_idx < 0) padding_idx <- num_embeddings + padding_idx + 1
      w[padding_idx, ] <- 0
    }
    self$weight <- nn_parameter(w)
    self$padding_idx <- padding_idx
  },
  forward = function(x) nnf_embedding(x, self$weight, self$padding_idx))

activation <- function(name, f, params = list(), inplace = FALSE) {
  # By name, looked up at each call: the nnf_ function that is exported (torch.R wraps them to
  # record on rf_tensors after this file is loaded).
  f <- deparse(substitute(f))
  init <- function() NULL
  # torch's activations take `inplace` (see nnf_relu): checked and kept, as torch keeps it.
  formals(init) <- c(params, if (inplace) alist(inplace = FALSE))
  body(init) <- as.call(c(list(as.name("{")),
                          if (inplace) list(quote(check_inplace(inplace, sys.call())), quote(self$inplace <- inplace)),
                          lapply(names(params), function(p) call("<-", call("$", as.name("self"), as.name(p)), as.name(p)))))
  nn_module(name, initialize = init, forward = function(input) {
    args <- lapply(names(params), function(p) get(p, envir = self))
    do.call(f, append(list(input), args))
  })
}

#' @rdname nn_layers
#' @export
nn_leaky_relu <- activation("nn_leaky_relu", nnf_leaky_relu, alist(negative_slope = 0.01), inplace = TRUE)
#' @rdname nn_layers
#' @export
nn_elu <- activation("nn_elu", nnf_elu, alist(alpha = 1), inplace = TRUE)
#' @rdname nn_layers
#' @export
nn_selu <- activation("nn_selu", nnf_selu, inplace = TRUE)
#' @rdname nn_layers
#' @export
nn_silu <- activation("nn_silu", nnf_silu, inplace = TRUE)
#' @rdname nn_layers
#' @export
nn_softplus <- activation("nn_softplus", nnf_softplus, alist(beta = 1, threshold = 20))
#' @rdname nn_layers
#' @export
nn_hardtanh <- activation("nn_hardtanh", nnf_hardtanh, alist(min_val = -1, max_val = 1), inplace = TRUE)
#' @rdname nn_layers
#' @export
nn_softmax <- activation("nn_softmax", nnf_softmax, alist(dim = ))
#' @rdname nn_layers
#' @export
nn_log_softmax <- activation("nn_log_softmax", nnf_log_softmax, alist(dim = ))

# ---- Recurrent layers ----------------------------------------------------------------------
# Programs traced for a GPU run each layer and direction as one rfuse.recurrent op (cuDNN's RNN
# call, its gradient cuDNN's backward calls; see recurrent_library). Elsewhere the layer is
# unrolled over the (static) sequence length: one matrix product computes every time step's
# input projection, then each step is a handful of fused kernels. Parameters are named and
# laid out as torch's (weight_ih_l0, weight_hh_l0_reverse, ...; gates i, f, g, o for the LSTM
# and r, z, n for the GRU), so state dicts interchange.

rnn_module <- function(name, mode) {
  force(mode)
  gates <- switch(mode, lstm = 4L, gru = 3L, 1L)
  nn_module(name,
    initialize = function(input_size, hidden_size, num_layers = 1, bias = TRUE, batch_first = FALSE,
                          dropout = 0, bidirectional = FALSE, nonlinearity = "tanh") {
      if (mode != "rnn" && !missing(nonlinearity))
        rf_abort("rfuse_unsupported", sprintf("%s() has no argument `nonlinearity`", name), sys.call())
      self$nonlinearity <- match_choice(nonlinearity, c("tanh", "relu"), "nonlinearity", sys.call())
      self$.record_whole <- TRUE # on recording rf_tensors: one recorded op (see record_forward)
      self$hidden_size <- hidden_size; self$num_layers <- num_layers; self$batch_first <- batch_first
      self$dropout <- dropout; self$bidirectional <- bidirectional; self$bias <- bias
      dirs <- if (bidirectional) 2L else 1L
      u <- function(...) nn_parameter(init_uniform(c(...), hidden_size)) # torch's: +-1/sqrt(hidden)
      for (l in seq_len(num_layers) - 1L) for (dir in seq_len(dirs)) {
        sfx <- paste0("_l", l, if (dir == 2L) "_reverse")
        inp <- if (l == 0) input_size else hidden_size * dirs
        assign(paste0("weight_ih", sfx), u(gates * hidden_size, inp), envir = self)
        assign(paste0("weight_hh", sfx), u(gates * hidden_size, hidden_size), envir = self)
        if (bias) {
          assign(paste0("bias_ih", sfx), u(gates * hidden_size), envir = self)
          assign(paste0("bias_hh", sfx), u(gates * hidden_size), envir = self)
        }
      }
    },
    forward = function(input, hx = NULL) rnn_forward(self, mode, input, hx))
}

rnn_forward <- function(self, mode, input, hx) {
  call <- sys.call(-1)
  d <- t_size(input)
  if (length(d) != 3)
    rf_shape_error(sprintf("%s expects a 3-d input (%s), got dims c(%s)", mode,
                           if (self$batch_first) "batch, seq, feature" else "seq, batch, feature", paste(d, collapse = ", ")), call)
  tdim <- if (self$batch_first) 2L else 1L
  steps <- d[tdim]; batch <- d[3L - tdim]
  H <- self$hidden_size; dirs <- if (self$bidirectional) 2L else 1L
  state0 <- function(which, k) { # initial state k (layer x direction) as batch x hidden
    s <- if (is.null(hx)) NULL else if (mode == "lstm") hx[[which]] else hx
    if (is.null(s)) return(matrix(0, batch, H))
    t_set_dims(t_narrow(s, 1, k, 1, call), c(batch, H))
  }
  x <- input
  h_n <- list(); c_n <- list()
  library_layers <- recurrent_library(input)
  for (l in seq_len(self$num_layers) - 1L) {
    outs <- list()
    for (dir in seq_len(dirs)) {
      sfx <- paste0("_l", l, if (dir == 2L) "_reverse")
      w_ih <- get(paste0("weight_ih", sfx), envir = self); w_hh <- get(paste0("weight_hh", sfx), envir = self)
      b_ih <- if (self$bias) get(paste0("bias_ih", sfx), envir = self)
      b_hh <- if (self$bias) get(paste0("bias_hh", sfx), envir = self)
      k <- l * dirs + dir
      if (library_layers) {
        cell <- if (mode == "rnn") paste0("rnn_", self$nonlinearity) else mode
        r <- recurrent_layer(cell, x, self$batch_first, state0(1L, k), if (mode == "lstm") state0(2L, k),
                             w_ih, w_hh, b_ih, b_hh, reverse = dir == 2L, call)
        outs[[dir]] <- r$y
        h_n[[k]] <- r$h
        if (mode == "lstm") c_n[[k]] <- r$c
        next
      }
      # Every step's input projection at once: (steps * batch) x gates*H.
      xd <- t_size(x)
      proj <- nnf_linear(t_set_dims(x, c(xd[1] * xd[2], xd[3])), w_ih, b_ih)
      proj <- t_set_dims(proj, c(xd[1], xd[2], t_size(w_ih)[1]))
      h <- state0(1L, k); cst <- if (mode == "lstm") state0(2L, k)
      seq_out <- vector("list", steps)
      order <- if (dir == 1L) seq_len(steps) else rev(seq_len(steps))
      for (t in order) {
        xt <- t_set_dims(t_narrow(proj, tdim, t, 1L, call), c(batch, t_size(w_ih)[1]))
        hh <- nnf_linear(h, w_hh, b_hh)
        gate <- function(a, i) t_narrow(a, 2L, (i - 1L) * H + 1L, H, call)
        if (mode == "lstm") {
          g <- xt + hh
          i_g <- nnf_sigmoid(gate(g, 1)); f_g <- nnf_sigmoid(gate(g, 2))
          c_g <- tanh(gate(g, 3)); o_g <- nnf_sigmoid(gate(g, 4))
          cst <- f_g * cst + i_g * c_g
          h <- o_g * tanh(cst)
        } else if (mode == "gru") {
          r <- nnf_sigmoid(gate(xt, 1) + gate(hh, 1))
          z <- nnf_sigmoid(gate(xt, 2) + gate(hh, 2))
          n <- tanh(gate(xt, 3) + r * gate(hh, 3))
          h <- (1 - z) * n + z * h
        } else {
          a <- xt + hh
          h <- if (self$nonlinearity == "tanh") tanh(a) else nnf_relu(a)
        }
        seq_out[[t]] <- h
      }
      outs[[dir]] <- t_stack(seq_out, tdim, call)
      h_n[[k]] <- h
      if (mode == "lstm") c_n[[k]] <- cst
    }
    x <- if (dirs == 2L) t_cat(outs, 3L, call) else outs[[1]]
    if (self$dropout > 0 && l < self$num_layers - 1L) x <- nnf_dropout(x, self$dropout, self$training)
  }
  hn <- t_stack(h_n, 1L, call)
  if (mode == "lstm") list(x, list(hn, t_stack(c_n, 1L, call))) else list(x, hn)
}

# Whether a recurrent layer traced now runs as one rfuse.recurrent op per layer and direction
# (cuDNN's RNN call and its gradient): for programs traced for a GPU, unless the cudnn_rnn option
# is off. Elsewhere the steps are written out (on the CPU a product and a fused cell kernel each).
recurrent_library <- function(input) {
  is_sym(input) && isTRUE(.rf_state$device %in% recurrent_library_devices) &&
    identical(rf_guard(.rf_option_get("cudnn_rnn")), "TRUE")
}
# (test-recurrent.R adds "cpu", where the interpreter runs the op, to check the op's frontend)
recurrent_library_devices <- "cuda"

# One layer and direction as rfuse.recurrent: `x` in torch dims (batch first or not), the
# initial states [batch, hidden] (c0: the LSTM's, else NULL), torch's weights (biases NULL for
# bias = FALSE: zeros). The op reads time first; the reverse direction runs on the time-reversed
# sequence. Returns the output in x's layout and the last states.
recurrent_layer <- function(cell, x, batch_first, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, call) {
  xt <- if (batch_first) t_permute(x, c(2L, 1L, 3L), call) else x
  d <- t_size(xt); H <- t_size(w_hh)[2]; dtype <- xt$dtype
  id_of <- function(v) sym_rowmajor(to_dtype(as_sym(v, call), dtype, call))
  bias_id <- function(b) id_of(if (is.null(b)) numeric(t_size(w_ih)[1]) else b)
  xid <- sym_rowmajor(xt)
  if (reverse) xid <- emit(.rf_b_reverse, xid, 0L, call = call)
  ids <- emit(.rf_b_recurrent, cell, xid, id_of(h0), if (is.null(c0)) -1L else id_of(c0), id_of(w_ih), id_of(w_hh),
              bias_id(b_ih), bias_id(b_hh), call = call)
  yid <- if (reverse) emit(.rf_b_reverse, ids[1], 0L, call = call) else ids[1]
  y <- sym_from_rowmajor(yid, c(d[1], d[2], H), dtype)
  list(y = if (batch_first) t_permute(y, c(2L, 1L, 3L), call) else y,
       h = sym_from_rowmajor(ids[2], c(d[2], H), dtype),
       c = if (length(ids) > 2) sym_from_rowmajor(ids[3], c(d[2], H), dtype))
}

#' @rdname nn_layers
#' @export
nn_lstm <- rnn_module("nn_lstm", "lstm")
#' @rdname nn_layers
#' @export
nn_gru <- rnn_module("nn_gru", "gru")
#' @rdname nn_layers
#' @export
nn_rnn <- rnn_module("nn_rnn", "rnn")

# Loss modules (torch's nn_*_loss): the losses of autodiff.R with their reduction.
# (`f` is the loss's name: the function is looked up when called, so that the module gets the
# nnf_* function as finally defined, which takes rf_tensors; see torch.R's functional ops.)
loss_module <- function(name, f) {
  force(f)
  nn_module(name, initialize = function(reduction = "mean") {
    self$reduction <- match_choice(reduction, c("mean", "sum", "none"), "reduction", sys.call())
  }, forward = function(input, target) get(f, envir = rfuse_namespace())(input, target, reduction = self$reduction))
}
# The class losses take torch's class weights and ignore_index too.
class_loss_module <- function(name, f) {
  force(f)
  nn_module(name, initialize = function(weight = NULL, ignore_index = -100, reduction = "mean") {
    self$weight <- weight
    self$ignore_index <- ignore_index
    self$reduction <- match_choice(reduction, c("mean", "sum", "none"), "reduction", sys.call())
  }, forward = function(input, target)
    get(f, envir = rfuse_namespace())(input, target, weight = self$weight, ignore_index = self$ignore_index,
                                      reduction = self$reduction))
}
#' @rdname losses
#' @export
nn_mse_loss <- loss_module("nn_mse_loss", "nnf_mse_loss")
#' @rdname losses
#' @export
nn_l1_loss <- loss_module("nn_l1_loss", "nnf_l1_loss")
#' @rdname losses
#' @export
nn_cross_entropy_loss <- class_loss_module("nn_cross_entropy_loss", "nnf_cross_entropy")
#' @rdname losses
#' @export
nn_nll_loss <- class_loss_module("nn_nll_loss", "nnf_nll_loss")
#' @rdname losses
#' @export
nn_bce_loss <- loss_module("nn_bce_loss", "nnf_binary_cross_entropy")
#' @rdname losses
#' @export
nn_bce_with_logits_loss <- loss_module("nn_bce_with_logits_loss", "nnf_binary_cross_entropy_with_logits")

# ---- Attention -----------------------------------------------------------------------------

init_xavier_uniform <- function(dims) {
  bound <- sqrt(6 / (dims[1] + dims[2]))
  array(stats::runif(prod(dims), -bound, bound), dims)
}

#' @rdname nn_layers
#' @export
nn_multihead_attention <- nn_module("nn_multihead_attention",
  initialize = function(embed_dim, num_heads, dropout = 0, bias = TRUE, batch_first = FALSE,
                        kdim = NULL, vdim = NULL) {
    if ((!is.null(kdim) && kdim != embed_dim) || (!is.null(vdim) && vdim != embed_dim))
      rf_abort("rfuse_unsupported", "nn_multihead_attention(): `kdim` / `vdim` other than `embed_dim` are not supported yet", sys.call())
    if (embed_dim %% num_heads != 0)
      rf_abort("rfuse_type_error", "embed_dim must be divisible by num_heads", sys.call())
    self$embed_dim <- embed_dim; self$num_heads <- num_heads; self$dropout <- dropout
    self$batch_first <- batch_first
    self$.record_whole <- TRUE # on recording rf_tensors: one recorded op (see record_forward)
    # torch's initialization: xavier-uniform input projection, zero biases.
    self$in_proj_weight <- nn_parameter(init_xavier_uniform(c(3 * embed_dim, embed_dim)))
    if (bias) self$in_proj_bias <- nn_parameter(rep(0, 3 * embed_dim))
    self$out_proj <- nn_linear(embed_dim, embed_dim, bias = bias)
    if (bias) self$out_proj$bias <- nn_parameter(rep(0, embed_dim))
  },
  forward = function(query, key, value, key_padding_mask = NULL, need_weights = TRUE, attn_mask = NULL,
                     average_attn_weights = TRUE)
    mha_forward(self, query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights))

mha_forward <- function(self, query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights) {
  call <- sys.call(-1)
  E <- self$embed_dim; H <- self$num_heads; hd <- E %/% H
  for (v in list(query, key, value))
    if (length(t_size(v)) != 3 || t_size(v)[3] != E)
      rf_shape_error(sprintf("multihead attention expects 3-d query, key and value with %d features, got dims c(%s)",
                             E, paste(t_size(v), collapse = ", ")), call)
  bf <- function(x) if (self$batch_first) x else t_permute(x, c(2, 1, 3), call) # to (N, L, E)
  q <- bf(query); k <- bf(key); v <- bf(value)
  N <- t_size(q)[1]; L <- t_size(q)[2]; S <- t_size(k)[2]
  w <- self$in_proj_weight; b <- self$in_proj_bias
  proj <- function(x, i) nnf_linear(x, t_narrow(w, 1, (i - 1) * E + 1, E, call),
                                    if (!is.null(b)) t_narrow(b, 1, (i - 1) * E + 1, E, call))
  heads <- function(x, len) t_reshape(t_permute(t_reshape(x, c(N, len, H, hd), call), c(1, 3, 2, 4), call), c(N * H, len, hd), call)
  qh <- heads(proj(q, 1), L); kh <- heads(proj(k, 2), S); vh <- heads(proj(v, 3), S)
  scores <- t_bmm(qh, t_transpose(kh, 2, 3, call), call) / sqrt(hd)
  if (!is.null(attn_mask)) {
    m <- if (length(t_size(attn_mask)) == 2) t_expand(t_set_dims(attn_mask, c(1L, L, S)), c(N * H, L, S), call) else attn_mask
    scores <- if (is_mask(attn_mask)) t_where(m, -Inf, scores, call) else scores + m
  }
  if (!is.null(key_padding_mask)) {
    km <- t_reshape(t_expand(t_set_dims(key_padding_mask, c(N, 1L, 1L, S)), c(N, H, L, S), call), c(N * H, L, S), call)
    scores <- t_where(km, -Inf, scores, call)
  }
  attn <- t_softmax(scores, 3, call)
  if (self$dropout > 0) attn <- nnf_dropout(attn, self$dropout, self$training)
  out <- t_bmm(attn, vh, call) # (N*H, L, hd)
  out <- t_reshape(t_permute(t_reshape(out, c(N, H, L, hd), call), c(1, 3, 2, 4), call), c(N, L, E), call)
  out <- self$out_proj(out)
  if (!self$batch_first) out <- t_permute(out, c(2, 1, 3), call)
  weights <- NULL
  if (isTRUE(need_weights)) {
    weights <- t_reshape(attn, c(N, H, L, S), call)
    if (isTRUE(average_attn_weights)) weights <- t_reduce("mean", weights, 2, FALSE, call)
  }
  list(out, weights)
}

# A boolean mask (TRUE: masked), as opposed to a float one added to the scores.
is_mask <- function(m) if (is_sym(m)) m$dtype == "i1" else is.logical(m)

#' @rdname nn_layers
#' @export
nn_transformer_encoder_layer <- nn_module("nn_transformer_encoder_layer",
  initialize = function(d_model, nhead, dim_feedforward = 2048, dropout = 0.1, activation = "relu",
                        layer_norm_eps = 1e-5, batch_first = FALSE, norm_first = FALSE) {
    self$self_attn <- nn_multihead_attention(d_model, nhead, dropout = dropout, batch_first = batch_first)
    self$linear1 <- nn_linear(d_model, dim_feedforward)
    self$linear2 <- nn_linear(dim_feedforward, d_model)
    self$norm1 <- nn_layer_norm(d_model, eps = layer_norm_eps)
    self$norm2 <- nn_layer_norm(d_model, eps = layer_norm_eps)
    self$dropout <- nn_dropout(dropout); self$dropout1 <- nn_dropout(dropout); self$dropout2 <- nn_dropout(dropout)
    self$activation <- if (is.function(activation)) activation else
      switch(match_choice(activation, c("relu", "gelu"), "activation", sys.call()), relu = nnf_relu, gelu = nnf_gelu)
    self$norm_first <- norm_first
  },
  forward = function(src, src_mask = NULL, src_key_padding_mask = NULL) {
    sa <- function(x) self$dropout1(self$self_attn(x, x, x, key_padding_mask = src_key_padding_mask,
                                                   need_weights = FALSE, attn_mask = src_mask)[[1]])
    ff <- function(x) self$dropout2(self$linear2(self$dropout(self$activation(self$linear1(x)))))
    x <- src
    if (self$norm_first) {
      x <- x + sa(self$norm1(x))
      x + ff(self$norm2(x))
    } else {
      x <- self$norm1(x + sa(x))
      self$norm2(x + ff(x))
    }
  })

#' @rdname nn_layers
#' @details `nn_transformer_encoder(encoder_layer, num_layers, norm = NULL)` holds `num_layers`
#'   independent copies of `encoder_layer` (an `nn_transformer_encoder_layer()` or any module
#'   taking `(src, src_mask, src_key_padding_mask)`; the same initial weights, as torch's deep
#'   copies), applied in turn, then `norm` (a module, or `NULL`).
#' @export
nn_transformer_encoder <- nn_module("nn_transformer_encoder",
  initialize = function(encoder_layer, num_layers, norm = NULL) {
    call <- sys.call()
    if (!is_module(encoder_layer))
      rf_abort("rfuse_type_error", "`encoder_layer` must be a module (an nn_transformer_encoder_layer())", call)
    if (!is.numeric(num_layers) || length(num_layers) != 1 || is.na(num_layers) || num_layers < 1 ||
        num_layers != round(num_layers))
      rf_abort("rfuse_type_error", "`num_layers` must be a positive whole number", call)
    if (!is.null(norm) && !is_module(norm)) rf_abort("rfuse_type_error", "`norm` must be a module or NULL", call)
    self$layers <- nn_module_list(lapply(seq_len(num_layers), function(i) clone_module(encoder_layer)))
    self$num_layers <- as.integer(num_layers)
    self$norm <- norm
  },
  forward = function(src, mask = NULL, src_key_padding_mask = NULL) {
    out <- src
    for (i in seq_len(self$num_layers))
      out <- self$layers[[i]](out, src_mask = mask, src_key_padding_mask = src_key_padding_mask)
    if (!is.null(self$norm)) out <- self$norm(out)
    out
  })

# ---- More convolution, normalization and resampling layers ----------------------------------

#' @rdname nnf
#' @param output_padding Transposed convolution: extra rows and columns on one side of the output.
#' @details `nnf_conv_transpose2d()` is the gradient of a convolution, computed as torch defines
#'   it: the input dilated by the stride (a pad with interior zeros), padded by
#'   `dilation * (k - 1) - padding`, and convolved with the flipped, transposed weight
#'   (`weight` is `in x out x kh x kw`, as torch's). Groups other than 1 are not supported yet.
#' @export
nnf_conv_transpose2d <- function(input, weight, bias = NULL, stride = 1, padding = 0, output_padding = 0,
                                 groups = 1, dilation = 1) {
  call <- sys.call()
  st <- pair(stride); pd <- pair(padding); op <- pair(output_padding); dl <- pair(dilation)
  if (groups != 1) rf_unsupported("nnf_conv_transpose2d", call, "groups other than 1 are not supported yet")
  d <- t_size(input); w <- t_size(weight)
  if (length(d) != 4 || length(w) != 4 || d[2] != w[1])
    rf_shape_error(sprintf("conv_transpose2d expects input c(N, C, H, W) and weight c(C, out, kh, kw), got c(%s) and c(%s)",
                           paste(d, collapse = ", "), paste(w, collapse = ", ")), call)
  edge <- dl * (w[3:4] - 1L) - pd
  if (any(edge < 0) || any(op >= pmax(st, dl)))
    rf_unsupported("nnf_conv_transpose2d", call, "padding larger than dilation * (kernel_size - 1), or output_padding not below the stride")
  if (!any_sym(input, weight, bias)) {
    key <- paste("conv_transpose2d", deparse(list(st, pd, op, dl, is.null(bias))))
    f <- if (is.null(bias)) function(x, w) nnf_conv_transpose2d(x, w, NULL, st, pd, op, 1, dl)
         else function(x, w, b) nnf_conv_transpose2d(x, w, b, st, pd, op, 1, dl)
    return(run_eagerly(key, f, if (is.null(bias)) list(input, weight) else list(input, weight, bias)))
  }
  x <- to_dtype(as_sym(input, call), trace_float(), call)
  # Tensor dims of an R array c(N, C, H, W) are [W, H, C, N].
  xp <- emit(.rf_b_pad, x$id, c(edge[2], edge[1], 0L, 0L), c(edge[2] + op[2], edge[1] + op[1], 0L, 0L),
             c(st[2] - 1L, st[1] - 1L, 0L, 0L), 0, call = call)
  hp <- (d[3] - 1L) * st[1] + 1L + 2L * edge[1] + op[1]; wp <- (d[4] - 1L) * st[2] + 1L + 2L * edge[2] + op[2]
  xs <- new_sym(xp, c(d[1:2], hp, wp), prod(d[1:2]) * hp * wp, x$dtype)
  ws <- to_dtype(as_sym(weight, call), trace_float(), call)
  flipped <- new_sym(emit(.rf_b_reverse, ws$id, c(0L, 1L), call = call), w, prod(w), ws$dtype)
  nnf_conv2d(xs, t_permute(flipped, c(2, 1, 3, 4), call), bias, 1, 0, dl, 1)
}

#' @rdname nnf
#' @param num_groups Group norm: the number of channel groups.
#' @export
nnf_group_norm <- function(input, num_groups, weight = NULL, bias = NULL, eps = 1e-5) {
  call <- sys.call()
  d <- t_size(input); C <- d[2]
  if (length(d) < 2 || C %% num_groups != 0)
    rf_shape_error(sprintf("group norm: %d channels do not split into %d groups", C, num_groups), call)
  g <- t_reshape(input, c(d[1], num_groups, -1), call) # row-major: each group's channels and positions
  m <- t_reduce("mean", g, 3, TRUE, call)
  gc <- t_binary(`-`, g, m, call)
  v <- t_reduce("mean", gc * gc, 3, TRUE, call)
  y <- t_reshape(t_binary(`/`, gc, sqrt(v + eps), call), d, call)
  per_channel <- function(p) t_set_dims(p, c(C, rep(1L, length(d) - 2L)))
  if (!is.null(weight)) y <- t_binary(`*`, y, per_channel(weight), call)
  if (!is.null(bias)) y <- t_binary(`+`, y, per_channel(bias), call)
  y
}

#' @rdname nnf
#' @details `nnf_dropout2d()` zeroes whole channels of an `(N, C, H, W)` input (one draw per
#'   sample and channel), scaling the rest by 1 / (1 - p), as torch's.
#' @export
nnf_dropout2d <- function(input, p = 0.5, training = TRUE) {
  call <- sys.call()
  check_dropout_p(p, call)
  d <- t_size(input)
  # torch for R's feature dropout: each (sample, channel) of c(N, C, ...) is kept or zeroed whole
  # (a 2-d c(N, C) input element by element, as torch for R gives it).
  if (length(d) < 2) rf_shape_error("dropout2d expects an input of at least 2 dims, c(N, C, ...)", call)
  if (!isTRUE(training) || p == 0) return(input)
  rd <- c(d[1:2], rep(1L, length(d) - 2L))
  if (!is_sym(input)) return(t_binary(`*`, input, array(dropout_mask(d[1] * d[2], p), rd), call))
  s <- to_dtype(input, trace_float(), call)
  t_binary(`*`, s, traced_dropout_mask("nnf_dropout2d", rd, prod(rd), p, s$dtype, call), call)
}

#' @rdname nnf
#' @param align_corners,recompute_scale_factor Bilinear interpolation: corner pixels mapped onto each other; the scale from the sizes even when `scale_factor` is given (torch's).
#' @param size,scale_factor,mode Interpolation: the output size or a scale factor (whole numbers
#'   for `"nearest"`), and `"nearest"` or `"bilinear"` (torch's, as two products with
#'   interpolation matrices).
#' @export
nnf_interpolate <- function(input, size = NULL, scale_factor = NULL, mode = "nearest", align_corners = FALSE,
                            recompute_scale_factor = NULL) {
  call <- sys.call()
  if (!is.character(mode) || length(mode) != 1 || !mode %in% c("nearest", "bilinear"))
    rf_unsupported("nnf_interpolate", call, sprintf("mode '%s' (\"nearest\" and \"bilinear\" so far)", paste(mode, collapse = " ")))
  if (!is.logical(align_corners) || length(align_corners) != 1 || is.na(align_corners))
    rf_abort("rfuse_type_error", "`align_corners` must be TRUE or FALSE", call)
  if (!is.null(recompute_scale_factor) && !(is.logical(recompute_scale_factor) && length(recompute_scale_factor) == 1 &&
                                            !is.na(recompute_scale_factor)))
    rf_abort("rfuse_type_error", "`recompute_scale_factor` must be NULL, TRUE or FALSE", call)
  d <- t_size(input); k <- length(d) - 2L
  if (k < 1) rf_shape_error("interpolate expects an input of dim c(N, C, ...)", call)
  if (mode == "bilinear") return(interpolate_bilinear(input, d, size, scale_factor, align_corners,
                                                      isTRUE(recompute_scale_factor), call))
  if (isTRUE(align_corners))
    rf_abort("rfuse_type_error", "align_corners can only be set with the interpolating modes (bilinear)", call)
  s <- if (!is.null(size)) {
    if (!is.null(scale_factor)) rf_abort("rfuse_type_error", "give either `size` or `scale_factor`", call)
    sz <- rep_len(as.integer(size), k)
    if (any(sz %% d[-(1:2)] != 0)) rf_unsupported("nnf_interpolate", call, "a size that is not a whole multiple of the input's")
    sz %/% d[-(1:2)]
  } else rep_len(scale_factor, k)
  if (is.null(s) || any(s != round(s)) || any(s < 1))
    rf_unsupported("nnf_interpolate", call, "scale factors that are not whole numbers")
  s <- as.integer(s)
  # Each element repeated s times along each spatial dim: a broadcast over new size-s dims
  # after each spatial dim, then a row-major merge.
  spread <- c(d[1:2], as.vector(rbind(d[-(1:2)], 1L)))
  big <- c(d[1:2], as.vector(rbind(d[-(1:2)], s)))
  t_reshape(t_expand(t_set_dims(input, spread), big, call), c(d[1:2], d[-(1:2)] * s), call)
}

# torch's upsample_bilinear2d as two products with interpolation matrices (constants of the
# program, so gradients flow as through any matmul): out = A_h x A_w^T per image, A[o, i] the
# weight source row i gets in output row o. Source coordinates as torch's
# area_pixel_compute_source_index: align_corners maps the corner pixels onto each other;
# otherwise (o + 1/2) * scale - 1/2 clamped at 0, the scale 1 / scale_factor when one is given
# (unless recompute_scale_factor), else in / out.
interpolate_bilinear <- function(input, d, size, scale_factor, align_corners, recompute, call) {
  if (length(d) != 4) rf_shape_error("bilinear interpolation expects an input of dim c(N, C, H, W)", call)
  if (!is.null(size) == !is.null(scale_factor)) rf_abort("rfuse_type_error", "give either `size` or `scale_factor`", call)
  sf <- if (!is.null(scale_factor)) rep_len(as.double(scale_factor), 2)
  out <- if (!is.null(size)) rep_len(as.integer(size), 2) else as.integer(floor(d[3:4] * sf))
  if (any(out < 1)) rf_abort("rfuse_type_error", "the output size must be at least 1", call)
  weights <- function(n_in, n_out, factor) {
    a <- matrix(0, n_out, n_in)
    scale <- if (align_corners) (if (n_out > 1) (n_in - 1) / (n_out - 1) else 0)
             else if (!is.null(factor) && !recompute) 1 / factor else n_in / n_out
    for (o in seq_len(n_out) - 1L) {
      src <- if (align_corners) o * scale else max((o + 0.5) * scale - 0.5, 0)
      i0 <- min(floor(src), n_in - 1)
      i1 <- min(i0 + 1, n_in - 1)
      l1 <- src - i0
      a[o + 1, i0 + 1] <- a[o + 1, i0 + 1] + (1 - l1)
      a[o + 1, i1 + 1] <- a[o + 1, i1 + 1] + l1
    }
    a
  }
  ah <- weights(d[3], out[1], sf[1])
  aw <- weights(d[4], out[2], sf[2])
  t_matmul(t_matmul(ah, input, call), t(aw), call)
}

#' @rdname nnf
#' @export
nnf_adaptive_max_pool2d <- function(input, output_size) {
  call <- sys.call()
  x <- input
  os <- pair(output_size); d <- t_size(x)
  # A 3-d input is one sample c(C, H, W), as torch takes it.
  if (length(d) == 3) return(torch_squeeze(nnf_adaptive_max_pool2d(torch_unsqueeze(x, 1), output_size), 1))
  if (length(d) != 4)
    rf_shape_error(sprintf("expected an array of dim c(N, C, H, W), got dim c(%s)", paste(d, collapse = ", ")), call)
  if (any(d[3:4] %% os != 0))
    rf_unsupported("nnf_adaptive_max_pool2d", call,
                   sprintf("output size %s does not divide the input's %dx%d", paste(os, collapse = "x"), d[3], d[4]))
  nnf_max_pool2d(x, d[3:4] %/% os)
}

#' @rdname nn_layers
#' @export
nn_conv_transpose2d <- nn_module("nn_conv_transpose2d",
  initialize = function(in_channels, out_channels, kernel_size, stride = 1, padding = 0, output_padding = 0,
                        groups = 1, bias = TRUE, dilation = 1) {
    k <- pair(kernel_size)
    fan_in <- out_channels / groups * prod(k) # torch's fan-in of a transposed convolution's weight
    self$weight <- nn_parameter(init_uniform(c(in_channels, out_channels / groups, k), fan_in))
    if (bias) self$bias <- nn_parameter(init_uniform(out_channels, fan_in))
    self$stride <- stride; self$padding <- padding; self$output_padding <- output_padding
    self$groups <- groups; self$dilation <- dilation
  },
  forward = function(x) nnf_conv_transpose2d(x, self$weight, self$bias, self$stride, self$padding,
                                             self$output_padding, self$groups, self$dilation))

#' @rdname nn_layers
#' @export
nn_group_norm <- nn_module("nn_group_norm",
  initialize = function(num_groups, num_channels, eps = 1e-5, affine = TRUE) {
    self$num_groups <- num_groups; self$eps <- eps
    if (affine) {
      self$weight <- nn_parameter(rep(1, num_channels))
      self$bias <- nn_parameter(rep(0, num_channels))
    }
  },
  forward = function(x) nnf_group_norm(x, self$num_groups, self$weight, self$bias, self$eps))

#' @rdname nn_layers
#' @export
nn_dropout2d <- nn_module("nn_dropout2d",
  initialize = function(p = 0.5) { self$p <- p },
  forward = function(x) nnf_dropout2d(x, self$p, self$training))

#' @rdname nn_layers
#' @export
nn_upsample <- nn_module("nn_upsample",
  initialize = function(size = NULL, scale_factor = NULL, mode = "nearest", align_corners = NULL) {
    self$size <- size; self$scale_factor <- scale_factor; self$mode <- mode
    self$align_corners <- align_corners
  },
  forward = function(x) nnf_interpolate(x, self$size, self$scale_factor, self$mode, isTRUE(self$align_corners)))

#' @rdname nn_layers
#' @export
nn_adaptive_max_pool2d <- nn_module("nn_adaptive_max_pool2d",
  initialize = function(output_size) { self$output_size <- output_size },
  forward = function(x) nnf_adaptive_max_pool2d(x, self$output_size))

#' @rdname losses
#' @param anchor,positive,negative `nnf_triplet_margin_loss()`: embeddings, `c(N, D)` (or one of
#'   length `D`); the loss is `max(d(a, p) - d(a, n) + margin, 0)` per sample with
#'   `d(x, y) = ||x - y + eps||_p` along the last dim, as torch's.
#' @param margin,p,eps,swap The margin, the norm's order, the distance's offset, and whether
#'   `d(a, n)` is the smaller of it and `d(p, n)` (torch's distance swap).
#' @export
nnf_triplet_margin_loss <- function(anchor, positive, negative, margin = 1, p = 2, eps = 1e-6, swap = FALSE,
                                    reduction = "mean") {
  call <- sys.call()
  if (!is.numeric(c(margin, p, eps)) || length(c(margin, p, eps)) != 3 || anyNA(c(margin, p, eps)) || p <= 0)
    rf_abort("rfuse_type_error", "`margin`, `p` and `eps` must be numbers (p > 0)", call)
  if (!is.logical(swap) || length(swap) != 1 || is.na(swap)) rf_abort("rfuse_type_error", "`swap` must be TRUE or FALSE", call)
  shapes <- lapply(list(anchor, positive, negative), t_size)
  if (!all(vapply(shapes, function(s) identical(s, shapes[[1]]), TRUE)) || !length(shapes[[1]]) %in% 1:2)
    rf_shape_error(sprintf("triplet_margin_loss takes anchor, positive and negative of one shape, c(N, D) or D (got %s)",
                           paste(vapply(shapes, paste, "", collapse = "x"), collapse = ", ")), call)
  last <- function(v) if (length(shapes[[1]]) == 1) sum(v) else rf_rowSums(v)
  dist <- function(x, y) {
    d <- abs(x - y + eps)
    if (p == 2) sqrt(last(d * d)) else if (p == 1) last(d) else last(d^p)^(1 / p)
  }
  d_ap <- dist(anchor, positive)
  d_an <- dist(anchor, negative)
  if (isTRUE(swap)) d_an <- rf_pmin(d_an, dist(positive, negative))
  reduce_loss(rf_pmax(d_ap - d_an + margin, 0), reduction, call)
}

#' @rdname losses
#' @export
nn_triplet_margin_loss <- nn_module("nn_triplet_margin_loss",
  initialize = function(margin = 1, p = 2, eps = 1e-6, swap = FALSE, reduction = "mean") {
    self$margin <- margin; self$p <- p; self$eps <- eps; self$swap <- swap
    self$reduction <- match_choice(reduction, c("mean", "sum", "none"), "reduction", sys.call())
  },
  forward = function(anchor, positive, negative)
    nnf_triplet_margin_loss(anchor, positive, negative, self$margin, self$p, self$eps, self$swap, self$reduction))
