// rfuse-autodiff: reverse-mode differentiation of a function (see Passes.td, docs/autodiff.md).
#include "rfuse/Passes/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_AUTODIFF
#include "rfuse/Passes/Passes.h.inc"

namespace {

bool isFloatTensor(Type t) {
  auto rt = llvm::dyn_cast<RankedTensorType>(t);
  return rt && llvm::isa<FloatType>(rt.getElementType());
}

Value splat(OpBuilder &b, Location loc, Type type, double c) {
  auto t = llvm::cast<RankedTensorType>(type);
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), c)));
}

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(function);
    if (!fn) {
      module.emitError() << "rfuse-autodiff: no function @" << function;
      return signalPassFailure();
    }
    if (failed(differentiate(module, fn)))
      signalPassFailure();
  }

  LogicalResult differentiate(ModuleOp module, func::FuncOp fn) {
    if (!fn.getBody().hasOneBlock())
      return fn.emitError("rfuse-autodiff: the function must have one block");
    Block &body = fn.getBody().front();
    for (Operation &op : body)
      if (isa<func::CallOp>(op))
        return op.emitError("rfuse-autodiff: inline calls first (--inline)");
    auto returnOp = cast<func::ReturnOp>(body.getTerminator());
    if (returnOp.getNumOperands() == 0)
      return fn.emitError("rfuse-autodiff: the function returns nothing to differentiate");
    Value loss = returnOp.getOperand(0);
    auto lossType = llvm::dyn_cast<RankedTensorType>(loss.getType());
    if (!lossType || !isFloatTensor(lossType) || lossType.getNumElements() != 1)
      return fn.emitError() << "rfuse-autodiff: the value to differentiate (result 0 of @"
                            << fn.getName() << ") is " << loss.getType()
                            << ", not a one-element float tensor (a scalar loss)";
    SmallVector<unsigned> args;
    if (wrt.empty()) {
      for (BlockArgument a : body.getArguments())
        if (isFloatTensor(a.getType()))
          args.push_back(a.getArgNumber());
    } else {
      for (int64_t i : wrt) {
        if (i < 0 || i >= (int64_t)body.getNumArguments())
          return fn.emitError() << "rfuse-autodiff: argument " << i << " is out of range (@"
                                << fn.getName() << " takes " << body.getNumArguments() << ")";
        if (!isFloatTensor(body.getArgument(i).getType()))
          return fn.emitError() << "rfuse-autodiff: argument " << i << " is "
                                << body.getArgument(i).getType()
                                << ": only float arguments have gradients";
        args.push_back((unsigned)i);
      }
    }

    // @f_grad: f's arguments; results (value, d value / d arg for each chosen arg).
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(fn);
    SmallVector<Type> resultTypes = {loss.getType()};
    for (unsigned i : args)
      resultTypes.push_back(body.getArgument(i).getType());
    auto grad = b.create<func::FuncOp>(fn.getLoc(), (fn.getName() + "_grad").str(),
                                       b.getFunctionType(fn.getArgumentTypes(), resultTypes));
    Block *entry = grad.addEntryBlock();
    IRMapping map;
    map.map(body.getArguments(), entry->getArguments());
    b.setInsertionPointToEnd(entry);
    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      forward.push_back(b.clone(op, map));
    Value gradLoss = map.lookup(loss);

    // Cotangents, accumulated in reverse order. With loss scaling the seed is the scale (a
    // placeholder argument here, moved last when the step's other arguments are in place).
    llvm::DenseMap<Value, Value> cot;
    Type lossElem = lossType.getElementType();
    BlockArgument scalePlaceholder;
    Value scaleScalar;
    if (lossScale) {
      if (optimizer != "sgd" && optimizer != "adam" && optimizer != "adamw")
        return fn.emitError() << "rfuse-autodiff: loss-scale needs an optimizer (sgd, adam, adamw), not '" << optimizer
                              << "'";
      scalePlaceholder = entry->addArgument(RankedTensorType::get({1}, lossElem), fn.getLoc());
      scaleScalar = b.create<ReshapeOp>(fn.getLoc(), RankedTensorType::get({}, lossElem), scalePlaceholder);
      cot[gradLoss] = b.create<BroadcastInDimOp>(fn.getLoc(), lossType, scaleScalar, b.getDenseI64ArrayAttr({}));
    } else {
      cot[gradLoss] = splat(b, fn.getLoc(), gradLoss.getType(), 1.0);
    }
    size_t before = entry->getOperations().size();
    for (Operation *op : llvm::reverse(forward)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(cot.lookup(r));
        any |= (bool)resultGrads.back();
      }
      if (!any)
        continue;
      auto vjp = dyn_cast<VjpOpInterface>(op);
      if (!vjp)
        return op->emitOpError("has no vector-Jacobian product: rfuse-autodiff cannot differentiate through it");
      SmallVector<Value> operandGrads;
      if (failed(vjp.buildVjp(b, resultGrads, operandGrads)))
        return failure();
      for (auto [v, g] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!g)
          continue;
        Value &acc = cot[v];
        acc = acc ? b.create<AddOp>(op->getLoc(), g.getType(), acc, g).getResult() : g;
      }
    }
    SmallVector<Value> grads;
    for (unsigned i : args) {
      Value g = cot.lookup(entry->getArgument(i));
      grads.push_back(g ? g : splat(b, fn.getLoc(), entry->getArgument(i).getType(), 0.0));
    }
    // Data-parallel training: the ranks' gradients, averaged (or summed), are what the
    // optimizer sees (and what a plain gradient program returns). SGD is linear in the gradient,
    // so with a mean its step averages the updated parameters instead — the same trajectory
    // (each rank's momentum buffer stays its own, their mean the group's), the same bytes moved,
    // and the update stays in the gradient's kernel.
    if (gradientAllReduce != "none" && gradientAllReduce != "mean" && gradientAllReduce != "sum")
      return fn.emitError() << "rfuse-autodiff: gradient-all-reduce is none, mean or sum, not '"
                            << gradientAllReduce << "'";
    auto reduction = gradientAllReduce == "sum" ? CollectiveReduction::sum : CollectiveReduction::mean;
    bool reduceParameters = optimizer == "sgd" && gradientAllReduce == "mean";
    if (gradientAllReduce != "none" && !reduceParameters)
      for (Value &g : grads)
        g = b.create<AllReduceOp>(g.getLoc(), ValueRange{g}, reduction).getResult(0);
    // Loss scaling: the gradients unscaled, and whether all of them are finite (every rank's).
    Value finite;
    if (lossScale) {
      Location loc = fn.getLoc();
      auto scalarType = RankedTensorType::get({}, lossElem);
      Value inverse = b.create<DivOp>(loc, scalarType, splat(b, loc, scalarType, 1.0), scaleScalar);
      Value total;
      for (Value &g : grads) {
        auto t = llvm::cast<RankedTensorType>(g.getType());
        Value inv = inverse;
        if (t.getElementType() != lossElem)
          inv = b.create<CastOp>(loc, RankedTensorType::get({}, t.getElementType()), inv);
        g = b.create<MulOp>(loc, t, g, b.create<BroadcastInDimOp>(loc, t, inv, b.getDenseI64ArrayAttr({})));
        // sum(g * 0) is 0 exactly when every element is finite (0 * Inf and NaN are NaN).
        SmallVector<int64_t> all;
        for (int64_t d = 0; d < t.getRank(); ++d)
          all.push_back(d);
        Value z = b.create<ReduceSumOp>(loc, b.create<MulOp>(loc, t, g, splat(b, loc, t, 0.0)), all, false);
        if (t.getElementType() != lossElem)
          z = b.create<CastOp>(loc, scalarType, z);
        total = total ? b.create<AddOp>(loc, scalarType, total, z).getResult() : z;
      }
      if (gradientAllReduce != "none") // a rank's overflow skips the step on every rank
        total = b.create<AllReduceOp>(loc, ValueRange{total}, CollectiveReduction::sum).getResult(0);
      finite = b.create<CompareOp>(loc, CmpPredicate::eq, total, splat(b, loc, scalarType, 0.0));
    }
    SmallVector<Value> results = {gradLoss};
    if (optimizer == "sgd") {
      if (failed(appendSgd(grad, b, args, grads, results)))
        return failure();
      if (reduceParameters)
        for (size_t k = 1; k <= args.size(); ++k)
          results[k] = b.create<AllReduceOp>(results[k].getLoc(), ValueRange{results[k]}, reduction).getResult(0);
      if (finite)
        keepUnlessFinite(entry, b, fn.getLoc(), args, sgdBuffers, finite, results);
    } else if (optimizer == "adam" || optimizer == "adamw") {
      appendAdam(grad, b, args, grads, results, optimizer == "adamw", finite);
      if (finite)
        keepUnlessFinite(entry, b, fn.getLoc(), args, adamBuffers, finite, results);
    } else if (optimizer == "none") {
      results.append(grads.begin(), grads.end());
    } else {
      return fn.emitError() << "rfuse-autodiff: unknown optimizer '" << optimizer
                            << "' (none, sgd, adam, adamw)";
    }
    // f's other results ride along after everything else, not differentiated (auxiliary values:
    // a batch norm's batch statistics for its running averages).
    for (Value aux : returnOp.getOperands().drop_front())
      results.push_back(map.lookupOrDefault(aux));
    if (finite)
      appendLossScaleUpdate(entry, b, fn.getLoc(), scalePlaceholder, scaleScalar, finite, results);
    b.create<func::ReturnOp>(fn.getLoc(), results);
    grad.setFunctionType(b.getFunctionType(entry->getArgumentTypes(), TypeRange(ValueRange(results))));
    numBackwardOps += entry->getOperations().size() - before - 1;
    if (recomputePointwise)
      recompute(forward);
    return success();
  }

  // A step whose scaled gradients are not finite keeps the parameters and the optimizer's
  // buffers as they were: results[1..] (updated parameters, then buffers) select the old values.
  void keepUnlessFinite(Block *entry, OpBuilder &b, Location loc, ArrayRef<unsigned> args, ArrayRef<Value> buffers,
                        Value finite, SmallVectorImpl<Value> &results) {
    SmallVector<Value> before;
    for (unsigned i : args)
      before.push_back(entry->getArgument(i));
    before.append(buffers.begin(), buffers.end());
    for (size_t k = 0; k < before.size(); ++k) {
      Value &r = results[k + 1];
      auto t = llvm::cast<RankedTensorType>(r.getType());
      Value cond = b.create<BroadcastInDimOp>(loc, RankedTensorType::get(t.getShape(), b.getI1Type()), finite,
                                              b.getDenseI64ArrayAttr({}));
      r = b.create<SelectOp>(loc, t, cond, r, before[k]);
    }
  }

  // The loss scale's two arguments, moved last (the placeholder the backward pass used is
  // replaced), and their new values as the last results: a finite step counts towards growth and
  // doubles the scale after lossScaleGrowthInterval of them; any other halves it.
  void appendLossScaleUpdate(Block *entry, OpBuilder &b, Location loc, BlockArgument placeholder, Value scale,
                             Value finite, SmallVectorImpl<Value> &results) {
    auto argType = llvm::cast<RankedTensorType>(placeholder.getType());
    auto scalarType = RankedTensorType::get({}, argType.getElementType());
    BlockArgument scaleArg = entry->addArgument(argType, loc);
    BlockArgument growthArg = entry->addArgument(argType, loc);
    placeholder.replaceAllUsesWith(scaleArg);
    entry->eraseArgument(placeholder.getArgNumber());
    Value growth = b.create<ReshapeOp>(loc, scalarType, growthArg);
    auto c = [&](double v) { return splat(b, loc, scalarType, v); };
    Value grown = b.create<AddOp>(loc, scalarType, growth, c(1));
    Value full = b.create<CompareOp>(loc, CmpPredicate::ge, grown, c((double)lossScaleGrowthInterval));
    Value doubled = b.create<MulOp>(loc, scalarType, scale, c(2));
    Value halved = b.create<MulOp>(loc, scalarType, scale, c(0.5));
    Value kept = b.create<SelectOp>(loc, scalarType, full, doubled, scale);
    Value newScale = b.create<SelectOp>(loc, scalarType, finite, kept, halved);
    Value newGrowth = b.create<SelectOp>(loc, scalarType, finite, b.create<SelectOp>(loc, scalarType, full, c(0), grown),
                                         c(0));
    results.push_back(b.create<ReshapeOp>(loc, argType, newScale));
    results.push_back(b.create<ReshapeOp>(loc, argType, newGrowth));
    // Adam's step count under loss scaling: the steps taken (the argument) plus this one if it
    // was, returned last (a skipped step does not count, as torch's optimizer.step() is not run).
    if (stepScalar) {
      Type countType = llvm::cast<RankedTensorType>(stepScalar.getType());
      Value taken = b.create<AddOp>(loc, countType, stepScalar, splat(b, loc, countType, 1.0));
      Value count = b.create<SelectOp>(loc, countType, finite, taken, stepScalar);
      results.push_back(b.create<ReshapeOp>(loc, stepArg.getType(), count));
    }
  }

  // SGD as pointwise ops after the backward pass (fused with it by the pipeline): g' = g + wd p;
  // v' = momentum v + g' (a buffer per argument, a new trailing function argument); p' = p - lr v'.
  LogicalResult appendSgd(func::FuncOp grad, OpBuilder &b, ArrayRef<unsigned> args,
                          ArrayRef<Value> grads, SmallVectorImpl<Value> &results) {
    Location loc = grad.getLoc();
    Block *entry = &grad.getBody().front();
    SmallVector<Value> velocities;
    // With lr-input, the learning rate is the last argument, added after every buffer.
    SmallVector<Value> buffers;
    if (momentum != 0)
      for (unsigned i : args)
        buffers.push_back(entry->addArgument(entry->getArgument(i).getType(), loc));
    sgdBuffers.assign(buffers.begin(), buffers.end());
    Value lrScalar = learningRateArgument(grad, b);
    for (auto [k, i, g] : llvm::enumerate(args, grads)) {
      Value p = entry->getArgument(i);
      Value step = g;
      if (weightDecay != 0)
        step = b.create<AddOp>(loc, g.getType(), g,
                               b.create<MulOp>(loc, g.getType(), p, splat(b, loc, g.getType(), weightDecay)));
      if (momentum != 0) {
        Value v = buffers[k];
        step = b.create<AddOp>(loc, g.getType(),
                               b.create<MulOp>(loc, g.getType(), v, splat(b, loc, g.getType(), momentum)), step);
        velocities.push_back(step);
      }
      results.push_back(b.create<SubOp>(loc, g.getType(), p,
                                        b.create<MulOp>(loc, g.getType(), step, lr(b, loc, g.getType(), lrScalar))));
    }
    results.append(velocities.begin(), velocities.end());
    return success();
  }

  // The learning-rate argument (lr-input: a tensor<1x...> appended last, as a scalar), or null.
  Value learningRateArgument(func::FuncOp grad, OpBuilder &b) {
    if (!learningRateInput)
      return {};
    Block *entry = &grad.getBody().front();
    Location loc = grad.getLoc();
    Type elem = llvm::cast<RankedTensorType>(entry->getArgument(0).getType()).getElementType();
    for (BlockArgument a : entry->getArguments())
      if (auto t = llvm::dyn_cast<RankedTensorType>(a.getType()); t && llvm::isa<FloatType>(t.getElementType())) {
        elem = t.getElementType();
        break;
      }
    Value arg = entry->addArgument(RankedTensorType::get({1}, elem), loc);
    return b.create<ReshapeOp>(loc, RankedTensorType::get({}, elem), arg);
  }
  // The learning rate as a tensor of type t: the argument broadcast, or the `lr` constant.
  Value lr(OpBuilder &b, Location loc, Type t, Value lrScalar) {
    if (!lrScalar)
      return splat(b, loc, t, learningRate);
    Value s = lrScalar;
    Type elem = llvm::cast<RankedTensorType>(t).getElementType();
    if (llvm::cast<RankedTensorType>(s.getType()).getElementType() != elem)
      s = b.create<CastOp>(loc, RankedTensorType::get({}, elem), s);
    return b.create<BroadcastInDimOp>(loc, t, s, b.getDenseI64ArrayAttr({}));
  }

  // Adam (PyTorch's): g' = g + wd p (adam) or p <- p - lr wd p first (adamw, decoupled);
  // m' = b1 m + (1 - b1) g'; v' = b2 v + (1 - b2) g'^2;
  // p' = p - lr (m' / (1 - b1^t)) / (sqrt(v' / (1 - b2^t)) + eps).
  // With loss scaling (`finite` given), the step-number argument is instead the count of steps
  // taken so far: this step's t is that plus one, and the new count is a last result (see
  // appendLossScaleUpdate).
  void appendAdam(func::FuncOp grad, OpBuilder &b, ArrayRef<unsigned> args, ArrayRef<Value> grads,
                  SmallVectorImpl<Value> &results, bool decoupled, Value finite) {
    Location loc = grad.getLoc();
    Block *entry = &grad.getBody().front();
    SmallVector<Value> ms, vs;
    for (unsigned i : args)
      ms.push_back(entry->addArgument(entry->getArgument(i).getType(), loc));
    for (unsigned i : args)
      vs.push_back(entry->addArgument(entry->getArgument(i).getType(), loc));
    SmallVector<Value> newM, newV;
    Value lrScalar;
    for (auto [k, i] : llvm::enumerate(args)) {
      Value p = entry->getArgument(i), g = grads[k];
      Type t = p.getType();
      auto elem = llvm::cast<RankedTensorType>(t).getElementType();
      auto c = [&](double v) { return splat(b, loc, t, v); };
      auto mul = [&](Value x, Value y) { return b.create<MulOp>(loc, t, x, y).getResult(); };
      auto add = [&](Value x, Value y) { return b.create<AddOp>(loc, t, x, y).getResult(); };
      // The step number t: one tensor<1x...> argument shared by every parameter (R hands over
      // a length-1 vector), broadcast here.
      if (k == 0) {
        stepArg = entry->addArgument(RankedTensorType::get({1}, elem), loc);
        stepScalar = b.create<ReshapeOp>(loc, RankedTensorType::get({}, elem), stepArg);
        lrScalar = learningRateArgument(grad, b); // after the step number
      }
      Value stepNumber = stepScalar;
      if (finite)
        stepNumber = b.create<AddOp>(loc, stepScalar.getType(), stepScalar,
                                     splat(b, loc, stepScalar.getType(), 1.0));
      Value step = b.create<BroadcastInDimOp>(loc, t, stepNumber, b.getDenseI64ArrayAttr({}));
      if (weightDecay != 0 && !decoupled)
        g = add(g, mul(p, c(weightDecay)));
      if (weightDecay != 0 && decoupled)
        p = b.create<SubOp>(loc, t, p, mul(p, mul(lr(b, loc, t, lrScalar), c(weightDecay))));
      Value m = add(mul(ms[k], c(beta1)), mul(g, c(1 - beta1)));
      Value v = add(mul(vs[k], c(beta2)), mul(mul(g, g), c(1 - beta2)));
      Value c1 = b.create<SubOp>(loc, t, c(1), b.create<PowOp>(loc, t, c(beta1), step));
      Value c2 = b.create<SubOp>(loc, t, c(1), b.create<PowOp>(loc, t, c(beta2), step));
      Value mhat = b.create<DivOp>(loc, t, m, c1), vhat = b.create<DivOp>(loc, t, v, c2);
      Value denom = add(b.create<SqrtOp>(loc, t, vhat), c(epsilon));
      results.push_back(b.create<SubOp>(loc, t, p, mul(lr(b, loc, t, lrScalar), b.create<DivOp>(loc, t, mhat, denom))));
      newM.push_back(m);
      newV.push_back(v);
    }
    results.append(newM.begin(), newM.end());
    results.append(newV.begin(), newV.end());
    adamBuffers.assign(ms.begin(), ms.end());
    adamBuffers.append(vs.begin(), vs.end());
  }
  Value stepArg, stepScalar;
  SmallVector<Value> sgdBuffers; ///< appendSgd's momentum buffers (arguments), in `args` order
  SmallVector<Value> adamBuffers; ///< appendAdam's first- then second-moment buffers

  // Backward uses of a pointwise forward value computed from arguments and constants alone get
  // a fresh copy of its op, so the forward value need not stay live (or be written) for them.
  void recompute(ArrayRef<Operation *> forward) {
    llvm::SmallPtrSet<Operation *, 32> isForward(forward.begin(), forward.end());
    for (Operation *op : forward) {
      if (!isa<PointwiseOpInterface, CastOp, BroadcastInDimOp>(op) || op->getNumResults() != 1)
        continue;
      bool leaf = llvm::all_of(op->getOperands(), [](Value v) {
        return llvm::isa<BlockArgument>(v) || v.getDefiningOp<ConstantOp>();
      });
      if (!leaf)
        continue;
      SmallVector<OpOperand *> backwardUses;
      for (OpOperand &use : op->getResult(0).getUses())
        if (!isForward.contains(use.getOwner()) && !isa<func::ReturnOp>(use.getOwner()))
          backwardUses.push_back(&use);
      for (OpOperand *use : backwardUses) {
        OpBuilder b(use->getOwner());
        use->set(b.clone(*op)->getResult(0));
      }
    }
  }
};

} // namespace
} // namespace rfuse
