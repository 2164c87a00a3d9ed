// rfuse-bucket-all-reduce: one-operand all-reduces packed into buckets (see Passes.td).
#include "rfuse/Passes/Passes.h"

#include "rfuse/IR/DType.h"

#include <algorithm>

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_BUCKETALLREDUCE
#include "rfuse/Passes/Passes.h.inc"

namespace {

int64_t bytesOf(Value v) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  return t.getNumElements() * (int64_t)dtypeSize(dtypeOf(v));
}

struct BucketAllReducePass : impl::BucketAllReduceBase<BucketAllReducePass> {
  using BucketAllReduceBase::BucketAllReduceBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (bucketBytes <= 0) {
      fn.emitError() << "rfuse-bucket-all-reduce: bucket-bytes must be positive, not " << (int64_t)bucketBytes;
      return signalPassFailure();
    }
    for (Block &block : fn.getBody()) {
      // Where each value becomes ready: its definition's position (arguments first).
      llvm::DenseMap<Operation *, int64_t> position;
      int64_t n = 0;
      for (Operation &op : block)
        position[&op] = n++;
      auto readyAt = [&](Value v) -> int64_t {
        Operation *def = v.getDefiningOp();
        return def && def->getBlock() == &block ? position[def] : -1;
      };
      for (auto reduction : {CollectiveReduction::mean, CollectiveReduction::sum}) {
        SmallVector<AllReduceOp> singles;
        for (Operation &op : block)
          if (auto ar = dyn_cast<AllReduceOp>(op); ar && ar.getInputs().size() == 1 && ar.getReduction() == reduction)
            singles.push_back(ar);
        std::stable_sort(singles.begin(), singles.end(), [&](AllReduceOp a, AllReduceOp b) {
          return readyAt(a.getInputs()[0]) < readyAt(b.getInputs()[0]);
        });
        // The first use of an all-reduce's result: a bucket must be placed before it.
        auto firstUse = [&](AllReduceOp ar) {
          int64_t first = n;
          for (Operation *user : ar.getResult(0).getUsers())
            if (user->getBlock() == &block)
              first = std::min(first, position[user]);
          return first;
        };
        SmallVector<SmallVector<AllReduceOp>> buckets;
        int64_t filled = 0, deadline = 0;
        for (AllReduceOp ar : singles) {
          int64_t bytes = bytesOf(ar.getInputs()[0]);
          if (buckets.empty() || filled + bytes > bucketBytes || readyAt(ar.getInputs()[0]) >= deadline) {
            buckets.emplace_back();
            filled = 0;
            deadline = n;
          }
          buckets.back().push_back(ar);
          filled += bytes;
          deadline = std::min(deadline, firstUse(ar));
        }
        for (auto &bucket : buckets)
          merge(block, bucket, reduction);
      }
    }
  }

  void merge(Block &block, ArrayRef<AllReduceOp> bucket, CollectiveReduction reduction) {
    SmallVector<Value> operands;
    SmallVector<Location> locs;
    for (AllReduceOp ar : bucket) {
      operands.push_back(ar.getInputs()[0]);
      locs.push_back(ar.getLoc());
    }
    // Right after the last operand is computed (the bucket is sorted by readiness).
    Value last = operands.back();
    OpBuilder b(block.getParentOp()->getContext());
    if (Operation *def = last.getDefiningOp(); def && def->getBlock() == &block)
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&block);
    auto merged = b.create<AllReduceOp>(b.getFusedLoc(locs), ValueRange(operands), reduction);
    for (auto [k, member] : llvm::enumerate(bucket)) {
      AllReduceOp ar = member;
      ar.getResult(0).replaceAllUsesWith(merged.getResult(k));
      ar.erase();
    }
    ++numBuckets;
  }
};

} // namespace
} // namespace rfuse
