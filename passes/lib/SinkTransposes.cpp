// rfuse-sink-transposes: transposes of any rank moved down through pointwise ops and reductions
// until they meet and cancel (see Passes.td; the moving is TransposeSinking.h's).
#include "rfuse/Passes/Passes.h"
#include "TransposeSinking.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_SINKTRANSPOSES
#include "rfuse/Passes/Passes.h.inc"

namespace {

struct SinkTransposesPass : impl::SinkTransposesBase<SinkTransposesPass> {
  using SinkTransposesBase::SinkTransposesBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    addTransposeSinkingPatterns(patterns, numSunk, /*rank=*/0);
    // Not converging within the driver's iterations leaves a valid program with some transposes
    // still in place: not a failure.
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace
} // namespace rfuse
