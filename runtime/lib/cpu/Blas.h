// Matmuls and convolutions on the CPU backend, in f64 through BLAS's dgemm.
#ifndef RFUSE_RUNTIME_CPU_BLAS_H
#define RFUSE_RUNTIME_CPU_BLAS_H

#include "rfuse/Codegen/LibraryCalls.h"

#include <string>

namespace rfuse::cpu {

/// Whether a dgemm_ was found (the process's, else libblas.so.3 / OpenBLAS).
bool blasAvailable();
/// Row-major C[b, m, n] = op(A) op(B) (alpha, bias, residual and activation must be defaults).
void gemm(const codegen::MatmulCall &g, const double *a, const double *b, double *c);
/// rfuse.conv2d: y = W col (+ bias); images split over threads.
void convolveForward(const ConvGeometry &c, const double *x, const double *w, const double *bias, double *y);
/// rfuse.conv2d_backward_input: col = W^T dy, scattered back (col2im).
void convolveBackwardInput(const ConvGeometry &c, const double *dy, const double *w, double *dx);
/// rfuse.conv2d_backward_filter: dW = sum over images of dy col^T, in image order.
void convolveBackwardFilter(const ConvGeometry &c, const double *x, const double *dy, double *dw);

/// Whether LAPACK's dgesv_, dgecon_ and dlange_ were found (the process's, else liblapack.so.3).
bool lapackAvailable();
/// R's solve() through LAPACK, on R's column-major n x n A (`a`) and n x k B (`b`): X (n x k,
/// into `x`) with A X = B, as R's La_solve computes it. Returns false, with R's reason in `why`,
/// where R stops: A exactly singular, or (tolerance > 0) dgecon's reciprocal condition number
/// below tolerance.
bool lapackSolve(int64_t n, int64_t k, const double *a, const double *b, double tolerance, double *x,
                 std::string &why);

/// R's chol() through LAPACK's dpotrf on R's column-major n x n A (`a`): the upper factor with
/// zeros below, into `u`. False, with R's reason, where R stops (a leading minor not positive).
bool lapackCholesky(int64_t n, const double *a, double *u, std::string &why);
/// R's determinant(A, logarithm = TRUE) through LAPACK's dgetrf: log |det A| and its sign.
void lapackLogDeterminant(int64_t n, const double *a, double &modulus, double &sign);

} // namespace rfuse::cpu

#endif
