// The C API (rfuse/rfuse_rt.h) over LoadedProgram: every exception becomes a status and a message.
#include "rfuse/rfuse_rt.h"

#include "LoadedProgram.h"

#include "../cuda/CudaApi.h"
#include "../cuda/Device.h"

#ifndef RFUSE_VERSION
#define RFUSE_VERSION "0.1.0"
#endif

using rfuse::artifact::ArtifactError;
using rfuse::artifact::Status;

struct rfuse_rt_program {
  std::shared_ptr<rfuse::artifact::LoadedProgram> program; // (shared: a training loop may keep it)
  std::vector<std::vector<int64_t>> inputShapes, outputShapes;
};

namespace {

thread_local std::string lastError;

rfuse_rt_status fail(Status s, const std::string &message) {
  lastError = message;
  return (rfuse_rt_status)s;
}

template <class F> rfuse_rt_status guarded(F &&f) {
  try {
    f();
    lastError.clear();
    return RFUSE_RT_OK;
  } catch (const ArtifactError &e) {
    return fail(e.status, e.what());
  } catch (const std::bad_alloc &) {
    return fail(Status::OutOfMemory, "out of host memory");
  } catch (const std::exception &e) {
    return fail(Status::Runtime, e.what());
  } catch (...) {
    return fail(Status::Runtime, "an unknown failure");
  }
}

rfuse_rt_status typeOf(const std::vector<rfuse::artifact::TensorType> &types, const char *what, size_t i,
                       rfuse_rt_dtype *dtype, size_t *rank, const int64_t **shape) {
  if (i >= types.size())
    return fail(Status::InvalidArgument, std::string(what) + " " + std::to_string(i) + " of a program of " +
                                             std::to_string(types.size()));
  if (dtype)
    *dtype = rfuse::artifact::toRtDType(types[i].dtype);
  if (rank)
    *rank = types[i].shape.size();
  if (shape)
    *shape = types[i].shape.data();
  lastError.clear();
  return RFUSE_RT_OK;
}

} // namespace

extern "C" {

rfuse_rt_status rfuse_rt_load(const char *path, rfuse_rt_program **out) {
  if (!path || !out)
    return fail(Status::InvalidArgument, "rfuse_rt_load: a null path or result pointer");
  *out = nullptr;
  return guarded([&] {
    auto p = std::make_unique<rfuse_rt_program>();
    p->program = std::make_shared<rfuse::artifact::LoadedProgram>(path);
    *out = p.release();
  });
}

rfuse_rt_status rfuse_rt_load_memory(const void *data, size_t size, const char *name, rfuse_rt_program **out) {
  if ((!data && size) || !out)
    return fail(Status::InvalidArgument, "rfuse_rt_load_memory: a null data or result pointer");
  *out = nullptr;
  return guarded([&] {
    auto p = std::make_unique<rfuse_rt_program>();
    std::string label = name ? name : "an artifact in memory";
    p->program = std::make_shared<rfuse::artifact::LoadedProgram>(
        rfuse::artifact::Container::parse(std::string((const char *)data, size), label));
    *out = p.release();
  });
}

void rfuse_rt_free(rfuse_rt_program *p) {
  try {
    delete p;
  } catch (...) {
  }
}

const char *rfuse_rt_last_error(void) { return lastError.c_str(); }
const char *rfuse_rt_status_name(rfuse_rt_status s) { return rfuse::artifact::statusName((Status)s); }
uint32_t rfuse_rt_format_version(void) { return rfuse::artifact::kFormatVersion; }
const char *rfuse_rt_version(void) { return RFUSE_VERSION; }

size_t rfuse_rt_num_inputs(const rfuse_rt_program *p) { return p ? p->program->manifest().inputs.size() : 0; }
size_t rfuse_rt_num_outputs(const rfuse_rt_program *p) { return p ? p->program->manifest().outputs.size() : 0; }

rfuse_rt_status rfuse_rt_input_type(const rfuse_rt_program *p, size_t i, rfuse_rt_dtype *dtype, size_t *rank,
                                    const int64_t **shape) {
  if (!p)
    return fail(Status::InvalidArgument, "rfuse_rt_input_type: a null program");
  return typeOf(p->program->manifest().inputs, "input", i, dtype, rank, shape);
}

rfuse_rt_status rfuse_rt_output_type(const rfuse_rt_program *p, size_t i, rfuse_rt_dtype *dtype, size_t *rank,
                                     const int64_t **shape) {
  if (!p)
    return fail(Status::InvalidArgument, "rfuse_rt_output_type: a null program");
  return typeOf(p->program->manifest().outputs, "output", i, dtype, rank, shape);
}

size_t rfuse_rt_input_bytes(const rfuse_rt_program *p, size_t i) {
  if (!p || i >= p->program->manifest().inputs.size())
    return 0;
  const auto &t = p->program->manifest().inputs[i];
  return (size_t)t.numel() * rfuse::dtypeSize(t.dtype);
}

size_t rfuse_rt_output_bytes(const rfuse_rt_program *p, size_t i) {
  if (!p || i >= p->program->manifest().outputs.size())
    return 0;
  const auto &t = p->program->manifest().outputs[i];
  return (size_t)t.numel() * rfuse::dtypeSize(t.dtype);
}

const char *rfuse_rt_describe(const rfuse_rt_program *p) { return p ? p->program->description().c_str() : ""; }

rfuse_rt_status rfuse_rt_metadata(const rfuse_rt_program *p, const char *name, const void **data, size_t *size) {
  if (!p || !name || !data || !size)
    return fail(Status::InvalidArgument, "rfuse_rt_metadata: a null argument");
  const std::string *m = p->program->metadata(name);
  if (!m)
    return fail(Status::InvalidArgument, std::string("the artifact has no metadata entry '") + name + "'");
  *data = m->data();
  *size = m->size();
  lastError.clear();
  return RFUSE_RT_OK;
}

rfuse_rt_status rfuse_rt_set_input(rfuse_rt_program *p, size_t i, rfuse_rt_dtype dtype, const int64_t *shape,
                                   size_t rank, const void *data, size_t bytes) {
  if (!p)
    return fail(Status::InvalidArgument, "rfuse_rt_set_input: a null program");
  if (!shape && rank)
    return fail(Status::InvalidArgument, "rfuse_rt_set_input: a null shape");
  if ((unsigned)dtype > (unsigned)RFUSE_RT_I64)
    return fail(Status::DType, "rfuse_rt_set_input: dtype " + std::to_string((int)dtype) + " is not an rfuse_rt_dtype");
  rfuse::artifact::TensorType given{rfuse::artifact::fromRtDType(dtype), std::vector<int64_t>(shape, shape + rank)};
  return guarded([&] { p->program->setInput(i, given, data, bytes); });
}

rfuse_rt_status rfuse_rt_run(rfuse_rt_program *p) {
  if (!p)
    return fail(Status::InvalidArgument, "rfuse_rt_run: a null program");
  return guarded([&] { p->program->run(); });
}

rfuse_rt_status rfuse_rt_get_output(rfuse_rt_program *p, size_t i, void *data, size_t bytes) {
  if (!p)
    return fail(Status::InvalidArgument, "rfuse_rt_get_output: a null program");
  return guarded([&] { p->program->getOutput(i, data, bytes); });
}

rfuse_rt_status rfuse_rt_run_device(rfuse_rt_program *p, const uint64_t *inputs, const uint64_t *outputs) {
  if (!p)
    return fail(Status::InvalidArgument, "rfuse_rt_run_device: a null program");
  return guarded([&] { p->program->runDevice(inputs, outputs); });
}

rfuse_rt_status rfuse_rt_synchronize(void) {
  return guarded([&] {
    if (!rfuse::cuda::gpuPresence().present)
      return; // CPU programs finish before their run returns
    rfuse::cuda::Device &d = rfuse::cuda::Device::get();
    rfuse::cuda::check(rfuse::cuda::driver().cuStreamSynchronize(d.stream), "cuStreamSynchronize",
                       "waiting for the device");
  });
}

} // extern "C"

std::shared_ptr<const rfuse::StepProgram> rfuse::artifact::stepProgramOf(rfuse_rt_program *p) {
  if (!p || !p->program)
    throw ArtifactError(Status::InvalidArgument, "no loaded artifact");
  return p->program;
}
