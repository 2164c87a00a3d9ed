// The CPU backend's JIT and threads: LLVM-dialect functions (codegen's CPU lowering) compiled by
// MLIR's ExecutionEngine with our own -O3 pipeline for the host CPU and glibc's vector math,
// cached process-wide by their text (Parallel.h runs them).
#ifndef RFUSE_RUNTIME_CPU_CPUJIT_H
#define RFUSE_RUNTIME_CPU_CPUJIT_H

#include "Parallel.h"
#include "rfuse/Codegen/CpuLowering.h"
#include "rfuse/Codegen/Plan.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rfuse::cpu {

struct CompiledFunction {
  std::unique_ptr<mlir::ExecutionEngine> engine;
  PackedFunction fn = nullptr;
};

/// Compiles `kernelText` (a module holding the function `name` as cpu::lowerKernel leaves it:
/// the LLVM dialect is reached here, only on a miss), or returns the process's
/// earlier compile of the same text, or loads the object a compile of it left in the disk cache
/// (cache_dir, keyed by the text, the host CPU and rfuse's build; skipped with disk_cache off).
/// Throws InterpreterError.
std::shared_ptr<CompiledFunction> jitCompile(const std::string &kernelText, const std::string &name);

/// The CPU executor's loader of JIT-compiled functions (jitCompile of each step's module).
struct CpuFunctionRef;
std::function<CpuFunctionRef(size_t, const codegen::Step &)> jitFunctionLoader();

/// An object file (ELF) of `kernelText`'s function `name`, compiled as jitCompile compiles
/// it (same pipeline and host CPU), with MLIR's packed wrapper `_mlir__mlir_ciface_<name>`: what
/// an ahead-of-time artifact links into its shared library. Throws InterpreterError.
std::string compileObject(const std::string &kernelText, const std::string &name);
/// The host CPU the JIT compiles for: LLVM's name and its "+feature,..." string.
std::pair<std::string, std::string> jitTarget();

/// Forgets the process's compiled functions (programs keep theirs alive until they go).
void clearJitCache();

/// Functions compiled (LLVM codegen runs), lookups answered by an earlier compile, and functions
/// loaded from the disk cache's objects (an earlier process's compiles), in this process.
struct JitCounts {
  size_t compiled = 0, reused = 0, diskHits = 0;
};
JitCounts jitCacheCounts();

} // namespace rfuse::cpu

#endif
