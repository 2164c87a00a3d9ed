// Runs an execution plan on the CPU through the shared step loop: compiled kernels (CpuJit.h),
// matmuls and convolutions through BLAS (Blas.h), pooling through the interpreter's loops, and
// host steps on the interpreter, with the reason recorded.
#ifndef RFUSE_RUNTIME_CPU_CPUEXECUTOR_H
#define RFUSE_RUNTIME_CPU_CPUEXECUTOR_H

#include "../StepLoop.h"
#include "Parallel.h"
#include "rfuse/Codegen/Plan.h"
#include "rfuse/Runtime/HostTensor.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rfuse::cpu {

/// A compiled step's entry, and what keeps its code loaded.
struct CpuFunctionRef {
  PackedFunction fn = nullptr;
  std::shared_ptr<void> owner;
};
/// Where a CPU program's compiled functions come from: step `index`'s loop nest, JIT-compiled
/// from its lowered module (CpuJit.h) or found in an artifact's shared library.
using CpuFunctionLoader = std::function<CpuFunctionRef(size_t index, const codegen::Step &step)>;

class CpuProgram {
public:
  /// Loads the plan's functions through `functions` (a plan made for Backend::Cpu); host steps
  /// and constants are computed by `hostSteps`.
  CpuProgram(codegen::ExecutionPlan plan, const CpuFunctionLoader &functions, runtime::HostStepRunner hostSteps);
  ~CpuProgram();
  std::vector<HostTensor> run(const std::vector<HostTensor> &inputs);
  /// The same in the caller's memory: inputs are read in place, and each step whose result the
  /// function returns writes it straight into the output buffer.
  void run(const std::vector<TensorRef> &inputs, const std::vector<TensorRef> &outputs);
  /// Steps running compiled ("name: how"), and those interpreted ("name: why").
  const std::vector<std::string> &jitted() const;
  const std::vector<std::string> &interpreted() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace rfuse::cpu

#endif
