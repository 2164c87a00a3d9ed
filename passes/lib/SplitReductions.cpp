// rfuse-split-reductions: two-stage reductions where one stage would leave the GPU idle (see
// Passes.td).
#include "rfuse/Passes/Passes.h"
#include "rfuse/IR/Geometry.h"
#include "FusionGrouping.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_SPLITREDUCTIONS
#include "rfuse/Passes/Passes.h.inc"

namespace {

RankedTensorType tensorOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

// A reduction of `kind` (the op's own class) over `dims`.
Value reduce(OpBuilder &b, Location loc, Operation *like, Value x, ArrayRef<int64_t> dims, bool keep) {
  if (isa<ReduceMaxOp>(like))
    return b.create<ReduceMaxOp>(loc, x, dims, keep);
  if (isa<ReduceMinOp>(like))
    return b.create<ReduceMinOp>(loc, x, dims, keep);
  return b.create<ReduceSumOp>(loc, x, dims, keep); // sum, and mean as a sum scaled at the end
}

// Whether the reduction's input is read again together with its result: some op that fusion
// would put in its region (fusion::isElementwiseLike), downstream of the result, also reads a
// value of the input's elementwise chain. That is a layer norm's or softmax's shape (x - mean(x),
// e / sum(e)): fused, it is one kernel whose passes all read the same input, which the CUDA
// codegen keeps in shared memory for tiles of 8 columns (no split needed: 8192 outputs give 1024
// blocks); split, the input is read, written and read again by separate kernels.
bool readAgainWithResult(Operation *red) {
  llvm::DenseSet<Value> chain;
  SmallVector<Value> work = {red->getOperand(0)};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!chain.insert(v).second)
      continue;
    if (Operation *def = v.getDefiningOp(); def && fusion::isElementwiseLike(def))
      for (Value x : def->getOperands())
        work.push_back(x);
  }
  llvm::DenseSet<Operation *> seen;
  SmallVector<Operation *> users(red->getUsers().begin(), red->getUsers().end());
  while (!users.empty()) {
    Operation *u = users.pop_back_val();
    if (!fusion::isElementwiseLike(u) || !seen.insert(u).second || seen.size() > 64)
      continue;
    if (llvm::any_of(u->getOperands(), [&](Value x) { return chain.contains(x); }))
      return true;
    for (Operation *next : u->getUsers())
      users.push_back(next);
  }
  return false;
}

struct SplitReductionsPass : impl::SplitReductionsBase<SplitReductionsPass> {
  using SplitReductionsBase::SplitReductionsBase;

  void runOnOperation() override {
    SmallVector<Operation *> reductions;
    getOperation().walk([&](Operation *op) {
      if (isReductionOp(op) && !op->getParentOfType<FusionOp>())
        reductions.push_back(op);
    });
    while (!reductions.empty()) {
      for (Operation *op : reductions)
        if (split(op))
          ++numSplit;
      reductions = std::move(again); // a second stage that may be split in turn
      again.clear();
    }
  }

  SmallVector<Operation *> again;

  bool split(Operation *op) {
    Value x = op->getOperand(0);
    auto t = tensorOf(x);
    if (!t.getElementType().isF32() && !t.getElementType().isF64() && !t.getElementType().isF16() &&
        !t.getElementType().isBF16())
      return false;
    ArrayRef<int64_t> shape = t.getShape();
    int64_t rank = shape.size();
    SmallVector<int64_t> dims(reductionDims(op));
    llvm::sort(dims);
    int64_t reduced = 1, outputs = 1;
    for (int64_t d = 0; d < rank; ++d)
      (llvm::is_contained(dims, d) ? reduced : outputs) *= shape[d];
    if (reduced < minReduced)
      return false;
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value partial;
    if ((int64_t)dims.size() == rank && rank >= 2 && shape[rank - 1] >= 32) {
      // Everything: the trailing dim first (rows in parallel), then the rest.
      partial = reduce(b, loc, op, x, {rank - 1}, false);
      SmallVector<int64_t> rest;
      for (int64_t d = 0; d < rank - 1; ++d)
        rest.push_back(d);
      partial = reduce(b, loc, op, partial, rest, false);
    } else if (outputs <= maxOutputs && llvm::equal(dims, llvm::seq<int64_t>(0, dims.size())) &&
               (int64_t)dims.size() < rank &&
               !(outputs >= keepReadAgainOutputs && reduced <= keepReadAgainReduced && t.getElementType().isF32() &&
                 readAgainWithResult(op))) {
      // Leading dims [R..., C...]: [k, R/k, C] reduced over R/k — k * C partial results, about
      // `parallelOutputs` of them, each from at least 32 rows — then the partials transposed to
      // [C, k] and reduced over k: a row reduction, a block per output. (Reducing [k, C] over k
      // instead would run C threads through k rows each: with a batch norm's 64 channels that
      // second stage alone took longer than reading the whole tensor.)
      int64_t k = 1;
      while (reduced % (k * 2) == 0 && reduced / (k * 2) >= 32 && outputs * k * 2 <= parallelOutputs)
        k *= 2;
      if (k < 8)
        return false;
      SmallVector<int64_t> grouped = {k, reduced / k};
      for (int64_t d = dims.size(); d < rank; ++d)
        grouped.push_back(shape[d]);
      Value r = b.create<ReshapeOp>(loc, RankedTensorType::get(grouped, t.getElementType()), x);
      partial = reduce(b, loc, op, r, {1}, false); // [k, C...]
      int64_t kept = rank - (int64_t)dims.size();
      SmallVector<int64_t> perm;
      for (int64_t d = 1; d <= kept; ++d)
        perm.push_back(d);
      perm.push_back(0);
      partial = b.create<TransposeOp>(loc, partial, perm); // [C..., k]
      partial = reduce(b, loc, op, partial, {kept}, false);
    } else if (outputs <= maxOutputs && !dims.empty() && dims[0] == 0 && (int64_t)dims.size() < rank &&
               !llvm::equal(dims, llvm::seq<int64_t>(0, dims.size())) && dims.back() != rank - 1 &&
               !readAgainWithResult(op)) {
      // Leading dims and others past a kept one, the innermost dim kept ([B, H, T, D] over B and
      // T: a bias's gradient read in attention's head layout): the later dims first, each
      // output's rows in parallel ([B, H, D]: many outputs), then the leading run, split again as
      // above if it is long. As one reduction over dims apart, tiles of columns on a few blocks
      // read the whole tensor. (With the innermost dim reduced, each output's elements are
      // contiguous runs: a block per output reads them at full speed. And not where the result
      // is read again with the input: fused with its readers, that is one kernel.)
      int64_t lead = 0;
      while (lead < (int64_t)dims.size() && dims[lead] == lead)
        ++lead;
      SmallVector<int64_t> later(dims.begin() + lead, dims.end());
      partial = reduce(b, loc, op, x, later, false);
      partial = reduce(b, loc, op, partial, llvm::to_vector(llvm::seq<int64_t>(0, lead)), false);
      again.push_back(partial.getDefiningOp());
    } else {
      return false;
    }
    auto resultType = llvm::cast<RankedTensorType>(op->getResult(0).getType());
    if (isa<ReduceMeanOp>(op))
      partial = b.create<MulOp>(loc, partial.getType(), partial,
                                b.create<ConstantOp>(loc, DenseElementsAttr::get(
                                    tensorOf(partial), b.getFloatAttr(t.getElementType(), 1.0 / (double)reduced))));
    if (partial.getType() != resultType) // keep_dims: the reduced dims back as 1s
      partial = b.create<ReshapeOp>(loc, resultType, partial);
    op->getResult(0).replaceAllUsesWith(partial);
    op->erase();
    return true;
  }
};

} // namespace
} // namespace rfuse
