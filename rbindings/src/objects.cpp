// R-object utilities the package needs on its hot paths: a 128-bit hash of any R value, an
// object's address, weak references and deep copies. They were rlang's; loading rlang (and cli,
// which it loads) made library(rfuse) ~0.3 s slower and put ~80k more cons cells in R's heap,
// which moved R's first full collection into a new session's first jitted call (issue 18).
#include <Rcpp.h>

#include "rfuse/IR/ScalarOps.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

using namespace Rcpp;

namespace {
// Feeds R's serialization of a value into XXH3-128, without the stream's header: it holds the
// writing R's version and native encoding, which would make equal values hash differently
// across R installations (as rlang::hash does).
struct SerialHash {
  XXH3_state_t state; // on the stack: an R error in serialization unwinds past it
  unsigned char header[64];
  size_t headerSeen = 0;
  size_t headerSize = 18; // "X\n", version, R version, min reader version, encoding length
  bool inBody = false;

  void feed(const unsigned char *p, size_t n) {
    while (n && !inBody) {
      if (headerSeen < sizeof header)
        header[headerSeen] = *p;
      ++headerSeen, ++p, --n;
      if (headerSeen == 18) { // the encoding's length, big-endian (XDR), then the encoding
        uint32_t len = (uint32_t(header[14]) << 24) | (uint32_t(header[15]) << 16) |
                       (uint32_t(header[16]) << 8) | uint32_t(header[17]);
        headerSize = 18 + len;
      }
      if (headerSeen >= 18 && headerSeen == headerSize)
        inBody = true;
    }
    if (n)
      XXH3_128bits_update(&state, p, n);
  }
};

void outBytes(R_outpstream_t stream, void *buf, int n) {
  static_cast<SerialHash *>(stream->data)->feed(static_cast<const unsigned char *>(buf), size_t(n));
}
void outChar(R_outpstream_t stream, int c) {
  unsigned char b = static_cast<unsigned char>(c);
  static_cast<SerialHash *>(stream->data)->feed(&b, 1);
}
} // namespace

// A 128-bit hash (32 hex digits) of an R value's serialization: equal values, equal hashes.
// [[Rcpp::export(".rf_hash", rng = false)]]
std::string rf_hash(SEXP x) {
  SerialHash h;
  XXH3_128bits_reset(&h.state);
  R_outpstream_st stream;
  R_InitOutPStream(&stream, static_cast<R_pstream_data_t>(&h), R_pstream_xdr_format, 3, outChar,
                   outBytes, nullptr, R_NilValue);
  R_Serialize(x, &stream);
  XXH128_hash_t v = XXH3_128bits_digest(&h.state);
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(v.high64),
                static_cast<unsigned long long>(v.low64));
  return out;
}

// The address of the R object itself (not of an equal copy): identity, as a string.
// [[Rcpp::export(".rf_obj_address", rng = false)]]
std::string rf_obj_address(SEXP x) {
  char out[32];
  std::snprintf(out, sizeof out, "%p", static_cast<void *>(x));
  return out;
}

// A weak reference to `key`: it does not keep `key` alive; .rf_weakref_key gives NULL once R has
// collected it.
// [[Rcpp::export(".rf_new_weakref", rng = false)]]
SEXP rf_new_weakref(SEXP key) {
  if (TYPEOF(key) != ENVSXP && TYPEOF(key) != EXTPTRSXP)
    stop("rfuse: a weak reference's key must be an environment or an external pointer");
  return R_MakeWeakRef(key, R_NilValue, R_NilValue, FALSE);
}

// [[Rcpp::export(".rf_weakref_key", rng = false)]]
SEXP rf_weakref_key(SEXP ref) {
  if (TYPEOF(ref) != WEAKREFSXP)
    stop("rfuse: not a weak reference");
  return R_WeakRefKey(ref);
}

// A deep copy in new memory (R's copy-on-modify would share it until written).
// [[Rcpp::export(".rf_duplicate", rng = false)]]
SEXP rf_duplicate(SEXP x) { return Rf_duplicate(x); }

// rfuse.random_uniform's draws computed here (ScalarOps.h's Philox, the generator compiled
// programs run): eager code draws what its traced program would, element for element.
// [[Rcpp::export(".rf_random_uniform", rng = false)]]
NumericVector rf_random_uniform(IntegerVector seed, double n) {
  if (seed.size() != 2)
    stop("rfuse: a seed is two integers");
  if (!(n >= 0) || n > 4503599627370496.0 || n != std::floor(n))
    stop("rfuse: a number of draws must be a non-negative whole number");
  auto k0 = static_cast<unsigned int>(seed[0]), k1 = static_cast<unsigned int>(seed[1]);
  R_xlen_t len = static_cast<R_xlen_t>(n);
  NumericVector out(len);
  double *o = out.begin();
  for (R_xlen_t i = 0; i < len; ++i)
    o[i] = rfuse::scalar::rf_random_uniform(static_cast<unsigned long long>(i), k0, k1);
  return out;
}
