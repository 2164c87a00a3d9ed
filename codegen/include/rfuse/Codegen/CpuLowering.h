// CPU lowering: a pointwise kernel function → a func of memrefs holding one linalg.generic whose
// body is arith/math ops (one per scalar op kind, matching ScalarOps.h), ready for MLIR's path to
// the LLVM dialect and the ExecutionEngine (runtime/lib/CpuJit.cpp).
#ifndef RFUSE_CODEGEN_CPULOWERING_H
#define RFUSE_CODEGEN_CPULOWERING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace rfuse::cpu {

/// Appends to `target` a function `name(memref inputs..., memref outputs...)` (with
/// llvm.emit_c_interface) computing the pointwise kernel `kernel`. Returns false, with `why`,
/// for what this lowering does not cover (reductions, matmuls, f16/bf16, float-to-int casts):
/// those run on the interpreter.
bool lowerPointwiseKernel(mlir::func::FuncOp kernel, mlir::ModuleOp target, const std::string &name,
                          std::string &why);

/// Registers the dialects the lowering and the LLVM path need in `registry`.
void registerCpuDialects(mlir::DialectRegistry &registry);

} // namespace rfuse::cpu

#endif
