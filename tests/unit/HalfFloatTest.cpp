// The runtime's own float16 / bfloat16 conversions (HalfFloat.h, no LLVM) against LLVM's APFloat,
// which rounds to nearest even exactly as the hardware does: every 16-bit pattern back to double,
// and doubles chosen to hit every rounding case (ties, subnormals, overflow, NaN) to 16 bits.
#include "HalfFloat.h"

#include "llvm/ADT/APFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace rfuse::runtime;

namespace {

const llvm::fltSemantics &semantics(bool bf16) { return bf16 ? llvm::APFloat::BFloat() : llvm::APFloat::IEEEhalf(); }

uint16_t apRound(double d, bool bf16) {
  llvm::APFloat x(d);
  bool lost;
  x.convert(semantics(bf16), llvm::APFloat::rmNearestTiesToEven, &lost);
  return (uint16_t)x.bitcastToAPInt().getZExtValue();
}

double apValue(uint16_t bits, bool bf16) {
  llvm::APFloat x(semantics(bf16), llvm::APInt(16, bits));
  bool lost;
  x.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return x.convertToDouble();
}

bool isNaNBits(uint16_t b, bool bf16) {
  return bf16 ? (b & 0x7f80) == 0x7f80 && (b & 0x7f) : (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
}

TEST(HalfFloat, EveryPatternReadsAsAPFloatReadsIt) {
  for (bool bf16 : {false, true})
    for (uint32_t b = 0; b < 65536; ++b) {
      double mine = halfBitsToDouble((uint16_t)b, bf16), ref = apValue((uint16_t)b, bf16);
      if (std::isnan(ref)) {
        EXPECT_TRUE(std::isnan(mine)) << b;
        continue;
      }
      ASSERT_EQ(mine, ref) << (bf16 ? "bf16 " : "f16 ") << b;
      ASSERT_EQ(std::signbit(mine), std::signbit(ref)) << b;
    }
}

TEST(HalfFloat, DoublesRoundToNearestEvenAsAPFloatRounds) {
  std::mt19937_64 rng(7);
  for (bool bf16 : {false, true}) {
    std::vector<double> values = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-300, -1e-300, 1e300, 65504.0, 65519.99,
                                  65520.0, 65536.0, 5.960464477539063e-08, 2.9802322387695312e-08,
                                  2.98023223876953125e-08 * 1.0000001, 6.103515625e-05, 3.3895313892515355e38};
    for (uint32_t b = 0; b < 65536; ++b) {
      double v = apValue((uint16_t)b, bf16), next = apValue((uint16_t)(b + 1), bf16);
      if (!std::isfinite(v) || !std::isfinite(next) || std::signbit(v) != std::signbit(next))
        continue;
      double mid = (v + next) / 2; // the tie, exactly, and either side of it
      values.insert(values.end(), {v, mid, std::nextafter(mid, v), std::nextafter(mid, next)});
    }
    std::uniform_real_distribution<double> uni(-1, 1);
    for (int k = 0; k < 20000; ++k)
      values.push_back(uni(rng) * std::pow(2.0, (int)(rng() % 80) - 40));
    for (double d : values) {
      uint16_t mine = doubleToHalfBits(d, bf16), ref = apRound(d, bf16);
      if (isNaNBits(ref, bf16)) {
        EXPECT_TRUE(isNaNBits(mine, bf16)) << d;
        continue;
      }
      ASSERT_EQ(mine, ref) << (bf16 ? "bf16 of " : "f16 of ") << std::hexfloat << d;
    }
  }
}

} // namespace
