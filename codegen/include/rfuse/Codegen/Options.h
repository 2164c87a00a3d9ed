// The choices code generation may be steered in (for experiments and tuning). Typed, passed in
// by the caller: codegen never reads the environment (runtime/.../Options.h reads RFUSE_* once).
#ifndef RFUSE_CODEGEN_OPTIONS_H
#define RFUSE_CODEGEN_OPTIONS_H

namespace rfuse {

struct CodegenOptions {
  /// CUDA row reductions: elements each thread keeps in registers; 0 = the heuristic (16 when
  /// the rows load as 128-bit chunks, else 8).
  int rowElementsPerThread = 0;
  /// CUDA row reductions: __launch_bounds__ minimum blocks per SM; -1 = the heuristic.
  int rowMinBlocks = -1;
  /// CUDA row reductions: a block per row (false) or one resident wave of blocks (true).
  bool rowGridWave = false;
  /// CUDA leading-dim reductions that read their inputs in more than one pass keep a tile of
  /// this many columns (8 or 4) in shared memory (one read of the input), where it fits; 0: off.
  int columnCache = 8;
  /// Those tiles read from global memory in every pass (L2 hits while the SMs' tiles fit) in
  /// blocks of 512 threads, three per SM, instead of from shared memory (an experiment).
  bool columnTilesFromL2 = false;
  /// On sm_90 and newer, those tiles are 32 columns wide, split along the reduction over a
  /// thread block cluster whose blocks combine their parts through distributed shared memory.
  bool columnClusters = true;
  /// On sm_90 and newer, plain column tiles (read from memory in every pass) fewer than the SMs
  /// split each tile's reduced elements over a thread block cluster of 2-8 blocks (ResNet-18's
  /// step on an H100 from R: 3.01 -> 2.44 ms).
  bool columnSplit = true;
  /// Those split tiles walk their part in a loop of constant trip count, fully unrolled, and
  /// keep the inputs read in more than one pass in registers (loaded once, before the first).
  bool columnSplitRegisters = false;
  /// On sm_90 and newer, the cluster tiles (columnClusters) are copied into shared memory
  /// asynchronously (cp.async), the next tile while the current one computes, by as many
  /// clusters as are resident at once (blocks of 1024 threads, two tiles' shared memory each).
  /// Off: slower on an H100 (W4 in R's layout 0.24 against 0.18 ms).
  bool columnPrefetch = false;
  /// rfuse.max_pool2d_backward runs as a generated gather kernel instead of cuDNN's.
  bool maxPoolBackwardKernel = false;
  /// cuBLASLt applies bias / ReLU / GELU / residual itself where it can (else a generated kernel).
  bool cublasLtEpilogues = true;
  /// A large f32 A^T B transposes A first (cublasLtMatrixTransform), then runs A' B.
  bool transposeLargeLhs = true;
  /// A bfloat16 / f16 product widened to f32 and read by nothing else is written in f32 by
  /// cuBLASLt (excess precision: never rounded to the narrow type in between).
  bool f32ResultsOfNarrowProducts = true;

  bool operator==(const CodegenOptions &o) const {
    return rowElementsPerThread == o.rowElementsPerThread && rowMinBlocks == o.rowMinBlocks &&
           rowGridWave == o.rowGridWave && columnCache == o.columnCache && columnTilesFromL2 == o.columnTilesFromL2 && columnClusters == o.columnClusters && columnSplit == o.columnSplit && columnSplitRegisters == o.columnSplitRegisters && columnPrefetch == o.columnPrefetch && maxPoolBackwardKernel == o.maxPoolBackwardKernel && cublasLtEpilogues == o.cublasLtEpilogues &&
           transposeLargeLhs == o.transposeLargeLhs && f32ResultsOfNarrowProducts == o.f32ResultsOfNarrowProducts;
  }
  bool operator!=(const CodegenOptions &o) const { return !(*this == o); }
};

} // namespace rfuse

#endif
