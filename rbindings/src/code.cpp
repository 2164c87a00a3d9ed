// Walks over R code on the trace's path (R/trace.R, R/errors.R): what a function's body calls
// and names, and a call cut to a few levels for its text. In R these walks cost about a tenth of
// tracing a small function; here they cost microseconds.
#include <Rcpp.h>

#include <unordered_set>
#include <vector>

namespace {

bool isTracedValue(SEXP x) { return TYPEOF(x) == VECSXP && Rf_inherits(x, "rf_sym"); }

// The parts the walk descends into, as collect_in_code's test: calls, pairlists (NULL is one),
// lists and character vectors.
bool isWalked(SEXP x) {
  int t = TYPEOF(x);
  return t == LANGSXP || t == LISTSXP || t == NILSXP || t == VECSXP || t == STRSXP;
}

// `x` with the parts nested `depth` or more calls below the top replaced by `...`, and traced
// values (R put one into the call: round()) by `<traced value>`. Shares what it does not change.
SEXP shortened(SEXP x, int level, int depth) {
  if (isTracedValue(x))
    return Rf_install("<traced value>");
  if (TYPEOF(x) != LANGSXP)
    return x;
  if (level >= depth)
    return Rf_install("...");
  PROTECT_INDEX slot;
  SEXP copy = R_NilValue;
  PROTECT_WITH_INDEX(copy, &slot);
  int index = 0;
  for (SEXP cell = CDR(x); cell != R_NilValue; cell = CDR(cell), ++index) {
    SEXP part = CAR(cell);
    if (TYPEOF(part) != LANGSXP && !isTracedValue(part))
      continue;
    SEXP cut = PROTECT(shortened(part, level + 1, depth));
    if (cut != part) {
      if (copy == R_NilValue)
        REPROTECT(copy = Rf_shallow_duplicate(x), slot);
      SETCAR(Rf_nthcdr(CDR(copy), index), cut);
    }
    UNPROTECT(1);
  }
  UNPROTECT(1);
  return copy == R_NilValue ? x : copy;
}

} // namespace

// The names of the functions `expr` calls (`strings` FALSE: the symbols at the head of its
// calls) or the character constants in it (`strings` TRUE), without repeats. Iterative: a
// deeply nested expression must not overflow the C stack.
// [[Rcpp::export(.rf_code_names, rng = false)]]
SEXP rf_code_names(SEXP expr, bool strings) {
  std::vector<SEXP> stack{expr}, found;
  std::unordered_set<SEXP> seen;
  auto keep = [&](SEXP charsxp) {
    if (seen.insert(charsxp).second)
      found.push_back(charsxp);
  };
  while (!stack.empty()) {
    SEXP e = stack.back();
    stack.pop_back();
    int t = TYPEOF(e);
    if (strings && t == STRSXP)
      for (R_xlen_t i = 0; i < XLENGTH(e); ++i)
        keep(STRING_ELT(e, i));
    if (!strings && t == LANGSXP && TYPEOF(CAR(e)) == SYMSXP)
      keep(PRINTNAME(CAR(e)));
    if (t == LANGSXP || t == LISTSXP) {
      for (SEXP cell = e; cell != R_NilValue; cell = CDR(cell))
        if (CAR(cell) != R_MissingArg && isWalked(CAR(cell)))
          stack.push_back(CAR(cell));
    } else if (t == VECSXP || t == EXPRSXP) {
      for (R_xlen_t i = 0; i < XLENGTH(e); ++i)
        if (isWalked(VECTOR_ELT(e, i)))
          stack.push_back(VECTOR_ELT(e, i));
    }
  }
  SEXP out = PROTECT(Rf_allocVector(STRSXP, (R_xlen_t)found.size()));
  for (size_t i = 0; i < found.size(); ++i)
    SET_STRING_ELT(out, (R_xlen_t)i, found[i]);
  UNPROTECT(1);
  return out;
}

// `call` cut below `depth` nested calls, for its text (call_text).
// [[Rcpp::export(.rf_shorten_call, rng = false)]]
SEXP rf_shorten_call(SEXP call, int depth) { return shortened(call, 0, depth); }
