// Verifiers, type inference and folders of the rfuse ops. Shape rules live in ShapeFunctions.cpp.
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/IR/ShapeFunctions.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"

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

// x * 1 -> x (exact in IEEE arithmetic, NaN and signed zeros included).
OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  auto isOne = [](Attribute a) {
    auto splat = llvm::dyn_cast_if_present<SplatElementsAttr>(a);
    if (!splat)
      return false;
    if (auto f = llvm::dyn_cast<FloatAttr>(splat.getSplatValue<Attribute>()))
      return f.getValue().isExactlyValue(1.0);
    if (auto i = llvm::dyn_cast<IntegerAttr>(splat.getSplatValue<Attribute>()))
      return i.getValue().isOne();
    return false;
  };
  if (isOne(adaptor.getRhs()))
    return getLhs();
  if (isOne(adaptor.getLhs()))
    return getRhs();
  return {};
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

LogicalResult BroadcastInDimOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type ") << out.getElementType()
                                               << " differs from the operand's "
                                               << in.getElementType();
  std::string err;
  if (!checkBroadcastInDim(in.getShape(), getDims(), out.getShape(), err))
    return emitOpError(err);
  return success();
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput(); // dims are then the identity (strictly increasing, same rank)
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
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type ") << out.getElementType()
                                               << " differs from the operand's "
                                               << in.getElementType();
  std::string err;
  if (!checkReshape(in.getShape(), out.getShape(), err))
    return emitOpError(err);
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
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

#define GET_OP_CLASSES
#include "rfuse/IR/RfuseOps.cpp.inc"
