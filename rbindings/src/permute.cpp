// .rf_aperm: aperm() of a plain numeric or logical array through permute.h (rf_fit's layout
// changes, torch-order conversions).
#include "glue.h"
#include "permute.h"

using rfuse::r::fail;
using rfuse::r::guarded;

// aperm(x, perm) for a numeric or logical array without dimnames.
// [[Rcpp::export(.rf_aperm, rng = false)]]
SEXP rf_aperm(SEXP x, Rcpp::IntegerVector perm) {
  return guarded([&]() -> SEXP {
    if (TYPEOF(x) != REALSXP && TYPEOF(x) != INTSXP && TYPEOF(x) != LGLSXP)
      fail("rfuse_type_error", "internal: .rf_aperm takes an array of numbers");
    rfuse::r::Permutation p = rfuse::r::permutationOfR(Rf_getAttrib(x, R_DimSymbol), perm, ".rf_aperm");
    SEXP out = PROTECT(Rf_allocVector(TYPEOF(x), Rf_xlength(x)));
    if (Rf_xlength(x) > 0) {
      switch (TYPEOF(x)) {
      case REALSXP: rfuse::r::permuteInto(REAL(x), REAL(out), p); break;
      case INTSXP: rfuse::r::permuteInto(INTEGER(x), INTEGER(out), p); break;
      default: rfuse::r::permuteInto(LOGICAL(x), LOGICAL(out), p); break;
      }
    }
    rfuse::r::setPermutedDims(out, p);
    UNPROTECT(1);
    return out;
  });
}
