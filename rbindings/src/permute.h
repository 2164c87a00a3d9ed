// aperm()'s work in C++ (permute.cpp, tensors.cpp, deferred.cpp): R's aperm walks the result in order and reads
// the input at a stride, recomputing the position each element: for a conv filter's layout change
// (dim c(O, I, kH, kW) -> c(I, kW, kH, O)) every read is a cache miss, about 35 ns an element on
// the GPU box. Here the two dims that are fastest in the input and in the result are walked in
// tiles, so reads and writes both run along cache lines.
#ifndef RFUSE_RBINDINGS_PERMUTE_H
#define RFUSE_RBINDINGS_PERMUTE_H

#include "glue.h"
#include "rfuse/Runtime/Parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace rfuse::r {

/// An R array's permutation: the result's dims (R order) and, for each, the input's stride.
struct Permutation {
  std::vector<int64_t> outDims, inStride;
};

/// aperm(<array of dims `dims`>, perm)'s layout (perm 1-based, as R's); empty `problem` if valid.
inline Permutation permutationOf(const std::vector<int64_t> &dims, const std::vector<int> &perm, std::string &problem) {
  Permutation p;
  const size_t n = dims.size();
  if (perm.size() != n) {
    problem = "the permutation has " + std::to_string(perm.size()) + " entries for " + std::to_string(n) + " dims";
    return p;
  }
  std::vector<int64_t> stride(n, 1);
  for (size_t k = 1; k < n; ++k)
    stride[k] = stride[k - 1] * dims[k - 1];
  std::vector<bool> seen(n, false);
  for (size_t k = 0; k < n; ++k) {
    int q = perm[k] - 1;
    if (q < 0 || q >= (int)n || seen[q]) {
      problem = "`perm` is not a permutation of the dims";
      return p;
    }
    seen[q] = true;
    p.outDims.push_back(dims[q]);
    p.inStride.push_back(stride[q]);
  }
  return p;
}

/// Lowers `least` to `at` when `at` is less (threads that find positions in any order keep the
/// first).
inline void lowerTo(std::atomic<int64_t> &least, int64_t at) {
  for (int64_t seen = least.load(); at < seen && !least.compare_exchange_weak(seen, at);) {
  }
}

/// out = aperm(in) as `perm` says, each element converted to Out (float <-> double on the way to
/// and from a tensor). Split over the CPU backend's threads in tiles of the result (a ResNet's
/// filters are 11M elements: rf_fit converts them on the way in and out). With `firstNA` (R's
/// doubles in), R's NA is looked for on the way: the least position of one in `in` is stored
/// there (left as it is when there is none) — one pass over the values instead of two.
template <typename In, typename Out>
void permuteInto(const In *in, Out *out, const Permutation &perm, std::atomic<int64_t> *firstNA = nullptr) {
  const std::vector<int64_t> &outDims = perm.outDims, &inStride = perm.inStride;
  const size_t n = outDims.size();
  if (n == 0)
    return;
  std::vector<int64_t> outStride(n, 1);
  for (size_t k = 1; k < n; ++k)
    outStride[k] = outStride[k - 1] * outDims[k - 1];
  // b: the result's dim that is the input's fastest (input stride 1).
  size_t b = 0;
  for (size_t k = 0; k < n; ++k)
    if (inStride[k] == 1)
      b = k;
  // The other dims (neither 0 nor b) index independent slices; in each, dims 0 and b are walked in
  // tiles (whole runs of dim 0 when b is 0: the fastest dims agree).
  std::vector<size_t> rest;
  int64_t slices = 1;
  for (size_t k = 1; k < n; ++k)
    if (k != b) {
      rest.push_back(k);
      slices *= outDims[k];
    }
  const int64_t n0 = outDims[0], nb = b == 0 ? 1 : outDims[b];
  const int64_t s0 = inStride[0], sb = b == 0 ? 0 : inStride[b], ob = b == 0 ? 0 : outStride[b];
  const int64_t tile0 = b == 0 ? 1024 : 32, tileB = 32;
  const int64_t tiles0 = (n0 + tile0 - 1) / tile0, tilesB = (nb + tileB - 1) / tileB;
  // A unit of work: one tile (tileB x tile0 elements) of one slice.
  auto units = [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      int64_t t0 = u % tiles0, tb = (u / tiles0) % tilesB, slice = u / (tiles0 * tilesB);
      int64_t inBase = 0, outBase = 0;
      for (size_t r = 0; r < rest.size(); ++r) {
        int64_t i = slice % outDims[rest[r]];
        slice /= outDims[rest[r]];
        inBase += i * inStride[rest[r]];
        outBase += i * outStride[rest[r]];
      }
      const int64_t j00 = t0 * tile0, j0End = std::min(n0, j00 + tile0);
      const int64_t jb0 = tb * tileB, jbEnd = std::min(nb, jb0 + tileB);
      for (int64_t jb = jb0; jb < jbEnd; ++jb) {
        const In *src = in + inBase + jb * sb;
        Out *dst = out + outBase + jb * ob;
        for (int64_t j0 = j00; j0 < j0End; ++j0)
          dst[j0] = static_cast<Out>(src[j0 * s0]);
        if constexpr (std::is_same_v<In, double>)
          if (firstNA)
            for (int64_t j0 = j00; j0 < j0End; ++j0)
              if (ISNAN(src[j0 * s0]) && R_IsNA(src[j0 * s0]))
                lowerTo(*firstNA, src + j0 * s0 - in);
      }
    }
  };
  rfuse::cpu::parallelFor(slices * tilesB * tiles0, 0, tileB * tile0, units);
}

/// permutationOf for an R array's dim attribute (or an integer dims vector) and R's 1-based
/// `perm`; a classed error naming `who` when they do not fit.
inline Permutation permutationOfR(SEXP dims, SEXP perm, const char *who) {
  if (TYPEOF(dims) != INTSXP || TYPEOF(perm) != INTSXP)
    fail("rfuse_type_error", std::string("internal: ") + who + " takes integer dims and a permutation");
  std::string problem;
  Permutation p = permutationOf(std::vector<int64_t>(INTEGER(dims), INTEGER(dims) + Rf_xlength(dims)),
                                std::vector<int>(INTEGER(perm), INTEGER(perm) + Rf_xlength(perm)), problem);
  if (!problem.empty())
    fail("rfuse_type_error", std::string("internal: ") + who + ": " + problem);
  return p;
}

/// Sets `v`'s dim attribute to the permuted dims.
inline void setPermutedDims(SEXP v, const Permutation &p) {
  SEXP dim = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)p.outDims.size()));
  for (size_t k = 0; k < p.outDims.size(); ++k)
    INTEGER(dim)[k] = (int)p.outDims[k];
  Rf_setAttrib(v, R_DimSymbol, dim);
  UNPROTECT(1);
}

} // namespace rfuse::r

#endif
