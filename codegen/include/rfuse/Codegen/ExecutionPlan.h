// The execution plan: a device-neutral description of a compiled program, built by one walk over
// the outlined host function. Every backend (runtime/cuda, runtime/cpu) runs the same plan through
// one step loop (runtime/.../StepLoop.h); the interpreter stays the oracle.
//
//   steps         what runs, in order: a generated kernel, a library call (+ its epilogue), an
//                 alias (a reshape shares its operand's buffer), a constant (computed once), a
//                 collective (an all-reduce over the process group's ranks), or a host step (the
//                 interpreter, with the reason)
//   buffer slots  one per SSA value: dtype, shape, bytes, first and last use, alias root
//   arguments / results  the slots the caller's inputs bind to and the results come from
//
// Heuristic choices (launch shapes, vector widths, epilogues, transposes) are made here, as a
// function of the target and CodegenOptions, and recorded in the steps.
#ifndef RFUSE_CODEGEN_EXECUTIONPLAN_H
#define RFUSE_CODEGEN_EXECUTIONPLAN_H

#include "rfuse/Codegen/CpuLowering.h"
#include "rfuse/Codegen/CudaCodegen.h"
#include "rfuse/Codegen/LibraryCalls.h"
#include "rfuse/Codegen/Options.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace rfuse::codegen {

enum class Backend { Cpu, Cuda };

struct Target {
  Backend backend = Backend::Cpu;
  cuda::CudaTarget cuda; ///< Backend::Cuda: the GPU the plan is made for
};

struct BufferSlot {
  mlir::Value value;
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
  mlir::Operation *op = nullptr; ///< the call / op in the entry function
  std::string label;             ///< the kernel's name, or the op's
  std::string kernelKind;        ///< pointwise / reduction / matmul_epilogue / conv_epilogue / pool
  std::vector<int> in, out;      ///< slots: a one-op kernel reads each distinct operand once
  /// Kernel: the kernel. Library: the epilogue over the library's result, if any.
  std::optional<cuda::KernelSpec> cudaKernel;
  std::optional<cpu::CpuFunction> cpuFunction;
  std::string cpuModule; ///< cpuFunction's module in the LLVM dialect (the JIT's input)
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

/// Builds the plan of `entry` (an outlined host function: kernel calls, library ops, reshapes,
/// constants) for `target`. Backend::Cpu lowers each kernel to the LLVM dialect; Backend::Cuda
/// generates each kernel's CUDA C++. Throws std::runtime_error when `entry` does not exist.
ExecutionPlan buildExecutionPlan(mlir::ModuleOp module, const std::string &entry, const Target &target,
                                 const CodegenOptions &options);

} // namespace rfuse::codegen

#endif
