// DType <-> MLIR element types, float splat constants' values, and the scalar ops' arities and
// names (MLIR-side; DType.cpp holds what needs no MLIR).
#include "rfuse/IR/DType.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/IR/ScalarOpKind.h"

namespace rfuse {

mlir::Type toMlirType(mlir::MLIRContext *ctx, DType t) {
  mlir::Builder b(ctx);
  switch (t) {
  case DType::F32: return b.getF32Type();
  case DType::F64: return b.getF64Type();
  case DType::F16: return b.getF16Type();
  case DType::BF16: return b.getBF16Type();
  case DType::I1: return b.getI1Type();
  case DType::I32: return b.getI32Type();
  case DType::I64: return b.getI64Type();
  }
  return {};
}

bool fromMlirType(mlir::Type t, DType &out) {
  if (t.isF32()) out = DType::F32;
  else if (t.isF64()) out = DType::F64;
  else if (t.isF16()) out = DType::F16;
  else if (t.isBF16()) out = DType::BF16;
  else if (t.isInteger(1)) out = DType::I1;
  else if (t.isInteger(32)) out = DType::I32;
  else if (t.isInteger(64)) out = DType::I64;
  else return false;
  return true;
}

DType dtypeOf(mlir::Value tensor) {
  DType d = DType::F32;
  fromMlirType(llvm::cast<mlir::RankedTensorType>(tensor.getType()).getElementType(), d);
  return d;
}

std::optional<double> floatSplatValue(mlir::Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto splat = c ? llvm::dyn_cast<mlir::SplatElementsAttr>(c.getValue()) : mlir::SplatElementsAttr();
  if (!splat || !llvm::isa<mlir::FloatType>(splat.getElementType()))
    return std::nullopt;
  return splat.getSplatValue<llvm::APFloat>().convertToDouble();
}

ScalarArity scalarArity(ScalarOpKind kind) {
  switch (kind) {
#define RFUSE_UNARY(K, FN) case ScalarOpKind::K: return ScalarArity::Unary;
#define RFUSE_BINARY(K, FN) case ScalarOpKind::K: return ScalarArity::Binary;
#define RFUSE_COMPARE(K, FN) case ScalarOpKind::K: return ScalarArity::Compare;
#define RFUSE_LOGIC1(K, FN) case ScalarOpKind::K: return ScalarArity::Logic1;
#define RFUSE_LOGIC2(K, FN) case ScalarOpKind::K: return ScalarArity::Logic2;
#include "rfuse/IR/ScalarOps.def"
  case ScalarOpKind::Select: return ScalarArity::Select;
  }
  return ScalarArity::Unary;
}

const char *scalarFunctionName(ScalarOpKind kind) {
  switch (kind) {
#define RFUSE_UNARY(K, FN) case ScalarOpKind::K: return #FN;
#define RFUSE_BINARY(K, FN) case ScalarOpKind::K: return #FN;
#define RFUSE_COMPARE(K, FN) case ScalarOpKind::K: return #FN;
#define RFUSE_LOGIC1(K, FN) case ScalarOpKind::K: return #FN;
#define RFUSE_LOGIC2(K, FN) case ScalarOpKind::K: return #FN;
#include "rfuse/IR/ScalarOps.def"
  case ScalarOpKind::Select: return "rf_select";
  }
  return "";
}

} // namespace rfuse
