// rfuse-expand-custom-vjp: each rfuse.custom_vjp becomes a call of its forward function, for the
// inliner that follows (see Passes.td).
#include "rfuse/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_EXPANDCUSTOMVJP
#include "rfuse/Passes/Passes.h.inc"

namespace {

struct ExpandCustomVjpPass : impl::ExpandCustomVjpBase<ExpandCustomVjpPass> {
  using ExpandCustomVjpBase::ExpandCustomVjpBase;

  void runOnOperation() override {
    SmallVector<CustomVjpOp> ops;
    getOperation().walk([&](CustomVjpOp op) { ops.push_back(op); });
    for (CustomVjpOp op : ops) {
      OpBuilder b(op);
      auto call = b.create<func::CallOp>(op.getLoc(), op.getForwardAttr(), op.getResultTypes(), op.getInputs());
      op.replaceAllUsesWith(call.getResults());
      op.erase();
      ++expanded;
    }
  }
};

} // namespace
} // namespace rfuse
