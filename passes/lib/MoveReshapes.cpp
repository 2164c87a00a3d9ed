// rfuse-move-reshapes: reshapes moved out from between the ops that fusion would otherwise put
// in one kernel (see Passes.td).
#include "rfuse/Passes/Passes.h"
#include "TransposeSinking.h"
#include "rfuse/IR/Geometry.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <optional>

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_MOVERESHAPES
#include "rfuse/Passes/Passes.h.inc"

namespace {

// A reshape from shape A to shape B, as consecutive runs of A's dims and of B's dims with equal
// element counts ([a0, a1) of A is [b0, b1) of B, row-major). Size-1 dims that pair with nothing
// join the run before them (or after, at the start).
struct DimGroup {
  int64_t a0, a1, b0, b1;
};

std::optional<SmallVector<DimGroup>> reshapeGroups(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  if (llvm::is_contained(from, 0) || llvm::is_contained(to, 0) || llvm::is_contained(from, ShapedType::kDynamic) ||
      llvm::is_contained(to, ShapedType::kDynamic))
    return std::nullopt;
  SmallVector<DimGroup> groups;
  int64_t i = 0, j = 0, n = from.size(), m = to.size();
  while (i < n || j < m) {
    DimGroup g{i, i, j, j};
    int64_t pa = 1, pb = 1;
    if (i < n)
      pa *= from[i++];
    if (j < m)
      pb *= to[j++];
    while (pa != pb) {
      if (pa < pb) {
        if (i >= n)
          return std::nullopt;
        pa *= from[i++];
      } else {
        if (j >= m)
          return std::nullopt;
        pb *= to[j++];
      }
    }
    g.a1 = i;
    g.b1 = j;
    groups.push_back(g);
  }
  // A run empty on one side (unit dims left over at the end) joins its neighbour.
  auto oneSided = [](const DimGroup &g) { return g.a0 == g.a1 || g.b0 == g.b1; };
  SmallVector<DimGroup> merged;
  for (DimGroup g : groups) {
    if (!merged.empty() && (oneSided(g) || oneSided(merged.back()))) {
      merged.back().a1 = g.a1;
      merged.back().b1 = g.b1;
    } else {
      merged.push_back(g);
    }
  }
  if (llvm::any_of(merged, oneSided))
    return std::nullopt;
  return merged;
}

// The dims of A (the reshape's input) of the runs whose dims of B all satisfy `holds`, in order;
// none where a run has some that do and some that do not (unit dims of B count as either). A
// broadcast's kept dims and a reduction's reduced dims move through a reshape this way.
template <class Pred>
std::optional<SmallVector<int64_t>> wholeRuns(ArrayRef<DimGroup> groups, ArrayRef<int64_t> b, Pred holds) {
  SmallVector<int64_t> dims;
  for (const DimGroup &g : groups) {
    bool all = true, none = true;
    for (int64_t d = g.b0; d < g.b1; ++d) {
      if (b[d] == 1)
        continue;
      all &= holds(d);
      none &= !holds(d);
    }
    if (!all && !none)
      return std::nullopt;
    if (all && !none)
      for (int64_t d = g.a0; d < g.a1; ++d)
        dims.push_back(d);
  }
  return dims;
}

// The runs in the order `key` (a run's position) gives them.
template <class Key> SmallVector<const DimGroup *> sortedRuns(ArrayRef<DimGroup> groups, Key key) {
  SmallVector<const DimGroup *> order;
  for (const DimGroup &g : groups)
    order.push_back(&g);
  llvm::sort(order, [&](const DimGroup *x, const DimGroup *y) { return key(*x) < key(*y); });
  return order;
}

bool increasingRun(ArrayRef<int64_t> v) {
  for (size_t k = 1; k < v.size(); ++k)
    if (v[k] != v[k - 1] + 1)
      return false;
  return true;
}

// What operand `v` (of shape `shape`) is in shape `src`, the input shape of the reshape being
// moved: the input of a reshape from `src`, a splat constant, a function argument behind a new
// reshape (a view), or a broadcast whose kept and broadcast dims are whole runs of the reshape.
// `make` false only checks.
Value inSourceShape(PatternRewriter &rw, Location loc, Value v, RankedTensorType src, bool make) {
  RankedTensorType t = tensorOf(v);
  RankedTensorType want = RankedTensorType::get(src.getShape(), t.getElementType());
  if (auto r = v.getDefiningOp<ReshapeOp>(); r && tensorOf(r.getInput()).getShape() == src.getShape())
    return r.getInput();
  if (auto c = v.getDefiningOp<ConstantOp>()) {
    auto splat = llvm::dyn_cast<SplatElementsAttr>(c.getValue());
    if (!splat)
      return Value();
    return make ? rw.create<ConstantOp>(loc, DenseElementsAttr::get(want, splat.getSplatValue<Attribute>())).getResult()
                : v;
  }
  if (llvm::isa<BlockArgument>(v))
    return make ? rw.create<ReshapeOp>(loc, want, v).getResult() : v;
  if (auto b = v.getDefiningOp<BroadcastInDimOp>()) {
    RankedTensorType in = tensorOf(b.getInput());
    auto groups = reshapeGroups(src.getShape(), t.getShape());
    if (!groups)
      return Value();
    // Which of the result's dims the input fills (an input dim of size 1 under a larger one is
    // broadcast, not kept).
    SmallVector<bool> kept(t.getRank(), false);
    ArrayRef<int64_t> dims = b.getDims();
    for (auto [i, d] : llvm::enumerate(dims)) {
      if (i > 0 && d <= dims[i - 1])
        return Value();
      kept[d] = in.getShape()[i] == t.getShape()[d];
    }
    auto newDims = wholeRuns(*groups, t.getShape(), [&](int64_t d) { return kept[d]; });
    if (!newDims)
      return Value();
    SmallVector<int64_t> newShape;
    for (int64_t d : *newDims)
      newShape.push_back(src.getShape()[d]);
    // The input as the new broadcast reads it: only where that needs no reshape of a computed
    // value (a reshape between a statistic and its readers would keep them out of one kernel).
    bool sameInput = llvm::equal(newShape, in.getShape());
    if (!sameInput && !llvm::isa<BlockArgument>(b.getInput()))
      return Value();
    if (!make)
      return v;
    Value input = b.getInput();
    if (!sameInput)
      input = rw.create<ReshapeOp>(loc, RankedTensorType::get(newShape, in.getElementType()), input);
    return rw.create<BroadcastInDimOp>(loc, want, input, rw.getDenseI64ArrayAttr(*newDims));
  }
  return Value();
}

// A reshape worth moving: of a value some op computes (a kernel's or a product's result), to
// another shape. Reshapes of arguments are views nothing fuses across.
ReshapeOp movableReshape(Value v) {
  auto r = v.getDefiningOp<ReshapeOp>();
  if (!r)
    return {};
  Operation *def = r.getInput().getDefiningOp();
  if (!def || isa<ConstantOp, ReshapeOp>(def))
    return {};
  return r;
}

// op(reshape(x), y, ...) -> reshape(op(x, y', ...)) for pointwise ops and casts: the op runs in
// x's shape, where it fuses with the op computing x (a product's epilogue, a transpose's kernel).
struct SinkReshapeThroughPointwise : RewritePattern {
  SinkReshapeThroughPointwise(MLIRContext *ctx, llvm::Statistic &count)
      : RewritePattern(MatchAnyOpTypeTag(), 1, ctx), count(count) {}
  llvm::Statistic &count;

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if (!(isa<PointwiseOpInterface>(op) || isa<CastOp>(op)) || op->getNumResults() != 1 || op->getNumOperands() == 0)
      return failure();
    RankedTensorType result = tensorOf(op->getResult(0));
    for (Value v : op->getOperands())
      if (tensorOf(v).getShape() != result.getShape())
        return failure();
    ReshapeOp driver;
    for (Value v : op->getOperands())
      if ((driver = movableReshape(v)))
        break;
    if (!driver)
      return failure();
    RankedTensorType src = tensorOf(driver.getInput());
    Value moved = rebuildInShape(rw, op, src.getShape(),
                                 [&](Value v, bool make) { return inSourceShape(rw, op->getLoc(), v, src, make); });
    if (!moved)
      return failure();
    rw.replaceOpWithNewOp<ReshapeOp>(op, result, moved);
    ++count;
    return success();
  }
};

// reduce(reshape(x), dims) -> reshape(reduce(x, dims')) where the reduced dims are whole runs of
// the reshape: the reduction reads x's kernel's values in the same kernel.
struct SinkReshapeThroughReduction : RewritePattern {
  SinkReshapeThroughReduction(MLIRContext *ctx, llvm::Statistic &count)
      : RewritePattern(MatchAnyOpTypeTag(), 1, ctx), count(count) {}
  llvm::Statistic &count;

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if (!isReductionOp(op))
      return failure();
    ReshapeOp r = movableReshape(op->getOperand(0));
    if (!r)
      return failure();
    RankedTensorType src = tensorOf(r.getInput()), in = tensorOf(r.getResult());
    auto groups = reshapeGroups(src.getShape(), in.getShape());
    if (!groups)
      return failure();
    ArrayRef<int64_t> dims = reductionDims(op);
    auto reduced = wholeRuns(*groups, in.getShape(), [&](int64_t d) { return llvm::is_contained(dims, d); });
    if (!reduced || reduced->empty())
      return failure();
    SmallVector<int64_t> newDims = std::move(*reduced);
    SmallVector<int64_t> shape;
    bool keep = reductionKeepsDims(op);
    for (int64_t d = 0; d < src.getRank(); ++d) {
      if (!llvm::is_contained(newDims, d))
        shape.push_back(src.getShape()[d]);
      else if (keep)
        shape.push_back(1);
    }
    RankedTensorType result = tensorOf(op->getResult(0));
    Operation *copy = rw.clone(*op);
    copy->setOperand(0, r.getInput());
    copy->setAttr("dims", rw.getDenseI64ArrayAttr(newDims));
    copy->getResult(0).setType(RankedTensorType::get(shape, result.getElementType()));
    rw.replaceOpWithNewOp<ReshapeOp>(op, result, copy->getResult(0));
    ++count;
    return success();
  }
};

// transpose(reshape(transpose(x, p)), q): the reshape moved above the first transpose (its runs
// are runs of x's dims in order) or below the second (its runs stay together, in order, in the
// result), so that the two transposes meet and compose into one kernel (transpose's folder).
// Attention's heads are split this way: R's layout to torch's, a split of the features into
// heads, then heads before positions.
struct ComposeTransposesAcrossReshape : OpRewritePattern<TransposeOp> {
  ComposeTransposesAcrossReshape(MLIRContext *ctx, llvm::Statistic &count)
      : OpRewritePattern(ctx), count(count) {}
  llvm::Statistic &count;

  LogicalResult matchAndRewrite(TransposeOp outer, PatternRewriter &rw) const override {
    auto r = outer.getInput().getDefiningOp<ReshapeOp>();
    if (!r || !r->hasOneUse())
      return failure();
    auto inner = r.getInput().getDefiningOp<TransposeOp>();
    if (!inner || !inner->hasOneUse())
      return failure();
    Location loc = outer.getLoc();
    RankedTensorType x = tensorOf(inner.getInput()), mid = tensorOf(inner.getResult()), shaped = tensorOf(r.getResult());
    Type element = x.getElementType();
    auto groups = reshapeGroups(mid.getShape(), shaped.getShape());
    if (!groups)
      return failure();
    // Above the inner transpose: each run of its result is a run of x's dims in order.
    ArrayRef<int64_t> p = inner.getPerm();
    if (llvm::all_of(*groups, [&](const DimGroup &g) { return increasingRun(p.slice(g.a0, g.a1 - g.a0)); })) {
      SmallVector<int64_t> shape, perm(shaped.getRank());
      for (const DimGroup *g : sortedRuns(*groups, [&](const DimGroup &g) { return p[g.a0]; }))
        for (int64_t d = g->b0; d < g->b1; ++d) {
          perm[d] = shape.size();
          shape.push_back(shaped.getShape()[d]);
        }
      Value reshaped = rw.create<ReshapeOp>(loc, RankedTensorType::get(shape, element), inner.getInput());
      Value first = rw.create<TransposeOp>(loc, shaped, reshaped, rw.getDenseI64ArrayAttr(perm));
      rw.replaceOpWithNewOp<TransposeOp>(outer, outer.getType(), first, outer.getPermAttr());
      ++count;
      return success();
    }
    // Below the outer transpose: each run of its input stays together and in order.
    ArrayRef<int64_t> q = outer.getPerm();
    SmallVector<int64_t> pos(q.size());
    for (auto [i, d] : llvm::enumerate(q))
      pos[d] = i;
    if (llvm::all_of(*groups, [&](const DimGroup &g) { return increasingRun(ArrayRef<int64_t>(pos).slice(g.b0, g.b1 - g.b0)); })) {
      SmallVector<int64_t> perm;
      for (const DimGroup *g : sortedRuns(*groups, [&](const DimGroup &g) { return pos[g.b0]; }))
        for (int64_t d = g->a0; d < g->a1; ++d)
          perm.push_back(d);
      Value second = rw.create<TransposeOp>(loc, permuted(mid, perm), inner.getResult(), rw.getDenseI64ArrayAttr(perm));
      rw.replaceOpWithNewOp<ReshapeOp>(outer, outer.getType(), second);
      ++count;
      return success();
    }
    return failure();
  }
};

struct MoveReshapesPass : impl::MoveReshapesBase<MoveReshapesPass> {
  using MoveReshapesBase::MoveReshapesBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ComposeTransposesAcrossReshape>(&getContext(), numComposed);
    patterns.add<SinkReshapeThroughPointwise, SinkReshapeThroughReduction>(&getContext(), numSunk);
    // Not converging within the driver's iterations leaves a valid program: not a failure.
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace
} // namespace rfuse
