// A compiled CPU loop nest as the runtime calls it. Plain C++ (no MLIR), for the execution plan.
#ifndef RFUSE_CODEGEN_CPUFUNCTION_H
#define RFUSE_CODEGEN_CPUFUNCTION_H

#include <cstdint>
#include <string>
#include <vector>

namespace rfuse::cpu {

/// One JIT-compiled loop nest and how to call it.
struct CpuFunction {
  std::string name;     ///< symbol in the target module (with llvm.emit_c_interface)
  int64_t extent = 1;   ///< the parallel range [0, extent) the runtime splits
  int64_t maxChunk = 0; ///< > 0: the largest [begin, end) one call accepts (stack scratch)
  int64_t workPerUnit = 1; ///< elements touched per unit of the range (threading threshold)
  /// The shapes the memref arguments are declared with (inputs, then outputs): buffers are
  /// contiguous, so the runtime describes the same data with these shapes.
  std::vector<std::vector<int64_t>> argShapes;
};

} // namespace rfuse::cpu

#endif
