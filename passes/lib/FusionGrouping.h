// The grouping engine shared by the three fusion passes. Each pass chooses a Mode; the engine
// grows groups along def-use edges in program order (union-find), accepting a merge only when
// the merged group is valid for the mode (iteration-space rules, see FusionGrouping.cpp) and
// keeps the graph of groups acyclic (no path leaves the group and re-enters it; checked against
// a maintained topological order of the groups), then materializes the chosen groups as
// rfuse.fusion ops.
#ifndef RFUSE_PASSES_FUSIONGROUPING_H
#define RFUSE_PASSES_FUSIONGROUPING_H

#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace rfuse::fusion {

enum class Mode { Elementwise, Reduction, MatmulEpilogue };

struct Options {
  Mode mode;
  unsigned maxOps = 512;            ///< 0: unbounded (see the max-ops pass option)
  bool testFlipSubOperands = false; ///< deliberately wrong, for testing the property suite
};

struct Result {
  unsigned regions = 0;
  unsigned fusedOps = 0;
};

/// Forms and materializes the fusion regions of `mode` in `fn`'s body.
Result fuse(mlir::func::FuncOp fn, const Options &options);

/// Cost model shared by the passes' statistics: kernels = fusion regions + compute ops outside
/// them; bytes = for each kernel, the bytes of its distinct tensor operands and its results.
struct Cost {
  uint64_t kernels = 0;
  uint64_t bytes = 0;
};
Cost estimateCost(mlir::func::FuncOp fn);

/// Runs fuse() and adds its counts and the resulting estimateCost() to a pass's statistics.
void fuseAndRecord(mlir::func::FuncOp fn, const Options &options, mlir::Pass::Statistic &regions,
                   mlir::Pass::Statistic &fusedOps, mlir::Pass::Statistic &kernels,
                   mlir::Pass::Statistic &bytes);

/// Ops a fusion region may contain as pointwise members (pointwise ops, cast, broadcast,
/// transpose).
bool isElementwiseLike(mlir::Operation *op);

} // namespace rfuse::fusion

#endif
