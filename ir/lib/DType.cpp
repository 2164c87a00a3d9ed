#include "rfuse/IR/DType.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/IR/ScalarOpKind.h"

namespace rfuse {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::I1: return "i1";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  }
  return "?";
}

bool parseDType(const std::string &n, DType &out) {
  static const struct { const char *a, *b; DType t; } names[] = {
      {"f32", "float32", DType::F32}, {"f64", "float64", DType::F64},
      {"f16", "float16", DType::F16}, {"bf16", "bfloat16", DType::BF16},
      {"i1", "bool", DType::I1},      {"i32", "int32", DType::I32},
      {"i64", "int64", DType::I64}};
  for (const auto &e : names)
    if (n == e.a || n == e.b) {
      out = e.t;
      return true;
    }
  return false;
}

int dtypeSize(DType t) {
  switch (t) {
  case DType::F64: case DType::I64: return 8;
  case DType::F32: case DType::I32: return 4;
  case DType::F16: case DType::BF16: return 2;
  case DType::I1: return 1;
  }
  return 0;
}

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
