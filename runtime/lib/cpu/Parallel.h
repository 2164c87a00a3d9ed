// The CPU backend's threads: a pool that splits a kernel's range, and the call of a compiled
// loop nest (JIT-compiled, or loaded from an ahead-of-time artifact) over it. No MLIR or LLVM:
// the ahead-of-time runtime uses it too.
#ifndef RFUSE_RUNTIME_CPU_PARALLEL_H
#define RFUSE_RUNTIME_CPU_PARALLEL_H

#include "rfuse/Codegen/CpuFunction.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace rfuse::cpu {

/// A compiled loop nest's entry: MLIR's packed C interface, `(index begin, index end, memref
/// descriptors...)` as an array of pointers to the arguments.
using PackedFunction = void (*)(void **);

/// Calls body(begin, end) over [0, extent): in chunks of at most maxChunk (0: any), spread over
/// the thread pool when extent * workPerUnit is large enough to pay for it. Chunks start at
/// multiples of 64, so results never depend on the thread count. A call from inside a pool
/// thread runs on that thread. The first exception a chunk throws is rethrown here.
void parallelFor(int64_t extent, int64_t maxChunk, int64_t workPerUnit,
                 const std::function<void(int64_t, int64_t)> &body);

/// Runs a compiled function over its range [0, extent), split over the threads, with the given
/// argument buffers (inputs, then outputs; contiguous, of f.argShapes).
void invoke(const CpuFunction &f, PackedFunction fn, const std::vector<void *> &data);

/// Threads the CPU backend splits a kernel over: the CPUs this process may run on, or the
/// cpu_threads option.
unsigned cpuThreads();

} // namespace rfuse::cpu

#endif
