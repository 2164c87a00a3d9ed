// rfuse-unfuse: dissolves fusion regions (see Passes.td).
#include "rfuse/Passes/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace rfuse {
#define GEN_PASS_DEF_UNFUSE
#include "rfuse/Passes/Passes.h.inc"

namespace {
struct UnfusePass : impl::UnfuseBase<UnfusePass> {
  void runOnOperation() override {
    llvm::SmallVector<FusionOp> fusions;
    getOperation().walk([&](FusionOp f) { fusions.push_back(f); });
    mlir::IRRewriter rewriter(&getContext());
    // Walk order is post-order, so nested fusions dissolve before their parents.
    for (FusionOp f : fusions) {
      rewriter.setInsertionPoint(f);
      mlir::IRMapping map;
      mlir::Block &body = f.getBody().front();
      map.map(body.getArguments(), f.getInputs());
      for (mlir::Operation &op : body.without_terminator())
        rewriter.clone(op, map);
      llvm::SmallVector<mlir::Value> results;
      for (mlir::Value v : body.getTerminator()->getOperands())
        results.push_back(map.lookupOrDefault(v));
      rewriter.replaceOp(f, results);
      ++numDissolved;
    }
  }
};
} // namespace
} // namespace rfuse
