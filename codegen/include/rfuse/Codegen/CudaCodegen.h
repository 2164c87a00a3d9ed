// CUDA C++ code generation: one kernel per outlined pointwise or reduction kernel function, and
// library-call descriptors (cuBLASLt) plus a generated epilogue kernel for matmul-epilogue ones.
// Scalar semantics come from ir/.../ScalarOps.h, whose text is embedded in every kernel.
#ifndef RFUSE_CODEGEN_CUDACODEGEN_H
#define RFUSE_CODEGEN_CUDACODEGEN_H

#include "rfuse/Codegen/LibraryCalls.h"
#include "rfuse/Codegen/Options.h"
#include "rfuse/IR/DType.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>
#include <vector>

namespace rfuse::cuda {

/// How the runtime launches a generated kernel.
enum class LaunchKind {
  GridStride,     ///< pointwise: 1-D grid-stride loop over `elements` (or elements / vector)
  BlockPerRow,    ///< reduction over trailing dims: a block per row of `rowLength` elements
  ThreadPerColumn ///< reduction over leading dims: tiles of `columnsPerBlock` of the `columns`
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
  int columnsPerBlock = 32; ///< ThreadPerColumn: columns a block takes at a time (32, or 8 cached)
  int blockSize = 256;
  int dynamicSharedBytes = 0; ///< `extern __shared__` bytes the launch gives each block
  unsigned grid = 1;     ///< blocks to launch (chosen for the target)
  /// Parameters in order: the region's inputs, then its outputs (device pointers).
  unsigned numInputs = 0, numOutputs = 0;
};

/// The code for one outlined kernel function (attribute rfuse.kernel) or lone host op.
struct KernelPlan {
  std::string function; ///< the kernel func.func's name
  std::string kind;     ///< pointwise / reduction / matmul_epilogue / conv_epilogue / pool
  /// Pointwise and reduction kinds: the kernel. Library kinds: the generated epilogue over the
  /// library's result (its input 0, then library->epilogueInputs), when one is needed.
  std::optional<KernelSpec> kernel;
  std::optional<codegen::LibraryCall> library; ///< cuBLASLt / cuDNN
  std::string unsupported; ///< non-empty: why there is no GPU code (host fallback)
};

/// The target a plan is made for: its architecture and size (launch shapes depend on it).
struct CudaTarget {
  std::string arch = "sm_90";
  int multiprocessors = 132;
};

/// Plans (and generates the source for) one kernel function.
KernelPlan planKernel(mlir::func::FuncOp kernelFn, const CudaTarget &target = {},
                      const CodegenOptions &options = {});

/// Plans one op of a host function that no fusion region holds (a pipeline without fusion): a
/// one-op pointwise or reduction kernel, or a cuBLASLt matmul.
KernelPlan planOperation(mlir::Operation *op, const std::string &name, const CudaTarget &target = {},
                         const CodegenOptions &options = {});

/// The text of ScalarOps.h, as embedded in every kernel.
const char *scalarOpsSource();

} // namespace rfuse::cuda

#endif
