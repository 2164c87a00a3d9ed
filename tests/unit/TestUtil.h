// Shared helpers of rfuse's unit tests: random tensors (never zeros), error measures, module text.
#ifndef RFUSE_TESTS_TESTUTIL_H
#define RFUSE_TESTS_TESTUTIL_H

#include "rfuse/Runtime/HostTensor.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace rfuse::test {

/// Uniform values in [lo, hi), resampled away from zero (|v| >= 1e-3) so that unwritten or
/// misindexed outputs cannot hide behind zeros.
inline HostTensor randomTensor(DType dt, std::vector<int64_t> shape, std::mt19937_64 &rng,
                               double lo = -2.0, double hi = 2.0) {
  HostTensor t(dt, std::move(shape));
  std::uniform_real_distribution<double> uni(lo, hi);
  for (int64_t k = 0; k < t.numel(); ++k) {
    double v;
    do
      v = uni(rng);
    while (std::fabs(v) < 1e-3);
    if (t.isFloat())
      t.set(k, v);
    else if (dt == DType::I1)
      t.i[k] = v > (lo + hi) / 2;
    else
      t.i[k] = (int64_t)std::lround(v * 10);
  }
  return t;
}

/// max_k |a_k - b_k| / max(|b_k|, floor): a relative error that tolerates values near zero.
inline double maxRelError(const std::vector<double> &a, const std::vector<double> &b,
                          double floor = 1e-6) {
  double m = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    if (std::isnan(a[k]) != std::isnan(b[k]))
      return INFINITY;
    if (std::isnan(a[k]))
      continue;
    m = std::max(m, std::fabs(a[k] - b[k]) / std::max(std::fabs(b[k]), floor));
  }
  return m;
}

/// ||a - b|| / ||b|| over the float values (shapes must match; NaN anywhere gives NaN, which
/// fails any comparison).
inline double relativeL2(const HostTensor &a, const HostTensor &b) {
  if (a.shape != b.shape || a.f.size() != b.f.size())
    return INFINITY;
  double num = 0, den = 0;
  for (size_t k = 0; k < a.f.size(); ++k) {
    num += (a.f[k] - b.f[k]) * (a.f[k] - b.f[k]);
    den += b.f[k] * b.f[k];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

/// "tensor<3x4xf32>"
inline std::string tensorType(const std::vector<int64_t> &shape, const std::string &elem) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + elem + ">";
}

} // namespace rfuse::test

#endif
