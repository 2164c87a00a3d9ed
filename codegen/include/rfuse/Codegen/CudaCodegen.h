// CUDA C++ code generation: one kernel per outlined pointwise or reduction kernel function, and
// library-call descriptors (cuBLASLt) plus a generated epilogue kernel for matmul-epilogue ones.
// Scalar semantics come from ir/.../ScalarOps.h, whose text is embedded in every kernel.
#ifndef RFUSE_CODEGEN_CUDACODEGEN_H
#define RFUSE_CODEGEN_CUDACODEGEN_H

#include "rfuse/IR/DType.h"
#include "rfuse/IR/Geometry.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>
#include <vector>

namespace rfuse::cuda {

/// How the runtime launches a generated kernel.
enum class LaunchKind {
  GridStride,     ///< pointwise: 1-D grid-stride loop over `elements` (or elements / vector)
  BlockPerRow,    ///< reduction over trailing dims: a block per row of `rowLength` elements
  ThreadPerColumn ///< reduction over leading dims: a thread per column of `columns`
};

struct KernelSpec {
  std::string name;      ///< extern "C" entry point
  std::string source;    ///< complete CUDA C++ translation unit
  LaunchKind launch = LaunchKind::GridStride;
  int64_t elements = 0;  ///< GridStride: iteration-space size
  int vectorWidth = 1;   ///< GridStride: elements per vector access (1, 2 or 4)
  int64_t rows = 0;      ///< BlockPerRow: rows; ThreadPerColumn: reduced length
  int64_t rowLength = 0; ///< BlockPerRow: row length
  int64_t columns = 0;   ///< ThreadPerColumn: number of columns
  int blockSize = 256;
  /// Parameters in order: the region's inputs, then its outputs (device pointers).
  unsigned numInputs = 0, numOutputs = 0;
};

/// A matmul executed by cuBLASLt with what of the epilogue cuBLASLt can apply itself.
struct MatmulSpec {
  int64_t batch = 1, m = 0, n = 0, k = 0; ///< row-major C[b, m, n] = A[b, m, k] B[b, k, n]
  bool transposeA = false, transposeB = false;
  bool batchedA = false, batchedB = false;
  DType dtype = DType::F32;
  int lhsInput = -1, rhsInput = -1; ///< indices into the region's inputs
  int biasInput = -1;               ///< bias vector [n] (cuBLASLt BIAS epilogue), or -1
  int residualInput = -1;           ///< C added with beta = 1, or -1
  double alpha = 1;                 ///< the product's scale: C - lr * A B (an SGD step) has -lr
  enum class Activation { None, Relu, GeluTanh } activation = Activation::None;
  /// Pointwise ops cuBLASLt cannot apply: a generated kernel over the product (its input 0 is the
  /// product, then the region inputs listed in `epilogueInputs`).
  std::optional<KernelSpec> epilogue;
  std::vector<int> epilogueInputs;
  /// Whether the region's output is the product itself (no epilogue kernel).
  bool outputIsProduct = true;
};

/// A convolution or one of its gradients executed by cuDNN (bias added by cuDNN), then a
/// generated kernel for the rest of the region when there is more.
struct ConvSpec {
  DType dtype = DType::F32;
  ConvGeometry geometry; ///< its direction says which of the three quantities the call computes
  /// Region input indices of the operands (-1: not an operand in this direction).
  int inputIndex = -1, filterIndex = -1, gradOutputIndex = -1, biasIndex = -1;
  std::optional<KernelSpec> epilogue;   ///< over the convolution's output (its input 0)
  std::vector<int> epilogueInputs;
  bool outputIsProduct = true;
};

/// Max or average pooling, or its gradient, executed by cuDNN. The operands are the op's, in
/// order (backward max: input, output, grad_output; backward avg: grad_output).
struct PoolSpec {
  DType dtype = DType::F32;
  PoolGeometry geometry;
};

/// The code for one outlined kernel function (attribute rfuse.kernel).
struct KernelPlan {
  std::string function; ///< the kernel func.func's name
  std::string kind;     ///< pointwise / reduction / matmul_epilogue / conv_epilogue
  std::optional<KernelSpec> kernel;  ///< pointwise and reduction kinds
  std::optional<MatmulSpec> matmul;  ///< matmul_epilogue kind
  std::optional<ConvSpec> conv;      ///< conv_epilogue kind
  std::optional<PoolSpec> pool;      ///< a pooling op (planOperation)
  std::string unsupported;           ///< non-empty: why there is no GPU code (host fallback)
};

/// Plans (and generates the source for) one kernel function.
KernelPlan planKernel(mlir::func::FuncOp kernelFn);

/// Plans one op of a host function that no fusion region holds (a pipeline without fusion): a
/// one-op pointwise or reduction kernel, or a cuBLASLt matmul.
KernelPlan planOperation(mlir::Operation *op, const std::string &name);

/// The text of ScalarOps.h, as embedded in every kernel.
const char *scalarOpsSource();

} // namespace rfuse::cuda

#endif
