// rfuse-autocast: float32 matrix products and convolutions in bfloat16 / float16, everything
// else in float32 (see Passes.td).
#include "rfuse/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_AUTOCAST
#include "rfuse/Passes/Passes.h.inc"

namespace {

constexpr char kAutocastAttr[] = "rfuse.autocast";

/// The low float type named "bf16" / "f16", or null.
Type lowFloatType(MLIRContext *ctx, llvm::StringRef name) {
  if (name == "bf16")
    return BFloat16Type::get(ctx);
  if (name == "f16")
    return Float16Type::get(ctx);
  return {};
}

bool isF32Tensor(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

struct AutocastPass : impl::AutocastBase<AutocastPass> {
  using AutocastBase::AutocastBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    MLIRContext *ctx = &getContext();
    if (scope != "all" && scope != "marked") {
      fn.emitError() << "rfuse-autocast: scope must be all or marked, not '" << scope << "'";
      return signalPassFailure();
    }
    Type passType = lowFloatType(ctx, dtype);
    if (scope == "all" && !passType) {
      fn.emitError() << "rfuse-autocast: dtype must be bf16 or f16, not '" << dtype << "'";
      return signalPassFailure();
    }
    SmallVector<Operation *> ops;
    fn.walk([&](Operation *op) {
      if (isa<MatmulOp, Conv2dOp>(op))
        ops.push_back(op);
    });
    bool failedMark = false;
    for (Operation *op : ops) {
      Type low = passType;
      auto mark = op->getAttrOfType<StringAttr>(kAutocastAttr);
      if (mark) {
        low = lowFloatType(ctx, mark.getValue());
        if (!low) {
          op->emitError() << "rfuse-autocast: the op's " << kAutocastAttr << " names '" << mark.getValue()
                          << "'; it must be bf16 or f16";
          failedMark = true;
          continue;
        }
      } else if (scope != "all") {
        continue;
      }
      op->removeAttr(kAutocastAttr);
      // Float32 products only: float64 stays exact, and a product already in a low dtype (or of
      // integers) is the program's own choice.
      if (!isF32Tensor(op->getResult(0)) ||
          !llvm::all_of(op->getOperands(), [](Value v) { return isF32Tensor(v); }))
        continue;
      OpBuilder b(op);
      Location loc = op->getLoc();
      IRMapping mapping;
      for (Value v : op->getOperands()) {
        if (mapping.contains(v)) // x %*% x: one cast
          continue;
        auto t = llvm::cast<RankedTensorType>(v.getType());
        mapping.map(v, b.create<CastOp>(loc, RankedTensorType::get(t.getShape(), low), v).getResult());
      }
      Operation *lowOp = b.clone(*op, mapping);
      auto resultType = llvm::cast<RankedTensorType>(op->getResult(0).getType());
      lowOp->getResult(0).setType(RankedTensorType::get(resultType.getShape(), low));
      Value back = b.create<CastOp>(loc, resultType, lowOp->getResult(0));
      op->getResult(0).replaceAllUsesWith(back);
      op->erase();
      ++numCast;
    }
    if (failedMark)
      signalPassFailure();
  }
};

} // namespace
} // namespace rfuse
