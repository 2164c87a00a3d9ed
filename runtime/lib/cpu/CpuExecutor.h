// Runs an execution plan on the CPU through the shared step loop: compiled kernels (CpuJit.h),
// matmuls and convolutions through BLAS (Blas.h), pooling through the interpreter's loops, and
// host steps on the interpreter, with the reason recorded.
#ifndef RFUSE_RUNTIME_CPU_CPUEXECUTOR_H
#define RFUSE_RUNTIME_CPU_CPUEXECUTOR_H

#include "rfuse/Codegen/ExecutionPlan.h"
#include "rfuse/Runtime/HostTensor.h"

#include <memory>
#include <string>
#include <vector>

namespace rfuse::cpu {

class CpuProgram {
public:
  /// JIT-compiles the plan's functions (shared by every program of the process, keyed by their
  /// lowered IR). The plan is one made for Backend::Cpu.
  explicit CpuProgram(codegen::ExecutionPlan plan);
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
