// rf_export() and rf_load_compiled(): ahead-of-time artifacts from R. Writing goes through the
// JIT runtime (Program::exportArtifact); loading and running through rfuse_rt's C API, as any
// other deployment would (no tracing, no compiling).
#include "glue.h"

#include "rfuse/Runtime/Artifact.h"
#include "rfuse/Runtime/Timeline.h"
#include "rfuse/rfuse_rt.h"

#include <cstring>

using namespace Rcpp;
using namespace rfuse;
using rfuse::r::fail;
using rfuse::r::guarded;

namespace {

// A failure of rfuse_rt as an R condition: rfuse_artifact_error, with the status in its message.
[[noreturn]] void failRt(rfuse_rt_status s, const std::string &what) {
  std::string cls = s == RFUSE_RT_ERROR_NO_DEVICE ? "rfuse_device_error"
                    : s == RFUSE_RT_ERROR_OUT_OF_MEMORY ? "rfuse_oom"
                    : s == RFUSE_RT_ERROR_SHAPE || s == RFUSE_RT_ERROR_DTYPE ? "rfuse_shape_error"
                                                                            : "rfuse_artifact_error";
  fail(cls.c_str(), what + ": " + rfuse_rt_last_error() + " [" + rfuse_rt_status_name(s) + "]");
}

void finalizeArtifact(SEXP p) {
  if (auto *prog = (rfuse_rt_program *)R_ExternalPtrAddr(p)) {
    rfuse_rt_free(prog);
    R_ClearExternalPtr(p);
  }
}

rfuse_rt_program *loadedArtifact(SEXP p) {
  if (TYPEOF(p) != EXTPTRSXP || !R_ExternalPtrAddr(p))
    fail("rfuse_artifact_error", "this compiled program is gone (it was loaded in another R session?): load it again "
                                 "with rf_load_compiled()");
  return (rfuse_rt_program *)R_ExternalPtrAddr(p);
}

List typesOf(rfuse_rt_program *p, bool outputs) {
  size_t n = outputs ? rfuse_rt_num_outputs(p) : rfuse_rt_num_inputs(p);
  List out(n);
  for (size_t i = 0; i < n; ++i) {
    rfuse_rt_dtype dt;
    size_t rank;
    const int64_t *shape;
    (outputs ? rfuse_rt_output_type : rfuse_rt_input_type)(p, i, &dt, &rank, &shape);
    IntegerVector s(rank);
    for (size_t d = 0; d < rank; ++d)
      s[d] = (int)shape[d];
    out[i] = List::create(_["dtype"] = std::string(dtypeName(rfuse::artifact::fromRtDType(dt))), _["shape"] = s);
  }
  return out;
}

} // namespace

std::shared_ptr<const StepProgram> rfuse::r::stepProgramPtr(SEXP p) {
  if (TYPEOF(p) == EXTPTRSXP && R_ExternalPtrTag(p) == Rf_install(kArtifactTag))
    return rfuse::artifact::stepProgramOf(loadedArtifact(p));
  return programPtr(p);
}

// Writes `program` as an artifact at `path`, with the R side's entries (`metadata`: raw vectors by
// entry name, "r/signature.rds" the call's signature).
// [[Rcpp::export(.rf_export_program, rng = false)]]
List rf_export_program(SEXP program, std::string path, CharacterVector archs, bool ptx, bool cpu, List metadata) {
  return guarded([&] {
    ExportOptions o;
    for (const String &a : archs)
      o.archs.push_back(a);
    o.ptx = ptx;
    o.cuda = archs.size() > 0;
    o.cpu = cpu;
    CharacterVector names = metadata.names();
    for (R_xlen_t k = 0; k < metadata.size(); ++k) {
      SEXP v = metadata[k];
      if (TYPEOF(v) != RAWSXP)
        fail("rfuse_error", "internal: artifact metadata must be raw vectors");
      o.metadata[std::string(names[k])] = std::string((const char *)RAW(v), (size_t)Rf_xlength(v));
    }
    ExportSummary s;
    try {
      s = rfuse::r::program(program).exportArtifact(path, o);
    } catch (const rfuse::artifact::ArtifactError &e) {
      fail(e.status == rfuse::artifact::Status::Unsupported ? "rfuse_unsupported" : "rfuse_artifact_error", e.what());
    }
    return List::create(_["archs"] = wrap(s.archs), _["ptx"] = s.ptxArch, _["cpu"] = s.cpu, _["kernels"] = (double)s.kernels,
                        _["steps"] = (double)s.steps, _["bytes"] = (double)s.bytes);
  });
}

namespace {
// A loaded artifact for R: the handle, its R signature, its types and how it runs.
List loadedForR(rfuse_rt_program *p) {
  SEXP handle = PROTECT(R_MakeExternalPtr(p, Rf_install(rfuse::r::kArtifactTag), R_NilValue));
  R_RegisterCFinalizerEx(handle, finalizeArtifact, TRUE);
  const void *data = nullptr;
  size_t size = 0;
  RawVector meta(0);
  if (rfuse_rt_metadata(p, "r/signature.rds", &data, &size) == RFUSE_RT_OK) {
    meta = RawVector(size);
    std::memcpy(RAW(meta), data, size);
  }
  List out = List::create(_["handle"] = handle, _["signature"] = meta, _["inputs"] = typesOf(p, false),
                          _["outputs"] = typesOf(p, true), _["description"] = std::string(rfuse_rt_describe(p)));
  UNPROTECT(1);
  return out;
}
} // namespace

// Loads an artifact for this GPU (see loadedForR).
// [[Rcpp::export(.rf_load_artifact, rng = false)]]
List rf_load_artifact(std::string path) {
  return guarded([&] {
    rfuse::TimelineSpan span("loading an artifact");
    rfuse_rt_program *p = nullptr;
    if (rfuse_rt_status s = rfuse_rt_load(path.c_str(), &p); s != RFUSE_RT_OK)
      failRt(s, "cannot load " + path);
    return loadedForR(p);
  });
}

// The same from an artifact's bytes (one kept inside another artifact's metadata).
// [[Rcpp::export(.rf_load_artifact_memory, rng = false)]]
List rf_load_artifact_memory(RawVector bytes, std::string name) {
  return guarded([&] {
    rfuse_rt_program *p = nullptr;
    if (rfuse_rt_status s = rfuse_rt_load_memory(RAW(bytes), (size_t)bytes.size(), name.c_str(), &p); s != RFUSE_RT_OK)
      failRt(s, "cannot load " + name);
    return loadedForR(p);
  });
}

// A metadata entry of a loaded artifact ("r/..."), or NULL.
// [[Rcpp::export(.rf_artifact_metadata, rng = false)]]
SEXP rf_artifact_metadata(SEXP handle, std::string name) {
  return guarded([&]() -> SEXP {
    const void *data = nullptr;
    size_t size = 0;
    if (rfuse_rt_metadata(loadedArtifact(handle), name.c_str(), &data, &size) != RFUSE_RT_OK)
      return R_NilValue;
    RawVector out(size);
    std::memcpy(RAW(out), data, size);
    return out;
  });
}

// Runs a loaded artifact on R values (already checked against its inputs in R): each converted to
// its input's dtype, the outputs back as R vectors (doubles, logicals for i1, integers for i32).
// [[Rcpp::export(.rf_run_artifact, rng = false)]]
List rf_run_artifact(SEXP handle, List values) {
  return guarded([&] {
    rfuse_rt_program *p = loadedArtifact(handle);
    if ((size_t)values.size() != rfuse_rt_num_inputs(p))
      fail("rfuse_type_error", "the program takes " + std::to_string(rfuse_rt_num_inputs(p)) + " inputs, got " +
                                   std::to_string(values.size()));
    for (R_xlen_t i = 0; i < values.size(); ++i) {
      rfuse_rt_dtype dt;
      size_t rank;
      const int64_t *shape;
      rfuse_rt_input_type(p, i, &dt, &rank, &shape);
      Tensor t = emptyTensor(rfuse::Device::Cpu, rfuse::artifact::fromRtDType(dt), std::vector<int64_t>(shape, shape + rank));
      SEXP v = values[i];
      if (Rf_xlength(v) != t.numel())
        fail("rfuse_shape_error", "input " + std::to_string(i + 1) + " has " + std::to_string(Rf_xlength(v)) +
                                      " values; the program's takes " + std::to_string(t.numel()));
      switch (TYPEOF(v)) {
      case REALSXP: copyFromDoubles(REAL(v), t); break;
      case INTSXP: copyFromInts(INTEGER(v), NA_INTEGER, t); break;
      case LGLSXP: copyFromInts(LOGICAL(v), NA_LOGICAL, t); break;
      default: fail("rfuse_type_error", std::string("input ") + std::to_string(i + 1) + " is an R " +
                                            Rf_type2char(TYPEOF(v)) + ", not numbers");
      }
      if (rfuse_rt_status s = rfuse_rt_set_input(p, i, dt, shape, rank, t.data(), t.bytes()); s != RFUSE_RT_OK)
        failRt(s, "input " + std::to_string(i + 1));
    }
    if (rfuse_rt_status s = rfuse_rt_run(p); s != RFUSE_RT_OK)
      failRt(s, "running the compiled program");
    size_t n = rfuse_rt_num_outputs(p);
    List out(n);
    for (size_t i = 0; i < n; ++i) {
      rfuse_rt_dtype dt;
      size_t rank;
      const int64_t *shape;
      rfuse_rt_output_type(p, i, &dt, &rank, &shape);
      Tensor t = emptyTensor(rfuse::Device::Cpu, rfuse::artifact::fromRtDType(dt), std::vector<int64_t>(shape, shape + rank));
      if (rfuse_rt_status s = rfuse_rt_get_output(p, i, t.data(), t.bytes()); s != RFUSE_RT_OK)
        failRt(s, "output " + std::to_string(i + 1));
      out[i] = rfuse::r::tensorToR(t, R_NilValue); // (int64 as doubles, exact to 2^53)
    }
    return out;
  });
}
