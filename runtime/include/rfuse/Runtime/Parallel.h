// The CPU backend's thread pool, for the runtime's kernels and for its clients' host work (the R
// package's conversions between R arrays and tensors).
#ifndef RFUSE_RUNTIME_PARALLEL_H
#define RFUSE_RUNTIME_PARALLEL_H

#include <cstdint>
#include <functional>

namespace rfuse::cpu {

/// Calls body(begin, end) over [0, extent): in chunks of at most maxChunk (0: any), spread over
/// the thread pool when extent * workPerUnit is large enough to pay for it. Chunks start at
/// multiples of 64, so results never depend on the thread count. A call from inside a pool
/// thread runs on that thread. The first exception a chunk throws is rethrown here.
void parallelFor(int64_t extent, int64_t maxChunk, int64_t workPerUnit,
                 const std::function<void(int64_t, int64_t)> &body);

/// Threads the CPU backend splits a kernel over: the CPUs this process may run on, or the
/// cpu_threads option.
unsigned cpuThreads();

} // namespace rfuse::cpu

#endif
