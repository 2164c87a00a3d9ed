// The CPU backend: every kernel (pointwise, reduction, matmul-epilogue) and every lone host op
// the CPU lowering covers runs JIT-compiled (MLIR → LLVM, -O3 for the host CPU, glibc's vector
// math for exp/tanh/erfc...), split across a thread pool; matmuls call the process's BLAS. What
// the lowering does not cover runs on the reference interpreter, with the reason recorded.
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
  /// Lowers and JIT-compiles every step of `entry` it can (compiled functions are shared by all
  /// programs of the process, keyed by their lowered IR).
  CpuProgram(mlir::ModuleOp module, const std::string &entry);
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

/// Functions compiled, and lookups answered by an earlier compile, in this process.
std::pair<size_t, size_t> jitCacheCounts();

/// Threads the CPU backend splits a kernel over: the machine's cores, or RFUSE_CPU_THREADS.
unsigned cpuThreads();

} // namespace rfuse::cpu

#endif
