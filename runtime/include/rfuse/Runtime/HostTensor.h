// HostTensor: a dense, row-major tensor in host memory — the currency of the interpreter, the
// tools and the tests. Plain C++ (no MLIR) so that any layer may hold one.
#ifndef RFUSE_RUNTIME_HOSTTENSOR_H
#define RFUSE_RUNTIME_HOSTTENSOR_H

#include "rfuse/IR/DType.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace rfuse {

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Values of float dtypes. Every f32/f16/bf16 value is exactly representable as a double, so
  /// one storage serves all float dtypes; values are kept rounded to `dtype`.
  std::vector<double> f;
  /// Values of i1/i32/i64 dtypes (i1 as 0/1).
  std::vector<int64_t> i;

  HostTensor() = default;
  /// A tensor of the given shape and dtype, filled with zeros.
  HostTensor(DType dtype, std::vector<int64_t> shape);
  /// A float tensor from values (rounded to `dtype`).
  static HostTensor fromDoubles(DType dtype, std::vector<int64_t> shape,
                                const std::vector<double> &values);

  int64_t numel() const;
  int64_t rank() const { return (int64_t)shape.size(); }
  bool isFloat() const { return rfuse::isFloat(dtype); }
  /// Element k (row-major) as a double, whatever the dtype.
  double get(int64_t k) const { return isFloat() ? f[k] : (double)i[k]; }
  /// Stores v at k, rounded (floats) or converted (integers: truncation, i1: v != 0) to dtype.
  void set(int64_t k, double v);
  /// The same values converted to another dtype (the rules of rfuse.cast).
  HostTensor castTo(DType to) const;
  /// The values in dtype's own binary format (little-endian; f16/bf16 as their 16 bits, i1 as
  /// one byte): what device buffers, JIT-compiled code and .npy files hold.
  std::vector<char> toBytes() const;
  /// The same, written to `dst` (numel() * dtypeSize(dtype) bytes).
  void writeBytes(void *dst) const;
  /// The inverse of toBytes(): `data` holds numel(shape) values of `dtype`.
  static HostTensor fromBytes(DType dtype, std::vector<int64_t> shape, const char *data);
  /// e.g. "tensor<3x4xf32>".
  std::string typeString() const;
};

/// Tensor memory a caller owns, in dtype's binary format (as HostTensor::toBytes; f64 as
/// doubles): how a front end hands its own arrays (R's doubles) to a backend that can read and
/// write them in place.
struct TensorRef {
  DType dtype = DType::F64;
  std::vector<int64_t> shape;
  void *data = nullptr;
};

/// What the tools fill a program's arguments with for `--random --seed N` (rfuse-run and
/// rfuse-aot-run agree, so their outputs compare line by line): floats uniform in [-1, 1) (never
/// zero), i1 0/1, integers in -9..9, drawn in order from std::mt19937_64(seed) over the arguments.
HostTensor randomHostTensor(DType dtype, std::vector<int64_t> shape, std::mt19937_64 &rng);
/// The tools' per-output summary: "output K: tensor<...> shape [...] sum S abs_sum A" and a
/// line of the first `first` values (each ending in a newline).
std::string outputSummary(size_t index, const HostTensor &t, unsigned first = 6);

/// Rounds a double to the nearest value of float dtype `t` (identity for f64).
double roundToDType(DType t, double v);
/// Converts per rfuse.cast's rules to integer dtype `t`: truncation toward zero, saturating,
/// NaN to 0; i1 is v != 0.
int64_t toIntegerDType(DType t, double v);
/// Wraps an integer to the range of `t` (two's complement for i32, 0/1 for i1).
int64_t wrapInteger(DType t, int64_t v);

} // namespace rfuse

#endif
