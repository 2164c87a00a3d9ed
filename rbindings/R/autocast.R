# Mixed precision in traced code, torch for R's API (with_autocast, local_autocast, set_autocast,
# unset_autocast). While a region is active for a device type, the float32 matrix products and
# convolutions rf_jit traces for that device are recorded with an `rfuse.autocast` mark; the
# rfuse-autocast pass runs each in the low dtype between casts (see docs/passes.md). The active
# region is part of every program's cache key, so a function called inside and outside one gets
# two programs.

.rf_autocast <- new.env(parent = emptyenv()) # per device type ($cuda, $cpu): "bf16" / "f16"; off: NULL

# "bf16" / "f16" for a dtype as torch for R names it (torch_bfloat16(), "float16", "half", ...);
# NULL means the device type's default, as torch's (float16 on CUDA, bfloat16 on the CPU).
autocast_low_dtype <- function(dtype, device_type) {
  if (is.null(dtype)) return(if (device_type == "cuda") "f16" else "bf16")
  if (is.character(dtype) && length(dtype) == 1 && !is.na(dtype)) {
    low <- switch(dtype, bfloat16 = , bf16 = "bf16", float16 = , half = , f16 = "f16", NULL)
    if (!is.null(low)) return(low)
  }
  rf_abort("rfuse_type_error", sprintf(paste0(
    "autocast runs products in bfloat16 or float16 (torch_bfloat16(), torch_float16()), not %s ",
    "on device type \"%s\""), paste(format(dtype), collapse = " "), device_type))
}

#' Mixed precision for a region of code (autocast)
#'
#' As torch for R's functions of these names. Inside the region, the float32 matrix products
#' (`%*%`, `torch_matmul`, `nn_linear`, ...) and convolutions that [rf_jit()] traces for
#' `device_type` run in `dtype` with float32 accumulation: their inputs are cast to `dtype` and
#' their result, rounded to `dtype`, is cast back to float32. Everything else stays float32, and
#' so do the parameters; a gradient taken through the region differentiates the low-precision
#' products (its backward products are low-precision too). Float64 code (the CPU's default
#' [rf_jit()] dtype) is left exact, as torch leaves float64 ops alone. Code for the other device
#' type is unchanged. A jitted function called inside and outside a region compiles a program for
#' each. For training, [rf_train()]'s `precision = "bf16-mixed"` does this for a whole step.
#'
#' @param code The code to run with autocast on.
#' @param device_type `"cuda"` or `"cpu"`: which programs it applies to.
#' @param dtype `torch_bfloat16()` / `"bfloat16"` or `torch_float16()` / `"float16"`; `NULL`: float16
#'   on `"cuda"`, bfloat16 on `"cpu"` (torch's defaults). Training through float16 products
#'   without loss scaling can underflow gradients, as in torch.
#' @param enabled `FALSE` turns autocast off inside the region (a nested region can opt out).
#' @param cache_enabled Torch's cache of cast weights. The compiled program casts each weight
#'   once per run either way, so `TRUE`, `FALSE` and `NULL` compute the same.
#' @param ... Must be empty (as torch, which takes nothing there).
#' @param .env The environment whose exit ends a `local_autocast()` region.
#' @param context What `set_autocast()` returned: the state `unset_autocast()` restores.
#' @return `with_autocast()`: the value of `code`. `set_autocast()`: a context for
#'   `unset_autocast()`. The others: invisible `NULL`.
#' @examples
#' f <- rf_jit(function(x, w) tanh(x %*% w), dtype = "float32")
#' x <- matrix(rnorm(64), 8); w <- matrix(rnorm(64), 8)
#' exact <- f(x, w)
#' low <- with_autocast(f(x, w), device_type = rf_default_device(), dtype = "bfloat16")
#' max(abs(low - exact)) # about bfloat16's precision, 2^-8
#' @export
with_autocast <- function(code, ..., device_type, dtype = NULL, enabled = TRUE, cache_enabled = NULL) {
  context <- set_autocast(device_type, dtype, enabled, cache_enabled, ...)
  on.exit(unset_autocast(context))
  force(code)
}

#' @rdname with_autocast
#' @export
local_autocast <- function(device_type, dtype = NULL, enabled = TRUE, cache_enabled = NULL, ...,
                           .env = parent.frame()) {
  context <- set_autocast(device_type, dtype, enabled, cache_enabled, ...)
  do.call(on.exit, list(substitute(unset_autocast(context), list(context = context)), add = TRUE), envir = .env)
  invisible()
}

#' @rdname with_autocast
#' @export
set_autocast <- function(device_type, dtype = NULL, enabled = TRUE, cache_enabled = NULL, ...) {
  if (...length())
    rf_abort("rfuse_type_error", sprintf("autocast takes no further arguments; it was given %s",
                                         paste(names(list(...)) %||% "an unnamed one", collapse = ", ")))
  if (missing(device_type) || !is.character(device_type) || length(device_type) != 1 ||
      !device_type %in% c("cuda", "cpu"))
    rf_abort("rfuse_type_error", "autocast's `device_type` must be \"cuda\" or \"cpu\"")
  if (!is.logical(enabled) || length(enabled) != 1 || is.na(enabled))
    rf_abort("rfuse_type_error", "autocast's `enabled` must be TRUE or FALSE")
  if (!is.null(cache_enabled) && !(is.logical(cache_enabled) && length(cache_enabled) == 1 && !is.na(cache_enabled)))
    rf_abort("rfuse_type_error", "autocast's `cache_enabled` must be NULL, TRUE or FALSE")
  low <- autocast_low_dtype(dtype, device_type)
  context <- structure(list(device_type = device_type, dtype = .rf_autocast[[device_type]]),
                       class = "rf_autocast_context")
  assign(device_type, if (enabled) low, envir = .rf_autocast)
  context
}

#' @rdname with_autocast
#' @export
unset_autocast <- function(context) {
  if (!inherits(context, "rf_autocast_context"))
    rf_abort("rfuse_type_error", "unset_autocast() takes what set_autocast() returned")
  assign(context$device_type, context$dtype, envir = .rf_autocast)
  invisible()
}

# Whether any autocast region is active (the jitted call's fast path then stands aside).
autocast_active <- function() !is.null(.rf_autocast$cuda) || !is.null(.rf_autocast$cpu)

# The low dtype ("bf16" / "f16") the products traced for `device` get now, or "".
autocast_for <- function(device) if (nzchar(device)) .rf_autocast[[device]] %||% "" else ""
