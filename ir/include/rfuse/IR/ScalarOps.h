// Pointwise scalar semantics of every rfuse op, written once.
//
// This header is plain C++ that compiles both as host code (the reference interpreter, tests) and
// under NVRTC (codegen embeds this file's text at the top of each generated kernel). Keep it free
// of anything but <cmath> on the host and CUDA's built-in math on the device. Floating-point
// functions are templates over the compute type (float for f32/f16/bf16 storage, double for f64).
#ifndef RFUSE_IR_SCALAROPS_H
#define RFUSE_IR_SCALAROPS_H

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define RF_FN __device__ __forceinline__
#define RF_M(f) ::f
#define RF_RCPF(x) __fdividef(1.0f, (x)) // MUFU.RCP: 2 ulp, no Newton steps
#else
#include <cmath>
#define RF_FN inline
#define RF_M(f) std::f
#define RF_RCPF(x) (1.0f / (x))
#endif

namespace rfuse {
namespace scalar {

template <class T> RF_FN T rf_neg(T x) { return -x; }
template <class T> RF_FN T rf_abs(T x) { return x < T(0) ? -x : x; }
template <class T> RF_FN T rf_exp(T x) { return RF_M(exp)(x); }
template <class T> RF_FN T rf_log(T x) { return RF_M(log)(x); }
template <class T> RF_FN T rf_sqrt(T x) { return RF_M(sqrt)(x); }
template <class T> RF_FN T rf_rsqrt(T x) { return T(1) / RF_M(sqrt)(x); }
template <class T> RF_FN T rf_tanh(T x) { return RF_M(tanh)(x); }
template <class T> RF_FN T rf_sigmoid(T x) { return T(1) / (T(1) + RF_M(exp)(-x)); }
// relu(NaN) is NaN, as in PyTorch.
template <class T> RF_FN T rf_relu(T x) { return x < T(0) ? T(0) : x; }
// erfc. In f32 a rational approximation in t = 1 / (1 + |z|/2) (Numerical Recipes' erfcc:
// relative error 1.2e-7 before rounding), its exponent taken base 2 (coefficients times
// log2 e): about a third of the instructions of CUDA's erfcf. GELU through it, with the device
// reciprocal's and exp2's 2 ulp, has relative error <= 1.5e-6 for |x| <= 3 and 4.6e-6 for
// |x| <= 6, against 0.85e-6 and 2.8e-6 through libm's erfcf (in f32 both are dominated by the
// rounding of x / sqrt 2; 1 + erf instead loses 1e-3 at x = -4). W4 (layernorm + GELU) is
// instruction-bound on an H200, so this matters there: 0.100 -> 0.0875 ms.
template <class T> RF_FN T rf_erfc(T x) { return RF_M(erfc)(x); }
template <> RF_FN float rf_erfc<float>(float x) {
  float z = x < 0.0f ? -x : x;
  float t = RF_RCPF(1.0f + 0.5f * z);
  float p = t * 0.246517301f - 1.18611491f;
  p = p * t + 2.14747453f;
  p = p * t - 1.63775313f;
  p = p * t + 0.402321577f;
  p = p * t - 0.268756866f;
  p = p * t + 0.139630049f;
  p = p * t + 0.539700627f;
  p = p * t + 1.44272923f;
  p = p * t - 1.82574821f;
  float r = t * RF_M(exp2)(RF_M(fma)(-z, z * 1.44269504f, p)); // erfc = t 2^(log2e (p - z^2))
  return x >= 0.0f ? r : 2.0f - r; // NaN: 2 - NaN
}

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

template <class T> RF_FN T rf_add(T a, T b) { return a + b; }
template <class T> RF_FN T rf_sub(T a, T b) { return a - b; }
template <class T> RF_FN T rf_mul(T a, T b) { return a * b; }
template <class T> RF_FN T rf_div(T a, T b) { return a / b; }
template <class T> RF_FN T rf_pow(T a, T b) { return RF_M(pow)(a, b); }
// max/min propagate NaN from either side (R's pmax/pmin and PyTorch's maximum/minimum do).
template <class T> RF_FN T rf_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <class T> RF_FN T rf_min(T a, T b) { return (a < b || a != a) ? a : b; }

template <class T> RF_FN bool rf_eq(T a, T b) { return a == b; }
template <class T> RF_FN bool rf_ne(T a, T b) { return a != b; }
template <class T> RF_FN bool rf_lt(T a, T b) { return a < b; }
template <class T> RF_FN bool rf_le(T a, T b) { return a <= b; }
template <class T> RF_FN bool rf_gt(T a, T b) { return a > b; }
template <class T> RF_FN bool rf_ge(T a, T b) { return a >= b; }

RF_FN bool rf_not(bool a) { return !a; }
RF_FN bool rf_and(bool a, bool b) { return a && b; }
RF_FN bool rf_or(bool a, bool b) { return a || b; }

template <class T> RF_FN T rf_select(bool c, T a, T b) { return c ? a : b; }

// rfuse.cast from a float to an integer type I: truncation toward zero, saturating at I's
// range, NaN to 0 (C++ leaves all three undefined). To i1: v != 0.
template <class I> RF_FN I rf_float_to_int(double v, double lo, double hi) {
  if (v != v)
    return I(0);
  if (v <= lo)
    return I(lo);
  if (v >= hi)
    return I(hi);
  return I(v);
}
RF_FN bool rf_to_bool(double v) { return v != 0.0; }

} // namespace scalar
} // namespace rfuse

#undef RF_FN
#undef RF_M
#undef RF_RCPF
#endif // RFUSE_IR_SCALAROPS_H
