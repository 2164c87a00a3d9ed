#' rfuse: graph-compiler fusion for R tensor code
#'
#' Trace ordinary R numeric code with [rf_jit()], inspect what the compiler makes of it with
#' [rf_explain()].
#'
#' @useDynLib rfuse, .registration = TRUE
#' @importFrom Rcpp sourceCpp
#' @importFrom methods new is setClass setMethod Arith Logic Math Ops Summary show
#' @exportClass rf_tensor
#' @exportMethod Ops Arith Logic Math Summary %*% t mean dim length as.array as.vector as.numeric as.logical [ $ show !
#' @keywords internal
"_PACKAGE"

# As torch for R does, rfuse re-exports magrittr's pipe, so that ported code using `%>%` (in
# `forward` and elsewhere) runs after library(rfuse).
#' @importFrom magrittr %>%
#' @export
magrittr::`%>%`
