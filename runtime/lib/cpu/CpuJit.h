// The CPU backend's JIT and threads: LLVM-dialect functions (codegen's CPU lowering) compiled by
// MLIR's ExecutionEngine with our own -O3 pipeline for the host CPU and glibc's vector math,
// cached process-wide by their text; a thread pool that splits a function's range.
#ifndef RFUSE_RUNTIME_CPU_CPUJIT_H
#define RFUSE_RUNTIME_CPU_CPUJIT_H

#include "rfuse/Codegen/CpuLowering.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>
#include <string>
#include <vector>

namespace rfuse::cpu {

struct CompiledFunction {
  std::unique_ptr<mlir::ExecutionEngine> engine;
  void (*fn)(void **) = nullptr;
};

/// Compiles `llvmDialectText` (a module holding the function `name`), or returns the process's
/// earlier compile of the same text. Throws InterpreterError.
std::shared_ptr<CompiledFunction> jitCompile(const std::string &llvmDialectText, const std::string &name);

/// Runs a compiled function over its range [0, extent), split over the threads, with the given
/// argument buffers (inputs, then outputs; contiguous, of f.argShapes).
void invoke(const CpuFunction &f, const CompiledFunction &c, const std::vector<void *> &data);

/// Calls body(begin, end) over [0, extent): in chunks of at most maxChunk (0: any), spread over
/// the thread pool when extent * workPerUnit is large enough to pay for it. Chunks start at
/// multiples of 64, so results never depend on the thread count.
void parallelFor(int64_t extent, int64_t maxChunk, int64_t workPerUnit,
                 llvm::function_ref<void(int64_t, int64_t)> body);

/// Forgets the process's compiled functions (programs keep theirs alive until they go).
void clearJitCache();

/// Functions compiled, and lookups answered by an earlier compile, in this process.
std::pair<size_t, size_t> jitCacheCounts();

/// Threads the CPU backend splits a kernel over: the machine's cores, or the cpu_threads option.
unsigned cpuThreads();

} // namespace rfuse::cpu

#endif
