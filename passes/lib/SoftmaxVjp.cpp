// rfuse-softmax-vjp: a softmax written as exp(z) / sum(exp(z)) gets the gradient of its output
// alone, as an rfuse.custom_vjp (see Passes.td).
#include "rfuse/Passes/Passes.h"
#include "Softmax.h"
#include "TransposeSinking.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_SOFTMAXVJP
#include "rfuse/Passes/Passes.h.inc"

// (e and the sum are what the custom op's forward recomputes.)
std::optional<Softmax> matchSoftmax(DivOp div) {
  auto exp = div.getLhs().getDefiningOp<ExpOp>();
  auto bcast = div.getRhs().getDefiningOp<BroadcastInDimOp>();
  if (!exp || !bcast || !bcast->hasOneUse())
    return std::nullopt;
  Softmax s{div, exp, nullptr, {bcast}, {}};
  Value in = bcast.getInput();
  if (auto r = in.getDefiningOp<ReshapeOp>()) {
    if (!r->hasOneUse())
      return std::nullopt;
    s.between.insert(s.between.begin(), r);
    in = r.getInput();
  }
  auto sum = in.getDefiningOp<ReduceSumOp>();
  if (!sum || !sum->hasOneUse() || sum.getInput() != exp.getResult())
    return std::nullopt;
  // e is read by the sum and the division only.
  for (Operation *user : exp->getUsers())
    if (user != sum.getOperation() && user != div.getOperation())
      return std::nullopt;
  RankedTensorType full = tensorOf(div.getResult()), in0 = tensorOf(bcast.getInput());
  // The broadcast spreads the sum over exactly the summed dims (size-1 dims are either).
  SmallVector<bool> spread(full.getRank(), true);
  for (auto [i, d] : llvm::enumerate(bcast.getDims()))
    if (in0.getShape()[i] == full.getShape()[d])
      spread[d] = false;
  for (int64_t d = 0; d < full.getRank(); ++d) {
    if (full.getShape()[d] == 1)
      continue;
    if (spread[d] != llvm::is_contained(sum.getDims(), d))
      return std::nullopt;
  }
  s.sum = sum;
  s.dims.assign(sum.getDims().begin(), sum.getDims().end());
  return s;
}

namespace {

struct SoftmaxVjpPass : impl::SoftmaxVjpBase<SoftmaxVjpPass> {
  using SoftmaxVjpBase::SoftmaxVjpBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Softmax> found;
    module.walk([&](DivOp div) {
      if (auto s = matchSoftmax(div))
        found.push_back(*s);
    });
    SymbolTable symbols(module);
    for (Softmax &s : found) {
      Location loc = s.div.getLoc();
      Value z = s.exp.getOperand();
      RankedTensorType t = tensorOf(s.div.getResult());
      OpBuilder b(module.getBodyRegion());
      b.setInsertionPointToEnd(module.getBody());
      // forward(z) -> (p, p): the output and the one residual the backward reads.
      auto fwd = b.create<func::FuncOp>(loc, "softmax_forward", b.getFunctionType({z.getType()}, {t, t}));
      fwd.setPrivate();
      symbols.insert(fwd);
      {
        OpBuilder fb = OpBuilder::atBlockBegin(fwd.addEntryBlock());
        IRMapping map;
        map.map(z, fwd.getArgument(0));
        for (Operation *op : {s.exp.getOperation(), s.sum})
          fb.clone(*op, map);
        for (Operation *op : s.between)
          fb.clone(*op, map);
        Value p = fb.clone(*s.div, map)->getResult(0);
        fb.create<func::ReturnOp>(loc, ValueRange{p, p});
      }
      // backward(p, g) -> p * (g - sum(g * p, dims)): no exp of z, no division's two cotangents.
      auto bwd = b.create<func::FuncOp>(loc, "softmax_backward", b.getFunctionType({t, t}, {z.getType()}));
      bwd.setPrivate();
      symbols.insert(bwd);
      {
        OpBuilder bb = OpBuilder::atBlockBegin(bwd.addEntryBlock());
        Value p = bwd.getArgument(0), g = bwd.getArgument(1);
        Value gp = bb.create<MulOp>(loc, g, p);
        SmallVector<int64_t> kept(t.getShape());
        for (int64_t d : s.dims)
          kept[d] = 1;
        auto keptType = RankedTensorType::get(kept, t.getElementType());
        Value r = bb.create<ReduceSumOp>(loc, keptType, gp, bb.getDenseI64ArrayAttr(s.dims), bb.getBoolAttr(true));
        Value rb = bb.create<BroadcastInDimOp>(loc, t, r,
                                               bb.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, t.getRank()))));
        Value dz = bb.create<MulOp>(loc, p, bb.create<SubOp>(loc, g, rb));
        bb.create<func::ReturnOp>(loc, dz);
      }
      OpBuilder at(s.div);
      auto op = at.create<CustomVjpOp>(loc, TypeRange{t, t}, FlatSymbolRefAttr::get(fwd.getSymNameAttr()),
                                       FlatSymbolRefAttr::get(bwd.getSymNameAttr()), at.getI64IntegerAttr(1),
                                       ValueRange{z});
      s.div.getResult().replaceAllUsesWith(op.getResult(0));
      s.div.erase();
      for (Operation *o : llvm::reverse(s.between))
        o->erase();
      s.sum->erase();
      s.exp.erase();
      ++numSoftmaxes;
    }
  }
};

} // namespace
} // namespace rfuse
