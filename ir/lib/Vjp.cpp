// Vector-Jacobian products of rfuse ops: each op's reverse-mode rule, written once, built from
// rfuse ops so that the backward graph goes through the same fusion pipeline and backends.
// Used through VjpOpInterface by rfuse-autodiff (passes/lib/Autodiff.cpp).
#include "rfuse/IR/RfuseDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace rfuse {
namespace {

RankedTensorType tensorOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }
bool isFloatTensor(Value v) { return llvm::isa<FloatType>(tensorOf(v).getElementType()); }

// Builds rfuse ops at one place with one location.
struct Emit {
  OpBuilder &b;
  Location loc;

  Value splat(Value like, double c) {
    auto t = tensorOf(like);
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), c)));
  }
  Value add(Value x, Value y) { return b.create<AddOp>(loc, x.getType(), x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x.getType(), x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x.getType(), x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x.getType(), x, y); }
  Value neg(Value x) { return b.create<NegOp>(loc, x.getType(), x); }
  Value scale(Value x, double c) { return mul(x, splat(x, c)); }
  Value cmp(CmpPredicate p, Value x, Value y) { return b.create<CompareOp>(loc, p, x, y); }
  Value select(Value c, Value x, Value y) { return b.create<SelectOp>(loc, x.getType(), c, x, y); }
  Value zero(Value like) { return splat(like, 0.0); }
  // g where cond, else 0.
  Value where(Value cond, Value g) { return select(cond, g, zero(g)); }
  Value reduceSum(Value x, ArrayRef<int64_t> dims, bool keep) {
    return b.create<ReduceSumOp>(loc, x, dims, keep);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    auto t = RankedTensorType::get(shape, tensorOf(x).getElementType());
    return t == x.getType() ? x : b.create<ReshapeOp>(loc, t, x).getResult();
  }
  // `x` of a reduced shape expanded back to `shape`, where the reduced dims `dims` were dropped
  // (keep = false) or kept as 1s.
  Value expand(Value x, ArrayRef<int64_t> shape, ArrayRef<int64_t> dims, bool keep) {
    SmallVector<int64_t> keepShape(shape);
    for (int64_t d : dims)
      keepShape[d] = 1;
    Value k = keep ? x : reshape(x, keepShape);
    auto t = RankedTensorType::get(shape, tensorOf(x).getElementType());
    if (t == k.getType())
      return k;
    SmallVector<int64_t> ident(shape.size());
    for (size_t i = 0; i < shape.size(); ++i)
      ident[i] = i;
    return b.create<BroadcastInDimOp>(loc, t, k, b.getDenseI64ArrayAttr(ident));
  }
  // A cotangent of a broadcast's result summed back to the operand's shape.
  Value unbroadcast(Value g, ArrayRef<int64_t> inShape, ArrayRef<int64_t> dims) {
    ArrayRef<int64_t> outShape = tensorOf(g).getShape();
    SmallVector<int64_t> added;
    for (int64_t d = 0; d < (int64_t)outShape.size(); ++d)
      if (!llvm::is_contained(dims, d))
        added.push_back(d);
    Value r = added.empty() ? g : reduceSum(g, added, false);
    // dims are strictly increasing: r's dims are the operand's, in order.
    SmallVector<int64_t> expanded;
    for (auto [i, d] : llvm::enumerate(dims))
      if (inShape[i] == 1 && outShape[d] != 1)
        expanded.push_back(i);
    if (!expanded.empty())
      r = reduceSum(r, expanded, true);
    return reshape(r, inShape);
  }
};

LogicalResult pointwiseVjp(Operation *op, ScalarOpKind kind, Emit &e, Value g,
                           SmallVectorImpl<Value> &grads) {
  Value x = op->getNumOperands() > 0 ? op->getOperand(0) : Value();
  Value y = op->getResult(0);
  auto set = [&](unsigned i, Value v) { grads[i] = v; };
  switch (kind) {
  case ScalarOpKind::Neg: set(0, e.neg(g)); break;
  case ScalarOpKind::Abs:
    set(0, e.select(e.cmp(CmpPredicate::gt, x, e.zero(x)), g,
                    e.select(e.cmp(CmpPredicate::lt, x, e.zero(x)), e.neg(g), e.zero(g))));
    break;
  case ScalarOpKind::Exp: set(0, e.mul(g, y)); break;
  case ScalarOpKind::Log: set(0, e.div(g, x)); break;
  case ScalarOpKind::Sqrt: set(0, e.div(e.scale(g, 0.5), y)); break;
  case ScalarOpKind::Rsqrt: set(0, e.mul(e.scale(g, -0.5), e.mul(y, e.mul(y, y)))); break;
  case ScalarOpKind::Tanh: set(0, e.mul(g, e.sub(e.splat(y, 1.0), e.mul(y, y)))); break;
  case ScalarOpKind::Sigmoid: set(0, e.mul(g, e.mul(y, e.sub(e.splat(y, 1.0), y)))); break;
  case ScalarOpKind::Relu: set(0, e.where(e.cmp(CmpPredicate::gt, x, e.zero(x)), g)); break;
  case ScalarOpKind::GeluErf:
  case ScalarOpKind::GeluTanh: {
    auto approx = kind == ScalarOpKind::GeluTanh ? GeluApproximation::tanh : GeluApproximation::none;
    set(0, e.mul(g, e.b.create<GeluGradOp>(e.loc, x.getType(), x, approx)));
    break;
  }
  case ScalarOpKind::Sin: set(0, e.mul(g, e.b.create<CosOp>(e.loc, x.getType(), x))); break;
  case ScalarOpKind::Cos: set(0, e.neg(e.mul(g, e.b.create<SinOp>(e.loc, x.getType(), x)))); break;
  case ScalarOpKind::Floor: set(0, e.zero(g)); break; // piecewise constant
  case ScalarOpKind::RoundEven: set(0, e.zero(g)); break; // piecewise constant
  case ScalarOpKind::Tan: set(0, e.mul(g, e.add(e.splat(y, 1.0), e.mul(y, y)))); break;
  case ScalarOpKind::Atan: set(0, e.div(g, e.add(e.splat(x, 1.0), e.mul(x, x)))); break;
  case ScalarOpKind::Asin:
  case ScalarOpKind::Acos: {
    Value d = e.b.create<SqrtOp>(e.loc, x.getType(), e.sub(e.splat(x, 1.0), e.mul(x, x)));
    set(0, kind == ScalarOpKind::Asin ? e.div(g, d) : e.neg(e.div(g, d)));
    break;
  }
  case ScalarOpKind::Qnorm: // 1 / dnorm(y) = sqrt(2 pi) exp(y^2 / 2)
    set(0, e.mul(g, e.scale(e.b.create<ExpOp>(e.loc, y.getType(), e.scale(e.mul(y, y), 0.5)), 2.5066282746310002)));
    break;
  case ScalarOpKind::Lgamma: set(0, e.mul(g, e.b.create<DigammaOp>(e.loc, x.getType(), x))); break;
  case ScalarOpKind::Tgamma: set(0, e.mul(g, e.mul(y, e.b.create<DigammaOp>(e.loc, x.getType(), x)))); break;
  case ScalarOpKind::Digamma: set(0, e.mul(g, e.b.create<TrigammaOp>(e.loc, x.getType(), x))); break;
  case ScalarOpKind::Trigamma: // the tetragamma function, which rfuse has no op for
    return op->emitOpError("has no vector-Jacobian product (it needs the tetragamma function)");
  case ScalarOpKind::Atan2: { // atan2(y, x): (x dy - y dx) / (x^2 + y^2)
    Value xx = op->getOperand(1), r2 = e.add(e.mul(x, x), e.mul(xx, xx));
    set(0, e.div(e.mul(g, xx), r2));
    set(1, e.neg(e.div(e.mul(g, x), r2)));
    break;
  }
  case ScalarOpKind::Erfc: { // -2/sqrt(pi) exp(-x^2)
    Value ex = e.b.create<ExpOp>(e.loc, x.getType(), e.neg(e.mul(x, x)));
    set(0, e.mul(g, e.scale(ex, -1.1283791670955126)));
    break;
  }
  case ScalarOpKind::Add: set(0, g); set(1, g); break;
  case ScalarOpKind::Sub: set(0, g); set(1, e.neg(g)); break;
  case ScalarOpKind::Mul: set(0, e.mul(g, op->getOperand(1))); set(1, e.mul(g, x)); break;
  case ScalarOpKind::Div: {
    Value d = op->getOperand(1);
    set(0, e.div(g, d));
    set(1, e.neg(e.div(e.mul(g, y), d)));
    break;
  }
  case ScalarOpKind::Pow: {
    Value p = op->getOperand(1);
    // d/dx x^p = p x^(p-1) = p y / x (x != 0); d/dp = y log x (x > 0; 0 elsewhere).
    Value pm1 = e.sub(p, e.splat(p, 1.0));
    set(0, e.mul(g, e.mul(p, e.b.create<PowOp>(e.loc, x.getType(), x, pm1))));
    Value logx = e.b.create<LogOp>(e.loc, x.getType(), x);
    set(1, e.where(e.cmp(CmpPredicate::gt, x, e.zero(x)), e.mul(g, e.mul(y, logx))));
    break;
  }
  case ScalarOpKind::Max:
  case ScalarOpKind::Min: {
    // The chosen operand gets the cotangent; ties go to the left one.
    Value takeLeft = e.cmp(kind == ScalarOpKind::Max ? CmpPredicate::ge : CmpPredicate::le, x,
                           op->getOperand(1));
    set(0, e.where(takeLeft, g));
    set(1, e.select(takeLeft, e.zero(g), g));
    break;
  }
  case ScalarOpKind::Select: {
    Value c = op->getOperand(0);
    set(1, e.where(c, g));
    set(2, e.select(c, e.zero(g), g));
    break;
  }
  case ScalarOpKind::GeluErfGrad:
  case ScalarOpKind::GeluTanhGrad:
    return op->emitOpError("has no vector-Jacobian product (second derivatives of GELU)");
  default: // comparisons and logic: piecewise constant, no cotangent flows through
    break;
  }
  return success();
}

LogicalResult matmulVjp(MatmulOp mm, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  Value a = mm.getLhs(), b = mm.getRhs();
  bool ta = mm.getTransposeA(), tb = mm.getTransposeB();
  auto make = [&](Value x, Value y, bool tx, bool ty) {
    return e.b.create<MatmulOp>(e.loc, x, y, tx, ty).getResult();
  };
  // The gradient of each operand in its stored layout (see docs/autodiff.md for the algebra).
  Value da = !ta ? make(g, b, false, !tb) : (!tb ? make(b, g, false, true) : make(b, g, true, true));
  Value db = !tb ? (!ta ? make(a, g, true, false) : make(a, g, false, false))
                 : (!ta ? make(g, a, true, false) : make(g, a, true, true));
  // A rank-2 operand broadcast over the batch: sum its gradient over the batch.
  if (tensorOf(a).getRank() == 2 && tensorOf(da).getRank() == 3)
    da = e.reduceSum(da, {0}, false);
  if (tensorOf(b).getRank() == 2 && tensorOf(db).getRank() == 3)
    db = e.reduceSum(db, {0}, false);
  grads[0] = da;
  grads[1] = db;
  return success();
}

// attention: one backward op, given the forward's row log-sum-exp and delta = sum_d g * out (the
// softmax's sum(g_P * P) over a row, computed from the output instead of the probabilities; with
// dropout too: sum_s P dP = sum_s P' dP'). The seed has no gradient.
LogicalResult attentionVjp(AttentionOp a, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  auto inF32 = [&](Value x) -> Value {
    auto t = tensorOf(x);
    if (t.getElementType().isF32())
      return x;
    return e.b.create<CastOp>(e.loc, RankedTensorType::get(t.getShape(), e.b.getF32Type()), x);
  };
  Value delta = e.reduceSum(e.mul(inF32(g), inF32(a.getOut())), {2}, false);
  auto bw = e.b.create<AttentionBackwardOp>(e.loc, a.getQ().getType(), a.getK().getType(), a.getV().getType(),
                                            a.getQ(), a.getK(), a.getV(), g, a.getLse(), delta, a.getMask(),
                                            a.getDropoutSeed(), a.getScaleAttr(), a.getCausalAttr(),
                                            a.getMaskValueAttr(), a.getDropoutThresholdAttr(),
                                            a.getDropoutScaleAttr(), a.getDropoutStridesAttr());
  grads[0] = bw.getGradQ();
  grads[1] = bw.getGradK();
  grads[2] = bw.getGradV();
  return success();
}

// x · a = b: with G = g a^-T (G · a^T = g), db = G and da = -x^T G (docs/autodiff.md). The
// transposed system is solved with tolerance 0: its condition is a's, checked by the forward solve.
LogicalResult solveVjp(SolveOp s, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  Value at = e.b.create<TransposeOp>(e.loc, s.getA(), ArrayRef<int64_t>{1, 0});
  Value G = e.b.create<SolveOp>(e.loc, s.getB().getType(), at, g, e.b.getF64FloatAttr(0.0));
  grads[0] = e.neg(e.b.create<MatmulOp>(e.loc, s.getResult(), G, true, false).getResult());
  grads[1] = G;
  return success();
}

template <class ReduceOpT>
LogicalResult reduceVjp(ReduceOpT r, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  Value x = r.getInput();
  ArrayRef<int64_t> shape = tensorOf(x).getShape();
  Value gb = e.expand(g, shape, r.getDims(), r.getKeepDims());
  if (isa<ReduceSumOp>(r.getOperation())) {
    grads[0] = gb;
  } else if (isa<ReduceMeanOp>(r.getOperation())) {
    int64_t n = 1;
    for (int64_t d : r.getDims())
      n *= shape[d];
    grads[0] = e.scale(gb, 1.0 / (double)n);
  } else {
    // max / min: the cotangent is shared evenly by the elements equal to the extremum.
    Value yb = e.expand(r.getResult(), shape, r.getDims(), r.getKeepDims());
    Value hit = e.b.create<CastOp>(e.loc, x.getType(), e.cmp(CmpPredicate::eq, x, yb));
    Value count = e.expand(e.reduceSum(hit, r.getDims(), true), shape, r.getDims(), true);
    grads[0] = e.div(e.mul(gb, hit), count);
  }
  return success();
}

// conv2d: cuDNN's / im2col's backward calls, as ops of their own (any layout, stride, padding,
// dilation and groups); the bias gets the output gradient summed over all but channels.
LogicalResult convVjp(Conv2dOp c, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  grads[0] = e.b.create<Conv2dBackwardInputOp>(e.loc, c.getInput().getType(), g, c.getFilter(), c.getStridesAttr(),
                                               c.getPaddingAttr(), c.getDilationAttr(), c.getGroupsAttr(),
                                               c.getLayoutAttr());
  grads[1] = e.b.create<Conv2dBackwardFilterOp>(e.loc, c.getFilter().getType(), c.getInput(), g, c.getStridesAttr(),
                                                c.getPaddingAttr(), c.getDilationAttr(), c.getGroupsAttr(),
                                                c.getLayoutAttr());
  if (c.getBias())
    grads[2] = e.reduceSum(g, c.getLayout() == Layout::NHWC ? SmallVector<int64_t>{0, 1, 2} : SmallVector<int64_t>{0, 2, 3},
                           false);
  return success();
}

// The cotangent of a strided slice: g's elements back in place, zeros between (a pad).
LogicalResult indexingVjp(SliceOp s, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  auto in = tensorOf(s.getInput()).getShape(), out = tensorOf(g).getShape();
  SmallVector<int64_t> low(s.getStart()), high, interior;
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t st = s.getStrides()[d];
    int64_t covered = out[d] == 0 ? 0 : (out[d] - 1) * st + 1;
    if (out[d] == 0)
      low[d] = 0;
    high.push_back(in[d] - low[d] - covered);
    interior.push_back(out[d] <= 1 ? 0 : st - 1);
  }
  grads[0] = e.b.create<PadOp>(e.loc, g, e.b.getDenseI64ArrayAttr(low), e.b.getDenseI64ArrayAttr(high),
                               e.b.getDenseI64ArrayAttr(interior), e.b.getF64FloatAttr(0.0));
  return success();
}

// The cotangent of a pad: the input's positions read back (a strided slice); the padding
// value is an attribute and gets none.
LogicalResult indexingVjp(PadOp p, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  auto in = tensorOf(p.getInput()).getShape();
  SmallVector<int64_t> start, limit, strides;
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t st = p.getInterior()[d] + 1;
    start.push_back(in[d] == 0 ? 0 : p.getLow()[d]);
    limit.push_back(in[d] == 0 ? 0 : p.getLow()[d] + (in[d] - 1) * st + 1);
    strides.push_back(st);
  }
  grads[0] = e.b.create<SliceOp>(e.loc, g, start, limit, strides);
  return success();
}

LogicalResult indexingVjp(ConcatOp c, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  auto out = tensorOf(g).getShape();
  int64_t dim = c.getDim(), offset = 0;
  for (auto [i, v] : llvm::enumerate(c.getInputs())) {
    auto shape = tensorOf(v).getShape();
    SmallVector<int64_t> start(out.size(), 0), limit(out), strides(out.size(), 1);
    start[dim] = offset;
    limit[dim] = offset + shape[dim];
    grads[i] = e.b.create<SliceOp>(e.loc, g, start, limit, strides);
    offset += shape[dim];
  }
  return success();
}

// The cotangent of a gather by constant indices: input position j sums g over every i with
// indices[i] = j. Occurrences are split into layers (the k-th occurrence of each j), each an
// injective map and so a gather back from g padded with one zero entry; the layers add up.
LogicalResult indexingVjp(GatherOp gather, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  auto c = gather.getIndices().getDefiningOp<ConstantOp>();
  auto attr = c ? llvm::dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
  if (!attr)
    return gather.emitOpError("has no vector-Jacobian product for computed indices");
  int64_t dim = gather.getDim(), n = tensorOf(gather.getInput()).getShape()[dim];
  auto gShape = tensorOf(g).getShape();
  int64_t m = gShape[dim];
  SmallVector<SmallVector<int64_t>> layers; // layers[k][j]: position of j's k-th occurrence, or m
  SmallVector<int64_t> seen(n, 0);
  int64_t i = 0;
  for (const APInt &v : attr.getValues<APInt>()) {
    int64_t j = v.getSExtValue(), k = seen[j]++;
    if ((int64_t)layers.size() <= k)
      layers.emplace_back(n, m);
    layers[k][j] = i++;
  }
  SmallVector<int64_t> low(gShape.size(), 0), high(gShape.size(), 0), interior(gShape.size(), 0);
  high[dim] = 1;
  Value padded = e.b.create<PadOp>(e.loc, g, e.b.getDenseI64ArrayAttr(low), e.b.getDenseI64ArrayAttr(high),
                                   e.b.getDenseI64ArrayAttr(interior), e.b.getF64FloatAttr(0.0));
  Value sum;
  for (auto &layer : layers) {
    auto idxType = RankedTensorType::get({n}, e.b.getI64Type());
    Value idx = e.b.create<ConstantOp>(e.loc, DenseElementsAttr::get(idxType, ArrayRef<int64_t>(layer)));
    Value part = e.b.create<GatherOp>(e.loc, padded, idx, dim);
    sum = sum ? e.add(sum, part) : part;
  }
  grads[0] = sum ? sum : e.zero(gather.getInput());
  return success();
}

LogicalResult poolVjp(MaxPool2dOp p, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  grads[0] = e.b.create<MaxPool2dBackwardOp>(e.loc, p.getInput().getType(), p.getInput(), p.getResult(), g,
                                             p.getKernelAttr(), p.getStridesAttr(), p.getPaddingAttr(),
                                             p.getLayoutAttr());
  return success();
}

LogicalResult poolVjp(AvgPool2dOp p, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  grads[0] = e.b.create<AvgPool2dBackwardOp>(e.loc, p.getInput().getType(), g, p.getKernelAttr(), p.getStridesAttr(),
                                             p.getPaddingAttr(), p.getLayoutAttr(), p.getCountIncludePadAttr());
  return success();
}

} // namespace

LogicalResult buildVjp(Operation *op, OpBuilder &builder, ArrayRef<Value> resultGrads,
                       SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(op->getNumOperands(), Value());
  if (resultGrads.empty() || !resultGrads[0])
    return success();
  Emit e{builder, op->getLoc()};
  Value g = resultGrads[0];
  LogicalResult result = success();
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](ConstantOp) {})
      .Case([&](RandomUniformOp) {}) // (its seed is an integer: no cotangent)
      .Case([&](StopGradientOp) {}) // (no cotangent: that is the op)
      .Case([&](CastOp c) {
        if (isFloatTensor(c.getInput()) && isFloatTensor(c.getResult()))
          operandGrads[0] = builder.create<CastOp>(e.loc, c.getInput().getType(), g);
      })
      .Case([&](BroadcastInDimOp bc) {
        operandGrads[0] = e.unbroadcast(g, tensorOf(bc.getInput()).getShape(), bc.getDims());
      })
      .Case([&](TransposeOp t) {
        SmallVector<int64_t> inverse(t.getPerm().size());
        for (auto [i, p] : llvm::enumerate(t.getPerm()))
          inverse[p] = i;
        operandGrads[0] = builder.create<TransposeOp>(e.loc, g, inverse);
      })
      .Case([&](ReshapeOp r) { operandGrads[0] = e.reshape(g, tensorOf(r.getInput()).getShape()); })
      .Case([&](ReverseOp r) { operandGrads[0] = builder.create<ReverseOp>(e.loc, g, r.getDims()); })
      .Case([&](SliceOp s) { result = indexingVjp(s, e, g, operandGrads); })
      .Case([&](PadOp p) { result = indexingVjp(p, e, g, operandGrads); })
      .Case([&](ConcatOp c) { result = indexingVjp(c, e, g, operandGrads); })
      .Case([&](GatherOp ga) { result = indexingVjp(ga, e, g, operandGrads); })
      .Case([&](ScanOp s) {
        // d cumsum: the cotangent summed from the end (a reversed cumulative sum).
        if (s.getKind() != ScanKind::sum) {
          result = s.emitOpError("has no vector-Jacobian product for cumulative products, maxima or minima");
          return;
        }
        SmallVector<int64_t> dims = {(int64_t)s.getDim()};
        Value rg = builder.create<ReverseOp>(e.loc, g, dims);
        Value cs = builder.create<ScanOp>(e.loc, rg, s.getDimAttr(), s.getKindAttr());
        operandGrads[0] = builder.create<ReverseOp>(e.loc, cs, dims);
      })
      .Case([&](SortOp s) {
        // Each cotangent goes back where its value came from: taken along the inverse
        // permutation, which is the order that sorts the indices.
        auto inverse = builder.create<SortOp>(e.loc, s.getIndices(), s.getDim());
        operandGrads[0] = builder.create<TakeAlongOp>(e.loc, g.getType(), g, inverse.getIndices(), s.getDimAttr());
      })
      .Case([&](TakeAlongOp t) {
        // Each cotangent added back at the position its value was taken from (positions taken
        // twice get both); the positions have none.
        operandGrads[0] = builder.create<ScatterAddOp>(e.loc, t.getInput().getType(), g, t.getIndices(), t.getDimAttr());
      })
      .Case([&](ScatterAddOp s) {
        operandGrads[0] = builder.create<TakeAlongOp>(e.loc, s.getSrc().getType(), g, s.getIndices(), s.getDimAttr());
      })
      .Case([&](ReduceSumOp r) { result = reduceVjp(r, e, g, operandGrads); })
      .Case([&](ReduceMeanOp r) { result = reduceVjp(r, e, g, operandGrads); })
      .Case([&](ReduceMaxOp r) { result = reduceVjp(r, e, g, operandGrads); })
      .Case([&](ReduceMinOp r) { result = reduceVjp(r, e, g, operandGrads); })
      .Case([&](MatmulOp m) { result = matmulVjp(m, e, g, operandGrads); })
      .Case([&](AttentionOp a) { result = attentionVjp(a, e, g, operandGrads); })
      .Case([&](SolveOp s) { result = solveVjp(s, e, g, operandGrads); })
      .Case([&](Conv2dOp c) { result = convVjp(c, e, g, operandGrads); })
      .Case([&](MaxPool2dOp p) { result = poolVjp(p, e, g, operandGrads); })
      .Case([&](AvgPool2dOp p) { result = poolVjp(p, e, g, operandGrads); })
      .Case([&](PointwiseOpInterface pw) { result = pointwiseVjp(op, pw.getScalarOp(), e, g, operandGrads); })
      .Default([&](Operation *o) {
        result = o->emitOpError("has no vector-Jacobian product");
      });
  // Only float operands carry cotangents.
  for (auto [v, grad] : llvm::zip(op->getOperands(), operandGrads))
    if (grad && !isFloatTensor(v))
      grad = Value();
  return result;
}


// recurrent: one backward op over the whole sequence; a result the loss does not reach gets a
// zero cotangent.
LogicalResult RecurrentOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(getNumOperands(), Value());
  if (llvm::none_of(resultGrads, [](Value g) { return (bool)g; }))
    return success();
  Emit e{builder, getLoc()};
  auto cotangent = [&](unsigned k) { return resultGrads[k] ? resultGrads[k] : e.zero(getResult(k)); };
  Value gcn = getCN() ? cotangent(2) : Value();
  // Operands and results both run x, h0, (c0), w_ih, w_hh, b_ih, b_hh.
  auto bw = builder.create<RecurrentBackwardOp>(getLoc(), getOperandTypes(), getModeAttr(), getX(), getH0(), getC0(), getWIh(),
                                                getWHh(), getBIh(), getBHh(), cotangent(0), cotangent(1), gcn);
  for (unsigned i = 0; i < getNumOperands(); ++i)
    operandGrads[i] = bw->getResult(i);
  return success();
}

// custom_vjp: the user's backward function, called on the residuals and the outputs' cotangents
// (zeros for an output the loss does not reach); it returns the float inputs' cotangents.
LogicalResult CustomVjpOp::buildVjp(OpBuilder &builder, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(getNumOperands(), Value());
  int64_t n = getNumOutputs();
  if (llvm::none_of(resultGrads.take_front(n), [](Value g) { return (bool)g; }))
    return success();
  Location loc = getLoc();
  SmallVector<Value> args(getResults().drop_front(n));
  for (int64_t k = 0; k < n; ++k) {
    Value g = resultGrads[k];
    if (!g) {
      auto t = llvm::cast<RankedTensorType>(getResult(k).getType());
      g = builder.create<ConstantOp>(loc, DenseElementsAttr::get(t, builder.getFloatAttr(t.getElementType(), 0.0)));
    }
    args.push_back(g);
  }
  auto bwd = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(*this, getBackwardAttr());
  if (!bwd)
    return emitOpError("names no function @") << getBackward() << " as its backward";
  auto call = builder.create<func::CallOp>(loc, bwd, args);
  unsigned j = 0;
  for (auto [i, in] : llvm::enumerate(getInputs()))
    if (isFloatTensor(in))
      operandGrads[i] = call.getResult(j++);
  return success();
}

} // namespace rfuse
