// The library calls of an execution plan on the GPU: matmuls through cuBLASLt, convolutions and
// pooling through cuDNN. Each object belongs to one step: descriptors and the chosen algorithm
// are made on the step's first run (again if TF32 is switched) and reused.
#ifndef RFUSE_RUNTIME_CUDA_LIBRARIES_H
#define RFUSE_RUNTIME_CUDA_LIBRARIES_H

#include "Device.h"

#include "rfuse/Codegen/LibraryCalls.h"

#include <vector>

namespace rfuse::cuda {

class CublasLtMatmul {
public:
  ~CublasLtMatmul();
  /// product = alpha op(lhs) op(rhs) (+ bias) (+ residual, beta = 1), then the activation.
  /// Picks the fastest of cuBLASLt's heuristic candidates by timing them on the first run when
  /// the problem is large.
  void run(Device &dev, const codegen::MatmulCall &m, CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr bias,
           CUdeviceptr residual, CUdeviceptr product, bool tf32);

private:
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ready = false, preparedTf32 = false;
  void prepare(Device &dev, const codegen::MatmulCall &m, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
               CUdeviceptr d, const void *alpha, const void *beta, bool tf32);
  void destroy();
};

/// dst (row-major [cols, rows]) = the transpose of f32 src (row-major [rows, cols]).
void transposeF32(Device &dev, CUdeviceptr src, int64_t rows, int64_t cols, CUdeviceptr dst);

class CudnnConv {
public:
  ~CudnnConv();
  /// The convolution (or gradient) the call's direction names, into `product`, + bias.
  void run(Device &dev, const codegen::ConvCall &call, const std::vector<CUdeviceptr> &ins, CUdeviceptr product,
           bool tf32);

private:
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo{};
  cudnnConvolutionBwdDataAlgo_t dataAlgo{};
  cudnnConvolutionBwdFilterAlgo_t filterAlgo{};
  bool ready = false, preparedTf32 = false;
  void prepare(Device &dev, const codegen::ConvCall &call, bool tf32);
  void destroy();
};

/// Asks cuDNN's heuristics about a small convolution in each direction, on a handle of its own:
/// cuDNN's one-time start (its convolution engines and heuristics loaded, ~0.1 s) then happens on
/// a warming thread (warmLibraries) instead of in a program's first convolution.
void warmConvolutionEngines();

/// The same for cuBLASLt: its heuristics and an algorithm check of a small product, on a handle
/// of its own. (Measured on an H100: a new session's first product spent 67 ms in its check of a
/// remembered algorithm, the later ones 0.1 ms.)
void warmMatmulHeuristics();

class CudnnPool {
public:
  ~CudnnPool();
  /// Pooling or its gradient; `operands` by position (backward max: input, output, grad_output;
  /// backward avg: grad_output).
  void run(Device &dev, const codegen::PoolCall &call, const std::vector<CUdeviceptr> &operands, CUdeviceptr out);

private:
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
};

} // namespace rfuse::cuda

#endif
