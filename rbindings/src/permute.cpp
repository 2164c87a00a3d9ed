// .rf_aperm: aperm() of a plain numeric or logical array through permute.h (rf_fit's layout
// changes, torch-order conversions).
#include "glue.h"
#include "permute.h"

using rfuse::r::fail;
using rfuse::r::guarded;

// aperm(x, perm) for a numeric or logical array without dimnames.
// [[Rcpp::export(.rf_aperm)]]
SEXP rf_aperm(SEXP x, Rcpp::IntegerVector perm) {
  return guarded([&]() -> SEXP {
    SEXP dim = Rf_getAttrib(x, R_DimSymbol);
    if (TYPEOF(dim) != INTSXP || (TYPEOF(x) != REALSXP && TYPEOF(x) != INTSXP && TYPEOF(x) != LGLSXP))
      fail("rfuse_type_error", "internal: .rf_aperm takes an array of numbers");
    std::string problem;
    rfuse::r::Permutation p = rfuse::r::permutationOf(std::vector<int64_t>(INTEGER(dim), INTEGER(dim) + Rf_xlength(dim)),
                                                      std::vector<int>(perm.begin(), perm.end()), problem);
    if (!problem.empty())
      fail("rfuse_type_error", "internal: .rf_aperm: " + problem);
    SEXP out = PROTECT(Rf_allocVector(TYPEOF(x), Rf_xlength(x)));
    if (Rf_xlength(x) > 0) {
      switch (TYPEOF(x)) {
      case REALSXP: rfuse::r::permuteInto(REAL(x), REAL(out), p); break;
      case INTSXP: rfuse::r::permuteInto(INTEGER(x), INTEGER(out), p); break;
      default: rfuse::r::permuteInto(LOGICAL(x), LOGICAL(out), p); break;
      }
    }
    SEXP outDim = PROTECT(Rf_allocVector(INTSXP, (R_xlen_t)p.outDims.size()));
    for (size_t k = 0; k < p.outDims.size(); ++k)
      INTEGER(outDim)[k] = (int)p.outDims[k];
    Rf_setAttrib(out, R_DimSymbol, outDim);
    UNPROTECT(2);
    return out;
  });
}
