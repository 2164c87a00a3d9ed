// rfuse-drop-stop-gradients: each rfuse.stop_gradient replaced by its operand once differentiation
// is done (see Passes.td).
#include "rfuse/Passes/Passes.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_DROPSTOPGRADIENTS
#include "rfuse/Passes/Passes.h.inc"

namespace {

struct DropStopGradientsPass : impl::DropStopGradientsBase<DropStopGradientsPass> {
  using DropStopGradientsBase::DropStopGradientsBase;

  void runOnOperation() override {
    SmallVector<StopGradientOp> ops;
    getOperation().walk([&](StopGradientOp op) { ops.push_back(op); });
    for (StopGradientOp op : ops) {
      op.replaceAllUsesWith(op.getInput());
      op.erase();
      ++dropped;
    }
  }
};

} // namespace
} // namespace rfuse
