// float16 and bfloat16 bits to and from float and double, rounding to nearest even as the
// hardware does. Plain C++ (the runtime's tensors and the ahead-of-time runtime use it).
#ifndef RFUSE_RUNTIME_HALFFLOAT_H
#define RFUSE_RUNTIME_HALFFLOAT_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace rfuse::runtime {

// Doubles round to f16/bf16 through float with round-to-odd (truncate, then set the last bit when
// inexact): float has more than two bits over either, so the second rounding is exact (no double
// rounding), and the result is the nearest value (LLVM's APFloat agrees: tests/unit/HalfFloatTest.cpp).
inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float toFloatRoundToOdd(double d) {
  float f = (float)d;
  if (!std::isfinite(f) || (double)f == d)
    return f;
  uint32_t u = floatBits(f);
  if (std::fabs((double)f) > std::fabs(d))
    u -= 1; // toward zero (same sign, magnitude one ulp down)
  return bitsFloat(u | 1u);
}

inline uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40); // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

inline uint16_t floatToHalf(float f) {
  uint32_t u = floatBits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return (uint16_t)(sign | 0x7e00u);
  if (a >= 0x477ff000u) // rounds to >= 65520: infinity
    return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) { // below 2^-14: a subnormal half (or zero)
    float m = bitsFloat(a) * 16777216.0f; // exact: * 2^24, so the value in units of 2^-24
    uint32_t q = (uint32_t)std::nearbyint(m); // round to nearest even (the default mode)
    return (uint16_t)(sign | q);
  }
  uint32_t mant = a & 0x7fffffu, exp = (a >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h;
  return (uint16_t)(sign | h);
}

inline float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0)
    return bitsFloat(sign) + (sign ? -1.0f : 1.0f) * (float)mant * (1.0f / 16777216.0f);
  if (exp == 31)
    return bitsFloat(sign | 0x7f800000u | (mant << 13));
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

inline float bf16ToFloat(uint16_t b) { return bitsFloat((uint32_t)b << 16); }

/// The nearest float16 (`bf16` false) or bfloat16 to `d`, as bits.
inline uint16_t doubleToHalfBits(double d, bool bf16) {
  float f = toFloatRoundToOdd(d);
  return bf16 ? floatToBf16(f) : floatToHalf(f);
}
/// The value of float16 / bfloat16 bits (exact in double).
inline double halfBitsToDouble(uint16_t h, bool bf16) { return bf16 ? bf16ToFloat(h) : halfToFloat(h); }

} // namespace rfuse::runtime

#endif
