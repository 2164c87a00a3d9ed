// The cache key of a jitted call: what of its arguments selects a compiled program. Front ends
// (the R glue) describe each argument; the key must be injective — two different descriptions
// never share a key, or one signature would run another's program.
#ifndef RFUSE_FRONTEND_CALLKEY_H
#define RFUSE_FRONTEND_CALLKEY_H

#include <cstdint>
#include <string>
#include <vector>

namespace rfuse {

struct ArgSignature {
  enum class Kind { Value, Tensor, Static };
  Kind kind = Kind::Value;
  std::string name;
  /// A value's R type ("double", "integer", "logical", ...); a tensor's "dtype@device".
  std::string type;
  /// Dims (R's dim attribute, or a tensor's) when present; otherwise `length`. A vector and a
  /// 1-d array of the same length are different signatures.
  bool hasDims = false;
  std::vector<int64_t> dims;
  int64_t length = 0;
};

/// The key of a call with these arguments (a static argument's value is appended by the caller).
/// Readable ("x:double[3];y:float32@cuda{d2x3};"), with the characters that structure it
/// percent-encoded in names and types.
std::string callKey(const std::vector<ArgSignature> &args);

} // namespace rfuse

#endif
