// What a compiled Program owns (Engine.cpp builds it; BatchTemplate.cpp specializes it).
#ifndef RFUSE_RUNTIME_PROGRAMSTATE_H
#define RFUSE_RUNTIME_PROGRAMSTATE_H

#include "rfuse/Runtime/Engine.h"
#include "cpu/CpuExecutor.h"
#include "cuda/CudaExecutor.h"

#include "rfuse/Codegen/ExecutionPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace rfuse {

struct Program::State {
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<codegen::ExecutionPlan> cudaPlan; // made at compile time (rf_explain shows it)
  std::unique_ptr<cuda::GpuProgram> gpu; // its kernels compiled on the first GPU run
  std::unique_ptr<cpu::CpuProgram> cpu;  // planned and JIT-compiled on the first CPU run
  std::mutex gpuMutex, cpuMutex;
  Tf32 tf32 = Tf32::FromOptions;
  explicit State(mlir::DialectRegistry &registry) : ctx(registry) {}
};

/// `x` (a module, a type, an attribute) printed as MLIR text.
template <class T> std::string printed(T x) {
  std::string s;
  llvm::raw_string_ostream os(s);
  x.print(os);
  return os.str();
}

/// Counts a program made by BatchTemplate::specialize (programCacheStats().specializations).
void countSpecialization();

} // namespace rfuse

#endif
