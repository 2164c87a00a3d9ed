// The hot path of a jitted function called again on rf_tensors with a signature it has run before:
// one .Call that matches the arguments against the signatures recorded by earlier calls (their
// dtypes, R dims and devices; a model's parameters by identity), runs the compiled program on the
// tensors' memory and makes the result rf_tensor, with no R code in between. Anything it does not
// cover (plain R values, pending lazy tensors, random inputs, batch statistics, several results,
// numbers read from outside the function, a changed model) misses and takes the R path, which
// records the signature when it qualifies. rf_cache_clear() and a changed module structure make
// every table forget its records.
#include "glue.h"

#include <atomic>

using namespace Rcpp;
using rfuse::Tensor;
using rfuse::r::guarded;
using rfuse::r::tensorOf;

namespace {

std::atomic<uint64_t> generation{1}; // bumped by rf_cache_clear(): records of older ones are dropped
std::atomic<uint64_t> fastHits{0};

struct ArgSignature {
  SEXP dtype = R_NilValue, device = R_NilValue; // CHARSXPs (R's string cache: compared by address)
  std::vector<int> rdim;
  bool hasRdim = false;
  double len = 0;
};

// A model parameter: where it lives (a module's environment and field) and the R object it was
// when its device tensor was made.
struct ParameterSlot {
  SEXP env, name, object, tensor; // the tensor: an rf_tensor handle
};

struct Record {
  SEXP names = R_NilValue;       // the call's argument names (NULL: all positional)
  std::vector<ArgSignature> args;
  std::vector<ParameterSlot> params;
  double moduleVersion = 0;
  std::shared_ptr<rfuse::Program> program;
  std::vector<int> inputIndex;   // 0-based positions in (args..., params...)
  std::vector<rfuse::DType> dtypes;
  rfuse::Device device = rfuse::Device::Cpu;
  // The result's fields as R values, made once and shared by every result (not mutable: R copies
  // them before any change).
  SEXP outDtypeValue = R_NilValue, outDeviceValue = R_NilValue, outRdim = R_NilValue, outLenValue = R_NilValue;
  uint64_t generation = 0;
  Rcpp::List kept; // every SEXP above, alive (Rcpp's precious list) as long as the record
};

struct Table {
  std::vector<Record> records;
};

constexpr size_t maxRecords = 64;

SEXP sym(const char *s) { return Rf_install(s); }

SEXP envOf(SEXP tensor) {
  static SEXP envSym = sym("env");
  return Rf_getAttrib(tensor, envSym);
}

SEXP field(SEXP env, SEXP name) {
  SEXP v = Rf_findVarInFrame(env, name);
  return v == R_UnboundValue ? R_NilValue : v;
}

bool isTensorObject(SEXP x) { return IS_S4_OBJECT(x) && TYPEOF(envOf(x)) == ENVSXP; }

ArgSignature signatureOf(SEXP env) {
  static SEXP dtypeS = sym("dtype"), deviceS = sym("device"), rdimS = sym("rdim"), lenS = sym("len");
  ArgSignature s;
  SEXP dt = field(env, dtypeS), dev = field(env, deviceS), rd = field(env, rdimS), len = field(env, lenS);
  s.dtype = TYPEOF(dt) == STRSXP && Rf_length(dt) == 1 ? STRING_ELT(dt, 0) : R_NilValue;
  s.device = TYPEOF(dev) == STRSXP && Rf_length(dev) == 1 ? STRING_ELT(dev, 0) : R_NilValue;
  s.hasRdim = TYPEOF(rd) == INTSXP;
  if (s.hasRdim)
    s.rdim.assign(INTEGER(rd), INTEGER(rd) + Rf_length(rd));
  s.len = Rf_isNumeric(len) && Rf_length(len) == 1 ? Rf_asReal(len) : -1;
  return s;
}

bool sameSignature(const ArgSignature &a, const ArgSignature &b) {
  return a.dtype == b.dtype && a.device == b.device && a.hasRdim == b.hasRdim && a.rdim == b.rdim && a.len == b.len &&
         a.dtype != R_NilValue && a.len >= 0;
}

bool sameNames(SEXP a, SEXP b) {
  if (Rf_isNull(a) || Rf_isNull(b))
    return Rf_isNull(a) && Rf_isNull(b);
  if (Rf_length(a) != Rf_length(b))
    return false;
  for (R_xlen_t i = 0; i < Rf_xlength(a); ++i)
    if (STRING_ELT(a, i) != STRING_ELT(b, i))
      return false;
  return true;
}

// The table, or null for a jitted function saved and restored in a new session (its calls then
// all take the R path, which traces again).
Table *tableOf(SEXP handle) {
  if (TYPEOF(handle) != EXTPTRSXP)
    return nullptr;
  return static_cast<Table *>(R_ExternalPtrAddr(handle));
}

void finalizeTable(SEXP handle) {
  delete static_cast<Table *>(R_ExternalPtrAddr(handle));
  R_ClearExternalPtr(handle);
}

// A value shared by every result of a record.
SEXP shared(SEXP v) {
  if (v != R_NilValue)
    MARK_NOT_MUTABLE(v);
  return v;
}

// A new rf_tensor: a copy of the prototype (an S4 object) with a fresh environment, as
// make_tensor() makes them in R. The environment is not hashed: six fields are found faster by
// a scan than a hash table is made.
SEXP makeTensor(SEXP prototype, SEXP buf, const Record &r) {
  static SEXP bufS = sym("buf"), nodeS = sym("node"), dtypeS = sym("dtype"), deviceS = sym("device"),
              rdimS = sym("rdim"), lenS = sym("len"), envS = sym("env");
  SEXP env = PROTECT(R_NewEnv(R_EmptyEnv, FALSE, 0));
  Rf_defineVar(lenS, r.outLenValue, env);
  Rf_defineVar(rdimS, r.outRdim, env);
  Rf_defineVar(deviceS, r.outDeviceValue, env);
  Rf_defineVar(dtypeS, r.outDtypeValue, env);
  Rf_defineVar(nodeS, R_NilValue, env);
  Rf_defineVar(bufS, buf, env);
  SEXP t = PROTECT(Rf_shallow_duplicate(prototype));
  Rf_setAttrib(t, envS, env);
  UNPROTECT(2);
  return t;
}

} // namespace

// [[Rcpp::export(.rf_fast_table, rng = false)]]
SEXP rf_fast_table() {
  SEXP handle = PROTECT(R_MakeExternalPtr(new Table, R_NilValue, R_NilValue));
  R_RegisterCFinalizerEx(handle, finalizeTable, FALSE);
  UNPROTECT(1);
  return handle;
}

// Forgets every record of every table (rf_cache_clear()).
// [[Rcpp::export(.rf_fast_forget, rng = false)]]
void rf_fast_forget() { ++generation; }

// [[Rcpp::export(.rf_fast_hits, rng = false)]]
double rf_fast_hits() { return (double)fastHits.load(); }

// Records the signature of a call the R path just ran (see jit_call_tensors).
// [[Rcpp::export(.rf_fast_record, rng = false)]]
void rf_fast_record(SEXP table, SEXP names, List args, List paramSlots, double moduleVersion, SEXP program,
                    IntegerVector inputIndex, CharacterVector dtypes, std::string device, SEXP outDtype,
                    SEXP outDevice, SEXP outRdim, double outLen) {
  guarded([&] {
    Table *found = tableOf(table);
    if (!found)
      return;
    Table &t = *found;
    Record r;
    r.names = names;
    Shield<SEXP> dtypeValue(Rf_ScalarString(STRING_ELT(outDtype, 0)));
    Shield<SEXP> deviceValue(Rf_ScalarString(STRING_ELT(outDevice, 0)));
    Shield<SEXP> lenValue(Rf_ScalarReal(outLen));
    r.kept = List::create(names, paramSlots, outRdim, outDtype, outDevice, dtypeValue, deviceValue, lenValue);
    r.outDtypeValue = shared(dtypeValue);
    r.outDeviceValue = shared(deviceValue);
    r.outLenValue = shared(lenValue);
    for (R_xlen_t k = 0; k < args.size(); ++k) {
      SEXP a = args[k];
      if (!isTensorObject(a))
        return;
      r.args.push_back(signatureOf(envOf(a)));
    }
    for (R_xlen_t k = 0; k < paramSlots.size(); ++k) {
      List s = paramSlots[k]; // list(env, name, object, tensor)
      ParameterSlot p{s[0], Rf_installChar(STRING_ELT(s[1], 0)), s[2], s[3]};
      r.params.push_back(p);
    }
    r.moduleVersion = moduleVersion;
    r.program = rfuse::r::programPtr(program);
    r.inputIndex.assign(inputIndex.begin(), inputIndex.end());
    for (R_xlen_t k = 0; k < dtypes.size(); ++k)
      r.dtypes.push_back(rfuse::r::dtypeOf(as<std::string>(dtypes[k])));
    r.device = device == "cuda" ? rfuse::Device::Cuda : rfuse::Device::Cpu;
    r.outRdim = shared(outRdim);
    r.generation = generation;
    // The same signature again (new parameter values, say) replaces its record.
    for (Record &old : t.records)
      if (old.generation == r.generation && old.args.size() == r.args.size() && sameNames(old.names, r.names) &&
          std::equal(old.args.begin(), old.args.end(), r.args.begin(), sameSignature)) {
        old = std::move(r);
        return;
      }
    if (t.records.size() == maxRecords) // the oldest goes (a function called with many batch sizes)
      t.records.erase(t.records.begin());
    t.records.push_back(std::move(r));
  });
}

// The call's result, or NULL when no record matches (the caller then takes the R path) or an
// autocast region is open (`autocast`: rfuse's autocast state; the region is part of a program's key).
// [[Rcpp::export(.rf_fast_call, rng = false)]]
SEXP rf_fast_call(SEXP table, SEXP args, SEXP counters, SEXP prototypeEnv, SEXP autocast) {
  Table *found = tableOf(table);
  if (!found || found->records.empty())
    return R_NilValue;
  static SEXP cudaS = sym("cuda"), cpuS = sym("cpu");
  if (!Rf_isNull(field(autocast, cudaS)) || !Rf_isNull(field(autocast, cpuS)))
    return R_NilValue;
  Table &t = *found;
  for (const Record &r : t.records)
    if (r.generation != generation) { // rf_cache_clear() ran: forget everything (and what it kept)
      t.records.clear();
      return R_NilValue;
    }
  static SEXP bufS = sym("buf"), versionS = sym("module_version"), valueS = sym("value");
  R_xlen_t n = Rf_xlength(args);
  SEXP names = Rf_getAttrib(args, R_NamesSymbol);
  for (const Record &r : t.records) {
    if ((R_xlen_t)r.args.size() != n || !sameNames(names, r.names))
      continue;
    bool match = true;
    for (R_xlen_t k = 0; k < n && match; ++k) {
      SEXP a = VECTOR_ELT(args, k);
      match = isTensorObject(a) && sameSignature(signatureOf(envOf(a)), r.args[k]) &&
              TYPEOF(field(envOf(a), bufS)) == EXTPTRSXP;
    }
    if (!match)
      continue;
    if (!r.params.empty()) {
      SEXP v = field(counters, versionS);
      if ((Rf_isNull(v) ? 0.0 : Rf_asReal(v)) != r.moduleVersion)
        return R_NilValue; // the model's structure changed: find its parameters again in R
      for (const ParameterSlot &p : r.params)
        if (Rf_findVarInFrame(p.env, p.name) != p.object) {
          match = false; // a new parameter value: it goes to the device on the R path
          break;
        }
      if (!match)
        return R_NilValue;
    }
    try {
      return guarded([&]() -> SEXP {
        std::vector<Tensor> inputs;
        inputs.reserve(r.inputIndex.size());
        for (size_t i = 0; i < r.inputIndex.size(); ++i) {
          int at = r.inputIndex[i];
          SEXP handle = at < n ? field(envOf(VECTOR_ELT(args, at)), bufS) : r.params[at - n].tensor;
          inputs.push_back(rfuse::r::programInput(handle, r.dtypes[i], i));
        }
        std::vector<Tensor> results =
            rfuse::r::retryAfterCollection([&] { return r.program->run(inputs, r.device); });
        SEXP buf = PROTECT(rfuse::r::wrapTensor(std::move(results[0])));
        SEXP out = makeTensor(field(prototypeEnv, valueS), buf, r);
        UNPROTECT(1);
        ++fastHits;
        if (rfuse::allocationPressure()) { // dropped results go back to the allocator (see collect_if_pressed)
          PROTECT(out);
          Function gc("gc", R_BaseNamespace);
          gc(Named("verbose") = false, Named("full") = false);
          UNPROTECT(1);
        }
        return out;
      });
    } catch (const Rcpp::exception &e) {
      return rfuse::r::failureValue(e);
    }
  }
  return R_NilValue;
}
