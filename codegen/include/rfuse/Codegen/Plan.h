// The execution plan's data (see ExecutionPlan.h for what it is and how it is built). Plain C++:
// the runtime's step loop and executors, and the ahead-of-time artifact, need no MLIR to read it.
#ifndef RFUSE_CODEGEN_PLAN_H
#define RFUSE_CODEGEN_PLAN_H

#include "rfuse/Codegen/CpuFunction.h"
#include "rfuse/Codegen/KernelSpec.h"
#include "rfuse/Codegen/LibraryCalls.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir {
class Operation;
}

namespace rfuse::codegen {

enum class Backend { Cpu, Cuda };

struct Target {
  Backend backend = Backend::Cpu;
  cuda::CudaTarget cuda; ///< Backend::Cuda: the GPU the plan is made for
};

struct BufferSlot {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  size_t bytes = 0;
  int firstUse = -1, lastUse = -1; ///< step indices; a result's lastUse is kLive
  int aliasOf = -1;                ///< the root slot whose buffer a reshape's result shares
  bool constant = false;           ///< computed once, kept for the program's life
  int argument = -1;               ///< the argument position, or -1
  static constexpr int kLive = 1 << 30;
};

struct Step {
  enum class Kind { Kernel, Library, Alias, Constant, Host, Collective };
  Kind kind = Kind::Host;
  mlir::Operation *op = nullptr; ///< the call / op in the entry function (null in a loaded plan)
  bool scan = false;             ///< a lone rfuse.scan (a thread per line, along it in turn)
  std::string label;             ///< the kernel's name, or the op's
  std::string kernelKind;        ///< pointwise / reduction / matmul_epilogue / conv_epilogue / pool
  std::vector<int> in, out;      ///< slots: a one-op kernel reads each distinct operand once
  /// Kernel: the kernel. Library: the epilogue over the library's result, if any.
  std::optional<cuda::KernelSpec> cudaKernel;
  std::optional<cpu::CpuFunction> cpuFunction;
  /// cpuFunction's module as lowerKernel leaves it (linalg, scf, memref, arith, math): the JIT's
  /// input and its cache key; it reaches the LLVM dialect only when no cached object has it.
  std::string cpuModule;
  std::optional<LibraryCall> library;
  std::string why; ///< Host: why the interpreter runs it
  /// Collective: an all-reduce of input k into output k for every k (one bucket), averaging
  /// (else summing) over the ranks. It may run on a stream of its own: its inputs stay live until
  /// the first step that reads one of its outputs (see buildExecutionPlan).
  bool collectiveMean = false;
  /// The source expressions the step came from (the R calls rf_jit recorded as op locations),
  /// "; "-separated; empty when unknown.
  std::string source;
  /// Bytes the step reads and writes (its slots), and its floating-point operations when known
  /// (library calls): what a profile turns into GB/s and TFLOP/s.
  double bytes = 0, flops = 0;

  bool hasEpilogue() const { return cudaKernel.has_value() || cpuFunction.has_value(); }
  /// How the step runs: "cuda pointwise grid 528 block 256 vector 4", "BLAS + compiled
  /// epilogue", "interpreted (f16 on the CPU)", ...
  std::string describe(Backend backend) const;
};

struct ExecutionPlan {
  Target target;
  std::string entry;
  std::vector<Step> steps;
  std::vector<BufferSlot> slots;
  std::vector<int> argSlots, resultSlots;

  /// The root slot of `slot` (itself unless it is an alias).
  int root(int slot) const { return slots[slot].aliasOf >= 0 ? slots[slot].aliasOf : slot; }
  /// "label: why" of every host step other than constants.
  std::vector<std::string> hostSteps() const;
  /// One line per step ("label: how").
  std::vector<std::string> describe() const;
};

} // namespace rfuse::codegen

#endif
