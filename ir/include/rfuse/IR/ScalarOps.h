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
using std::log;
using std::pow;
using std::sin;
using std::rint;
using std::sqrt;
using std::tan;
using std::tanh;
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

} // namespace scalar
} // namespace rfuse

#undef RF_FN
#undef RF_M
#undef RF_INF
#endif // RFUSE_IR_SCALAROPS_H
