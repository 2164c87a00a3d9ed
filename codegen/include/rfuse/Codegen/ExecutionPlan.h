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
#include "rfuse/Codegen/Options.h"
#include "rfuse/Codegen/Plan.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace rfuse::codegen {

/// Builds the plan of `entry` (an outlined host function: kernel calls, library ops, reshapes,
/// constants) for `target`. Backend::Cpu lowers each kernel to the LLVM dialect; Backend::Cuda
/// generates each kernel's CUDA C++. Throws std::runtime_error when `entry` does not exist.
ExecutionPlan buildExecutionPlan(mlir::ModuleOp module, const std::string &entry, const Target &target,
                                 const CodegenOptions &options);

} // namespace rfuse::codegen

#endif
