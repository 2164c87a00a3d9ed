// A generated CUDA kernel as the runtime launches it, and the GPU a plan is made for. Plain C++
// (no MLIR): the execution plan holds these, and the ahead-of-time runtime reads them back.
#ifndef RFUSE_CODEGEN_KERNELSPEC_H
#define RFUSE_CODEGEN_KERNELSPEC_H

#include <cstdint>
#include <string>

namespace rfuse::cuda {

/// How the runtime launches a generated kernel.
enum class LaunchKind {
  GridStride,     ///< pointwise: 1-D grid-stride loop over `elements` (or elements / vector)
  BlockPerRow,    ///< reduction over trailing dims: a block per row of `rowLength` elements
  ThreadPerColumn, ///< reduction over leading dims: tiles of `columnsPerBlock` of the `columns`
  Tiles            ///< `grid` blocks, each its own tile (attention): the kernel knows its sizes
};

struct KernelSpec {
  std::string name;      ///< extern "C" entry point
  std::string source;    ///< complete CUDA C++ translation unit
  LaunchKind launch = LaunchKind::GridStride;
  int64_t elements = 0;  ///< GridStride: iteration-space size (tiled transposes: tiles x blockSize)
  int vectorWidth = 1;   ///< GridStride: elements per vector access (1, 2 or 4)
  int64_t rows = 0;      ///< BlockPerRow: rows; ThreadPerColumn: reduced length
  int64_t rowLength = 0; ///< BlockPerRow: row length
  int rowsPerBlock = 1;  ///< BlockPerRow: rows a block takes at a time (a warp each when > 1)
  int64_t columns = 0;   ///< ThreadPerColumn: number of columns
  int columnsPerBlock = 32; ///< ThreadPerColumn: columns a block takes at a time (32, or 8 cached)
  int blockSize = 256;
  int dynamicSharedBytes = 0; ///< `extern __shared__` bytes the launch gives each block
  /// Blocks per thread block cluster (sm_90+; the kernel declares it with __cluster_dims__, so a
  /// plain launch forms the clusters); `grid` is a multiple of it.
  int clusterSize = 1;
  unsigned grid = 1;     ///< blocks to launch (chosen for the target)
  /// The kernel's clusters loop over its tiles (each prefetching its next one), so the launcher
  /// lowers `grid` to the clusters the device holds at once (cuOccupancyMaxActiveClusters):
  /// more would wait for a whole cluster's tiles to finish.
  bool residentClusters = false;
  /// Parameters in order: the region's inputs, then its outputs (device pointers), then, when
  /// takesBatch, `long long rf_batch` = `batch` (a kernel shared by every batch size of a
  /// dynamic-shape program, see BatchTemplate in Engine.h).
  unsigned numInputs = 0, numOutputs = 0;
  bool takesBatch = false;
  int64_t batch = 0;
};

/// The target a plan is made for: its architecture and size (launch shapes depend on it).
struct CudaTarget {
  std::string arch = "sm_90";
  int multiprocessors = 132;
};

} // namespace rfuse::cuda

#endif
