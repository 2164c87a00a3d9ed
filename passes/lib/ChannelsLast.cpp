// rfuse-channels-last: NCHW convolutions and pooling in NHWC, with the layout transposes moved
// down until they meet and cancel (see Passes.td).
#include "rfuse/Passes/Passes.h"
#include "rfuse/IR/Geometry.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_CHANNELSLAST
#include "rfuse/Passes/Passes.h.inc"

namespace {

constexpr int64_t toNhwc[4] = {0, 2, 3, 1}; // NCHW -> NHWC (and a filter OIHW -> OHWI)
constexpr int64_t toNchw[4] = {0, 3, 1, 2}; // back

RankedTensorType tensorOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

// The type of transpose(t, perm): result dimension i is dimension perm[i] of t.
RankedTensorType permuted(RankedTensorType t, ArrayRef<int64_t> perm, Type element = {}) {
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(t.getDimSize(p));
  return RankedTensorType::get(shape, element ? element : t.getElementType());
}

// The type T' with transpose(T', perm) = t: the layout before the transpose.
RankedTensorType unpermuted(RankedTensorType t, ArrayRef<int64_t> perm, Type element) {
  SmallVector<int64_t> shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    shape[perm[i]] = t.getDimSize(i);
  return RankedTensorType::get(shape, element);
}

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

// What an operand of a pointwise op is before transpose `perm`: the transpose's input, a
// broadcast along the permuted dimensions, a splat constant of the unpermuted shape, or a
// pointwise op of broadcasts and splats rebuilt there. `make` false only checks that there is one.
Value beforeTranspose(PatternRewriter &rw, Location loc, Value v, ArrayRef<int64_t> perm, bool make, int depth = 0) {
  RankedTensorType pre = unpermuted(tensorOf(v), perm, tensorOf(v).getElementType());
  // A pointwise op of broadcasts and splats (a batch norm's scale times a constant), rebuilt in
  // the unpermuted layout: fusion puts the copy in the same kernel.
  if (Operation *def = v.getDefiningOp();
      def && depth < 4 && (isa<PointwiseOpInterface>(def) || isa<CastOp>(def)) && def->getNumResults() == 1 &&
      !def->getParentOfType<FusionOp>()) {
    for (Value x : def->getOperands())
      if (!beforeTranspose(rw, loc, x, perm, false, depth + 1))
        return Value();
    if (!make)
      return v;
    SmallVector<Value> operands;
    for (Value x : def->getOperands())
      operands.push_back(beforeTranspose(rw, loc, x, perm, true, depth + 1));
    Operation *copy = rw.clone(*def);
    copy->setOperands(operands);
    copy->getResult(0).setType(pre);
    return copy->getResult(0);
  }
  if (auto t = v.getDefiningOp<TransposeOp>()) // (inside a rebuilt op, only layout-free values)
    return t.getPerm() == perm && depth == 0 ? t.getInput() : Value();
  if (auto b = v.getDefiningOp<BroadcastInDimOp>()) {
    // The input's size-1 dims carry no order: they are dropped (a reshape), so that per-channel
    // statistics kept as [1, 1, C, 1] in R's layout broadcast as [C] into any layout.
    RankedTensorType in = tensorOf(b.getInput());
    SmallVector<int64_t> dims, kept;
    for (auto [i, d] : llvm::enumerate(b.getDims()))
      if (in.getShape()[i] != 1) {
        dims.push_back(perm[d]);
        kept.push_back(in.getShape()[i]);
      }
    for (size_t k = 1; k < dims.size(); ++k)
      if (dims[k] <= dims[k - 1])
        return Value(); // the broadcast's own dims would need a transpose: not worth it
    if (!make)
      return v;
    Value input = b.getInput();
    if ((int64_t)kept.size() != in.getRank())
      input = rw.create<ReshapeOp>(loc, RankedTensorType::get(kept, in.getElementType()), input);
    return rw.create<BroadcastInDimOp>(loc, pre, input, rw.getDenseI64ArrayAttr(dims));
  }
  if (auto c = v.getDefiningOp<ConstantOp>()) {
    auto splat = llvm::dyn_cast<SplatElementsAttr>(c.getValue());
    if (!splat)
      return Value();
    if (!make)
      return v;
    return rw.create<ConstantOp>(loc, DenseElementsAttr::get(pre, splat.getSplatValue<Attribute>()));
  }
  return Value();
}

// op(transpose(x, p), broadcast(v), ...) = transpose(op(x, broadcast'(v), ...), p) for a pointwise
// op or cast of rank-4 values.
struct SinkThroughPointwise : RewritePattern {
  SinkThroughPointwise(MLIRContext *ctx, llvm::Statistic &count)
      : RewritePattern(MatchAnyOpTypeTag(), 1, ctx), count(count) {}
  llvm::Statistic &count;

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if ((!isa<PointwiseOpInterface>(op) && !isa<CastOp>(op)) || op->getNumResults() != 1 ||
        tensorOf(op->getResult(0)).getRank() != 4 || op->getParentOfType<FusionOp>())
      return failure();
    SmallVector<int64_t> perm;
    for (Value v : op->getOperands())
      if (auto t = v.getDefiningOp<TransposeOp>(); t && tensorOf(v).getRank() == 4) {
        perm.assign(t.getPerm().begin(), t.getPerm().end());
        break;
      }
    if (perm.empty())
      return failure();
    for (Value v : op->getOperands())
      if (!beforeTranspose(rw, op->getLoc(), v, perm, false))
        return failure();
    SmallVector<Value> operands;
    for (Value v : op->getOperands())
      operands.push_back(beforeTranspose(rw, op->getLoc(), v, perm, true));
    Operation *moved = rw.clone(*op);
    moved->setOperands(operands);
    RankedTensorType result = tensorOf(op->getResult(0));
    moved->getResult(0).setType(unpermuted(result, perm, result.getElementType()));
    rw.replaceOp(op, rw.create<TransposeOp>(op->getLoc(), moved->getResult(0), perm).getResult());
    ++count;
    return success();
  }
};

// reduce(transpose(x, p), dims) = reduce(x, p[dims]), with the kept dimensions put back in
// order by a transpose when the reduction leaves more than one of them out of order.
struct SinkThroughReduction : RewritePattern {
  SinkThroughReduction(MLIRContext *ctx, llvm::Statistic &count)
      : RewritePattern(MatchAnyOpTypeTag(), 1, ctx), count(count) {}
  llvm::Statistic &count;

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if (!isReductionOp(op) || op->getParentOfType<FusionOp>())
      return failure();
    auto t = op->getOperand(0).getDefiningOp<TransposeOp>();
    if (!t || tensorOf(t.getResult()).getRank() != 4)
      return failure();
    ArrayRef<int64_t> perm = t.getPerm();
    SmallVector<int64_t> dims;
    for (int64_t d : reductionDims(op))
      dims.push_back(perm[d]);
    llvm::sort(dims);
    bool keep = reductionKeepsDims(op);
    Location loc = op->getLoc();
    Value x = t.getInput(), r;
    if (isa<ReduceSumOp>(op)) r = rw.create<ReduceSumOp>(loc, x, dims, keep);
    else if (isa<ReduceMeanOp>(op)) r = rw.create<ReduceMeanOp>(loc, x, dims, keep);
    else if (isa<ReduceMaxOp>(op)) r = rw.create<ReduceMaxOp>(loc, x, dims, keep);
    else r = rw.create<ReduceMinOp>(loc, x, dims, keep);
    SmallVector<int64_t> order; // the result's dimensions as dimensions of r
    if (keep) {
      order.assign(perm.begin(), perm.end());
    } else {
      SmallVector<int64_t> kept; // x's dimensions left, in r's order
      for (int64_t d = 0; d < (int64_t)perm.size(); ++d)
        if (!llvm::is_contained(dims, d))
          kept.push_back(d);
      for (int64_t i = 0; i < (int64_t)perm.size(); ++i)
        if (!llvm::is_contained(reductionDims(op), i))
          order.push_back(llvm::find(kept, perm[i]) - kept.begin());
    }
    if (!llvm::equal(order, llvm::seq<int64_t>(0, order.size())))
      r = rw.create<TransposeOp>(loc, r, order);
    rw.replaceOp(op, r);
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
    patterns.add<SinkThroughPointwise>(&getContext(), numSunk);
    patterns.add<SinkThroughReduction>(&getContext(), numSunk);
    // Not converging within the driver's iterations leaves a valid program with some transposes
    // still in place: not a failure.
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace
} // namespace rfuse
