// Verifiers, type inference and folders of the rfuse ops. Shape rules live in ShapeFunctions.cpp.
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/IR/ShapeFunctions.h"
#include "rfuse/IR/Geometry.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/Sequence.h"

using namespace mlir;
using namespace rfuse;

namespace {
RankedTensorType tensorType(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

// Reports a shape-function error as a diagnostic of op `name` at `loc` (when there is one).
LogicalResult shapeError(std::optional<Location> loc, StringRef name, const std::string &err) {
  return emitOptionalError(loc, "'rfuse.", name, "' op ", err);
}
} // namespace

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto value = llvm::dyn_cast_if_present<ElementsAttr>(adaptor.getValueAttr());
  if (!value)
    return emitOptionalError(loc, "'rfuse.constant' op value must be an elements attribute");
  types.push_back(value.getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

LogicalResult ConstantOp::verify() {
  if (!llvm::isa<DenseElementsAttr>(getValue()))
    return emitOpError("value must be a dense elements attribute (sparse and resource "
                       "constants are not supported)");
  return success();
}

//===----------------------------------------------------------------------===//
// Pointwise
//===----------------------------------------------------------------------===//

ScalarOpKind CompareOp::getScalarOp() {
  switch (getPredicate()) {
  case CmpPredicate::eq: return ScalarOpKind::Eq;
  case CmpPredicate::ne: return ScalarOpKind::Ne;
  case CmpPredicate::lt: return ScalarOpKind::Lt;
  case CmpPredicate::le: return ScalarOpKind::Le;
  case CmpPredicate::gt: return ScalarOpKind::Gt;
  case CmpPredicate::ge: return ScalarOpKind::Ge;
  }
  llvm_unreachable("unknown predicate");
}

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto t = llvm::cast<RankedTensorType>(adaptor.getLhs().getType());
  types.push_back(RankedTensorType::get(t.getShape(), IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult SelectOp::verify() {
  if (getCond().getType().getShape() != getResult().getType().getShape())
    return emitOpError("condition shape ")
           << shapeToString(getCond().getType().getShape())
           << " does not match the value shape " << shapeToString(getResult().getType().getShape());
  return success();
}

namespace {
// Whether `a` is a splat constant equal to `value`. For floats, the sign of zero matters:
// x + (-0.0) == x for every x, but x + (+0.0) turns -0.0 into +0.0.
bool isSplatOf(Attribute a, double value, bool negativeZero = false) {
  auto splat = llvm::dyn_cast_if_present<SplatElementsAttr>(a);
  if (!splat)
    return false;
  if (auto f = llvm::dyn_cast<FloatAttr>(splat.getSplatValue<Attribute>()))
    return value == 0.0 ? f.getValue().isZero() && f.getValue().isNegative() == negativeZero
                        : f.getValue().isExactlyValue(value);
  if (auto i = llvm::dyn_cast<IntegerAttr>(splat.getSplatValue<Attribute>()))
    return i.getValue().getSExtValue() == (int64_t)value;
  return false;
}
bool isIntegerTensor(Value v) {
  return llvm::isa<IntegerType>(llvm::cast<RankedTensorType>(v.getType()).getElementType());
}
} // namespace

// Identity folds, each exact in IEEE arithmetic (NaN and signed zeros included):
// x * 1, 1 * x, x / 1, x - (+0), x + (-0), -0 + x; for integers also x + 0, 0 + x.
OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 1.0))
    return getRhs();
  return {};
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return getLhs();
  return {};
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0, /*negativeZero=*/false))
    return getLhs();
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  bool isInt = isIntegerTensor(getLhs());
  if (isSplatOf(adaptor.getRhs(), 0.0, /*negativeZero=*/!isInt))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 0.0, /*negativeZero=*/!isInt))
    return getRhs();
  return {};
}

// A power with a small whole constant exponent as products. x ^ 2 is x * x in every float type:
// R's R_pow computes it so, bit for bit, and a correctly rounded pow agrees. In f32, x ^ 3 and
// x ^ 4 too: two roundings instead of libm's one (<= 2 ulp, inside f32's 1e-5 contract), and
// an order of magnitude cheaper than powf, whose vector variant sends every negative base to
// the scalar libm (the tanh GELU's 0.044715 * y^3 spent half of W4's CPU time there). f64
// keeps pow for n > 2, as R computes it.
namespace {
struct PowBySmallInteger : public OpRewritePattern<PowOp> {
  using OpRewritePattern<PowOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(PowOp op, PatternRewriter &rewriter) const override {
    Attribute rhs;
    if (!matchPattern(op.getRhs(), m_Constant(&rhs)))
      return failure();
    int n = isSplatOf(rhs, 2.0) ? 2 : isSplatOf(rhs, 3.0) ? 3 : isSplatOf(rhs, 4.0) ? 4 : 0;
    if (n == 0 || (n > 2 && !tensorType(op.getLhs()).getElementType().isF32()))
      return failure();
    Value x = op.getLhs(), square = rewriter.create<MulOp>(op.getLoc(), x, x);
    Value result = n == 2 ? square
                   : n == 3 ? rewriter.create<MulOp>(op.getLoc(), square, x).getResult()
                            : rewriter.create<MulOp>(op.getLoc(), square, square).getResult();
    rewriter.replaceOp(op, result);
    return success();
  }
};
} // namespace

void PowOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<PowBySmallInteger>(context);
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError("result shape ") << shapeToString(getResult().getType().getShape())
                                        << " differs from the input shape "
                                        << shapeToString(getInput().getType().getShape());
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

namespace {
// Data-movement ops keep the element type.
LogicalResult verifySameElementType(Operation *op, RankedTensorType in, RankedTensorType out) {
  if (in.getElementType() == out.getElementType())
    return success();
  return op->emitOpError("result element type ")
         << out.getElementType() << " differs from the operand's " << in.getElementType();
}
} // namespace

LogicalResult BroadcastInDimOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (failed(verifySameElementType(*this, in, out)))
    return failure();
  std::string err;
  if (!checkBroadcastInDim(in.getShape(), getDims(), out.getShape(), err))
    return emitOpError(err);
  return success();
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput(); // dims are then the identity (strictly increasing, same rank)
  // broadcast(broadcast(x, d1), d2) = broadcast(x, d2 . d1)
  if (auto inner = getInput().getDefiningOp<BroadcastInDimOp>()) {
    SmallVector<int64_t> dims;
    for (int64_t d : inner.getDims())
      dims.push_back(getDims()[d]);
    getInputMutable().assign(inner.getInput());
    setDims(dims);
    return getResult();
  }
  if (auto splat = llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(getResult().getType(), splat.getSplatValue<Attribute>());
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto in = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  Shape out;
  std::string err;
  if (!inferTransposeShape(in.getShape(), adaptor.getPerm(), out, err))
    return shapeError(loc, "transpose", err);
  types.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (failed(verifySameElementType(*this, in, out)))
    return failure();
  std::string err;
  if (!checkReshape(in.getShape(), out.getShape(), err))
    return emitOpError(err);
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  if (auto splat = llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(getResult().getType(), splat.getSplatValue<Attribute>());
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) { // reshape(reshape(x)) = reshape(x)
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto in = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  Shape out;
  std::string err;
  if (!inferSliceShape(in.getShape(), adaptor.getStart(), adaptor.getLimit(), adaptor.getStrides(), out, err))
    return shapeError(loc, "slice", err);
  types.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput(); // all of every dim, step 1
  return {};
}

LogicalResult ReverseOp::verify() {
  std::string err;
  if (!checkReverseDims(getInput().getType().getShape(), getDims(), err))
    return emitOpError(err);
  return success();
}

OpFoldResult ReverseOp::fold(FoldAdaptor) {
  auto shape = getInput().getType().getShape();
  if (llvm::all_of(getDims(), [&](int64_t d) { return shape[d] <= 1; }))
    return getInput();
  // reverse(reverse(x, d), d) = x
  if (auto inner = getInput().getDefiningOp<ReverseOp>()) {
    SmallVector<int64_t> a(getDims()), b(inner.getDims());
    llvm::sort(a);
    llvm::sort(b);
    if (a == b)
      return inner.getInput();
  }
  return {};
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  auto in = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  Shape out;
  std::string err;
  if (!inferPadShape(in.getShape(), adaptor.getLow(), adaptor.getHigh(), adaptor.getInterior(), out, err))
    return shapeError(loc, "pad", err);
  types.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput(); // nothing added
  return {};
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  SmallVector<SmallVector<int64_t, 4>> shapes;
  for (Value v : adaptor.getInputs())
    shapes.emplace_back(llvm::cast<RankedTensorType>(v.getType()).getShape());
  Shape out;
  std::string err;
  if (!inferConcatShape(shapes, adaptor.getDim(), out, err))
    return shapeError(loc, "concat", err);
  types.push_back(RankedTensorType::get(
      out, llvm::cast<RankedTensorType>(adaptor.getInputs()[0].getType()).getElementType()));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs()[0];
  return {};
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto in = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  auto idx = llvm::cast<RankedTensorType>(adaptor.getIndices().getType());
  Shape out;
  std::string err;
  if (!inferGatherShape(in.getShape(), idx.getShape(), adaptor.getDim(), out, err))
    return shapeError(loc, "gather", err);
  types.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

LogicalResult SortOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location>, Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto in = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  types.push_back(in);
  types.push_back(RankedTensorType::get(in.getShape(), IntegerType::get(ctx, 64)));
  return success();
}

// The ops along one dim (sort, take_along, scan): the dim must be one of the operand's.
static LogicalResult verifyDimOf(Operation *op, int64_t dim, int64_t rank) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError("dim ") << dim << " is out of range for an operand of rank " << rank;
  return success();
}

LogicalResult SortOp::verify() { return verifyDimOf(*this, getDim(), getInput().getType().getRank()); }

LogicalResult TakeAlongOp::verify() {
  auto in = getInput().getType(), idx = getIndices().getType(), r = getResult().getType();
  int64_t rank = in.getRank(), dim = getDim();
  if (failed(verifyDimOf(*this, dim, rank)))
    return failure();
  if (idx.getRank() != rank)
    return emitOpError("indices ") << idx << " must have the input's rank " << rank;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && idx.getShape()[d] != in.getShape()[d])
      return emitOpError("indices ") << idx << " must match the input " << in << " in every dim but " << dim;
  if (r.getShape() != idx.getShape() || r.getElementType() != in.getElementType())
    return emitOpError("result ") << r << " must have the indices' shape and the input's element type";
  if (in.getShape()[dim] == 0 && idx.getShape()[dim] != 0)
    return emitOpError("takes positions from an empty dim ") << dim;
  return success();
}

LogicalResult ScatterAddOp::verify() {
  auto src = getSrc().getType(), idx = getIndices().getType(), r = getResult().getType();
  int64_t rank = src.getRank(), dim = getDim();
  if (failed(verifyDimOf(*this, dim, rank)))
    return failure();
  if (idx.getShape() != src.getShape())
    return emitOpError("indices ") << idx << " must have the source's shape " << src;
  if (r.getRank() != rank || r.getElementType() != src.getElementType())
    return emitOpError("result ") << r << " must have the source's rank and element type";
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && r.getShape()[d] != src.getShape()[d])
      return emitOpError("result ") << r << " must match the source " << src << " in every dim but " << dim;
  if (r.getShape()[dim] == 0 && src.getShape()[dim] != 0)
    return emitOpError("adds entries into an empty dim ") << dim;
  return success();
}

LogicalResult ScanOp::verify() { return verifyDimOf(*this, getDim(), getInput().getType().getRank()); }

LogicalResult RandomUniformOp::verify() {
  auto seed = getSeed().getType();
  if (seed.getRank() != 1 || seed.getShape()[0] != 2)
    return emitOpError("seed must be tensor<2xi32> (the generator's key), got ") << seed;
  return success();
}

LogicalResult AllReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location>, Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  for (Value v : adaptor.getInputs())
    types.push_back(v.getType());
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  for (Value v : getInputs())
    if (!llvm::cast<RankedTensorType>(v.getType()).hasStaticShape())
      return emitOpError("operands must have static shapes, not ") << v.getType();
  return success();
}

// q [B, L, D], k [B, S, D], v [B, S, Dv] of one float type; the forward's out [B, L, Dv] and
// lse [B, L] (f32).
static LogicalResult verifyAttentionOperands(Operation *op, RankedTensorType q, RankedTensorType k,
                                             RankedTensorType v) {
  if (q.getRank() != 3 || k.getRank() != 3 || v.getRank() != 3)
    return op->emitOpError("takes 3-d q, k and v ([B, L, D], [B, S, D], [B, S, Dv]), not ")
           << q << ", " << k << ", " << v;
  if (q.getElementType() != k.getElementType() || q.getElementType() != v.getElementType())
    return op->emitOpError("q, k and v must share one element type, not ") << q << ", " << k << ", " << v;
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  if (ks[0] != qs[0] || vs[0] != qs[0] || ks[2] != qs[2] || vs[1] != ks[1])
    return op->emitOpError("shapes do not agree: q ") << q << ", k " << k << ", v " << v
           << " (want [B, L, D], [B, S, D], [B, S, Dv])";
  return success();
}

// out / grad_out: [B, L, Dv] of q's type.
static LogicalResult verifyOutputShaped(Operation *op, StringRef what, RankedTensorType t, RankedTensorType q,
                                        RankedTensorType v) {
  if (t.getElementType() != q.getElementType() ||
      t.getShape() != ArrayRef<int64_t>{q.getShape()[0], q.getShape()[1], v.getShape()[2]})
    return op->emitOpError(what) << " must be [B, L, Dv] of q's type, not " << t;
  return success();
}

static LogicalResult verifyRowStatistic(Operation *op, StringRef what, RankedTensorType t, RankedTensorType q) {
  if (t.getRank() != 2 || t.getShape()[0] != q.getShape()[0] || t.getShape()[1] != q.getShape()[1] ||
      !t.getElementType().isF32())
    return op->emitOpError(what) << " must be f32 [" << q.getShape()[0] << ", " << q.getShape()[1] << "], not " << t;
  return success();
}

// The mask: i1 [B or 1, L or 1, S or 1]; a mask value only with something masked, and never NaN
// or +inf (a score the softmax could not take).
static LogicalResult verifyAttentionMask(Operation *op, Value mask, bool causal, std::optional<APFloat> maskValue,
                                         RankedTensorType q, RankedTensorType k) {
  if (mask) {
    auto m = cast<RankedTensorType>(mask.getType());
    int64_t want[3] = {q.getShape()[0], q.getShape()[1], k.getShape()[1]};
    bool ok = m.getRank() == 3;
    for (int64_t i = 0; ok && i < 3; ++i)
      ok = m.getShape()[i] == want[i] || m.getShape()[i] == 1;
    if (!ok)
      return op->emitOpError("mask must be i1 [B or 1, L or 1, S or 1] = [") << want[0] << " or 1, " << want[1]
             << " or 1, " << want[2] << " or 1], not " << m;
  }
  if (maskValue) {
    if (!mask && !causal)
      return op->emitOpError("has a mask_value but neither a mask nor causal");
    double v = maskValue->convertToDouble();
    if (std::isnan(v) || v == std::numeric_limits<double>::infinity())
      return op->emitOpError("mask_value must be finite or -inf, not ") << v;
  }
  return success();
}

// Dropout: a seed (i32 [2]) with all three of its attributes or none of them; a threshold in
// [0, 1], a finite positive scale and three non-negative strides.
template <class AttentionOpT>
static LogicalResult verifyAttentionDropout(AttentionOpT op) {
  bool seed = (bool)op.getDropoutSeed(), threshold = op.getDropoutThreshold().has_value(),
       scale = op.getDropoutScale().has_value(), strides = op.getDropoutStrides().has_value();
  if (!seed && !threshold && !scale && !strides)
    return success();
  if (!seed || !threshold || !scale || !strides)
    return op.emitOpError("dropout needs a dropout seed with dropout_threshold, dropout_scale and dropout_strides; "
                          "some are missing");
  auto st = cast<RankedTensorType>(op.getDropoutSeed().getType());
  if (st.getShape() != ArrayRef<int64_t>{2})
    return op.emitOpError("dropout seed must be i32 [2] (a key of two words), not ") << st;
  double t = op.getDropoutThreshold()->convertToDouble(), c = op.getDropoutScale()->convertToDouble();
  if (!(t >= 0 && t <= 1))
    return op.emitOpError("dropout_threshold must be in [0, 1], not ") << t;
  if (!(c > 0) || std::isinf(c))
    return op.emitOpError("dropout_scale must be finite and positive, not ") << c;
  ArrayRef<int64_t> d = *op.getDropoutStrides();
  if (d.size() != 3 || llvm::any_of(d, [](int64_t x) { return x < 0; }))
    return op.emitOpError("dropout_strides must be three non-negative strides (of b, l, s)");
  return success();
}

std::array<int64_t, 3> rfuse::attentionMaskStrides(ArrayRef<int64_t> d) {
  return {d[0] == 1 ? 0 : d[1] * d[2], d[1] == 1 ? 0 : d[2], d[2] == 1 ? 0 : 1};
}

LogicalResult AttentionOp::verify() {
  auto q = getQ().getType(), v = getV().getType();
  if (failed(verifyAttentionOperands(*this, q, getK().getType(), v)) ||
      failed(verifyAttentionMask(*this, getMask(), getCausal(), getMaskValue(), q, getK().getType())) ||
      failed(verifyAttentionDropout(*this)))
    return failure();
  if (failed(verifyOutputShaped(*this, "out", getOut().getType(), q, v)))
    return failure();
  return verifyRowStatistic(*this, "lse", getLse().getType(), q);
}

LogicalResult AttentionBackwardOp::verify() {
  auto q = getQ().getType(), k = getK().getType(), v = getV().getType();
  if (failed(verifyAttentionOperands(*this, q, k, v)) ||
      failed(verifyAttentionMask(*this, getMask(), getCausal(), getMaskValue(), q, k)) ||
      failed(verifyAttentionDropout(*this)))
    return failure();
  if (failed(verifyOutputShaped(*this, "grad_out", getGradOut().getType(), q, v)) ||
      failed(verifyRowStatistic(*this, "lse", getLse().getType(), q)) ||
      failed(verifyRowStatistic(*this, "delta", getDelta().getType(), q)))
    return failure();
  if (getGradQ().getType() != q || getGradK().getType() != k || getGradV().getType() != v)
    return emitOpError("the gradients must have q's, k's and v's types");
  return success();
}

// rfuse.recurrent's operands: x [T, B, I], h0 (c0 for an LSTM only) [B, H], w_ih [G H, I],
// w_hh [G H, H], biases [G H], one float type.
static LogicalResult verifyRecurrentOperands(Operation *op, RecurrentMode mode, Value x, Value h0, Value c0,
                                             Value wih, Value whh, Value bih, Value bhh) {
  auto t = [](Value v) { return llvm::cast<RankedTensorType>(v.getType()); };
  if (t(x).getRank() != 3 || t(h0).getRank() != 2)
    return op->emitOpError("needs x [T, B, I] and h0 [B, H], not ") << t(x) << " and " << t(h0);
  int64_t B = t(x).getShape()[1], I = t(x).getShape()[2], H = t(h0).getShape()[1];
  int64_t G = mode == RecurrentMode::lstm ? 4 : mode == RecurrentMode::gru ? 3 : 1;
  if (t(h0).getShape()[0] != B)
    return op->emitOpError("h0 ") << t(h0) << " must have x's batch size " << B;
  if ((mode == RecurrentMode::lstm) != (bool)c0)
    return op->emitOpError(mode == RecurrentMode::lstm ? "an LSTM needs a cell state c0" : "only an LSTM has a cell state");
  if (c0 && t(c0) != t(h0))
    return op->emitOpError("c0 ") << t(c0) << " must have h0's type " << t(h0);
  auto is = [&](Value v, ArrayRef<int64_t> shape) { return t(v).getShape() == shape; };
  if (!is(wih, {G * H, I}) || !is(whh, {G * H, H}) || !is(bih, {G * H}) || !is(bhh, {G * H}))
    return op->emitOpError("needs w_ih [") << G * H << ", " << I << "], w_hh [" << G * H << ", " << H << "] and biases ["
                                            << G * H << "] (" << G << " gates of " << H << ")";
  Type e = t(x).getElementType();
  for (Value v : {h0, wih, whh, bih, bhh})
    if (t(v).getElementType() != e)
      return op->emitOpError("needs one float type for every operand, not ") << e << " and " << t(v).getElementType();
  return success();
}

// The output of every step, [T, B, H], in x's element type.
static RankedTensorType recurrentOutputType(RankedTensorType x, RankedTensorType h) {
  return RankedTensorType::get({x.getShape()[0], x.getShape()[1], h.getShape()[1]}, x.getElementType());
}

LogicalResult RecurrentOp::verify() {
  if (failed(verifyRecurrentOperands(*this, getMode(), getX(), getH0(), getC0(), getWIh(), getWHh(), getBIh(), getBHh())))
    return failure();
  auto x = getX().getType(), h = getH0().getType();
  auto y = recurrentOutputType(x, h);
  if (getY().getType() != y || getHN().getType() != h || (bool)getCN() != (bool)getC0() ||
      (getCN() && getCN().getType() != h))
    return emitOpError("results must be y ") << y << ", h_n " << h << (getC0() ? " and c_n of h0's type" : "");
  return success();
}

LogicalResult RecurrentBackwardOp::verify() {
  if (failed(verifyRecurrentOperands(*this, getMode(), getX(), getH0(), getC0(), getWIh(), getWHh(), getBIh(), getBHh())))
    return failure();
  auto x = getX().getType(), h = getH0().getType();
  auto y = recurrentOutputType(x, h);
  if (getGradY().getType() != y || getGradHN().getType() != h || (bool)getGradCN() != (bool)getC0() ||
      (getGradCN() && getGradCN().getType() != h))
    return emitOpError("needs grad_y ") << y << " and grad_h_n " << h << (getC0() ? " and grad_c_n" : "");
  if (getGradX().getType() != x || getGradH0().getType() != h || (bool)getGradC0() != (bool)getC0() ||
      getGradWIh().getType() != getWIh().getType() || getGradWHh().getType() != getWHh().getType() ||
      getGradBIh().getType() != getBIh().getType() || getGradBHh().getType() != getBHh().getType())
    return emitOpError("the gradients must have their operands' types");
  return success();
}

LogicalResult SolveOp::verify() {
  auto a = getA().getType(), b = getB().getType(), r = getResult().getType();
  if (a.getRank() != 2 || a.getShape()[0] != a.getShape()[1])
    return emitOpError("'a' must be a square matrix, not ") << a;
  if (b.getRank() != 2 || b.getShape()[1] != a.getShape()[0])
    return emitOpError("'b' ") << b << " must be [k, " << a.getShape()[0] << "] to solve with " << a;
  if (a.getElementType() != b.getElementType() || r != b)
    return emitOpError("'a', 'b' and the result must share one element type, the result 'b''s type");
  return success();
}

LogicalResult CholeskyOp::verify() {
  auto t = getInput().getType();
  if (t.getRank() != 2 || t.getShape()[0] != t.getShape()[1])
    return emitOpError("needs a square matrix, not ") << t;
  return success();
}

LogicalResult LogDeterminantOp::verify() {
  auto t = getInput().getType(), r = getResult().getType();
  if (t.getRank() != 2 || t.getShape()[0] != t.getShape()[1])
    return emitOpError("needs a square matrix, not ") << t;
  if (r.getRank() != 1 || r.getShape()[0] != 2 || r.getElementType() != t.getElementType())
    return emitOpError("returns [2] (log modulus, sign) in the input's element type, not ") << r;
  return success();
}

LogicalResult GatherOp::verify() {
  auto c = getIndices().getDefiningOp<ConstantOp>();
  if (!c)
    return success();
  auto attr = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
  int64_t n = getInput().getType().getShape()[getDim()];
  if (attr)
    for (const APInt &v : attr.getValues<APInt>())
      if (v.getSExtValue() < 0 || v.getSExtValue() >= n)
        return emitOpError("index ") << v.getSExtValue() << " is out of range [0, " << n << ") of dim " << getDim();
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  if (llvm::equal(getPerm(), llvm::seq<int64_t>(0, getPerm().size())))
    return getInput();
  // One value everywhere, in any order (a zero initial state in R's layout, say).
  if (auto splat = llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(getResult().getType(), splat.getSplatValue<Attribute>());
  // transpose(transpose(x, p1), p2) = transpose(x, p1 . p2): result dim i is x dim p1[p2[i]].
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> perm;
    for (int64_t p : getPerm())
      perm.push_back(inner.getPerm()[p]);
    if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      return inner.getInput();
    getInputMutable().assign(inner.getInput());
    setPerm(perm);
    return getResult();
  }
  return {};
}

// matmul(transpose(a), b) = matmul(a, b) with transpose_a flipped (likewise b), for the
// transposes a flag expresses: [1, 0], or [0, 2, 1] of a batch. The library call reads the
// operand as it is, so the transpose is never materialized — also when it has other users (a
// training step's forward and backward products read one transposed weight).
OpFoldResult MatmulOp::fold(FoldAdaptor) {
  auto swapsLastTwo = [](Value v) -> TransposeOp {
    auto t = v.getDefiningOp<TransposeOp>();
    if (!t)
      return {};
    ArrayRef<int64_t> p = t.getPerm();
    bool flag = (p.size() == 2 && p[0] == 1 && p[1] == 0) || (p.size() == 3 && p[0] == 0 && p[1] == 2 && p[2] == 1);
    return flag ? t : TransposeOp();
  };
  bool changed = false;
  if (TransposeOp t = swapsLastTwo(getLhs())) {
    getLhsMutable().assign(t.getInput());
    setTransposeA(!getTransposeA());
    changed = true;
  }
  if (TransposeOp t = swapsLastTwo(getRhs())) {
    getRhsMutable().assign(t.getInput());
    setTransposeB(!getTransposeB());
    changed = true;
  }
  return changed ? OpFoldResult(getResult()) : OpFoldResult();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

namespace {
template <class AdaptorT>
LogicalResult inferReduce(StringRef name, std::optional<Location> loc, AdaptorT adaptor,
                          SmallVectorImpl<Type> &types) {
  auto in = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  Shape out;
  std::string err;
  if (!inferReduceShape(in.getShape(), adaptor.getDims(), adaptor.getKeepDims(), out, err))
    return shapeError(loc, name, err);
  types.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}
} // namespace

#define RFUSE_REDUCE_INFER(OP, NAME)                                                              \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor, \
                                     SmallVectorImpl<Type> &types) {                             \
    return inferReduce(NAME, loc, adaptor, types);                                               \
  }
RFUSE_REDUCE_INFER(ReduceSumOp, "reduce_sum")
RFUSE_REDUCE_INFER(ReduceMeanOp, "reduce_mean")
RFUSE_REDUCE_INFER(ReduceMaxOp, "reduce_max")
RFUSE_REDUCE_INFER(ReduceMinOp, "reduce_min")
#undef RFUSE_REDUCE_INFER

//===----------------------------------------------------------------------===//
// Contractions, convolution, pooling
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto lhs = llvm::cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = llvm::cast<RankedTensorType>(adaptor.getRhs().getType());
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "'rfuse.matmul' op element types differ: lhs ",
                             lhs.getElementType(), ", rhs ", rhs.getElementType());
  Shape out;
  std::string err;
  if (!inferMatmulShape(lhs.getShape(), rhs.getShape(), adaptor.getTransposeA(),
                        adaptor.getTransposeB(), out, err))
    return shapeError(loc, "matmul", err);
  types.push_back(RankedTensorType::get(out, lhs.getElementType()));
  return success();
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto in = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  auto filter = llvm::cast<RankedTensorType>(adaptor.getFilter().getType());
  std::optional<ArrayRef<int64_t>> bias;
  if (Value b = adaptor.getBias()) {
    bias = llvm::cast<RankedTensorType>(b.getType()).getShape();
    if (tensorType(b).getElementType() != in.getElementType())
      return emitOptionalError(loc, "'rfuse.conv2d' op bias element type ",
                               tensorType(b).getElementType(), " differs from the input's ",
                               in.getElementType());
  }
  if (filter.getElementType() != in.getElementType())
    return emitOptionalError(loc, "'rfuse.conv2d' op filter element type ",
                             filter.getElementType(), " differs from the input's ",
                             in.getElementType());
  Shape out;
  std::string err;
  if (!inferConv2dShape(in.getShape(), filter.getShape(), bias, adaptor.getStrides(),
                        adaptor.getPadding(), adaptor.getDilation(), adaptor.getGroups(),
                        adaptor.getLayout() == Layout::NHWC, out, err))
    return shapeError(loc, "conv2d", err);
  types.push_back(RankedTensorType::get(out, in.getElementType()));
  return success();
}

#define RFUSE_POOL_INFER(OP, NAME)                                                                \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, Adaptor adaptor, \
                                     SmallVectorImpl<Type> &types) {                             \
    auto in = llvm::cast<RankedTensorType>(adaptor.getInput().getType());                       \
    Shape out;                                                                                   \
    std::string err;                                                                             \
    if (!inferPool2dShape(in.getShape(), adaptor.getKernel(), adaptor.getStrides(),              \
                          adaptor.getPadding(), adaptor.getLayout() == Layout::NHWC, out, err))  \
      return shapeError(loc, NAME, err);                                                         \
    types.push_back(RankedTensorType::get(out, in.getElementType()));                            \
    return success();                                                                            \
  }
RFUSE_POOL_INFER(MaxPool2dOp, "max_pool2d")
RFUSE_POOL_INFER(AvgPool2dOp, "avg_pool2d")
#undef RFUSE_POOL_INFER

//===----------------------------------------------------------------------===//
// Gradients of convolution and pooling
//===----------------------------------------------------------------------===//

namespace {
// The forward op's output shape, from the forward input and filter, must be grad_output's.
template <class OpT>
LogicalResult verifyConvBackward(OpT op, Value input, Value filter, Value gradOutput) {
  Type elem = tensorType(gradOutput).getElementType();
  for (Value v : {input, filter})
    if (tensorType(v).getElementType() != elem)
      return op.emitOpError("mixes element types ") << tensorType(v).getElementType() << " and " << elem;
  Shape out;
  std::string err;
  if (!inferConv2dShape(tensorType(input).getShape(), tensorType(filter).getShape(), std::nullopt,
                        op.getStrides(), op.getPadding(), op.getDilation(), op.getGroups(),
                        op.getLayout() == Layout::NHWC, out, err))
    return op.emitOpError("describes no valid forward convolution: ") << err;
  if (ArrayRef<int64_t>(out) != tensorType(gradOutput).getShape())
    return op.emitOpError("grad_output has shape ") << tensorType(gradOutput) << " but the forward convolution's output has "
                                                    << RankedTensorType::get(out, elem);
  return success();
}

template <class OpT>
LogicalResult verifyPoolBackward(OpT op, Value input, Value gradOutput) {
  Shape out;
  std::string err;
  if (tensorType(input).getElementType() != tensorType(gradOutput).getElementType())
    return op.emitOpError("mixes element types");
  if (!inferPool2dShape(tensorType(input).getShape(), op.getKernel(), op.getStrides(), op.getPadding(),
                        op.getLayout() == Layout::NHWC, out, err))
    return op.emitOpError("describes no valid forward pooling: ") << err;
  if (ArrayRef<int64_t>(out) != tensorType(gradOutput).getShape())
    return op.emitOpError("grad_output's shape differs from the forward pooling's output");
  return success();
}
} // namespace

LogicalResult Conv2dBackwardInputOp::verify() {
  return verifyConvBackward(*this, getResult(), getFilter(), getGradOutput());
}
LogicalResult Conv2dBackwardFilterOp::verify() {
  return verifyConvBackward(*this, getInput(), getResult(), getGradOutput());
}
LogicalResult MaxPool2dBackwardOp::verify() {
  if (getInput().getType() != getResult().getType() || getOutput().getType() != getGradOutput().getType())
    return emitOpError("result must have the input's type, output the grad_output's");
  return verifyPoolBackward(*this, getInput(), getGradOutput());
}
LogicalResult AvgPool2dBackwardOp::verify() { return verifyPoolBackward(*this, getResult(), getGradOutput()); }

//===----------------------------------------------------------------------===//
// FusionOp
//===----------------------------------------------------------------------===//

LogicalResult FusionOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body has ") << body.getNumArguments() << " arguments but the op has "
                                    << getInputs().size() << " inputs";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(body.getArgumentTypes(), getInputs()))) {
    auto [argType, input] = pair;
    if (argType != input.getType())
      return emitOpError("body argument #") << i << " has type " << argType
                                            << " but input #" << i << " has type "
                                            << input.getType();
  }
  unsigned reductions = 0, matmuls = 0, convs = 0, pools = 0;
  body.walk([&](Operation *op) {
    reductions += isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>(op);
    matmuls += isa<MatmulOp>(op);
    convs += isConvolutionOp(op);
    pools += isPoolingOp(op);
  });
  StringRef kind = stringifyFusionKind(getKind());
  if (pools)
    return emitOpError("a ") << kind << " region cannot contain pooling";
  switch (getKind()) {
  case FusionKind::pointwise:
    if (reductions || matmuls || convs)
      return emitOpError("a pointwise region cannot contain reductions, matmul or conv2d");
    break;
  case FusionKind::reduction:
    if (!reductions || matmuls || convs)
      return emitOpError("a reduction region needs at least one reduction and no matmul or "
                         "conv2d");
    break;
  case FusionKind::matmul_epilogue:
    if (matmuls != 1 || convs || reductions)
      return emitOpError("a matmul_epilogue region needs exactly one matmul and no conv2d or "
                         "reduction, found ")
             << matmuls << " matmul(s)";
    break;
  case FusionKind::conv_epilogue:
    if (convs != 1 || matmuls || reductions)
      return emitOpError("a conv_epilogue region needs exactly one conv2d and no matmul or "
                         "reduction, found ")
             << convs << " conv2d(s)";
    break;
  }
  auto yield = llvm::dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in rfuse.yield");
  if (yield.getValues().size() != getNumResults())
    return emitOpError("body yields ") << yield.getValues().size() << " values but the op has "
                                       << getNumResults() << " results";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(yield.getValues().getTypes(), getResultTypes()))) {
    auto [yielded, result] = pair;
    if (yielded != result)
      return emitOpError("yielded value #") << i << " has type " << yielded << " but result #"
                                            << i << " has type " << result;
  }
  return success();
}

// ---- custom_vjp -------------------------------------------------------------------------------

LogicalResult CustomVjpOp::verify() {
  int64_t n = getNumOutputs();
  if (n < 1 || n > (int64_t)getNumResults())
    return emitOpError("num_outputs is ") << n << "; it must be in 1.." << getNumResults();
  for (Value r : getResults().take_front(n))
    if (!llvm::isa<FloatType>(llvm::cast<RankedTensorType>(r.getType()).getElementType()))
      return emitOpError("output ") << r.getType() << " is not a float tensor (outputs have cotangents)";
  return success();
}

LogicalResult CustomVjpOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto lookup = [&](FlatSymbolRefAttr name, const char *role) -> FunctionOpInterface {
    auto fn = symbols.lookupNearestSymbolFrom<FunctionOpInterface>(*this, name);
    if (!fn)
      emitOpError("names no function @") << name.getValue() << " as its " << role;
    return fn;
  };
  FunctionOpInterface fwd = lookup(getForwardAttr(), "forward");
  if (!fwd)
    return failure();
  FunctionOpInterface bwd = lookup(getBackwardAttr(), "backward");
  if (!bwd)
    return failure();
  auto fwdType = llvm::cast<FunctionType>(fwd.getFunctionType());
  SmallVector<Type> inputTypes(getInputs().getTypes()), resultTypes(getResultTypes());
  if (fwdType.getInputs() != ArrayRef<Type>(inputTypes) || fwdType.getResults() != ArrayRef<Type>(resultTypes))
    return emitOpError("forward @") << getForward() << " has type " << fwdType << ", not the op's";
  int64_t n = getNumOutputs();
  SmallVector<Type> bwdInputs(ArrayRef<Type>(resultTypes).drop_front(n));
  llvm::append_range(bwdInputs, ArrayRef<Type>(resultTypes).take_front(n));
  SmallVector<Type> bwdResults;
  for (Type t : inputTypes)
    if (llvm::isa<FloatType>(llvm::cast<RankedTensorType>(t).getElementType()))
      bwdResults.push_back(t);
  auto bwdType = llvm::cast<FunctionType>(bwd.getFunctionType());
  if (bwdType.getInputs() != ArrayRef<Type>(bwdInputs) || bwdType.getResults() != ArrayRef<Type>(bwdResults))
    return emitOpError("backward @") << getBackward() << " has type " << bwdType
                                     << "; it must take the residuals and the outputs' cotangents and return "
                                        "the float inputs' cotangents";
  return success();
}

#define GET_OP_CLASSES
#include "rfuse/IR/RfuseOps.cpp.inc"
