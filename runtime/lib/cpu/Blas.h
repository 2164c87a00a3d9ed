// Matmuls and convolutions on the CPU backend, in f64 through BLAS's dgemm.
#ifndef RFUSE_RUNTIME_CPU_BLAS_H
#define RFUSE_RUNTIME_CPU_BLAS_H

#include "rfuse/Codegen/LibraryCalls.h"

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

} // namespace rfuse::cpu

#endif
