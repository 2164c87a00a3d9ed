// Transposes moved down through layout-free ops (see TransposeSinking.h).
#include "TransposeSinking.h"
#include "rfuse/IR/Geometry.h"
#include "rfuse/Passes/Passes.h"

using namespace mlir;

namespace rfuse {

RankedTensorType permuted(RankedTensorType t, ArrayRef<int64_t> perm, Type element) {
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(t.getDimSize(p));
  return RankedTensorType::get(shape, element ? element : t.getElementType());
}

RankedTensorType unpermuted(RankedTensorType t, ArrayRef<int64_t> perm, Type element) {
  SmallVector<int64_t> shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    shape[perm[i]] = t.getDimSize(i);
  return RankedTensorType::get(shape, element);
}

Value rebuildInShape(PatternRewriter &rw, Operation *op, ArrayRef<int64_t> shape,
                     function_ref<Value(Value, bool make)> convert) {
  for (Value v : op->getOperands())
    if (!convert(v, false))
      return Value();
  SmallVector<Value> operands;
  for (Value v : op->getOperands())
    operands.push_back(convert(v, true));
  Operation *copy = rw.clone(*op);
  copy->setOperands(operands);
  copy->getResult(0).setType(RankedTensorType::get(shape, tensorOf(op->getResult(0)).getElementType()));
  return copy->getResult(0);
}

namespace {

SmallVector<int64_t> nonUnitShape(RankedTensorType t) {
  SmallVector<int64_t> shape;
  for (int64_t d : t.getShape())
    if (d != 1)
      shape.push_back(d);
  return shape;
}

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
    // statistics kept as [1, 1, C, 1] in R's layout broadcast as [C] into any layout. Where the
    // input is itself a transpose (a statistic whose reduction was moved: see below), perhaps
    // behind a reshape of size-1 dims, the broadcast reads the transpose's input instead.
    Value input = b.getInput();
    SmallVector<int64_t> dims; // for each of the input's non-unit dims in order, its dim in `pre`
    for (auto [i, d] : llvm::enumerate(b.getDims()))
      if (tensorOf(input).getShape()[i] != 1)
        dims.push_back(perm[d]);
    auto increasing = [](ArrayRef<int64_t> d) {
      for (size_t k = 1; k < d.size(); ++k)
        if (d[k] <= d[k - 1])
          return false;
      return true;
    };
    if (!increasing(dims)) {
      Value src = input;
      if (auto r = src.getDefiningOp<ReshapeOp>(); r && nonUnitShape(tensorOf(r.getInput())) == nonUnitShape(tensorOf(src)))
        src = r.getInput();
      auto t = src.getDefiningOp<TransposeOp>();
      if (!t)
        return Value(); // the broadcast's own dims would need a transpose: not worth it
      // Output dim i of t is dim q[i] of its input: the input's non-unit dims, in order, take the
      // targets of the output's non-unit dims they became.
      ArrayRef<int64_t> q = t.getPerm();
      RankedTensorType out = tensorOf(t.getResult());
      SmallVector<int64_t> target(q.size(), -1);
      size_t k = 0;
      for (int64_t i = 0; i < out.getRank(); ++i)
        if (out.getShape()[i] != 1)
          target[q[i]] = dims[k++];
      dims.clear();
      for (int64_t d : target)
        if (d >= 0)
          dims.push_back(d);
      if (!increasing(dims))
        return Value();
      input = t.getInput();
    }
    if (!make)
      return v;
    RankedTensorType in = tensorOf(input);
    // A statistic kept with its reduced dims as 1s, where they are in `pre` (a softmax's maximum
    // over the last dim): broadcast as it is, with no reshape between the reduction and the ops
    // reading it, so that fusion puts them in one kernel.
    if (in.getRank() == pre.getRank()) {
      SmallVector<int64_t> own;
      for (int64_t i = 0; i < in.getRank(); ++i)
        if (in.getShape()[i] != 1)
          own.push_back(i);
      if (own == dims)
        return rw.create<BroadcastInDimOp>(loc, pre, input,
                                           rw.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, in.getRank()))));
    }
    SmallVector<int64_t> kept = nonUnitShape(in);
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

// Whether the patterns move transposes of `v`'s rank: `rank` only, or any rank from 2 (0).
bool takesRank(Value v, int64_t rank) {
  int64_t r = tensorOf(v).getRank();
  return rank ? r == rank : r >= 2;
}

// Whether `v` reaches a reduction or a transpose through pointwise ops and casts: where a
// transpose moved below the op that computes `v` gets somewhere (a reduction over the unpermuted
// layout, a transpose it composes with). A transpose that would only move down a pointwise chain
// to the program's result stays where fusion reads it as an index map of an input.
bool leadsToReductionOrTranspose(Value v, llvm::SmallPtrSetImpl<Operation *> &seen, int depth = 0) {
  if (depth > 8)
    return false;
  for (Operation *user : v.getUsers()) {
    if (isReductionOp(user) || isa<TransposeOp>(user))
      return true;
    if ((isa<PointwiseOpInterface>(user) || isa<CastOp>(user)) && user->getNumResults() == 1 &&
        seen.insert(user).second && leadsToReductionOrTranspose(user->getResult(0), seen, depth + 1))
      return true;
  }
  return false;
}

// op(transpose(x, p), broadcast(v), ...) = transpose(op(x, broadcast'(v), ...), p) for a pointwise
// op or cast (in any-rank mode, only where that leads somewhere: leadsToReductionOrTranspose).
struct SinkThroughPointwise : RewritePattern {
  SinkThroughPointwise(MLIRContext *ctx, llvm::Statistic &count, int64_t rank)
      : RewritePattern(MatchAnyOpTypeTag(), 1, ctx), count(count), rank(rank) {}
  llvm::Statistic &count;
  int64_t rank;

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if ((!isa<PointwiseOpInterface>(op) && !isa<CastOp>(op)) || op->getNumResults() != 1 ||
        !takesRank(op->getResult(0), rank) || op->getParentOfType<FusionOp>())
      return failure();
    SmallVector<int64_t> perm;
    for (Value v : op->getOperands())
      if (auto t = v.getDefiningOp<TransposeOp>(); t && takesRank(v, rank)) {
        perm.assign(t.getPerm().begin(), t.getPerm().end());
        break;
      }
    llvm::SmallPtrSet<Operation *, 16> seen; // (each op of the chain looked at once)
    if (perm.empty() || (!rank && !leadsToReductionOrTranspose(op->getResult(0), seen)))
      return failure();
    RankedTensorType result = tensorOf(op->getResult(0));
    Value moved = rebuildInShape(rw, op, unpermuted(result, perm, result.getElementType()).getShape(),
                                 [&](Value v, bool make) { return beforeTranspose(rw, op->getLoc(), v, perm, make); });
    if (!moved)
      return failure();
    rw.replaceOp(op, rw.create<TransposeOp>(op->getLoc(), moved, perm).getResult());
    ++count;
    return success();
  }
};

// reduce(transpose(x, p), dims) = reduce(x, p[dims]), with the kept dimensions put back in
// order by a transpose when the reduction leaves more than one of them out of order.
struct SinkThroughReduction : RewritePattern {
  SinkThroughReduction(MLIRContext *ctx, llvm::Statistic &count, int64_t rank)
      : RewritePattern(MatchAnyOpTypeTag(), 1, ctx), count(count), rank(rank) {}
  llvm::Statistic &count;
  int64_t rank;

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    if (!isReductionOp(op) || op->getParentOfType<FusionOp>())
      return failure();
    auto t = op->getOperand(0).getDefiningOp<TransposeOp>();
    if (!t || !takesRank(t.getResult(), rank))
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

} // namespace

void addTransposeSinkingPatterns(RewritePatternSet &patterns, llvm::Statistic &count, int64_t rank) {
  patterns.add<SinkThroughPointwise>(patterns.getContext(), count, rank);
  patterns.add<SinkThroughReduction>(patterns.getContext(), count, rank);
}

} // namespace rfuse
