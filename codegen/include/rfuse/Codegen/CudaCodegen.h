// CUDA C++ code generation: one kernel per outlined pointwise or reduction kernel function, and
// library-call descriptors (cuBLASLt) plus a generated epilogue kernel for matmul-epilogue ones.
// Scalar semantics come from ir/.../ScalarOps.h, whose text is embedded in every kernel.
#ifndef RFUSE_CODEGEN_CUDACODEGEN_H
#define RFUSE_CODEGEN_CUDACODEGEN_H

#include "rfuse/Codegen/KernelSpec.h"
#include "rfuse/Codegen/LibraryCalls.h"
#include "rfuse/Codegen/Options.h"
#include "rfuse/IR/DType.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>
#include <vector>

namespace rfuse::cuda {

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
