.onAttach <- function(libname, pkgname) {
  # Before attachNamespace locks package:rfuse (see torch_double_colon).
  if (!torch_installed()) assign("::", torch_double_colon, envir = as.environment(paste0("package:", pkgname)))
}

.onLoad <- function(libname, pkgname) {
  .rf_tensor_prototype$value <- methods::new("rf_tensor", env = emptyenv())
  # What a compiled program's handle is after a save and restore (see current_entry).
  .rf_counters$null_handle <- methods::new("externalptr")
  # R users asked for float32 get float32 matrix products: TF32 (10-bit mantissa inputs, the
  # speed PyTorch's benchmarks use) only when asked for (rf_options(tf32 = TRUE)).
  if (!nzchar(Sys.getenv("RFUSE_ALLOW_TF32"))) .rf_option_set("tf32", "0")
  # A bad options(rfuse.*) must not stop the package from loading: it warns, and the next
  # compile raises the classed error.
  tryCatch(apply_r_options(), rfuse_option_error = function(e) warning(conditionMessage(e), call. = FALSE))
  .rf_warm_builder() # (the first trace's MLIR start-up, on a thread while R goes on)
}

#' Allow TF32 matrix products on the GPU
#'
#' On NVIDIA GPUs float32 matrix products can run in TF32 (inputs rounded to 10 mantissa bits,
#' float32 accumulation): several times faster, relative error near 1e-3 instead of 1e-6. rfuse's
#' R package keeps it off unless asked (`RFUSE_ALLOW_TF32=1` in the environment, this function,
#' or `rf_options(tf32 = TRUE)`, which it calls). It applies from the next call on.
#'
#' @param allow `TRUE` or `FALSE`.
#' @return The previous setting, invisibly.
#' @examples
#' old <- rf_allow_tf32(TRUE)
#' rf_allow_tf32(old)
#' @export
rf_allow_tf32 <- function(allow = TRUE) {
  if (!is.logical(allow) || length(allow) != 1L || is.na(allow))
    rf_abort("rfuse_option_error", "rf_allow_tf32() takes TRUE or FALSE")
  invisible(rf_options(tf32 = allow)$tf32)
}
