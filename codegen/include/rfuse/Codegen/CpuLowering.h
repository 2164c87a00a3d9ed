// CPU lowering: an outlined kernel (pointwise, reduction, matmul-epilogue) or a lone host op →
// functions of memrefs built from linalg / scf / arith / math ops (each scalar op's code derived
// from ScalarOps.h through ScalarIR.h), ready for MLIR's path to the LLVM dialect and the ExecutionEngine
// (lowerToLLVMDialect here, then runtime/lib/cpu/CpuJit.cpp). Every function takes `(index begin, index end, memref inputs...,
// memref outputs...)` and computes the part [begin, end) of its parallel dimension, so the runtime
// can split a kernel across threads without locks.
#ifndef RFUSE_CODEGEN_CPULOWERING_H
#define RFUSE_CODEGEN_CPULOWERING_H

#include "rfuse/Codegen/CpuFunction.h"
#include "rfuse/Codegen/LibraryCalls.h"
#include "rfuse/IR/DType.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace rfuse::cpu {

/// How the runtime runs one kernel (or lone host op) on the CPU.
struct CpuKernel {
  enum class Kind { Pointwise, Reduction, Library } kind = Kind::Pointwise;
  /// Pointwise / reduction: the loop nest over the region's inputs and outputs. Library: the
  /// epilogue over the library's result (absent when that is the only output), whose inputs are
  /// the result then library->epilogueInputs and whose outputs are the region's outputs other
  /// than the result.
  std::optional<CpuFunction> function;
  /// Matmuls through BLAS (f32 computed in f64), convolutions through im2col / col2im + BLAS,
  /// pooling through PoolGeometry::run (the interpreter's loops) in f64.
  std::optional<codegen::LibraryCall> library;
};

/// Appends to `target` the functions for kernel function `kernel` (attribute rfuse.kernel),
/// named `name`... Returns nullopt, with `why`, for what the CPU backend does not compile
/// (f16/bf16, float-to-int casts, dense constants, index maps over computed values): the runtime
/// interprets those.
std::optional<CpuKernel> lowerKernel(mlir::func::FuncOp kernel, mlir::ModuleOp target,
                                     const std::string &name, std::string &why);

/// The same for one op of a host function that no kernel holds (a pipeline without fusion).
std::optional<CpuKernel> lowerOperation(mlir::Operation *op, mlir::ModuleOp target,
                                        const std::string &name, std::string &why);

/// Registers the dialects the lowering and the LLVM path need in `registry`.
void registerCpuDialects(mlir::DialectRegistry &registry);

/// Registers those in `ctx` and loads the ones `lowerKernel` builds (not the LLVM dialect and its
/// conversions: a plan keeps its functions before the LLVM dialect, lowered by the JIT only when
/// no cached object has them).
void loadKernelDialects(mlir::MLIRContext *ctx);

/// Lowers the functions `lowerKernel` appended to `module` (linalg, scf, memref, math) to the
/// LLVM dialect, ready for MLIR's ExecutionEngine. Fails with MLIR's diagnostics.
mlir::LogicalResult lowerToLLVMDialect(mlir::ModuleOp module);

} // namespace rfuse::cpu

#endif
