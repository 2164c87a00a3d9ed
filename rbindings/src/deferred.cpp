// Trained values that stay where training left them until R reads them. rf_fit gives the model
// doubles of an ALTREP class over the step's final tensors: R sees an ordinary numeric array
// (its length, dims and class are set at once), and the values are downloaded, converted and
// (for a filter) permuted to R's layout the first time R asks for their memory or an element.
// Until then a later rf_fit (or anything that turns the array into a tensor again) can take the
// tensor itself (.rf_deferred_tensor), so training in several calls never moves the model
// through the host, and the end of a fit allocates nothing in R (no collection: a ResNet's
// 89 MB of doubles are not made unless asked for).
//
// data1: list(handle, rdim, perm or NULL, length); data2: the values once made (then the
// handle is dropped: the tensor's memory goes with R's next collection).
#include "glue.h"
#include "permute.h"

#include <R_ext/Altrep.h>
#include <R_ext/Rdynload.h>

#include <cstdio>
#include <algorithm>
#include <cstring>

using rfuse::DType;
using rfuse::Tensor;
using rfuse::r::fail;
using rfuse::r::guarded;
using rfuse::r::tensorOf;

namespace {

R_altrep_class_t deferredClass;

enum Slot { kHandle = 0, kRdim = 1, kPerm = 2, kLength = 3 };

// The values into `out` (n doubles, R's layout); a message instead of an exception (the caller
// raises R's error once no C++ object is alive).
void fillValues(SEXP info, double *out, char *message, size_t cap) noexcept {
  try {
    const Tensor &t = rfuse::r::tensorOf(VECTOR_ELT(info, kHandle));
    SEXP perm = VECTOR_ELT(info, kPerm);
    if (Rf_isNull(perm)) {
      rfuse::copyToDoubles(t, out);
      return;
    }
    rfuse::r::Permutation p = rfuse::r::permutationOfR(VECTOR_ELT(info, kRdim), perm, "a deferred parameter");
    Tensor staged;
    if (t.dtype == DType::F32 || t.dtype == DType::F64) {
      staged = rfuse::toDevice(t, rfuse::Device::Cpu);
    } else {
      staged = rfuse::emptyTensor(rfuse::Device::Cpu, DType::F64, t.shape);
      rfuse::copyToDoubles(t, (double *)staged.data());
    }
    if (staged.dtype == DType::F32)
      rfuse::r::permuteInto((const float *)staged.data(), out, p);
    else
      rfuse::r::permuteInto((const double *)staged.data(), out, p);
  } catch (const std::exception &e) {
    std::snprintf(message, cap, "%s", e.what());
  } catch (...) {
    std::snprintf(message, cap, "unknown error");
  }
}

// Raises rfuse's classed error (an R function of the package) for a failed download.
[[noreturn]] void deferredFailure(const char *message) {
  SEXP ns = PROTECT(R_FindNamespace(Rf_mkString("rfuse")));
  SEXP call = PROTECT(Rf_lang2(Rf_install("deferred_values_failed"), Rf_mkString(message)));
  Rf_eval(call, ns);
  UNPROTECT(2);
  Rf_error("%s", message); // (deferred_values_failed always raises)
}

SEXP materialized(SEXP x) {
  SEXP done = R_altrep_data2(x);
  if (done != R_NilValue)
    return done;
  SEXP info = R_altrep_data1(x);
  R_xlen_t n = (R_xlen_t)REAL(VECTOR_ELT(info, kLength))[0];
  SEXP v = PROTECT(Rf_allocVector(REALSXP, n));
  char message[2048] = "";
  fillValues(info, REAL(v), message, sizeof message);
  if (message[0]) {
    UNPROTECT(1);
    deferredFailure(message);
  }
  R_set_altrep_data2(x, v);
  SET_VECTOR_ELT(info, kHandle, R_NilValue); // the tensor is no longer needed
  UNPROTECT(1);
  return v;
}

R_xlen_t deferredLength(SEXP x) {
  SEXP done = R_altrep_data2(x);
  if (done != R_NilValue)
    return XLENGTH(done);
  return (R_xlen_t)REAL(VECTOR_ELT(R_altrep_data1(x), kLength))[0];
}

void *deferredDataptr(SEXP x, Rboolean) { return REAL(materialized(x)); }

const void *deferredDataptrOrNull(SEXP x) {
  SEXP done = R_altrep_data2(x);
  return done == R_NilValue ? nullptr : REAL(done);
}

double deferredElt(SEXP x, R_xlen_t i) { return REAL(materialized(x))[i]; }

R_xlen_t deferredGetRegion(SEXP x, R_xlen_t i, R_xlen_t n, double *buf) {
  SEXP v = materialized(x);
  R_xlen_t len = XLENGTH(v), count = i < len ? std::min(n, len - i) : 0;
  if (count > 0)
    std::memcpy(buf, REAL(v) + i, (size_t)count * sizeof(double));
  return count;
}

// A copy of a value not yet made is another view of the same tensor (never written: each view
// makes its own values); a made one copies its values.
SEXP deferredDuplicate(SEXP x, Rboolean deep) {
  SEXP done = R_altrep_data2(x);
  if (done != R_NilValue)
    return Rf_duplicate(done);
  SEXP info = PROTECT(Rf_shallow_duplicate(R_altrep_data1(x)));
  SEXP copy = R_new_altrep(deferredClass, info, R_NilValue);
  UNPROTECT(1);
  return copy;
}

Rboolean deferredInspect(SEXP x, int, int, int, void (*)(SEXP, int, int, int)) {
  Rprintf(" rfuse trained values (%s)\n", R_altrep_data2(x) == R_NilValue ? "on the tensor" : "made");
  return TRUE;
}

} // namespace

// [[Rcpp::init]]
void rf_register_deferred_values(DllInfo *dll) {
  deferredClass = R_make_altreal_class("rfuse_deferred_values", "rfuse", dll);
  R_set_altrep_Length_method(deferredClass, deferredLength);
  R_set_altrep_Duplicate_method(deferredClass, deferredDuplicate);
  R_set_altrep_Inspect_method(deferredClass, deferredInspect);
  R_set_altvec_Dataptr_method(deferredClass, deferredDataptr);
  R_set_altvec_Dataptr_or_null_method(deferredClass, deferredDataptrOrNull);
  R_set_altreal_Elt_method(deferredClass, deferredElt);
  R_set_altreal_Get_region_method(deferredClass, deferredGetRegion);
}

// Doubles over a float tensor's values, made when R first reads them: R's array of dims `rdim`
// (NULL: a vector), or, with `perm`, aperm(<array of dims rdim>, perm) (a filter trained in its
// convolution's layout); of class `cls` (NULL: none). The class is set here: R's `class<-` on
// the result would wrap it in an ALTREP wrapper (a shared vector of 64 or more elements), which
// .rf_deferred_tensor_copy would not see through.
// [[Rcpp::export(.rf_deferred_values, rng = false)]]
SEXP rf_deferred_values(SEXP handle, SEXP rdim, SEXP perm, SEXP cls) {
  return guarded([&]() -> SEXP {
    const Tensor &t = tensorOf(handle);
    if (t.dtype == DType::I1 || t.dtype == DType::I32 || t.dtype == DType::I64)
      fail("rfuse_type_error", "internal: .rf_deferred_values takes a float tensor");
    std::vector<int64_t> outDims;
    if (!Rf_isNull(perm)) {
      rfuse::r::Permutation p = rfuse::r::permutationOfR(rdim, perm, ".rf_deferred_values");
      outDims = p.outDims;
    } else if (!Rf_isNull(rdim)) {
      if (TYPEOF(rdim) != INTSXP)
        fail("rfuse_type_error", "internal: .rf_deferred_values takes integer dims");
      outDims.assign(INTEGER(rdim), INTEGER(rdim) + Rf_xlength(rdim));
    }
    int64_t n = 1;
    for (int64_t d : outDims)
      n *= d;
    if (Rf_isNull(rdim))
      n = t.numel();
    if (n != t.numel())
      fail("rfuse_type_error", "internal: .rf_deferred_values: dims of " + std::to_string(n) +
                                   " values for a tensor of " + std::to_string(t.numel()));
    SEXP info = PROTECT(Rf_allocVector(VECSXP, 4));
    SET_VECTOR_ELT(info, kHandle, handle);
    SET_VECTOR_ELT(info, kRdim, rdim);
    SET_VECTOR_ELT(info, kPerm, perm);
    SET_VECTOR_ELT(info, kLength, Rf_ScalarReal((double)n));
    SEXP v = PROTECT(R_new_altrep(deferredClass, info, R_NilValue));
    if (!outDims.empty()) {
      SEXP dims = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)outDims.size()));
      for (size_t i = 0; i < outDims.size(); ++i)
        INTEGER(dims)[i] = (int)outDims[i];
      Rf_setAttrib(v, R_DimSymbol, dims);
      UNPROTECT(1);
    }
    if (!Rf_isNull(cls))
      Rf_classgets(v, cls);
    UNPROTECT(2);
    return v;
  });
}

namespace {
bool sameInts(SEXP a, SEXP b) {
  if (Rf_isNull(a) || Rf_isNull(b))
    return Rf_isNull(a) && Rf_isNull(b);
  return TYPEOF(a) == INTSXP && TYPEOF(b) == INTSXP && XLENGTH(a) == XLENGTH(b) &&
         std::equal(INTEGER(a), INTEGER(a) + XLENGTH(a), INTEGER(b));
}
} // namespace

// A copy, on its device, of the tensor under trained values not yet made, when that tensor is
// what a new tensor made from `x` with these arguments would hold (`dtype`, `device`, and the
// same dims and permutation); NULL otherwise (ordinary doubles, values already made, another
// layout). A copy, never the tensor itself: the new one is trained in place, and `x` keeps its
// values.
// [[Rcpp::export(.rf_deferred_tensor_copy, rng = false)]]
SEXP rf_deferred_tensor_copy(SEXP x, std::string dtype, std::string device, SEXP rdim, SEXP perm) {
  return guarded([&]() -> SEXP {
    if (!ALTREP(x) || !R_altrep_inherits(x, deferredClass) || R_altrep_data2(x) != R_NilValue)
      return R_NilValue;
    SEXP info = R_altrep_data1(x);
    const Tensor &t = tensorOf(VECTOR_ELT(info, kHandle));
    rfuse::Device want = device == "cuda" ? rfuse::Device::Cuda : rfuse::Device::Cpu;
    if (t.dtype != rfuse::r::dtypeOf(dtype) || t.device() != want || !sameInts(VECTOR_ELT(info, kPerm), perm) ||
        !sameInts(VECTOR_ELT(info, kRdim), rdim))
      return R_NilValue;
    return rfuse::r::wrapTensor(rfuse::cloneTensor(t));
  });
}

// Whether `x` is trained values not yet made (a test's view of the deferral).
// [[Rcpp::export(.rf_deferred_pending, rng = false)]]
bool rf_deferred_pending(SEXP x) {
  return ALTREP(x) && R_altrep_inherits(x, deferredClass) && R_altrep_data2(x) == R_NilValue;
}
