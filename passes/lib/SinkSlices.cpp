// rfuse-sink-slices: static slices moved towards the inputs, so that fused kernels read inputs
// through them instead of copying computed values (see Passes.td).
#include "rfuse/IR/Geometry.h"
#include "rfuse/Passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_SINKSLICES
#include "rfuse/Passes/Passes.h.inc"

namespace {

RankedTensorType tensorOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

// A slice's parts, per dim.
struct Window {
  SmallVector<int64_t> start, limit, strides;
  explicit Window(SliceOp s) : start(s.getStart()), limit(s.getLimit()), strides(s.getStrides()) {}
  Window() = default;
  bool isFull(ArrayRef<int64_t> shape) const {
    for (size_t d = 0; d < shape.size(); ++d)
      if (start[d] != 0 || limit[d] != shape[d] || strides[d] != 1)
        return false;
    return true;
  }
};

// A rewrite that counts what it did (the pass's statistic).
template <class OpTy> struct Counted : OpRewritePattern<OpTy> {
  Counted(MLIRContext *ctx, int64_t &count) : OpRewritePattern<OpTy>(ctx), count(count) {}
  int64_t &count;
};

Value slice(PatternRewriter &b, Location loc, Value x, const Window &w) {
  if (w.isFull(tensorOf(x).getShape()))
    return x;
  return b.create<SliceOp>(loc, x, w.start, w.limit, w.strides);
}

// slice(slice(x)) -> slice(x).
struct ComposeSlices : Counted<SliceOp> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(SliceOp outer, PatternRewriter &b) const override {
    auto inner = outer.getInput().getDefiningOp<SliceOp>();
    if (!inner)
      return failure();
    Window a(inner), o(outer), w;
    ArrayRef<int64_t> size = tensorOf(outer.getResult()).getShape();
    for (size_t d = 0; d < size.size(); ++d) {
      int64_t start = a.start[d] + o.start[d] * a.strides[d], stride = a.strides[d] * o.strides[d];
      w.start.push_back(start);
      w.strides.push_back(stride);
      w.limit.push_back(size[d] == 0 ? start : start + (size[d] - 1) * stride + 1);
    }
    b.replaceOp(outer, slice(b, outer.getLoc(), inner.getInput(), w));
    ++count;
    return success();
  }
};

// slice(broadcast_in_dim(v)) -> broadcast_in_dim(slice(v)): a dim of v that is broadcast (size 1
// against more) keeps its one element.
struct SliceOfBroadcast : Counted<SliceOp> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(SliceOp s, PatternRewriter &b) const override {
    auto bc = s.getInput().getDefiningOp<BroadcastInDimOp>();
    if (!bc)
      return failure();
    Window o(s), w;
    ArrayRef<int64_t> in = tensorOf(bc.getInput()).getShape(), out = tensorOf(bc.getResult()).getShape();
    ArrayRef<int64_t> dims = bc.getDims();
    for (size_t i = 0; i < in.size(); ++i) {
      int64_t d = dims[i];
      bool expanded = in[i] == 1 && out[d] != 1;
      w.start.push_back(expanded ? 0 : o.start[d]);
      w.limit.push_back(expanded ? 1 : o.limit[d]);
      w.strides.push_back(expanded ? 1 : o.strides[d]);
    }
    Value v = slice(b, s.getLoc(), bc.getInput(), w);
    b.replaceOpWithNewOp<BroadcastInDimOp>(s, s.getResult().getType(), v, dims);
    ++count;
    return success();
  }
};

// slice(transpose(x, perm)) -> transpose(slice(x), perm).
struct SliceOfTranspose : Counted<SliceOp> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(SliceOp s, PatternRewriter &b) const override {
    auto t = s.getInput().getDefiningOp<TransposeOp>();
    if (!t)
      return failure();
    Window o(s), w;
    ArrayRef<int64_t> perm = t.getPerm();
    w.start.resize(perm.size());
    w.limit.resize(perm.size());
    w.strides.resize(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) { // result dim i is input dim perm[i]
      w.start[perm[i]] = o.start[i];
      w.limit[perm[i]] = o.limit[i];
      w.strides[perm[i]] = o.strides[i];
    }
    Value v = slice(b, s.getLoc(), t.getInput(), w);
    b.replaceOpWithNewOp<TransposeOp>(s, v, perm);
    ++count;
    return success();
  }
};

// slice(p(a, b, ...)) for a pointwise op p all of whose users are slices: each slice computes p
// on the slices of p's operands (same shape as p's result, or splat constants).
struct SliceOfPointwise : Counted<SliceOp> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(SliceOp s, PatternRewriter &b) const override {
    Operation *p = s.getInput().getDefiningOp();
    if (!p || !isa<PointwiseOpInterface, CastOp>(p) || p->getNumResults() != 1 || p->getNumRegions() != 0)
      return failure();
    ArrayRef<int64_t> shape = tensorOf(p->getResult(0)).getShape();
    for (Value v : p->getOperands())
      if (!llvm::isa<RankedTensorType>(v.getType()) || tensorOf(v).getShape() != shape)
        return failure();
    if (!llvm::all_of(p->getUsers(), [](Operation *u) { return isa<SliceOp>(u); }))
      return failure();
    Window w(s);
    ArrayRef<int64_t> outShape = tensorOf(s.getResult()).getShape();
    SmallVector<Value> operands;
    for (Value v : p->getOperands()) {
      auto c = v.getDefiningOp<ConstantOp>();
      if (auto splat = c ? llvm::dyn_cast<SplatElementsAttr>(c.getValue()) : nullptr)
        operands.push_back(b.create<ConstantOp>(
            c.getLoc(), splat.resizeSplat(RankedTensorType::get(outShape, splat.getElementType()))));
      else
        operands.push_back(slice(b, s.getLoc(), v, w));
    }
    Type result = RankedTensorType::get(outShape, tensorOf(p->getResult(0)).getElementType());
    OperationState state(p->getLoc(), p->getName(), operands, {result}, p->getAttrs());
    b.replaceOp(s, b.create(state)->getResults());
    ++count;
    return success();
  }
};

// reshape(slice(x)) where the slice picks one index t of dim d (not the last; every other dim
// whole, steps of 1) and the reshape drops that dim: slice(reshape(x)), d merged into d + 1.
struct ReshapeOfUnitSlice : Counted<ReshapeOp> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(ReshapeOp r, PatternRewriter &b) const override {
    auto s = r.getInput().getDefiningOp<SliceOp>();
    if (!s)
      return failure();
    ArrayRef<int64_t> in = tensorOf(s.getInput()).getShape(), out = tensorOf(r.getResult()).getShape();
    Window w(s);
    int64_t d = -1;
    for (size_t k = 0; k < in.size(); ++k) {
      if (w.strides[k] != 1)
        return failure();
      if (w.start[k] == 0 && w.limit[k] == in[k])
        continue;
      if (d >= 0 || w.limit[k] - w.start[k] != 1)
        return failure();
      d = k;
    }
    if (d < 0 || d + 1 >= (int64_t)in.size())
      return failure();
    SmallVector<int64_t> dropped(in);
    dropped.erase(dropped.begin() + d);
    if (ArrayRef<int64_t>(dropped) != out)
      return failure();
    SmallVector<int64_t> merged(in);
    merged[d + 1] *= merged[d];
    merged.erase(merged.begin() + d);
    Value view = b.create<ReshapeOp>(r.getLoc(), RankedTensorType::get(merged, tensorOf(r.getResult()).getElementType()),
                                     s.getInput());
    Window m;
    for (size_t k = 0; k < merged.size(); ++k) {
      bool pick = (int64_t)k == d; // the merged dim: the t-th run of in[d + 1] elements
      m.start.push_back(pick ? w.start[d] * in[d + 1] : 0);
      m.limit.push_back(pick ? (w.start[d] + 1) * in[d + 1] : merged[k]);
      m.strides.push_back(1);
    }
    b.replaceOp(r, slice(b, r.getLoc(), view, m));
    ++count;
    return success();
  }
};

// slice(reshape(transpose(y))) where the reshape merges two adjacent dims k, k + 1 of the
// transpose's result and the slice takes whole runs of dim k + 1 from the merged dim (its start
// and limit multiples of that dim's size, steps of 1): reshape(transpose(slice(y))), so that only
// the slice is moved (R code reading one time step of a time-first output in R's layout: the
// whole output was transposed for the one step). Only where the reshape and the transpose have
// no other reader (else the large transpose is made anyway).
struct SliceOfMergedTranspose : Counted<SliceOp> {
  using Counted::Counted;
  LogicalResult matchAndRewrite(SliceOp s, PatternRewriter &b) const override {
    auto r = s.getInput().getDefiningOp<ReshapeOp>();
    auto t = r ? r.getInput().getDefiningOp<TransposeOp>() : TransposeOp();
    if (!t || !r->hasOneUse() || !t->hasOneUse())
      return failure();
    ArrayRef<int64_t> in = tensorOf(t.getResult()).getShape(), merged = tensorOf(r.getResult()).getShape();
    if (merged.size() + 1 != in.size())
      return failure();
    int64_t k = -1;
    for (size_t d = 0; d < merged.size(); ++d)
      if (merged[d] != in[d]) {
        k = d;
        break;
      }
    if (k < 0 || merged[k] != in[k] * in[k + 1] ||
        ArrayRef<int64_t>(merged).drop_front(k + 1) != ArrayRef<int64_t>(in).drop_front(k + 2))
      return failure();
    Window o(s);
    int64_t run = in[k + 1];
    if (o.strides[k] != 1 || o.start[k] % run || o.limit[k] % run || run == 0)
      return failure();
    Window w; // over the transpose's result: dim k in runs, dim k + 1 whole
    for (size_t d = 0; d < in.size(); ++d) {
      int64_t from = (int64_t)d < k ? d : (int64_t)d == k ? k : (int64_t)d == k + 1 ? -1 : d - 1;
      w.start.push_back(from < 0 ? 0 : (int64_t)d == k ? o.start[k] / run : o.start[from]);
      w.limit.push_back(from < 0 ? run : (int64_t)d == k ? o.limit[k] / run : o.limit[from]);
      w.strides.push_back(from < 0 ? 1 : o.strides[from]);
    }
    ArrayRef<int64_t> perm = t.getPerm();
    Window x; // over the transpose's input: result dim i is input dim perm[i]
    x.start.resize(perm.size());
    x.limit.resize(perm.size());
    x.strides.resize(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      x.start[perm[i]] = w.start[i];
      x.limit[perm[i]] = w.limit[i];
      x.strides[perm[i]] = w.strides[i];
    }
    Value v = b.create<TransposeOp>(s.getLoc(), slice(b, s.getLoc(), t.getInput(), x), perm);
    b.replaceOpWithNewOp<ReshapeOp>(s, s.getResult().getType(), v);
    ++count;
    return success();
  }
};

struct SinkSlicesPass : impl::SinkSlicesBase<SinkSlicesPass> {
  using SinkSlicesBase::SinkSlicesBase;
  void runOnOperation() override {
    int64_t count = 0;
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    patterns.add<ComposeSlices, SliceOfBroadcast, SliceOfTranspose, SliceOfPointwise, ReshapeOfUnitSlice,
                 SliceOfMergedTranspose>(ctx, count);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    numSunk += count;
  }
};

} // namespace
} // namespace rfuse
