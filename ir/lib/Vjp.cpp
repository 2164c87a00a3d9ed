// Vector-Jacobian products of rfuse ops: each op's reverse-mode rule, written once, built from
// rfuse ops so that the backward graph goes through the same fusion pipeline and backends.
// Used through VjpOpInterface by rfuse-autodiff (passes/lib/Autodiff.cpp).
#include "rfuse/IR/RfuseDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
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

// An [n, n] anti-identity: multiplying by it reverses a dim (exactly: one product of 1 per
// element). rfuse has no reverse op; the filter flip of a convolution's input gradient uses this.
Value antiIdentity(Emit &e, int64_t n, Type elem) {
  std::vector<Attribute> v((size_t)(n * n), e.b.getFloatAttr(elem, 0.0));
  for (int64_t i = 0; i < n; ++i)
    v[(size_t)(i * n + (n - 1 - i))] = e.b.getFloatAttr(elem, 1.0);
  auto t = RankedTensorType::get({n, n}, elem);
  return e.b.create<ConstantOp>(e.loc, DenseElementsAttr::get(t, v));
}

Value conv(Emit &e, Value x, Value w, ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
           ArrayRef<int64_t> dilation) {
  return e.b.create<Conv2dOp>(e.loc, x, w, Value(), e.b.getDenseI64ArrayAttr(strides),
                              e.b.getDenseI64ArrayAttr(padding), e.b.getDenseI64ArrayAttr(dilation),
                              e.b.getI64IntegerAttr(1), LayoutAttr::get(e.b.getContext(), Layout::NCHW));
}

// conv2d (NCHW, groups 1, stride 1), both gradients as convolutions:
//   dW[o,c] = x[.,c] (*) g[.,o]: a convolution of x^T [C,N,H,W] with g^T [O,N,OH,OW] as the filter,
//     dilated by the forward stride (1), with the forward padding -> [C,O,KH,KW], transposed;
//   dX = g (*) flip(W)^T: padding d (K - 1) - p on each side, dilation d.
LogicalResult convVjp(Conv2dOp c, Emit &e, Value g, SmallVectorImpl<Value> &grads) {
  auto st = c.getStrides(), pad = c.getPadding(), dil = c.getDilation();
  if (c.getLayout() != Layout::NCHW || c.getGroups() != 1 || st[0] != 1 || st[1] != 1)
    return c.emitOpError("has no vector-Jacobian product here: only NCHW, groups = 1, stride 1");
  Value x = c.getInput(), w = c.getFilter();
  auto ws = tensorOf(w).getShape();
  int64_t kh = ws[2], kw = ws[3];
  int64_t ph = dil[0] * (kh - 1) - pad[0], pw = dil[1] * (kw - 1) - pad[2];
  if (pad[0] != pad[1] || pad[2] != pad[3] || ph < 0 || pw < 0)
    return c.emitOpError("has no vector-Jacobian product here: asymmetric or over-wide padding");
  Value xt = e.b.create<TransposeOp>(e.loc, x, ArrayRef<int64_t>{1, 0, 2, 3});
  Value gt = e.b.create<TransposeOp>(e.loc, g, ArrayRef<int64_t>{1, 0, 2, 3});
  Value dwT = conv(e, xt, gt, {dil[0], dil[1]}, pad, {1, 1}); // [C, O, KH', KW']
  if (tensorOf(dwT).getShape()[2] != kh || tensorOf(dwT).getShape()[3] != kw)
    return c.emitOpError("has no vector-Jacobian product here: the filter gradient's shape does not come out exact");
  grads[1] = e.b.create<TransposeOp>(e.loc, dwT, ArrayRef<int64_t>{1, 0, 2, 3});
  // flip(W) over KH and KW: [O*C, KH, KW] between two anti-identity matmuls.
  Type elem = tensorOf(w).getElementType();
  Value w3 = e.reshape(w, {ws[0] * ws[1], kh, kw});
  Value flipped = e.b.create<MatmulOp>(e.loc, antiIdentity(e, kh, elem), w3, false, false);
  flipped = e.b.create<MatmulOp>(e.loc, flipped, antiIdentity(e, kw, elem), false, false);
  Value wf = e.b.create<TransposeOp>(e.loc, e.reshape(flipped, ws), ArrayRef<int64_t>{1, 0, 2, 3});
  grads[0] = conv(e, g, wf, {1, 1}, {ph, ph, pw, pw}, {dil[0], dil[1]});
  if (c.getBias())
    grads[2] = e.reduceSum(g, {0, 2, 3}, false);
  return success();
}

// A [rows, cols] matrix with ones on the diagonal: multiplying by it keeps the leading rows or
// columns of an operand (or puts them back, zero elsewhere) — exact, and rfuse has no slice or
// pad op.
Value selection(Emit &e, int64_t rows, int64_t cols, Type elem) {
  std::vector<Attribute> v((size_t)(rows * cols), e.b.getFloatAttr(elem, 0.0));
  for (int64_t i = 0; i < std::min(rows, cols); ++i)
    v[(size_t)(i * cols + i)] = e.b.getFloatAttr(elem, 1.0);
  return e.b.create<ConstantOp>(e.loc, DenseElementsAttr::get(RankedTensorType::get({rows, cols}, elem), v));
}

// [N, C, H, W] -> [N, C, h, w] keeping the leading (or, growing, zero-filling) rows and columns.
Value resizeSpatial(Emit &e, Value x, int64_t h, int64_t w) {
  auto s = tensorOf(x).getShape();
  if (s[2] == h && s[3] == w)
    return x;
  Type elem = tensorOf(x).getElementType();
  Value b = e.reshape(x, {s[0] * s[1], s[2], s[3]});
  b = e.b.create<MatmulOp>(e.loc, selection(e, h, s[2], elem), b, false, false);
  b = e.b.create<MatmulOp>(e.loc, b, selection(e, s[3], w, elem), false, false);
  return e.reshape(b, {s[0], s[1], h, w});
}

// Pooling with non-overlapping windows (kernel = stride, no padding): each window is a
// [.., KH, .., KW] block of x's covered part reshaped to [N, C, OH, KH, OW, KW]; rows and
// columns past the last window get no gradient.
template <class PoolOpT>
LogicalResult poolVjp(PoolOpT p, Emit &e, Value g, SmallVectorImpl<Value> &grads, bool isMax) {
  auto k = p.getKernel(), st = p.getStrides(), pad = p.getPadding();
  Value input = p.getInput();
  auto full = tensorOf(input).getShape();
  if (p.getLayout() != Layout::NCHW || k[0] != st[0] || k[1] != st[1] ||
      llvm::any_of(pad, [](int64_t v) { return v != 0; }))
    return p.emitOpError("has no vector-Jacobian product here: only NCHW windows that tile the input");
  int64_t oh = full[2] / k[0], ow = full[3] / k[1];
  Value x = resizeSpatial(e, input, oh * k[0], ow * k[1]);
  auto xs = tensorOf(x).getShape();
  SmallVector<int64_t> blocks = {xs[0], xs[1], oh, k[0], ow, k[1]};
  Type elem = tensorOf(x).getElementType();
  auto bt = RankedTensorType::get(blocks, elem);
  auto spread = [&](Value v) { // [N, C, OH, OW] over each window
    return e.b.create<BroadcastInDimOp>(e.loc, bt, v, e.b.getDenseI64ArrayAttr({0, 1, 2, 4})).getResult();
  };
  Value gb = spread(g);
  Value gx;
  if (!isMax) {
    gx = e.reshape(e.scale(gb, 1.0 / (double)(k[0] * k[1])), xs);
  } else { // max: shared evenly by the window's elements equal to its maximum
    Value xb = e.reshape(x, blocks);
    Value hit = e.b.create<CastOp>(e.loc, bt, e.cmp(CmpPredicate::eq, xb, spread(p.getResult())));
    Value count = e.reduceSum(hit, {3, 5}, false);
    gx = e.reshape(e.div(e.mul(gb, hit), spread(count)), xs);
  }
  grads[0] = resizeSpatial(e, gx, full[2], full[3]);
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
      .Case([&](ReduceSumOp r) { result = reduceVjp(r, e, g, operandGrads); })
      .Case([&](ReduceMeanOp r) { result = reduceVjp(r, e, g, operandGrads); })
      .Case([&](ReduceMaxOp r) { result = reduceVjp(r, e, g, operandGrads); })
      .Case([&](ReduceMinOp r) { result = reduceVjp(r, e, g, operandGrads); })
      .Case([&](MatmulOp m) { result = matmulVjp(m, e, g, operandGrads); })
      .Case([&](Conv2dOp c) { result = convVjp(c, e, g, operandGrads); })
      .Case([&](MaxPool2dOp p) { result = poolVjp(p, e, g, operandGrads, true); })
      .Case([&](AvgPool2dOp p) { result = poolVjp(p, e, g, operandGrads, false); })
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

} // namespace rfuse
