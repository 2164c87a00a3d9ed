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
  void prepare(Device &dev, const codegen::ConvCall &call, bool tf32, const std::vector<CUdeviceptr> &ins,
               CUdeviceptr product);
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

/// A recurrent layer (or its gradient) through cuDNN's RNN API: `ins` and `outs` are the op's
/// operands and results by position (RecurrentCall). The layer's weights are copied into cuDNN's
/// weight space before each call (and the weight gradients out of it); the gradient runs the
/// forward again in training mode for cuDNN's reserve space, then cudnnRNNBackwardData_v8 and
/// cudnnRNNBackwardWeights_v8. Descriptors, the weight space, the workspace and the reserve are
/// made on the first run and kept (graph replays reuse their addresses).
class CudnnRecurrent {
public:
  ~CudnnRecurrent();
  void run(Device &dev, const codegen::RecurrentCall &call, const std::vector<CUdeviceptr> &ins,
           const std::vector<CUdeviceptr> &outs, bool tf32, const std::string &algorithm);

private:
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnRNNDataDescriptor_t xDesc = nullptr, yDesc = nullptr;
  cudnnTensorDescriptor_t hDesc = nullptr;
  cudnnDropoutDescriptor_t dropout = nullptr;
  CUdeviceptr weights = 0, weightGrads = 0, seqLengths = 0, work = 0, reserve = 0, yScratch = 0;
  size_t weightBytes = 0, workBytes = 0, reserveBytes = 0, yBytes = 0;
  std::vector<int32_t> hostSeqLengths;
  /// Where each part of the four weight operands (w_ih, w_hh, b_ih, b_hh: 0..3) lives in the
  /// weight space, adjacent parts merged.
  struct Part {
    int operand;
    size_t operandOffset, spaceOffset, bytes;
  };
  std::vector<Part> parts;
  cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
  bool ready = false, preparedTf32 = false;
  cudnnStatus_t prepare(Device &dev, const codegen::RecurrentCall &call, bool tf32, cudnnRNNAlgo_t algorithm);
  cudnnStatus_t execute(Device &dev, const codegen::RecurrentCall &call, const std::vector<CUdeviceptr> &ins,
                        const std::vector<CUdeviceptr> &outs);
  void destroy();
};

} // namespace rfuse::cuda

#endif
