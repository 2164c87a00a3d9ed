#include "rfuse/IR/DType.h"

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

} // namespace rfuse
