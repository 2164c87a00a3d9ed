// The call of a compiled loop nest (JIT-compiled, or loaded from an ahead-of-time artifact) over
// the CPU backend's threads (rfuse/Runtime/Parallel.h). No MLIR or LLVM: the ahead-of-time
// runtime uses it too.
#ifndef RFUSE_RUNTIME_CPU_PARALLEL_H
#define RFUSE_RUNTIME_CPU_PARALLEL_H

#include "rfuse/Codegen/CpuFunction.h"
#include "rfuse/Runtime/Parallel.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace rfuse::cpu {

/// A compiled loop nest's entry: MLIR's packed C interface, `(index begin, index end, memref
/// descriptors...)` as an array of pointers to the arguments.
using PackedFunction = void (*)(void **);

/// Runs a compiled function over its range [0, extent), split over the threads, with the given
/// argument buffers (inputs, then outputs; contiguous, of f.argShapes).
void invoke(const CpuFunction &f, PackedFunction fn, const std::vector<void *> &data);

} // namespace rfuse::cpu

#endif
