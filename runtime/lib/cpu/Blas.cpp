// BLAS on the CPU backend: whatever dgemm the process has (R's own inside R), else Debian's
// libblas / OpenBLAS; and the convolution ops as im2col / col2im + dgemm per image and group.
#include "Blas.h"
#include "Parallel.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace rfuse::cpu {

namespace {

using DgemmFn = void (*)(const char *, const char *, const int *, const int *, const int *,
                         const double *, const double *, const int *, const double *, const int *,
                         const double *, double *, const int *, size_t, size_t);
DgemmFn blasDgemm() {
  static DgemmFn fn = [] {
    if (void *f = dlsym(RTLD_DEFAULT, "dgemm_"))
      return (DgemmFn)f;
    for (const char *lib : {"libblas.so.3", "libopenblas.so.0", "libblas.so"})
      if (void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL))
        if (void *f = dlsym(h, "dgemm_"))
          return (DgemmFn)f;
    return (DgemmFn) nullptr;
  }();
  return fn;
}

// Row-major C[m, n] (leading dim ldc) = op(A) op(B) + beta C through column-major BLAS:
// C^T = op(B)^T op(A)^T.
void dgemmRowMajor(bool ta, bool tb, int m, int n, int k, const double *a, int lda, const double *b,
                   int ldb, double beta, double *c, int ldc) {
  double one = 1;
  blasDgemm()(tb ? "T" : "N", ta ? "T" : "N", &n, &m, &k, &one, b, &ldb, a, &lda, &beta, c, &ldc, 1, 1);
}

// Whether the process's BLAS runs one thread (Debian's reference libblas, R's own): then rfuse
// spreads a large product's rows over its threads itself. A threaded OpenBLAS is left alone.
bool blasSingleThreaded() {
  static bool single = [] {
    using NumThreads = int (*)();
    if (auto f = (NumThreads)dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))
      return f() <= 1;
    return true;
  }();
  return single;
}

// C[m, n] = op(A)[m, k] B'[k, n] for a short k, rows r0..r1 of C: each row k axpys over the rows
// of B' ([k, n], contiguous), vectorized for the host CPU (an AVX2/FMA clone where the CPU has
// it). Reference BLAS runs such shapes (an RBF kernel's 2000 x 1500 x 16) several times slower:
// short dot products or k passes over C, without AVX. Each element sums its k products in order
// (as reference BLAS does), whatever the row split.
__attribute__((target_clones("arch=haswell", "default"))) void
smallKRows(int64_t r0, int64_t r1, int64_t n, int64_t k, const double *a, int64_t aRow, int64_t aCol,
           const double *bp, double *c) {
  for (int64_t i = r0; i < r1; ++i) {
    double *ci = c + i * n;
    double a0 = a[i * aRow];
    for (int64_t j = 0; j < n; ++j)
      ci[j] = a0 * bp[j];
    for (int64_t l = 1; l < k; ++l) {
      double al = a[i * aRow + l * aCol];
      const double *bl = bp + l * n;
      for (int64_t j = 0; j < n; ++j)
        ci[j] += al * bl[j];
    }
  }
}
constexpr int64_t kSmallK = 32;

// LAPACK's routines R's solve() calls: the process's (R's own inside R), else Debian's liblapack.
struct Lapack {
  using Dgesv = void (*)(const int *, const int *, double *, const int *, int *, double *, const int *, int *);
  using Dlange = double (*)(const char *, const int *, const int *, const double *, const int *, double *, size_t);
  using Dgecon = void (*)(const char *, const int *, const double *, const int *, const double *, double *,
                          double *, int *, int *, size_t);
  using Dpotrf = void (*)(const char *, const int *, double *, const int *, int *, size_t);
  using Dgetrf = void (*)(const int *, const int *, double *, const int *, int *, int *);
  Dgesv dgesv = nullptr;
  Dlange dlange = nullptr;
  Dgecon dgecon = nullptr;
  Dpotrf dpotrf = nullptr;
  Dgetrf dgetrf = nullptr;
};
const Lapack &lapack() {
  static Lapack l = [] {
    Lapack r;
    auto find = [&](void *h) {
      r.dgesv = (Lapack::Dgesv)dlsym(h, "dgesv_");
      r.dlange = (Lapack::Dlange)dlsym(h, "dlange_");
      r.dgecon = (Lapack::Dgecon)dlsym(h, "dgecon_");
      r.dpotrf = (Lapack::Dpotrf)dlsym(h, "dpotrf_");
      r.dgetrf = (Lapack::Dgetrf)dlsym(h, "dgetrf_");
      return r.dgesv && r.dlange && r.dgecon && r.dpotrf && r.dgetrf;
    };
    if (find(RTLD_DEFAULT))
      return r;
    for (const char *lib : {"liblapack.so.3", "libopenblas.so.0", "liblapack.so"})
      if (void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL))
        if (find(h))
          return r;
    return Lapack{};
  }();
  return l;
}

} // namespace

bool blasAvailable() { return blasDgemm() != nullptr; }

bool lapackAvailable() { return lapack().dgesv != nullptr; }

namespace {
const Lapack &requireLapack(const char *routine) {
  const Lapack &l = lapack();
  if (!l.dgesv)
    throw std::runtime_error(std::string("rfuse needs LAPACK (") + routine + "), and none was found (liblapack.so.3)");
  return l;
}
} // namespace

// R's La_chol (src/modules/lapack/Lapack.c) without pivoting: the lower triangle zeroed, then dpotrf.
bool lapackCholesky(int64_t n64, const double *a, double *u, std::string &why) {
  const Lapack &l = requireLapack("dpotrf");
  int n = (int)n64, info = 0;
  std::copy(a, a + n64 * n64, u);
  for (int64_t j = 0; j < n64; ++j)
    for (int64_t i = j + 1; i < n64; ++i)
      u[i + n64 * j] = 0;
  l.dpotrf("U", &n, u, &n, &info, 1);
  if (info > 0) {
    why = "the leading minor of order " + std::to_string(info) + " is not positive";
    return false;
  }
  if (info < 0)
    throw std::runtime_error("argument " + std::to_string(-info) + " of Lapack routine dpotrf had invalid value");
  return true;
}

// R's det_ge_real with logarithm = TRUE.
void lapackLogDeterminant(int64_t n64, const double *a, double &modulus, double &sign) {
  const Lapack &l = requireLapack("dgetrf");
  int n = (int)n64, info = 0;
  std::vector<double> lu(a, a + n64 * n64);
  std::vector<int> ipiv(std::max(1, n));
  l.dgetrf(&n, &n, lu.data(), &n, ipiv.data(), &info);
  sign = 1;
  if (info < 0)
    throw std::runtime_error("argument " + std::to_string(-info) + " of Lapack routine dgetrf had invalid value");
  if (info > 0) {
    modulus = -std::numeric_limits<double>::infinity();
    return;
  }
  for (int i = 0; i < n; ++i)
    if (ipiv[i] != i + 1)
      sign = -sign;
  modulus = 0;
  for (int64_t i = 0; i < n64; ++i) {
    double d = lu[i * (n64 + 1)];
    modulus += std::log(d < 0 ? -d : d);
    if (d < 0)
      sign = -sign;
  }
}

// R's La_solve (src/modules/lapack/Lapack.c), step for step.
bool lapackSolve(int64_t n64, int64_t k64, const double *a, const double *b, double tolerance, double *x,
                 std::string &why) {
  const Lapack &l = requireLapack("dgesv");
  int n = (int)n64, k = (int)k64, info = 0;
  std::vector<double> lu(a, a + n64 * n64);
  std::vector<int> ipiv(std::max(1, n));
  std::copy(b, b + n64 * k64, x);
  l.dgesv(&n, &k, lu.data(), &n, ipiv.data(), x, &n, &info);
  if (info > 0) {
    why = "Lapack routine dgesv: system is exactly singular: U[" + std::to_string(info) + "," +
          std::to_string(info) + "] = 0";
    return false;
  }
  if (info < 0)
    throw std::runtime_error("argument " + std::to_string(-info) + " of Lapack routine dgesv had invalid value");
  if (tolerance > 0) {
    double anorm = l.dlange("1", &n, &n, a, &n, nullptr, 1), rcond = 0;
    std::vector<double> work(4 * (size_t)std::max(1, n));
    l.dgecon("1", &n, lu.data(), &n, &anorm, &rcond, work.data(), ipiv.data(), &info, 1);
    if (rcond < tolerance) {
      why = "system is computationally singular: reciprocal condition number = " + std::to_string(rcond);
      return false;
    }
  }
  return true;
}

// Each row block of C is its own dgemm call on the same operands: every element is the same
// k-term dot product in the same order whatever the split (reference BLAS), so threads do not
// change results.
void gemm(const codegen::MatmulCall &g, const double *a, const double *b, double *c) {
  int n = (int)g.n, k = (int)g.k;
  int lda = g.transposeA ? (int)g.m : k, ldb = g.transposeB ? k : n;
  for (int64_t p = 0; p < g.batch; ++p) {
    const double *ap = a + (g.batchedA ? p * g.m * g.k : 0), *bp = b + (g.batchedB ? p * g.k * g.n : 0);
    double *cp = c + p * g.m * g.n;
    auto rows = [&](int64_t r0, int64_t r1) {
      // Row r of op(A): A's row r, or (transposed) its column r.
      dgemmRowMajor(g.transposeA, g.transposeB, (int)(r1 - r0), n, k, ap + (g.transposeA ? r0 : r0 * lda), lda,
                    bp, ldb, 0, cp + r0 * n, n);
    };
    if (g.k >= 1 && g.k <= kSmallK) {
      std::vector<double> packed; // op(B) as [k, n] rows
      const double *bk = bp;
      if (g.transposeB) {
        packed.resize(g.k * g.n);
        for (int64_t j = 0; j < g.n; ++j)
          for (int64_t l = 0; l < g.k; ++l)
            packed[l * g.n + j] = bp[j * g.k + l];
        bk = packed.data();
      }
      int64_t aRow = g.transposeA ? 1 : g.k, aCol = g.transposeA ? g.m : 1;
      parallelFor(g.m, 0, 2 * g.n * g.k,
                  [&](int64_t r0, int64_t r1) { smallKRows(r0, r1, g.n, g.k, ap, aRow, aCol, bk, cp); });
    } else if (blasSingleThreaded()) {
      parallelFor(g.m, 0, 2 * (int64_t)n * k, rows);
    } else {
      rows(0, g.m);
    }
  }
}

// The convolution ops as im2col / col2im + dgemm per image and group. The column matrix of image
// n and group g is, NCHW: col[K][P] with K in (ci, kh, kw) order; NHWC: col[P][K] with K in
// (kh, kw, ci) order — each the filter's own layout, so the filter is a plain row-major [Og, K]
// matrix. `scatter` adds col back into x (col2im) instead of gathering from it.
namespace {
template <bool scatter>
void columns(const ConvGeometry &c, int64_t n, int64_t g, const double *xIn, double *xOut, double *col) {
  int64_t Cg = c.c / c.groups, P = c.oh * c.ow, K = Cg * c.kh * c.kw;
  for (int64_t oh = 0; oh < c.oh; ++oh)
    for (int64_t ow = 0; ow < c.ow; ++ow)
      for (int64_t kh = 0; kh < c.kh; ++kh)
        for (int64_t kw = 0; kw < c.kw; ++kw) {
          int64_t h = oh * c.strideH - c.padTop + kh * c.dilationH;
          int64_t ww = ow * c.strideW - c.padLeft + kw * c.dilationW;
          bool inside = h >= 0 && h < c.h && ww >= 0 && ww < c.w;
          int64_t p = oh * c.ow + ow;
          for (int64_t ci = 0; ci < Cg; ++ci) {
            double &v = c.nhwc ? col[p * K + (kh * c.kw + kw) * Cg + ci] : col[((ci * c.kh + kh) * c.kw + kw) * P + p];
            if (scatter) {
              if (inside)
                xOut[c.inputAt(n, g * Cg + ci, h, ww)] += v;
            } else {
              v = inside ? xIn[c.inputAt(n, g * Cg + ci, h, ww)] : 0.0;
            }
          }
        }
}

} // namespace

// rfuse.conv2d: y = W col (+ bias); images split over threads.
void convolveForward(const ConvGeometry &c, const double *x, const double *w, const double *bias, double *y) {
  int64_t G = c.groups, Og = c.o / G, P = c.oh * c.ow, K = c.c / G * c.kh * c.kw;
  parallelFor(c.n, 0, P * K * Og, [&](int64_t begin, int64_t end) {
    std::vector<double> col((size_t)(P * K));
    for (int64_t n = begin; n < end; ++n)
      for (int64_t g = 0; g < G; ++g) {
        columns<false>(c, n, g, x, nullptr, col.data());
        const double *wg = w + g * Og * K;
        if (c.nhwc)
          dgemmRowMajor(false, true, (int)P, (int)Og, (int)K, col.data(), (int)K, wg, (int)K, 0,
                        y + n * P * c.o + g * Og, (int)c.o);
        else
          dgemmRowMajor(false, false, (int)Og, (int)P, (int)K, wg, (int)K, col.data(), (int)P, 0,
                        y + (n * c.o + g * Og) * P, (int)P);
      }
    if (bias)
      for (int64_t n = begin; n < end; ++n)
        for (int64_t o = 0; o < c.o; ++o)
          for (int64_t p = 0; p < P; ++p)
            y[c.nhwc ? (n * P + p) * c.o + o : (n * c.o + o) * P + p] += bias[o];
  });
}

// rfuse.conv2d_backward_input: col = W^T dy, scattered back (col2im); images split over threads.
void convolveBackwardInput(const ConvGeometry &c, const double *dy, const double *w, double *dx) {
  int64_t G = c.groups, Og = c.o / G, P = c.oh * c.ow, K = c.c / G * c.kh * c.kw;
  parallelFor(c.n, 0, P * K * Og, [&](int64_t begin, int64_t end) {
    std::vector<double> col((size_t)(P * K));
    std::fill(dx + begin * c.c * c.h * c.w, dx + end * c.c * c.h * c.w, 0.0);
    for (int64_t n = begin; n < end; ++n)
      for (int64_t g = 0; g < G; ++g) {
        const double *wg = w + g * Og * K;
        if (c.nhwc)
          dgemmRowMajor(false, false, (int)P, (int)K, (int)Og, dy + n * P * c.o + g * Og, (int)c.o, wg, (int)K, 0,
                        col.data(), (int)K);
        else
          dgemmRowMajor(true, false, (int)K, (int)P, (int)Og, wg, (int)K, dy + (n * c.o + g * Og) * P, (int)P, 0,
                        col.data(), (int)P);
        columns<true>(c, n, g, nullptr, dx, col.data());
      }
  });
}

// rfuse.conv2d_backward_filter: dW += dy col^T over the images, in image order (one thread:
// the sum's order does not depend on the thread count).
void convolveBackwardFilter(const ConvGeometry &c, const double *x, const double *dy, double *dw) {
  int64_t G = c.groups, Og = c.o / G, P = c.oh * c.ow, K = c.c / G * c.kh * c.kw;
  std::vector<double> col((size_t)(P * K));
  std::fill(dw, dw + c.o * K, 0.0);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t g = 0; g < G; ++g) {
      columns<false>(c, n, g, x, nullptr, col.data());
      double *dwg = dw + g * Og * K;
      if (c.nhwc)
        dgemmRowMajor(true, false, (int)Og, (int)K, (int)P, dy + n * P * c.o + g * Og, (int)c.o, col.data(), (int)K,
                      1, dwg, (int)K);
      else
        dgemmRowMajor(false, true, (int)Og, (int)K, (int)P, dy + (n * c.o + g * Og) * P, (int)P, col.data(), (int)P,
                      1, dwg, (int)K);
    }
}

} // namespace rfuse::cpu
