#' rfuse: graph-compiler fusion for R tensor code
#'
#' Trace ordinary R numeric code with [rf_jit()], inspect what the compiler makes of it with
#' [rf_explain()].
#'
#' @useDynLib rfuse, .registration = TRUE
#' @importFrom Rcpp sourceCpp
#' @keywords internal
"_PACKAGE"
