// Helpers every file of the Rcpp glue shares: rfuse's C++ exceptions become classed R conditions
// (rfuse_shape_error, ..., signalled by R/errors.R's rf_glue_failure); handles (external
// pointers) are checked before use.
#ifndef RFUSE_RBINDINGS_GLUE_H
#define RFUSE_RBINDINGS_GLUE_H

#include <Rcpp.h>

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Interpreter.h"
#include "rfuse/Runtime/Options.h"
#include "rfuse/Runtime/ProcessGroup.h"
#include "rfuse/Runtime/Profile.h"
#include "rfuse/Runtime/Tensor.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace rfuse::r {

// A classed R condition (class `cls`, inheriting from rfuse_error), signalled by R itself
// (R/errors.R's rf_glue_failure) so that R code needs no handler around each glue call to class
// it. R's error unwinds through Rcpp's protection as a C++ exception (LongjumpException, which
// guarded() does not catch) to the entry point's end, and continues from there. On R's main
// thread only (every caller is: compiles on worker threads throw C++ exceptions, rethrown here).
[[noreturn]] inline void fail(const char *cls, const std::string &msg) {
  Rcpp::Function signal = Rcpp::Environment::namespace_env("rfuse")["rf_glue_failure"];
  signal(std::string(cls), msg);
  throw Rcpp::exception((std::string(cls) + ": " + msg).c_str(), false); // (signal() never returns)
}

template <class F> auto guarded(F &&f) -> decltype(f()) {
  try {
    return f();
  } catch (const rfuse::ShapeError &e) {
    fail("rfuse_shape_error", e.what());
  } catch (const rfuse::TraceError &e) {
    fail("rfuse_trace_error", e.what());
  } catch (const rfuse::CompileError &e) {
    fail("rfuse_compile_error", e.what());
  } catch (const rfuse::OutOfMemoryError &e) {
    fail("rfuse_oom", e.what());
  } catch (const rfuse::DeviceMismatchError &e) {
    fail("rfuse_device_error", e.what());
  } catch (const rfuse::InterpreterError &e) {
    fail("rfuse_runtime_error", e.what());
  } catch (const rfuse::OptionError &e) {
    fail("rfuse_option_error", e.what());
  } catch (const rfuse::DistributedError &e) {
    fail("rfuse_distributed_error", e.what());
  } catch (const std::invalid_argument &e) {
    fail("rfuse_type_error", e.what());
  } catch (const std::bad_alloc &) {
    fail("rfuse_oom", "out of host memory");
  } catch (const Rcpp::exception &) {
    throw;
  } catch (const std::exception &e) {
    fail("rfuse_error", e.what());
  }
}

// Runs `f` (a compile: no R API inside; it must own what it uses, captured by value) on a worker
// thread while this one watches for the user's interrupt every 50 ms. On one, the call returns to
// R at once with R's interrupt; the abandoned compile finishes on its own and is dropped, so
// every cache stays as it was.
inline void checkInterrupt(void *) { R_CheckUserInterrupt(); }
template <class F> auto interruptible(F f) -> decltype(f()) {
  using T = decltype(f());
  auto task = std::make_shared<std::packaged_task<T()>>(std::move(f));
  std::future<T> result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready)
    if (!R_ToplevelExec(checkInterrupt, nullptr))
      throw Rcpp::internal::InterruptedException();
  return result.get(); // rethrows the compile's own exception here
}

inline GraphBuilder &builder(SEXP b) {
  Rcpp::XPtr<GraphBuilder> p(b);
  if (!p.get())
    fail("rfuse_trace_error", "the trace is no longer valid");
  return *p;
}

inline DType dtypeOf(const std::string &name) {
  DType d;
  if (!parseDType(name, d))
    fail("rfuse_error", "unknown dtype '" + name + "'");
  return d;
}

inline std::vector<int64_t> toShape(Rcpp::IntegerVector v) { return std::vector<int64_t>(v.begin(), v.end()); }
inline TracedValue tv(int id) { return TracedValue{id}; }

/// The program a handle holds (shared: a training loop or a fast-call record keeps it alive).
inline std::shared_ptr<Program> programPtr(SEXP p) {
  if (TYPEOF(p) != EXTPTRSXP || !R_ExternalPtrAddr(p) || !*Rcpp::XPtr<std::shared_ptr<Program>>(p))
    fail("rfuse_error", "the compiled program is no longer valid (e.g. after a session restart)");
  return *Rcpp::XPtr<std::shared_ptr<Program>>(p);
}
inline const Program &program(SEXP p) { return *programPtr(p); }
/// The tag of a handle to an artifact rf_load_compiled() loaded (an rfuse_rt_program).
constexpr const char *kArtifactTag = "rfuse_rt_program";
/// What a training loop runs: a compiled program's handle, or a loaded artifact's (artifact.cpp).
std::shared_ptr<const StepProgram> stepProgramPtr(SEXP p);


/// The tensor an rf_tensor's handle holds; a classed error when its memory is gone (a handle
/// saved with the workspace and restored in a new session is a null pointer).
inline Tensor &tensorOf(SEXP handle) {
  if (TYPEOF(handle) != EXTPTRSXP || !R_ExternalPtrAddr(handle))
    fail("rfuse_invalid_tensor", "this rf_tensor's memory is gone (it was saved and restored in a new session, "
                                 "or freed): create it again from its R values");
  return *static_cast<Tensor *>(R_ExternalPtrAddr(handle));
}

/// The tensor of input `k` (0-based) of a program that takes `want` there.
inline const Tensor &programInput(SEXP handle, DType want, size_t k) {
  const Tensor &t = tensorOf(handle);
  if (t.dtype != want)
    fail("rfuse_type_error", "input " + std::to_string(k + 1) + " is " + dtypeName(t.dtype) +
                                 " but the program takes " + dtypeName(want));
  return t;
}

/// A failure as a value (class "rfuse_failure": condition class, message), for the hot paths that
/// R checks without a tryCatch per call.
inline SEXP failureValue(const Rcpp::exception &e) {
  std::string msg = e.what();
  size_t colon = msg.find(": ");
  Rcpp::CharacterVector failure = Rcpp::CharacterVector::create(
      colon == std::string::npos ? std::string("rfuse_error") : msg.substr(0, colon),
      colon == std::string::npos ? msg : msg.substr(colon + 2));
  failure.attr("class") = "rfuse_failure";
  return failure;
}

/// f(), and once more after a full garbage collection when it runs out of device memory: dropped
/// rf_tensors whose finalizers have not yet run hold memory R does not see.
template <class F> auto retryAfterCollection(F &&f) -> decltype(f()) {
  try {
    return f();
  } catch (const OutOfMemoryError &) {
    R_gc();
    return f();
  }
}

/// A handle owning `t` (its finalizer gives the memory back).
SEXP wrapTensor(Tensor t);

/// The tensor shape of an R value: its dims reversed (R's column-major data is that row-major
/// tensor), or [length] for a plain vector.
inline std::vector<int64_t> rShape(SEXP a) {
  std::vector<int64_t> shape;
  SEXP dim = Rf_getAttrib(a, R_DimSymbol);
  if (Rf_isNull(dim)) {
    shape.push_back(Rf_xlength(a));
  } else {
    for (R_xlen_t i = Rf_xlength(dim) - 1; i >= 0; --i)
      shape.push_back(INTEGER(dim)[i]);
  }
  return shape;
}

/// R numbers (double, integer or logical) into a new tensor of `dtype` on `device`.
Tensor tensorFromR(SEXP a, DType dtype, Device device);
/// A tensor's values as a new R vector (double; logical for i1; integer for i32) with dim `rdim`.
SEXP tensorToR(const Tensor &t, SEXP rdim);

} // namespace rfuse::r

#endif
