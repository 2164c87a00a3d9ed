// What a library call computes (a matmul, a convolution or one of its gradients, a pooling op),
// described once for every backend: cuBLASLt / cuDNN on the GPU, BLAS / im2col / the pooling
// loops on the CPU. Operands are indices into the step's inputs (the kernel region's inputs).
#ifndef RFUSE_CODEGEN_LIBRARYCALLS_H
#define RFUSE_CODEGEN_LIBRARYCALLS_H

#include "rfuse/IR/DType.h"
#include "rfuse/IR/ConvPoolGeometry.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rfuse::codegen {

enum class Activation { None, Relu, GeluTanh };

/// Row-major C[batch, m, n] = alpha * op(A)[batch?, m, k] op(B)[batch?, k, n] (+ bias[n])
/// (+ residual), then the activation. Bias, residual, alpha and activation are what the library
/// applies itself; the CPU's BLAS path leaves them at their defaults and compiles the epilogue.
struct MatmulCall {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false, batchedA = false, batchedB = false;
  DType dtype = DType::F32;
  int lhsInput = -1, rhsInput = -1;
  int biasInput = -1;     ///< bias vector [n] (cuBLASLt BIAS epilogue), or -1
  int residualInput = -1; ///< C added with beta = 1, or -1
  double alpha = 1;       ///< the product's scale: C - lr * A B (an SGD step) has -lr
  Activation activation = Activation::None;
  /// A large f32 A^T B: A is transposed first (cublasLtMatrixTransform) and the product runs as
  /// A' B (cuBLASLt's kernels for the A^T layout run at ~65% of its best). Then transposeA is
  /// false and the operand is the transposed copy.
  bool transposeLhsFirst = false;
  /// bfloat16 / f16 operands whose product the program widens to f32 and nothing else reads: the
  /// library writes the f32 result directly (f32 accumulation, never rounded to the narrow type
  /// in between: excess precision, as XLA's default allows).
  bool f32Result = false;
  DType resultDtype() const { return f32Result ? DType::F32 : dtype; }
};

/// A 2-D convolution or one of its gradients (bias added by the library).
struct ConvCall {
  DType dtype = DType::F32;
  ConvGeometry geometry; ///< its direction says which of the three quantities the call computes
  /// Input indices of the operands (-1: not an operand in this direction).
  int inputIndex = -1, filterIndex = -1, gradOutputIndex = -1, biasIndex = -1;
};

/// Max or average pooling, or its gradient. Its operands are the op's, by position (backward
/// max: input, output, grad_output; backward avg: grad_output).
struct PoolCall {
  DType dtype = DType::F32;
  PoolGeometry geometry;
};

/// A recurrent layer over a whole sequence (rfuse.recurrent), or its gradient
/// (rfuse.recurrent_backward). Operands and results are the op's, by position; the library writes
/// every result (several outputs, no epilogue).
struct RecurrentCall {
  enum class Cell { Lstm, Gru, RnnTanh, RnnRelu } cell = Cell::Lstm;
  bool backward = false;
  DType dtype = DType::F32;
  int64_t batch = 0, steps = 0, inputSize = 0, hidden = 0;
  int gates() const { return cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1; }
};

/// One library call of a step, and how the step's epilogue (the region's other ops, compiled
/// separately) reads its result.
struct LibraryCall {
  enum class Kind { Matmul, Conv, Pool, Recurrent } kind = Kind::Matmul;
  MatmulCall matmul;
  ConvCall conv;
  PoolCall pool;
  RecurrentCall recurrent;
  /// The epilogue's inputs after the product: step input indices.
  std::vector<int> epilogueInputs;
  /// The step's output 0 is the library's result itself (else the result is a temporary).
  bool productIsOutput = true;

  /// Bytes of the library's result (of its first result for a recurrent call, which writes
  /// every output of its step itself).
  size_t productBytes() const;
  /// Floating-point operations (a multiply-add counts two; pools count none).
  double flops() const;
  /// e.g. "matmul 1x64x64x64 tB + bias, relu", "cudnn conv forward 8x3x32x32 -> 16 k3 s1".
  std::string describe() const;
};

} // namespace rfuse::codegen

#endif
