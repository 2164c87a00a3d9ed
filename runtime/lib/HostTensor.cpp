#include "rfuse/Runtime/HostTensor.h"

#include "rfuse/IR/ScalarOps.h"

#include "HalfFloat.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace rfuse {

int64_t HostTensor::numel() const {
  // A zero dim makes the tensor empty whatever the others are (a .npy header may pair 0 with
  // dims whose product overflows: the fuzzer found one).
  for (int64_t d : shape)
    if (d == 0)
      return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

HostTensor::HostTensor(DType dt, std::vector<int64_t> s) : dtype(dt), shape(std::move(s)) {
  if (rfuse::isFloat(dtype))
    f.assign(numel(), 0.0);
  else
    i.assign(numel(), 0);
}

HostTensor HostTensor::fromDoubles(DType dt, std::vector<int64_t> s,
                                   const std::vector<double> &values) {
  HostTensor t(dt, std::move(s));
  for (int64_t k = 0, n = t.numel(); k < n; ++k)
    t.set(k, values.at(k));
  return t;
}

void HostTensor::set(int64_t k, double v) {
  if (isFloat())
    f[k] = roundToDType(dtype, v);
  else
    i[k] = toIntegerDType(dtype, v);
}

HostTensor HostTensor::castTo(DType to) const {
  HostTensor out(to, shape);
  for (int64_t k = 0, n = numel(); k < n; ++k) {
    if (!isFloat() && !rfuse::isFloat(to))
      out.i[k] = wrapInteger(to, i[k]);
    else
      out.set(k, get(k));
  }
  return out;
}

std::vector<char> HostTensor::toBytes() const {
  std::vector<char> b((size_t)numel() * dtypeSize(dtype));
  writeBytes(b.data());
  return b;
}

void HostTensor::writeBytes(void *dst) const {
  int size = dtypeSize(dtype);
  if (dtype == DType::F64 || dtype == DType::I64) {
    std::memcpy(dst, dtype == DType::F64 ? (const void *)f.data() : (const void *)i.data(), (size_t)numel() * 8);
    return;
  }
  for (int64_t k = 0; k < numel(); ++k) {
    char *p = (char *)dst + k * size;
    switch (dtype) {
    case DType::F32: { float v = (float)f[k]; std::memcpy(p, &v, 4); break; }
    case DType::F64: std::memcpy(p, &f[k], 8); break;
    case DType::F16: case DType::BF16: {
      uint16_t bits = runtime::doubleToHalfBits(f[k], dtype == DType::BF16);
      std::memcpy(p, &bits, 2);
      break;
    }
    case DType::I1: *p = i[k] != 0; break;
    case DType::I32: { int32_t v = (int32_t)i[k]; std::memcpy(p, &v, 4); break; }
    case DType::I64: std::memcpy(p, &i[k], 8); break;
    }
  }
}

HostTensor HostTensor::fromBytes(DType dt, std::vector<int64_t> shape, const char *data) {
  HostTensor t(dt, std::move(shape));
  int size = dtypeSize(dt);
  for (int64_t k = 0; k < t.numel(); ++k) {
    const char *p = data + k * size;
    switch (dt) {
    case DType::F32: { float v; std::memcpy(&v, p, 4); t.f[k] = v; break; }
    case DType::F64: std::memcpy(&t.f[k], p, 8); break;
    case DType::F16: case DType::BF16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      t.f[k] = runtime::halfBitsToDouble(bits, dt == DType::BF16);
      break;
    }
    case DType::I1: t.i[k] = *p != 0; break;
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); t.i[k] = v; break; }
    case DType::I64: std::memcpy(&t.i[k], p, 8); break;
    }
  }
  return t;
}

std::string HostTensor::typeString() const {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + dtypeName(dtype) + ">";
}

double roundToDType(DType t, double v) {
  switch (t) {
  case DType::F64:
    return v;
  case DType::F32:
    return (double)(float)v;
  case DType::F16:
  case DType::BF16: {
    bool bf16 = t == DType::BF16;
    return runtime::halfBitsToDouble(runtime::doubleToHalfBits(v, bf16), bf16);
  }
  default:
    return v;
  }
}

int64_t toIntegerDType(DType t, double v) {
  if (t == DType::I1)
    return scalar::rf_to_bool(v);
  if (t == DType::I32)
    return scalar::rf_float_to_int<int32_t>(v);
  return scalar::rf_float_to_int<int64_t>(v);
}

int64_t wrapInteger(DType t, int64_t v) {
  if (t == DType::I1)
    return v != 0;
  if (t == DType::I32)
    return (int32_t)(uint32_t)(uint64_t)v;
  return v;
}

HostTensor randomHostTensor(DType dtype, std::vector<int64_t> shape, std::mt19937_64 &rng) {
  HostTensor t(dtype, std::move(shape));
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (int64_t k = 0; k < t.numel(); ++k) {
    if (t.isFloat()) {
      double v = uni(rng);
      t.set(k, v == 0.0 ? 0.5 : v);
    } else if (dtype == DType::I1) {
      t.i[k] = rng() & 1;
    } else {
      t.i[k] = (int64_t)(rng() % 19) - 9;
    }
  }
  return t;
}

std::string outputSummary(size_t index, const HostTensor &r, unsigned first) {
  double sum = 0, asum = 0;
  for (int64_t k = 0; k < r.numel(); ++k) {
    sum += r.get(k);
    asum += std::fabs(r.get(k));
  }
  char buf[96];
  std::string s = "output " + std::to_string(index) + ": " + r.typeString() + " shape [";
  for (size_t d = 0; d < r.shape.size(); ++d)
    s += (d ? ", " : "") + std::to_string(r.shape[d]);
  std::snprintf(buf, sizeof buf, "] sum %.17g abs_sum %.17g\n  first:", sum, asum);
  s += buf;
  for (int64_t k = 0; k < std::min<int64_t>(first, r.numel()); ++k) {
    std::snprintf(buf, sizeof buf, " %.9g", r.get(k));
    s += buf;
  }
  return s + "\n";
}

} // namespace rfuse
