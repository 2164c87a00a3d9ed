// rf_tensor's C++ side: a handle (external pointer) owns an rfuse::Tensor in device or host memory;
// its finalizer gives the memory back to the allocator. Values cross into R only through
// tensorToR (as.array, print, ...) and in through tensorFromR; programs run on handles and return
// handles on the same device.
#include "glue.h"
#include "permute.h"

#include "rfuse/Runtime/Parallel.h"
#include "rfuse/Runtime/Timeline.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

using namespace Rcpp;
using rfuse::Device;
using rfuse::DType;
using rfuse::Tensor;
using rfuse::r::dtypeOf;
using rfuse::r::fail;
using rfuse::r::guarded;
using rfuse::r::tensorOf;

namespace rfuse::r {

namespace {
void finalizeTensor(SEXP handle) {
  auto *t = static_cast<Tensor *>(R_ExternalPtrAddr(handle));
  if (!t)
    return;
  R_ClearExternalPtr(handle);
  try {
    delete t;
  } catch (...) { // a finalizer never throws into R
  }
}
} // namespace

SEXP wrapTensor(Tensor t) {
  SEXP handle = PROTECT(R_MakeExternalPtr(new Tensor(std::move(t)), R_NilValue, R_NilValue));
  R_RegisterCFinalizerEx(handle, finalizeTensor, TRUE);
  static SEXP bufferClass = [] { // one class vector for every handle
    SEXP c = Rf_mkString("rfuse_buffer");
    R_PreserveObject(c);
    MARK_NOT_MUTABLE(c);
    return c;
  }();
  Rf_setAttrib(handle, R_ClassSymbol, bufferClass);
  UNPROTECT(1);
  return handle;
}

Tensor tensorFromR(SEXP a, DType dtype, Device device) {
  Tensor t = retryAfterCollection([&] { return emptyTensor(device, dtype, rShape(a)); });
  switch (TYPEOF(a)) {
  case REALSXP: copyFromDoubles(REAL(a), t); break;
  case INTSXP: copyFromInts(INTEGER(a), NA_INTEGER, t); break;
  case LGLSXP: copyFromInts(LOGICAL(a), NA_LOGICAL, t); break;
  default: fail("rfuse_type_error", std::string("cannot make a tensor of an R ") + Rf_type2char(TYPEOF(a)));
  }
  return t;
}

SEXP tensorToR(const Tensor &t, SEXP rdim) {
  int64_t n = t.numel();
  SEXPTYPE type = t.dtype == DType::I1 ? LGLSXP : t.dtype == DType::I32 ? INTSXP : REALSXP;
  SEXP v = PROTECT(Rf_allocVector(type, (R_xlen_t)n));
  if (type == REALSXP)
    copyToDoubles(t, REAL(v));
  else
    copyToInts(t, type == LGLSXP ? LOGICAL(v) : INTEGER(v));
  if (!Rf_isNull(rdim))
    Rf_setAttrib(v, R_DimSymbol, rdim);
  UNPROTECT(1);
  return v;
}

} // namespace rfuse::r

namespace {
Device deviceOf(const std::string &d) {
  if (d == "cuda")
    return Device::Cuda;
  if (d == "cpu")
    return Device::Cpu;
  fail("rfuse_error", "unknown device '" + d + "' (use \"cpu\" or \"cuda\")");
}
} // namespace

// Tensors hold NaN but not R's NA (as torch's): their ops would answer NA differently from R
// (NaN > 0 is FALSE, R's NA > 0 is NA; float32 and the GPU drop NA's payload). R values with NA
// are refused where they become tensors, naming the first.
// (Scanned over the CPU threads: a ResNet's filters are 89 MB of doubles; rf_fit's filters are
// scanned while they are permuted, see .rf_tensor_from_r_permuted.)
static void failOnNA(int64_t at) { // (INT64_MAX: none)
  if (at != INT64_MAX)
    fail("rfuse_type_error", "element " + std::to_string((long long)at + 1) +
                                 " is NA: tensors hold NaN but not R's NA (their comparisons and float32 "
                                 "would not keep it); replace NA first, e.g. x[is.na(x)] <- NaN");
}

static void refuseNA(SEXP x) {
  R_xlen_t n = Rf_xlength(x);
  std::atomic<int64_t> first{INT64_MAX};
  auto scan = [&](auto isNA) {
    rfuse::cpu::parallelFor(n, 0, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e && i < first.load(std::memory_order_relaxed); ++i)
        if (isNA(i))
          return rfuse::r::lowerTo(first, i);
    });
  };
  if (TYPEOF(x) == REALSXP) {
    const double *v = REAL(x);
    scan([v](int64_t i) { return ISNAN(v[i]) && R_IsNA(v[i]); });
  } else if (TYPEOF(x) == INTSXP || TYPEOF(x) == LGLSXP) {
    const int *v = TYPEOF(x) == INTSXP ? INTEGER(x) : LOGICAL(x);
    scan([v](int64_t i) { return v[i] == NA_INTEGER; });
  }
  failOnNA(first.load());
}

// [[Rcpp::export(.rf_tensor_from_r, rng = false)]]
SEXP rf_tensor_from_r(SEXP x, std::string dtype, std::string device) {
  return guarded([&] {
    refuseNA(x);
    return rfuse::r::wrapTensor(rfuse::r::tensorFromR(x, dtypeOf(dtype), deviceOf(device)));
  });
}

// A tensor of aperm(x, perm)'s values and R dims, for a double array x, without making that array
// in R: permuted on the host into rfuse's pooled memory, then converted and copied as
// .rf_tensor_from_r does (rf_fit's conv filters: no R allocation, so no collection, on the way in).
// [[Rcpp::export(.rf_tensor_from_r_permuted, rng = false)]]
SEXP rf_tensor_from_r_permuted(SEXP x, IntegerVector perm, std::string dtype, std::string device) {
  return guarded([&] {
    rfuse::TimelineSpan span("R values into a tensor, permuted", std::to_string(Rf_xlength(x)) + " values");
    // Each phase's time, marked at the end (a new session's first step waits for these).
    auto began = std::chrono::steady_clock::now();
    std::string phases;
    auto phase = [&](const char *name) {
      auto now = std::chrono::steady_clock::now();
      phases += (phases.empty() ? "" : ", ") + std::string(name) + " " +
                std::to_string(std::chrono::duration<double, std::milli>(now - began).count()) + " ms";
      began = now;
    };
    if (TYPEOF(x) != REALSXP)
      fail("rfuse_type_error", "internal: .rf_tensor_from_r_permuted takes an array of doubles");
    rfuse::r::Permutation p =
        rfuse::r::permutationOfR(Rf_getAttrib(x, R_DimSymbol), perm, ".rf_tensor_from_r_permuted");
    std::vector<int64_t> shape(p.outDims.rbegin(), p.outDims.rend()); // R's dims reversed
    DType dt = dtypeOf(dtype);
    Device dev = deviceOf(device);
    // f32 and f64: permuted, converted and checked for NA in one pass straight into the tensor's
    // memory on the CPU, or into the pinned staging buffer on the way to the GPU (a filter of up
    // to 16 MiB in one chunk: no host copy in between; larger ones permuted once into host
    // memory, then copied chunk by chunk). Other dtypes (f16, bf16, integers) through doubles
    // and copyFromDoubles.
    if (dt == DType::F32 || dt == DType::F64) {
      Tensor t = rfuse::r::retryAfterCollection([&] { return rfuse::emptyTensor(dev, dt, shape); });
      phase("allocation");
      const size_t total = t.bytes();
      std::vector<char> whole; // only when the upload comes in several chunks
      std::atomic<int64_t> firstNA{INT64_MAX};
      auto permuteTo = [&](void *out) {
        if (dt == DType::F32)
          rfuse::r::permuteInto(REAL(x), (float *)out, p, &firstNA);
        else
          rfuse::r::permuteInto(REAL(x), (double *)out, p, &firstNA);
      };
      rfuse::fillBytes(t, [&](size_t offset, size_t bytes, void *out) {
        if (offset == 0 && bytes == total)
          return permuteTo(out);
        if (whole.empty()) {
          whole.resize(total);
          permuteTo(whole.data());
        }
        std::memcpy(out, whole.data() + offset, bytes);
      });
      phase("permuted, checked and uploaded");
      rfuse::timelineMark("R values into a tensor, permuted: phases", phases);
      failOnNA(firstNA.load());
      return rfuse::r::wrapTensor(std::move(t));
    }
    refuseNA(x);
    Tensor staged =
        rfuse::r::retryAfterCollection([&] { return rfuse::emptyTensor(Device::Cpu, DType::F64, shape); });
    rfuse::r::permuteInto(REAL(x), (double *)staged.data(), p);
    Tensor t = rfuse::r::retryAfterCollection([&] { return rfuse::emptyTensor(dev, dt, shape); });
    rfuse::copyFromDoubles((const double *)staged.data(), t);
    return rfuse::r::wrapTensor(std::move(t));
  });
}

// [[Rcpp::export(.rf_tensor_to_r, rng = false)]]
SEXP rf_tensor_to_r(SEXP handle, SEXP rdim) {
  return guarded([&] { return rfuse::r::tensorToR(tensorOf(handle), rdim); });
}

// [[Rcpp::export(.rf_tensor_empty, rng = false)]]
SEXP rf_tensor_empty(IntegerVector shape, std::string dtype, std::string device) {
  return guarded([&] {
    return rfuse::r::wrapTensor(rfuse::r::retryAfterCollection(
        [&] { return rfuse::emptyTensor(deviceOf(device), dtypeOf(dtype), rfuse::r::toShape(shape)); }));
  });
}

// [[Rcpp::export(.rf_tensor_zeros, rng = false)]]
SEXP rf_tensor_zeros(IntegerVector shape, std::string dtype, std::string device) {
  return guarded([&] {
    return rfuse::r::wrapTensor(rfuse::r::retryAfterCollection(
        [&] { return rfuse::zeroTensor(deviceOf(device), dtypeOf(dtype), rfuse::r::toShape(shape)); }));
  });
}

// [[Rcpp::export(.rf_tensor_valid, rng = false)]]
bool rf_tensor_valid(SEXP handle) { return TYPEOF(handle) == EXTPTRSXP && R_ExternalPtrAddr(handle); }

// [[Rcpp::export(.rf_tensor_to_device, rng = false)]]
SEXP rf_tensor_to_device(SEXP handle, std::string device) {
  return guarded([&] { return rfuse::r::wrapTensor(rfuse::toDevice(tensorOf(handle), deviceOf(device))); });
}

// The same values in another dtype, on the tensor's device: a one-op program (rfuse.cast's
// rules), compiled once per (from, to, shape).
// [[Rcpp::export(.rf_tensor_cast, rng = false)]]
SEXP rf_tensor_cast(SEXP handle, std::string dtype) {
  return guarded([&] {
    const Tensor &t = tensorOf(handle);
    DType to = dtypeOf(dtype);
    if (t.dtype == to)
      return rfuse::r::wrapTensor(t);
    static std::mutex mu;
    // Never destroyed (programs must not be torn down during exit), and bounded: a cast per
    // (dtypes, shape), the oldest dropped beyond 64.
    static auto &programs = *new std::map<std::string, std::shared_ptr<rfuse::Program>>;
    static auto &order = *new std::deque<std::string>;
    std::string key = std::string(rfuse::dtypeName(t.dtype)) + ">" + rfuse::dtypeName(to);
    for (int64_t d : t.shape)
      key += "x" + std::to_string(d);
    std::shared_ptr<rfuse::Program> p;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto &slot = programs[key];
      if (!slot) {
        rfuse::GraphBuilder g("main");
        g.finish({g.cast(g.input(t.shape, t.dtype, "x"), to)});
        slot = rfuse::compileProgram(g.moduleText(), "default");
        order.push_back(key);
      }
      p = slot;
      if (order.size() > 64) {
        programs.erase(order.front());
        order.pop_front();
      }
    }
    return rfuse::r::wrapTensor(p->run(std::vector<Tensor>{t}, t.device())[0]);
  });
}

// [[Rcpp::export(.rf_tensor_copy_elements, rng = false)]]
void rf_tensor_copy_elements(SEXP dst, double dstOffset, SEXP src, double srcOffset, double count) {
  guarded([&] { rfuse::copyElements(tensorOf(dst), (int64_t)dstOffset, tensorOf(src), (int64_t)srcOffset, (int64_t)count); });
}

// Runs a compiled program on handles (and plain R values, converted onto `device` first); returns
// handles on `device`, or, with `outputs` (a list of handles), writes into those. The hot path
// of every call on rf_tensors: failures come back as a value (class "rfuse_failure").
// [[Rcpp::export(.rf_run_tensors, rng = false)]]
SEXP rf_run_tensors(SEXP p, List args, CharacterVector dtypes, std::string device, SEXP outputs) {
  try {
    return guarded([&]() -> SEXP {
      const rfuse::Program &prog = rfuse::r::program(p);
      Device dev = deviceOf(device);
      std::vector<Tensor> inputs;
      inputs.reserve(args.size());
      for (R_xlen_t k = 0; k < args.size(); ++k) {
        SEXP a = args[k];
        if (TYPEOF(a) == EXTPTRSXP) {
          inputs.push_back(rfuse::r::programInput(a, dtypeOf(as<std::string>(dtypes[k])), k));
        } else { // an R value beside tensors becomes one: the same NA rule
          refuseNA(a);
          inputs.push_back(rfuse::r::tensorFromR(a, dtypeOf(as<std::string>(dtypes[k])), dev));
        }
      }
      if (!Rf_isNull(outputs)) {
        List outs(outputs);
        std::vector<Tensor> o;
        for (R_xlen_t k = 0; k < outs.size(); ++k)
          o.push_back(tensorOf(outs[k]));
        for (const Tensor &t : o)
          for (const Tensor &i : inputs)
            if (t.data() == i.data())
              fail("rfuse_error", "an output tensor is also an input of the program");
        prog.run(inputs, o, dev);
        return outputs;
      }
      std::vector<Tensor> results = rfuse::r::retryAfterCollection([&] { return prog.run(inputs, dev); });
      List out(results.size());
      for (size_t k = 0; k < results.size(); ++k)
        out[k] = rfuse::r::wrapTensor(std::move(results[k]));
      if (rfuse::allocationPressure())
        out.attr("collect") = true;
      return out;
    });
  } catch (const Rcpp::exception &e) {
    return rfuse::r::failureValue(e);
  }
}

// The start-up timeline (rfuse/Runtime/Timeline.h): one row per mark.
// [[Rcpp::export(.rf_timeline, rng = false)]]
DataFrame rf_timeline() {
  std::vector<rfuse::TimelineMark> marks = rfuse::timelineMarks();
  NumericVector ms(marks.size());
  IntegerVector thread(marks.size());
  CharacterVector what(marks.size()), detail(marks.size());
  for (size_t i = 0; i < marks.size(); ++i) {
    ms[i] = marks[i].seconds * 1e3;
    thread[i] = (int)marks[i].thread;
    what[i] = marks[i].what;
    detail[i] = marks[i].detail;
  }
  return DataFrame::create(_["ms"] = ms, _["thread"] = thread, _["what"] = what, _["detail"] = detail,
                           _["stringsAsFactors"] = false);
}

// A mark from R code (rf_fit's phases).
// [[Rcpp::export(.rf_timeline_mark, rng = false)]]
void rf_timeline_mark(std::string what) { rfuse::timelineMark(std::move(what)); }

// [[Rcpp::export(.rf_transfer_stats, rng = false)]]
NumericVector rf_transfer_stats() {
  rfuse::TransferStats s = rfuse::transferStats();
  return NumericVector::create(_["host_to_device_bytes"] = (double)s.hostToDeviceBytes,
                               _["device_to_host_bytes"] = (double)s.deviceToHostBytes,
                               _["host_to_device_copies"] = (double)s.hostToDeviceCopies,
                               _["device_to_host_copies"] = (double)s.deviceToHostCopies,
                               _["host_to_device_seconds"] = s.hostToDeviceSeconds,
                               _["device_to_host_seconds"] = s.deviceToHostSeconds);
}

// [[Rcpp::export(.rf_device_memory, rng = false)]]
NumericVector rf_device_memory() {
  return guarded([&] {
    rfuse::DeviceMemory m = rfuse::deviceMemory();
    return NumericVector::create(_["free"] = (double)m.free, _["total"] = (double)m.total,
                                 _["in_use"] = (double)m.inUse, _["cached"] = (double)m.cached);
  });
}

// [[Rcpp::export(.rf_synchronize, rng = false)]]
void rf_synchronize() {
  guarded([&] { rfuse::synchronizeDevice(); });
}

// R values into an existing tensor (same number of elements): a streamed batch into its buffer.
// On the GPU the copy is queued through pinned staging and overlaps the step already running.
// [[Rcpp::export(.rf_tensor_copy_from_r, rng = false)]]
void rf_tensor_copy_from_r(SEXP handle, SEXP x) {
  guarded([&] {
    const Tensor &t = tensorOf(handle);
    if ((int64_t)Rf_xlength(x) != t.numel())
      fail("rfuse_shape_error", "a tensor of " + std::to_string(t.numel()) + " elements cannot take " +
                                    std::to_string((long long)Rf_xlength(x)) + " values");
    refuseNA(x);
    switch (TYPEOF(x)) {
    case REALSXP: rfuse::copyFromDoubles(REAL(x), t); break;
    case INTSXP: rfuse::copyFromInts(INTEGER(x), NA_INTEGER, t); break;
    case LGLSXP: rfuse::copyFromInts(LOGICAL(x), NA_LOGICAL, t); break;
    default: fail("rfuse_type_error", "only numbers can be copied into a tensor");
    }
  });
}

// Seconds one thread takes to copy `bytes` in host memory (the best of three): the floor the
// plain-array path is measured against (benchmarks/r-bench.R).
// [[Rcpp::export(.rf_host_copy_seconds, rng = false)]]
double rf_host_copy_seconds(double bytes) {
  return guarded([&] {
    size_t n = (size_t)bytes;
    std::vector<char> a(n, 1), b(n, 0);
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      std::memcpy(b.data(), a.data(), n);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (b[n / 2] != 1)
      fail("rfuse_error", "memcpy did not copy");
    return best;
  });
}

// ---- rf_profile() and rf_sitrep() ------------------------------------------------------------

// [[Rcpp::export(.rf_profile_start, rng = false)]]
void rf_profile_start() { rfuse::startProfile(); }

// [[Rcpp::export(.rf_profile_stop, rng = false)]]
DataFrame rf_profile_stop() {
  std::vector<rfuse::ProfileRecord> recs = rfuse::stopProfile();
  std::vector<std::string> program, step, how, source, device;
  std::vector<double> ms, bytes, flops;
  for (const rfuse::ProfileRecord &r : recs) {
    program.push_back(r.program);
    step.push_back(r.step);
    how.push_back(r.how);
    source.push_back(r.source);
    device.push_back(r.device);
    ms.push_back(r.ms);
    bytes.push_back(r.bytes);
    flops.push_back(r.flops);
  }
  return DataFrame::create(_["program"] = program, _["step"] = step, _["how"] = how, _["source"] = source,
                           _["device"] = device, _["ms"] = ms, _["bytes"] = bytes, _["flops"] = flops,
                           _["stringsAsFactors"] = false);
}

// [[Rcpp::export(.rf_sitrep_info, rng = false)]]
List rf_sitrep_info() {
  const rfuse::cuda::DeviceInfo &d = rfuse::cuda::deviceInfo();
  rfuse::cuda::LibraryVersions v = rfuse::cuda::libraryVersions();
  std::vector<std::string> archs = rfuse::cuda::supportedArchitectures();
  rfuse::DeviceMemory m = rfuse::deviceMemory();
  List out; // (more fields than List::create takes)
  out["gpu_available"] = d.available;
  out["gpu_reason"] = d.reason;
  out["gpu_name"] = d.name;
  out["arch"] = d.available ? d.arch() : std::string();
  out["multiprocessors"] = d.multiprocessors;
  out["arch_supported"] = d.available && std::find(archs.begin(), archs.end(), d.arch()) != archs.end();
  out["supported_archs"] = CharacterVector(archs.begin(), archs.end());
  out["driver"] = v.driver;
  out["driver_error"] = v.driverError;
  out["nvrtc"] = v.nvrtc;
  out["nvrtc_error"] = v.nvrtcError;
  out["cublaslt"] = (double)v.cublasLt;
  out["cublaslt_error"] = v.cublasLtError;
  out["cudnn"] = (double)v.cudnn;
  out["cudnn_error"] = v.cudnnError;
  out["memory_free"] = (double)m.free;
  out["memory_total"] = (double)m.total;
  out["memory_in_use"] = (double)m.inUse;
  out["memory_cached"] = (double)m.cached;
  out["cache_dir"] = rfuse::cuda::kernelCacheDir();
  out["default_device"] = rfuse::deviceName(rfuse::defaultDevice());
  out["option_device"] = rfuse::getOption("device");
  return out;
}
