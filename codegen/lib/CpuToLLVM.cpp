// The CPU lowering's second half: the functions of memrefs CpuLowering.cpp builds (linalg, scf,
// memref, math, arith) to the LLVM dialect, which the runtime's JIT (runtime/cpu) translates to
// LLVM IR, optimizes for the host and compiles.
#include "rfuse/Codegen/CpuLowering.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

namespace rfuse::cpu {

void registerCpuDialects(DialectRegistry &registry) {
  registry.insert<linalg::LinalgDialect, memref::MemRefDialect, arith::ArithDialect,
                  math::MathDialect, func::FuncDialect, scf::SCFDialect, LLVM::LLVMDialect,
                  cf::ControlFlowDialect, affine::AffineDialect>();
}

void loadKernelDialects(MLIRContext *ctx) {
  DialectRegistry registry;
  registerCpuDialects(registry);
  ctx->appendDialectRegistry(registry);
  ctx->loadDialect<linalg::LinalgDialect, memref::MemRefDialect, arith::ArithDialect, math::MathDialect,
                   func::FuncDialect, scf::SCFDialect>();
}

LogicalResult lowerToLLVMDialect(ModuleOp module) {
  PassManager pm(module.getContext());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  // libm for what LLVM has no intrinsic for (tanh, erfc...): the functions the interpreter's
  // std:: calls reach too, and whose vector variants glibc provides.
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(module);
}

} // namespace rfuse::cpu
