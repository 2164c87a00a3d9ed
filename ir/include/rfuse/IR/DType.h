// Element types rfuse tensors carry. Plain C++ (no MLIR) so every layer can name them.
#ifndef RFUSE_IR_DTYPE_H
#define RFUSE_IR_DTYPE_H

#include <cstdint>
#include <string>

namespace rfuse {

enum class DType { F32, F64, F16, BF16, I1, I32, I64 };

inline bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}
/// "f32", "f64", "f16", "bf16", "i1", "i32", "i64" (MLIR's spelling).
const char *dtypeName(DType t);
/// Parses dtypeName's spelling; also accepts "float32", "float64", "float16", "bfloat16",
/// "bool", "int32", "int64". Returns false when the name is unknown.
bool parseDType(const std::string &name, DType &out);
/// Storage size in bytes (i1 is stored as one byte).
int dtypeSize(DType t);

} // namespace rfuse

#endif
