// Pointwise scalar semantics of every rfuse op, written once, with the reduction kinds and the
// saturating float-to-int bounds.
//
// This header is plain C++ that compiles as host code (the reference interpreter, tests), under
// NVRTC (codegen embeds this file's text at the top of each generated kernel), and over the CPU
// lowering's IR-building scalar type (codegen/lib/ScalarIR.h), which instantiates these same
// templates to emit arith/math ops: so the interpreter, the GPU and the CPU compute each op from
// one definition. Keep it free of anything but <cmath> on the host and CUDA's built-in math on the
// device, write choices as rf_if (not ?:, which a builder type cannot overload) and call math
// through RF_M (unqualified on the host: std:: for numbers, the builder's by argument-dependent
// lookup). Functions are templates over the compute type (float for f32/f16/bf16 storage, double
// for f64).
#ifndef RFUSE_IR_SCALAROPS_H
#define RFUSE_IR_SCALAROPS_H

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define RF_FN __device__ __forceinline__
#define RF_M(f) ::f
#define RF_INF __longlong_as_double(0x7ff0000000000000LL)
#else
#include <cmath>
#define RF_FN inline
#define RF_M(f) f
#define RF_INF HUGE_VAL
#endif

namespace rfuse {
namespace scalar {

#if !(defined(__CUDACC_RTC__) || defined(__CUDACC__))
using std::acos;
using std::asin;
using std::atan;
using std::atan2;
using std::cos;
using std::erfc;
using std::exp;
using std::exp2;
using std::fma;
using std::lgamma;
using std::log;
using std::pow;
using std::sin;
using std::rint;
using std::sqrt;
using std::tan;
using std::tanh;
using std::tgamma;
#endif

// c ? a : b. (Builder types overload it.)
template <class C, class T> RF_FN T rf_if(C c, T a, T b) { return c ? a : b; }
// 1 / x; on the GPU in f32 the device reciprocal (MUFU.RCP: 2 ulp, no Newton steps).
template <class T> RF_FN T rf_rcp(T x) { return T(1) / x; }
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
template <> RF_FN float rf_rcp<float>(float x) { return __fdividef(1.0f, x); }
#endif

template <class T> RF_FN T rf_neg(T x) { return -x; }
template <class T> RF_FN T rf_abs(T x) { return rf_if(x < T(0), -x, x); }
template <class T> RF_FN T rf_exp(T x) { return RF_M(exp)(x); }
template <class T> RF_FN T rf_log(T x) { return RF_M(log)(x); }
template <class T> RF_FN T rf_sqrt(T x) { return RF_M(sqrt)(x); }
template <class T> RF_FN T rf_rsqrt(T x) { return T(1) / RF_M(sqrt)(x); }
template <class T> RF_FN T rf_tanh(T x) { return RF_M(tanh)(x); }
template <class T> RF_FN T rf_sigmoid(T x) { return T(1) / (T(1) + RF_M(exp)(-x)); }
// relu(NaN) is NaN, as in PyTorch.
template <class T> RF_FN T rf_relu(T x) { return rf_if(x < T(0), T(0), x); }
// erfc. In f32 a rational approximation in t = 1 / (1 + |z|/2) (Numerical Recipes' erfcc:
// relative error 1.2e-7 before rounding), its exponent taken base 2 (coefficients times
// log2 e): about a third of the instructions of CUDA's erfcf. GELU through it, with the device
// reciprocal's and exp2's 2 ulp, has relative error <= 1.5e-6 for |x| <= 3 and 4.6e-6 for
// |x| <= 6, against 0.85e-6 and 2.8e-6 through libm's erfcf (in f32 both are dominated by the
// rounding of x / sqrt 2; 1 + erf instead loses 1e-3 at x = -4). W4 (layernorm + GELU) is
// instruction-bound on an H200, so this matters there (benchmarks/RESULTS.md, runs 17-20).
template <class T> RF_FN T rf_erfc_rational(T x) {
  T z = rf_if(x < T(0.0f), -x, x);
  T t = rf_rcp<T>(T(1.0f) + T(0.5f) * z);
  T p = t * T(0.246517301f) - T(1.18611491f);
  p = p * t + T(2.14747453f);
  p = p * t - T(1.63775313f);
  p = p * t + T(0.402321577f);
  p = p * t - T(0.268756866f);
  p = p * t + T(0.139630049f);
  p = p * t + T(0.539700627f);
  p = p * t + T(1.44272923f);
  p = p * t - T(1.82574821f);
  T r = t * RF_M(exp2)(RF_M(fma)(-z, z * T(1.44269504f), p)); // erfc = t 2^(log2e (p - z^2))
  return rf_if(x >= T(0.0f), r, T(2.0f) - r);                   // NaN: 2 - NaN
}
template <class T> RF_FN T rf_erfc(T x) { return RF_M(erfc)(x); }
template <> RF_FN float rf_erfc<float>(float x) { return rf_erfc_rational<float>(x); }

// gelu(x) = x * Phi(x) = 0.5 x erfc(-x / sqrt 2). erfc, not 1 + erf: for negative x the latter
// cancels catastrophically (at x = -4 it loses 4 of float's 7 digits).
template <class T> RF_FN T rf_gelu_erf(T x) {
  return T(0.5) * x * rf_erfc<T>(-x * T(0.70710678118654752440));
}
// gelu, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
// the identical x / (1 + exp(-2u)), which does not cancel for negative x.
template <class T> RF_FN T rf_gelu_tanh(T x) {
  T u = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
  return x / (T(1) + RF_M(exp)(T(-2) * u));
}
// Their derivatives (reverse-mode differentiation): Phi(x) + x phi(x), and that of the tanh form,
// 0.5 (1 + t) + 0.5 x (1 - t^2) u'(x) with t = tanh(u).
template <class T> RF_FN T rf_gelu_erf_grad(T x) {
  return T(0.5) * rf_erfc<T>(-x * T(0.70710678118654752440)) +
         x * T(0.39894228040143267794) * RF_M(exp)(T(-0.5) * x * x);
}
template <class T> RF_FN T rf_gelu_tanh_grad(T x) {
  T u = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
  T t = RF_M(tanh)(u);
  return T(0.5) * (T(1) + t) +
         T(0.5) * x * (T(1) - t * t) * T(0.79788456080286535588) * (T(1) + T(0.134145) * x * x);
}
template <class T> RF_FN T rf_sin(T x) { return RF_M(sin)(x); }
template <class T> RF_FN T rf_cos(T x) { return RF_M(cos)(x); }
// The largest integer not above x (R's floor(); %/% and %% are built from it).
template <class T> RF_FN T rf_floor(T x) { return RF_M(floor)(x); }
// The nearest integer, ties to even (R's round(x) with digits = 0: IEC 60559).
template <class T> RF_FN T rf_round_even(T x) { return RF_M(rint)(x); }
template <class T> RF_FN T rf_tan(T x) { return RF_M(tan)(x); }
template <class T> RF_FN T rf_atan(T x) { return RF_M(atan)(x); }
template <class T> RF_FN T rf_asin(T x) { return RF_M(asin)(x); }
template <class T> RF_FN T rf_acos(T x) { return RF_M(acos)(x); }
template <class T> RF_FN T rf_atan2(T y, T x) { return RF_M(atan2)(y, x); }
// Gamma and its logarithm (of |Gamma|), libm's (R computes its own, to the same few ulps).
template <class T> RF_FN T rf_tgamma(T x) { return RF_M(tgamma)(x); }
template <class T> RF_FN T rf_lgamma(T x) { return RF_M(lgamma)(x); }
// digamma (psi) and trigamma (psi'), as R's to a few ulps: x < 0 reflected (psi(x) =
// psi(1 - x) - pi / tan(pi x), psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x), with the angle reduced
// to x - floor(x), exactly), shifted up by 10 (psi(y) = psi(y + 10) - sum 1 / (y + k),
// psi'(y) = psi'(y + 10) + sum 1 / (y + k)^2) and the asymptotic series at y + 10 >= 10 (seven
// Bernoulli terms: the next is below 1e-17 relative). At the poles, 0, -1, -2, ...: digamma NaN,
// trigamma Inf (R's).
template <class T> RF_FN T rf_digamma(T x) {
  T y = rf_if(x < T(0), T(1) - x, x);
  T acc = T(0);
  for (int k = 0; k < 10; ++k) acc = acc + T(1) / (y + T(k));
  T z = y + T(10), r = T(1) / z, r2 = r * r;
  T series = r2 * (T(1.0 / 12) - r2 * (T(1.0 / 120) - r2 * (T(1.0 / 252) - r2 * (T(1.0 / 240) -
             r2 * (T(1.0 / 132) - r2 * (T(691.0 / 32760) - r2 * T(1.0 / 12)))))));
  T psi = RF_M(log)(z) - T(0.5) * r - series - acc;
  T pi = T(3.14159265358979323846);
  T frac = x - RF_M(floor)(x);
  T reflected = psi - pi / RF_M(tan)(pi * frac);
  T inf = T(RF_INF);
  return rf_if(x < T(0), rf_if(frac == T(0), inf - inf, reflected), rf_if(x == T(0), inf - inf, psi));
}
template <class T> RF_FN T rf_trigamma(T x) {
  T y = rf_if(x < T(0), T(1) - x, x);
  T acc = T(0);
  for (int k = 0; k < 10; ++k) acc = acc + T(1) / ((y + T(k)) * (y + T(k)));
  T z = y + T(10), r = T(1) / z, r2 = r * r;
  T series = r * (T(1) + r * (T(0.5) + r * (T(1.0 / 6) - r2 * (T(1.0 / 30) - r2 * (T(1.0 / 42) -
             r2 * (T(1.0 / 30) - r2 * (T(5.0 / 66) - r2 * (T(691.0 / 2730) - r2 * T(7.0 / 6)))))))));
  T psi1 = series + acc;
  T pi = T(3.14159265358979323846);
  T frac = x - RF_M(floor)(x);
  T s = RF_M(sin)(pi * frac);
  T reflected = pi * pi / (s * s) - psi1;
  T inf = T(RF_INF);
  return rf_if(x < T(0), rf_if(frac == T(0), inf, reflected), rf_if(x == T(0), inf, psi1));
}
// The standard normal quantile: Wichura's AS 241 (PPND16), the algorithm of R's qnorm, with R's
// boundaries (0 -> -Inf, 1 -> Inf, outside [0, 1] NaN). The three regions are all computed
// and one chosen (builder types cannot branch).
template <class T> RF_FN T rf_qnorm(T p) {
  T q = p - T(0.5);
  T r = T(0.180625) - q * q;
  T central = q * (((((((r * T(2509.0809287301226727) + T(33430.575583588128105)) * r + T(67265.770927008700853)) * r +
                       T(45921.953931549871457)) * r + T(13731.693765509461125)) * r + T(1971.5909503065514427)) * r +
                    T(133.14166789178437745)) * r + T(3.387132872796366608)) /
              (((((((r * T(5226.495278852545925) + T(28729.085735721942674)) * r + T(39307.89580009271061)) * r +
                   T(21213.794301586595867)) * r + T(5394.1960214247511077)) * r + T(687.1870074920579083)) * r +
                T(42.313330701600911252)) * r + T(1.0));
  T tail = rf_if(q < T(0.0), p, T(1.0) - p); // 0 only at the boundaries, answered below
  T s = RF_M(sqrt)(-RF_M(log)(tail));
  T a = s - T(1.6);
  T near = (((((((a * T(7.7454501427834140764e-4) + T(0.0227238449892691845833)) * a + T(0.24178072517745061177)) * a +
                T(1.27045825245236838258)) * a + T(3.64784832476320460504)) * a + T(5.7694972214606914055)) * a +
             T(4.6303378461565452959)) * a + T(1.42343711074968357734)) /
           (((((((a * T(1.05075007164441684324e-9) + T(5.475938084995344946e-4)) * a + T(0.0151986665636164571966)) * a +
                T(0.14810397642748007459)) * a + T(0.68976733498510000455)) * a + T(1.6763848301838038494)) * a +
             T(2.05319162663775882187)) * a + T(1.0));
  T b = s - T(5.0);
  T far = (((((((b * T(2.01033439929228813265e-7) + T(2.71155556874348757815e-5)) * b + T(0.0012426609473880784386)) * b +
               T(0.026532189526576123093)) * b + T(0.29656057182850489123)) * b + T(1.7848265399172913358)) * b +
            T(5.4637849111641143699)) * b + T(6.6579046435011037772)) /
          (((((((b * T(2.04426310338993978564e-15) + T(1.4215117583164458887e-7)) * b + T(1.8463183175100546818e-5)) * b +
               T(7.868691311456132591e-4)) * b + T(0.0148753612908506148525)) * b + T(0.13692988092273580531)) * b +
            T(0.59983220655588793769)) * b + T(1.0));
  T v = rf_if(s <= T(5.0), near, far);
  v = rf_if(q < T(0.0), -v, v);
  v = rf_if(rf_abs(q) <= T(0.425), central, v);
  T inf = T(RF_INF);
  v = rf_if(p == T(0.0), -inf, rf_if(p == T(1.0), inf, v));
  return rf_if(p < T(0.0) || p > T(1.0) || p != p, inf - inf, v);
}

template <class T> RF_FN T rf_add(T a, T b) { return a + b; }
template <class T> RF_FN T rf_sub(T a, T b) { return a - b; }
template <class T> RF_FN T rf_mul(T a, T b) { return a * b; }
template <class T> RF_FN T rf_div(T a, T b) { return a / b; }
template <class T> RF_FN T rf_pow(T a, T b) { return RF_M(pow)(a, b); }
// max/min propagate NaN from either side (R's pmax/pmin and PyTorch's maximum/minimum do).
// The primitives: IEEE 754-2019 maximum / minimum (builder types map them to their own).
template <class T> RF_FN T rf_maximum(T a, T b) { return rf_if(a > b || a != a, a, b); }
template <class T> RF_FN T rf_minimum(T a, T b) { return rf_if(a < b || a != a, a, b); }
template <class T> RF_FN T rf_max(T a, T b) { return rf_maximum(a, b); }
template <class T> RF_FN T rf_min(T a, T b) { return rf_minimum(a, b); }

template <class T> RF_FN auto rf_eq(T a, T b) -> decltype(a == b) { return a == b; }
template <class T> RF_FN auto rf_ne(T a, T b) -> decltype(a != b) { return a != b; }
template <class T> RF_FN auto rf_lt(T a, T b) -> decltype(a < b) { return a < b; }
template <class T> RF_FN auto rf_le(T a, T b) -> decltype(a <= b) { return a <= b; }
template <class T> RF_FN auto rf_gt(T a, T b) -> decltype(a > b) { return a > b; }
template <class T> RF_FN auto rf_ge(T a, T b) -> decltype(a >= b) { return a >= b; }

template <class B> RF_FN B rf_not(B a) { return !a; }
template <class B> RF_FN B rf_and(B a, B b) { return a && b; }
template <class B> RF_FN B rf_or(B a, B b) { return a || b; }

template <class C, class T> RF_FN T rf_select(C c, T a, T b) { return rf_if(c, a, b); }

// rfuse.cast from a float to an integer type I: truncation toward zero, saturating at I's
// range, NaN to 0 (C++ leaves all three undefined). To i1: v != 0. The bounds are the doubles
// nearest I's range that convert exactly (2^63 - 1 is not a double: 2^63 - 1024 is).
template <class I> struct rf_int_range;
template <> struct rf_int_range<int> {
  static constexpr double lo = -2147483648.0, hi = 2147483647.0;
};
template <> struct rf_int_range<long long> {
  static constexpr double lo = -9223372036854775808.0, hi = 9223372036854774784.0;
};
template <> struct rf_int_range<long> : rf_int_range<long long> {};
// v clamped to [lo, hi], NaN to 0: what rf_float_to_int truncates.
template <class D> RF_FN D rf_saturate(D v, D lo, D hi) {
  D c = rf_if(v <= lo, lo, v);
  c = rf_if(c >= hi, hi, c);
  return rf_if(v != v, D(0), c);
}
template <class I> RF_FN I rf_float_to_int(double v) {
  return I(rf_saturate<double>(v, rf_int_range<I>::lo, rf_int_range<I>::hi));
}
RF_FN bool rf_to_bool(double v) { return v != 0.0; }

// Reductions: sum, max, min (NaN-propagating, as rf_max / rf_min), their identities (what a
// reduction over nothing gives) and combining step.
enum rf_reduce_kind { RF_REDUCE_SUM = 0, RF_REDUCE_MAX = 1, RF_REDUCE_MIN = 2 };
template <int K, class T> RF_FN T rf_reduce_combine(T a, T b) {
  return K == RF_REDUCE_SUM ? a + b : K == RF_REDUCE_MAX ? rf_max<T>(a, b) : rf_min<T>(a, b);
}
template <int K> RF_FN double rf_reduce_identity_f() {
  return K == RF_REDUCE_SUM ? 0.0 : K == RF_REDUCE_MAX ? -RF_INF : RF_INF;
}
template <int K> RF_FN long long rf_reduce_identity_i(bool i32) {
  return K == RF_REDUCE_SUM ? 0LL
         : K == RF_REDUCE_MAX ? (i32 ? -2147483647LL - 1 : -9223372036854775807LL - 1)
                              : (i32 ? 2147483647LL : 9223372036854775807LL);
}

// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11; cuRAND's and PyTorch's generator): the block
// at counter c under key (k0, k1), in place. rfuse.random_uniform's element i is word 0 of the
// block at (i mod 2^32, i div 2^32, 0, 0), its top 24 bits times 2^-24.
RF_FN void rf_philox4x32_10(unsigned int c[4], unsigned int k0, unsigned int k1) {
  for (int round = 0; round < 10; ++round) {
    unsigned long long p0 = 0xD2511F53ull * c[0], p1 = 0xCD9E8D57ull * c[2];
    unsigned int n0 = (unsigned int)(p1 >> 32) ^ c[1] ^ k0, n2 = (unsigned int)(p0 >> 32) ^ c[3] ^ k1;
    c[1] = (unsigned int)p1;
    c[3] = (unsigned int)p0;
    c[0] = n0;
    c[2] = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
RF_FN float rf_random_uniform(unsigned long long i, unsigned int k0, unsigned int k1) {
  unsigned int c[4] = {(unsigned int)i, (unsigned int)(i >> 32), 0u, 0u};
  rf_philox4x32_10(c, k0, k1);
  return (float)(c[0] >> 8) * 5.9604644775390625e-8f; // 2^-24: exact, in [0, 1)
}

} // namespace scalar
} // namespace rfuse

#undef RF_FN
#undef RF_M
#undef RF_INF
#endif // RFUSE_IR_SCALAROPS_H
