// The CPU backend (a first slice): pointwise kernels lowered through linalg to LLVM and JIT-
// compiled with MLIR's ExecutionEngine; every other step runs on the reference interpreter.
#ifndef RFUSE_RUNTIME_CPUJIT_H
#define RFUSE_RUNTIME_CPUJIT_H

#include "rfuse/Runtime/HostTensor.h"

#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <string>
#include <vector>

namespace rfuse::cpu {

class CpuProgram {
public:
  /// Lowers and JIT-compiles every pointwise kernel `entry` calls (others stay interpreted).
  CpuProgram(mlir::ModuleOp module, const std::string &entry);
  ~CpuProgram();
  std::vector<HostTensor> run(const std::vector<HostTensor> &inputs);
  /// Kernels running JIT-compiled, and those interpreted with the reason.
  const std::vector<std::string> &jitted() const;
  const std::vector<std::string> &interpreted() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace rfuse::cpu

#endif
