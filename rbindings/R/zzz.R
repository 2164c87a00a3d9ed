.onLoad <- function(libname, pkgname) {
  # R users asked for float32 get float32 matrix products: TF32 (10-bit mantissa inputs, the
  # speed PyTorch's benchmarks use) only when asked for, through rf_allow_tf32().
  if (!nzchar(Sys.getenv("RFUSE_ALLOW_TF32"))) Sys.setenv(RFUSE_ALLOW_TF32 = "0")
}

#' Allow TF32 matrix products on the GPU
#'
#' On NVIDIA GPUs float32 matrix products can run in TF32 (inputs rounded to 10 mantissa bits,
#' float32 accumulation): several times faster, relative error near 1e-3 instead of 1e-6. rfuse's
#' R package keeps it off unless asked (`RFUSE_ALLOW_TF32=1` in the environment or this function).
#' Programs compiled before the change keep their setting.
#'
#' @param allow `TRUE` or `FALSE`.
#' @return The previous setting, invisibly.
#' @examples
#' old <- rf_allow_tf32(TRUE)
#' rf_allow_tf32(old)
#' @export
rf_allow_tf32 <- function(allow = TRUE) {
  old <- Sys.getenv("RFUSE_ALLOW_TF32") == "1"
  Sys.setenv(RFUSE_ALLOW_TF32 = if (isTRUE(allow)) "1" else "0")
  invisible(old)
}
