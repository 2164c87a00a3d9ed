#include "LoadedProgram.h"
#include "PlanJson.h"

#include "../cuda/CudaExecutor.h"
#include "../cuda/Device.h"

#include "rfuse/Runtime/Cuda.h"

#include <cstring>

#ifndef RFUSE_VERSION
#define RFUSE_VERSION "0.1.0"
#endif

namespace rfuse::artifact {

using codegen::ExecutionPlan;
using codegen::Step;

namespace {

bool sameType(const codegen::BufferSlot &s, const TensorType &t) { return s.dtype == t.dtype && s.shape == t.shape; }

} // namespace

LoadedProgram::LoadedProgram(const std::string &path) {
  Container c = Container::read(path);
  manifest_ = Manifest::fromJson(c.at("manifest.json"), RFUSE_VERSION);
  // cuBLASLt and cuDNN load and initialize on a thread of their own while the driver starts and
  // the kernels load.
  cuda::warmLibraries(manifest_.usesCublasLt, manifest_.usesCudnn);
  const cuda::DeviceInfo &dev = cuda::gpuPresence();
  if (!dev.present)
    throw ArtifactError(Status::NoDevice, "no CUDA device to run the artifact on: " + dev.reason);
  bool ptx = false;
  const CudaTargetEntry &target = selectCudaTarget(manifest_, dev.arch(), ptx);
  ExecutionPlan plan;
  try {
    plan = planFromJson(nlohmann::json::parse(c.at(target.plan)));
  } catch (const nlohmann::json::exception &e) {
    throw ArtifactError(Status::Corrupt, "the artifact's plan for " + target.arch + " is not JSON: " + e.what());
  }
  if (plan.target.backend != codegen::Backend::Cuda)
    throw ArtifactError(Status::Corrupt, "the artifact's plan for " + target.arch + " is not a GPU plan");
  if (plan.argSlots.size() != manifest_.inputs.size() || plan.resultSlots.size() != manifest_.outputs.size())
    throw ArtifactError(Status::Corrupt, "the artifact's plan and signature disagree on the number of inputs or outputs");
  for (size_t k = 0; k < plan.argSlots.size(); ++k)
    if (!sameType(plan.slots[plan.argSlots[k]], manifest_.inputs[k]))
      throw ArtifactError(Status::Corrupt, "the artifact's plan and signature disagree on input " + std::to_string(k));
  for (size_t k = 0; k < plan.resultSlots.size(); ++k)
    if (!sameType(plan.slots[plan.resultSlots[k]], manifest_.outputs[k]))
      throw ArtifactError(Status::Corrupt, "the artifact's plan and signature disagree on output " + std::to_string(k));

  // Constants come from the artifact; anything else on the host cannot run here (no interpreter).
  auto constants = std::make_shared<std::map<int, std::string>>();
  for (const Step &s : plan.steps) {
    if (s.kind == Step::Kind::Host)
      throw ArtifactError(Status::Unsupported, "step " + s.label + " of the artifact runs on the host (" + s.why +
                                                   "), which rfuse_rt cannot");
    if (s.kind == Step::Kind::Constant) {
      auto it = target.constants.find(s.out[0]);
      if (it == target.constants.end())
        throw ArtifactError(Status::Corrupt, "the artifact has no value for constant " + s.label);
      const std::string &bytes = c.at(it->second);
      if (bytes.size() != plan.slots[s.out[0]].bytes)
        throw ArtifactError(Status::Corrupt, "the artifact's constant " + s.label + " has " +
                                                 std::to_string(bytes.size()) + " bytes for a " +
                                                 std::to_string(plan.slots[s.out[0]].bytes) + "-byte tensor");
      (*constants)[s.out[0]] = bytes;
    }
  }
  std::vector<codegen::BufferSlot> slots = plan.slots;
  runtime::HostStepRunner hostSteps = [constants, slots](const Step &s, size_t,
                                                         const std::vector<HostTensor> &) -> std::vector<HostTensor> {
    if (s.kind != Step::Kind::Constant)
      throw ArtifactError(Status::Unsupported, "step " + s.label + " needs the host (" +
                                                   (s.why.empty() ? std::string("cuDNN is missing") : s.why) +
                                                   "), which rfuse_rt cannot run");
    const codegen::BufferSlot &slot = slots[s.out[0]];
    return {HostTensor::fromBytes(slot.dtype, slot.shape, constants->at(s.out[0]).data())};
  };
  // Kernels by name: the target's cubins, or its PTX (NUL-terminated for cuModuleLoadData).
  cuda::KernelLoader kernels = [&](const std::vector<std::string> &names, const std::vector<std::string> &,
                                   const std::string &arch) {
    std::vector<cuda::CompiledKernel> out;
    for (const std::string &name : names) {
      auto it = target.kernels.find(name);
      const std::string &entry = it == target.kernels.end() ? std::string() : ptx ? it->second.ptx : it->second.cubin;
      if (entry.empty())
        throw ArtifactError(Status::Corrupt, "the artifact has no " + std::string(ptx ? "PTX" : "cubin") +
                                                 " for kernel " + name + " (" + target.arch + ")");
      const std::string &bytes = c.at(entry);
      cuda::CompiledKernel k;
      k.arch = arch;
      k.cubin.assign(bytes.begin(), bytes.end());
      if (ptx && (k.cubin.empty() || k.cubin.back() != '\0'))
        k.cubin.push_back('\0');
      out.push_back(std::move(k));
    }
    return out;
  };
  std::optional<bool> tf32;
  if (manifest_.tf32 != "option")
    tf32 = manifest_.tf32 == "allowed";
  try {
    gpu_ = std::make_unique<cuda::GpuProgram>(std::move(plan), kernels, hostSteps, tf32);
  } catch (const ArtifactError &) {
    throw;
  } catch (const OutOfMemoryError &e) {
    throw ArtifactError(Status::OutOfMemory, e.what());
  } catch (const std::exception &e) {
    throw ArtifactError(Status::Runtime, std::string("loading the artifact's kernels failed: ") + e.what());
  }
  description_ = "cuda " + dev.arch() +
                 (ptx ? " (PTX for " + target.arch + ", compiled by the driver)" : std::string(" (cubins)"));
  for (auto &[name, bytes] : c.entries)
    if (name.rfind("metadata/", 0) == 0)
      metadata_[name.substr(9)] = std::move(bytes);
  inputs_.resize(manifest_.inputs.size());
  inputSet_.assign(manifest_.inputs.size(), false);
}

LoadedProgram::~LoadedProgram() = default;

void LoadedProgram::setInput(size_t i, const TensorType &given, const void *data, size_t bytes) {
  if (i >= manifest_.inputs.size())
    throw ArtifactError(Status::InvalidArgument, "input " + std::to_string(i) + " of a program of " +
                                                     std::to_string(manifest_.inputs.size()) + " inputs");
  const TensorType &t = manifest_.inputs[i];
  if (given.dtype != t.dtype)
    throw ArtifactError(Status::DType, "input " + std::to_string(i) + " is " + t.str() + "; a " + given.str() +
                                           " was given");
  if (given.shape != t.shape)
    throw ArtifactError(Status::Shape, "input " + std::to_string(i) + " is " + t.str() + "; a " + given.str() +
                                           " was given");
  size_t want = (size_t)t.numel() * dtypeSize(t.dtype);
  if (bytes != want)
    throw ArtifactError(Status::Shape, "input " + std::to_string(i) + " is " + t.str() + " (" + std::to_string(want) +
                                           " bytes); " + std::to_string(bytes) + " bytes were given");
  if (!data && bytes)
    throw ArtifactError(Status::InvalidArgument, "input " + std::to_string(i) + ": a null pointer");
  try {
    if (!inputs_[i].storage)
      inputs_[i] = emptyTensor(Device::Cuda, t.dtype, t.shape);
    cuda::Device::get().upload((CUdeviceptr)(uintptr_t)inputs_[i].data(), bytes,
                               [&](size_t offset, size_t n, void *staging) {
                                 std::memcpy(staging, (const char *)data + offset, n);
                               });
  } catch (const OutOfMemoryError &e) {
    throw ArtifactError(Status::OutOfMemory, e.what());
  } catch (const std::exception &e) {
    throw ArtifactError(Status::Runtime, std::string("uploading input ") + std::to_string(i) + ": " + e.what());
  }
  inputSet_[i] = true;
}

void LoadedProgram::run() {
  for (size_t i = 0; i < inputSet_.size(); ++i)
    if (!inputSet_[i])
      throw ArtifactError(Status::InvalidArgument, "input " + std::to_string(i) + " (" + manifest_.inputs[i].str() +
                                                       ") was never set");
  try {
    if (outputs_.empty())
      outputs_ = gpu_->allocateResults();
    std::vector<uintptr_t> in, out;
    for (const Tensor &t : inputs_)
      in.push_back((uintptr_t)t.data());
    for (const Tensor &t : outputs_)
      out.push_back((uintptr_t)t.data());
    gpu_->run(in, out);
  } catch (const ArtifactError &) {
    throw;
  } catch (const OutOfMemoryError &e) {
    throw ArtifactError(Status::OutOfMemory, e.what());
  } catch (const std::exception &e) {
    throw ArtifactError(Status::Runtime, std::string("running the artifact failed: ") + e.what());
  }
  ran_ = true;
}

void LoadedProgram::getOutput(size_t i, void *data, size_t bytes) {
  if (i >= manifest_.outputs.size())
    throw ArtifactError(Status::InvalidArgument, "output " + std::to_string(i) + " of a program of " +
                                                     std::to_string(manifest_.outputs.size()) + " outputs");
  if (!ran_)
    throw ArtifactError(Status::InvalidArgument, "output " + std::to_string(i) + " read before the program ran");
  const TensorType &t = manifest_.outputs[i];
  size_t want = (size_t)t.numel() * dtypeSize(t.dtype);
  if (bytes != want)
    throw ArtifactError(Status::Shape, "output " + std::to_string(i) + " is " + t.str() + " (" +
                                           std::to_string(want) + " bytes); the buffer given holds " +
                                           std::to_string(bytes));
  if (!data && bytes)
    throw ArtifactError(Status::InvalidArgument, "output " + std::to_string(i) + ": a null pointer");
  try {
    cuda::Device::get().download((CUdeviceptr)(uintptr_t)outputs_[i].data(), bytes,
                                 [&](size_t offset, size_t n, const void *staging) {
                                   std::memcpy((char *)data + offset, staging, n);
                                 });
  } catch (const std::exception &e) {
    throw ArtifactError(Status::Runtime, std::string("downloading output ") + std::to_string(i) + ": " + e.what());
  }
}

void LoadedProgram::runDevice(const uint64_t *inputs, const uint64_t *outputs) {
  if ((!inputs && !manifest_.inputs.empty()) || (!outputs && !manifest_.outputs.empty()))
    throw ArtifactError(Status::InvalidArgument, "rfuse_rt_run_device: a null array of device pointers");
  std::vector<uintptr_t> in, out;
  for (size_t k = 0; k < manifest_.inputs.size(); ++k)
    in.push_back((uintptr_t)inputs[k]);
  for (size_t k = 0; k < manifest_.outputs.size(); ++k)
    out.push_back((uintptr_t)outputs[k]);
  try {
    gpu_->run(in, out);
  } catch (const ArtifactError &) {
    throw;
  } catch (const std::exception &e) {
    throw ArtifactError(Status::Runtime, std::string("running the artifact failed: ") + e.what());
  }
}

} // namespace rfuse::artifact
