// rfuse-channels-last: NCHW convolutions and pooling in NHWC, with the layout transposes moved
// down until they meet and cancel (see Passes.td; the moving is TransposeSinking.h's).
#include "rfuse/Passes/Passes.h"
#include "rfuse/IR/Geometry.h"
#include "TransposeSinking.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_CHANNELSLAST
#include "rfuse/Passes/Passes.h.inc"

namespace {

constexpr int64_t toNhwc[4] = {0, 2, 3, 1}; // NCHW -> NHWC (and a filter OIHW -> OHWI)
constexpr int64_t toNchw[4] = {0, 3, 1, 2}; // back

bool isLayoutOp(Operation *op) {
  return isa<Conv2dOp, MaxPool2dOp, AvgPool2dOp, Conv2dBackwardInputOp, Conv2dBackwardFilterOp,
             MaxPool2dBackwardOp, AvgPool2dBackwardOp>(op);
}

// An NCHW convolution or pooling (or a gradient of one) becomes the same op in NHWC: every 4-d
// operand (activations, gradients, a filter) transposed into it, the result transposed back.
// Only when its first operand (the image it reads) is itself a transpose, as R's arrays are: the
// new transpose then composes with it for free. A program that takes NCHW tensors as they are
// keeps them.
struct ToNhwc : RewritePattern {
  ToNhwc(MLIRContext *ctx, llvm::Statistic &count) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx), count(count) {}
  llvm::Statistic &count;

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if (!isLayoutOp(op) || op->getParentOfType<FusionOp>())
      return failure();
    auto layout = op->getAttrOfType<LayoutAttr>("layout");
    if (!layout || layout.getValue() != Layout::NCHW || !op->getOperand(0).getDefiningOp<TransposeOp>())
      return failure();
    // cuDNN runs NHWC in the tensor-core dtypes only (no float64: "no algorithm").
    Type element = tensorOf(op->getResult(0)).getElementType();
    if (!element.isF32() && !element.isF16() && !element.isBF16())
      return failure();
    Location loc = op->getLoc();
    SmallVector<Value> operands;
    for (Value v : op->getOperands())
      operands.push_back(tensorOf(v).getRank() == 4 ? rw.create<TransposeOp>(loc, v, toNhwc).getResult() : v);
    Operation *nhwc = rw.clone(*op);
    nhwc->setOperands(operands);
    nhwc->getResult(0).setType(permuted(tensorOf(op->getResult(0)), toNhwc));
    nhwc->setAttr("layout", LayoutAttr::get(op->getContext(), Layout::NHWC));
    rw.replaceOp(op, rw.create<TransposeOp>(loc, nhwc->getResult(0), toNchw).getResult());
    ++count;
    return success();
  }
};

struct ChannelsLastPass : impl::ChannelsLastBase<ChannelsLastPass> {
  using ChannelsLastBase::ChannelsLastBase;

  void runOnOperation() override {
    bool any = false;
    getOperation().walk([&](Operation *op) {
      if (isLayoutOp(op) && !op->getParentOfType<FusionOp>())
        any = true;
    });
    if (!any)
      return; // only programs with convolutions or pooling change
    RewritePatternSet patterns(&getContext());
    patterns.add<ToNhwc>(&getContext(), numLayoutOps);
    addTransposeSinkingPatterns(patterns, numSunk, /*rank=*/4);
    // Not converging within the driver's iterations leaves a valid program with some transposes
    // still in place: not a failure.
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace
} // namespace rfuse
