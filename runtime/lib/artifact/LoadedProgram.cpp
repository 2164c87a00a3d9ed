#include "LoadedProgram.h"
#include "PlanJson.h"

#include "../cuda/CudaExecutor.h"
#include "../cpu/CpuExecutor.h"
#include "../cuda/Device.h"

#include "rfuse/Runtime/Options.h"

#include "rfuse/Runtime/Cuda.h"

#include <cerrno>
#include <cstring>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef RFUSE_VERSION
#define RFUSE_VERSION "0.1.0"
#endif

namespace rfuse::artifact {

using codegen::ExecutionPlan;
using codegen::Step;

namespace {

bool sameType(const codegen::BufferSlot &s, const TensorType &t) { return s.dtype == t.dtype && s.shape == t.shape; }

} // namespace

namespace {

// A plan entry, parsed and checked against the signature.
ExecutionPlan readPlan(const Container &c, const std::string &entry, codegen::Backend backend, const Manifest &m) {
  ExecutionPlan plan;
  try {
    plan = planFromJson(nlohmann::json::parse(c.at(entry)));
  } catch (const nlohmann::json::exception &e) {
    throw ArtifactError(Status::Corrupt, "the artifact's plan " + entry + " is not JSON: " + e.what());
  }
  if (plan.target.backend != backend)
    throw ArtifactError(Status::Corrupt, "the artifact's plan " + entry + " is for another device");
  if (plan.argSlots.size() != m.inputs.size() || plan.resultSlots.size() != m.outputs.size())
    throw ArtifactError(Status::Corrupt, "the artifact's plan and signature disagree on the number of inputs or outputs");
  for (size_t k = 0; k < plan.argSlots.size(); ++k)
    if (!sameType(plan.slots[plan.argSlots[k]], m.inputs[k]))
      throw ArtifactError(Status::Corrupt, "the artifact's plan and signature disagree on input " + std::to_string(k));
  for (size_t k = 0; k < plan.resultSlots.size(); ++k)
    if (!sameType(plan.slots[plan.resultSlots[k]], m.outputs[k]))
      throw ArtifactError(Status::Corrupt, "the artifact's plan and signature disagree on output " + std::to_string(k));
  return plan;
}

// Constants come from the artifact; anything else on the host cannot run here (no interpreter).
runtime::HostStepRunner storedConstants(const Container &c, const ExecutionPlan &plan,
                                        const std::map<int, std::string> &entries) {
  auto constants = std::make_shared<std::map<int, std::string>>();
  for (const Step &s : plan.steps) {
    if (s.kind == Step::Kind::Host)
      throw ArtifactError(Status::Unsupported, "step " + s.label + " of the artifact runs on the host (" + s.why +
                                                   "), which rfuse_rt cannot");
    if (s.kind == Step::Kind::Constant) {
      auto it = entries.find(s.out[0]);
      if (it == entries.end())
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
  return [constants, slots](const Step &s, size_t, const std::vector<HostTensor> &) -> std::vector<HostTensor> {
    if (s.kind != Step::Kind::Constant)
      throw ArtifactError(Status::Unsupported, "step " + s.label + " needs the host (" +
                                                   (s.why.empty() ? std::string("a library is missing") : s.why) +
                                                   "), which rfuse_rt cannot run");
    const codegen::BufferSlot &slot = slots[s.out[0]];
    return {HostTensor::fromBytes(slot.dtype, slot.shape, constants->at(s.out[0]).data())};
  };
}

// The CPU kernels' shared library, loaded from the artifact's bytes (an anonymous file: nothing
// is written to disk), closed (and its file) when the last function from it goes.
std::shared_ptr<void> loadLibrary(const std::string &bytes) {
  int fd = memfd_create("rfuse-kernels", MFD_CLOEXEC);
  if (fd < 0)
    throw ArtifactError(Status::Runtime, std::string("memfd_create failed: ") + std::strerror(errno));
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      close(fd);
      throw ArtifactError(Status::Runtime, "cannot stage the artifact's CPU kernels");
    }
    done += (size_t)n;
  }
  // The descriptor stays open while the library is loaded: the loader knows a library by its
  // path, so a second artifact's memfd given the same number would otherwise be answered with
  // this (already loaded) library and its functions.
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    close(fd);
    throw ArtifactError(Status::Runtime, std::string("cannot load the artifact's CPU kernels: ") + (why ? why : "?"));
  }
  return std::shared_ptr<void>(lib, [fd](void *l) {
    dlclose(l);
    close(fd);
  });
}

} // namespace

LoadedProgram::LoadedProgram(const std::string &path) : LoadedProgram(Container::read(path)) {}

LoadedProgram::LoadedProgram(const Container &c) {
  manifest_ = Manifest::fromJson(c.at("manifest.json"), RFUSE_VERSION);
  const std::string &option = runtimeOptions().device;
  bool haveGpuCode = !manifest_.cuda.empty();
  bool onCpu = option == "cpu" || (option != "cuda" && manifest_.cpu &&
                                   (!haveGpuCode || !cuda::gpuPresence().present));
  if (onCpu) {
    if (!manifest_.cpu)
      throw ArtifactError(Status::NoDevice, "the artifact has no CPU program (export it with --cpu), and the "
                                            "device option asks for the CPU");
    loadCpu(c);
  } else {
    loadCuda(c);
  }
  for (const auto &[name, bytes] : c.entries)
    if (name.rfind("metadata/", 0) == 0)
      metadata_[name.substr(9)] = bytes;
  inputs_.resize(manifest_.inputs.size());
  inputSet_.assign(manifest_.inputs.size(), false);
  for (const TensorType &t : manifest_.inputs)
    arguments_.push_back({t.dtype, t.shape});
  for (const TensorType &t : manifest_.outputs)
    results_.push_back({t.dtype, t.shape});
}

void LoadedProgram::loadCpu(const Container &c) {
  const CpuTargetEntry &t = *manifest_.cpu;
  std::vector<std::string> missing = missingCpuFeatures(t.features);
  if (!missing.empty()) {
    std::string list;
    for (const std::string &f : missing)
      list += (list.empty() ? "" : ", ") + f;
    throw ArtifactError(Status::Architecture, "the artifact's CPU kernels were compiled for " + t.cpu +
                                                  " and need " + list + ", which this CPU lacks (export it on a "
                                                  "machine like this one)");
  }
  ExecutionPlan plan = readPlan(c, t.plan, codegen::Backend::Cpu, manifest_);
  runtime::HostStepRunner hostSteps = storedConstants(c, plan, t.constants);
  std::shared_ptr<void> library = loadLibrary(c.at(t.library));
  cpu::CpuFunctionLoader functions = [&](size_t, const Step &s) {
    std::string symbol = "_mlir__mlir_ciface_" + s.cpuFunction->name;
    void *fn = dlsym(library.get(), symbol.c_str());
    if (!fn)
      throw ArtifactError(Status::Corrupt, "the artifact's CPU library has no " + symbol + " (step " + s.label + ")");
    return cpu::CpuFunctionRef{(cpu::PackedFunction)fn, library};
  };
  try {
    cpu_ = std::make_unique<cpu::CpuProgram>(std::move(plan), functions, hostSteps);
  } catch (const ArtifactError &) {
    throw;
  } catch (const std::exception &e) {
    throw ArtifactError(Status::Runtime, std::string("loading the artifact's CPU program failed: ") + e.what());
  }
  description_ = "cpu (kernels for " + t.cpu + ")";
}

void LoadedProgram::loadCuda(const Container &c) {
  // cuBLASLt and cuDNN load and initialize on a thread of their own while the driver starts and
  // the kernels load.
  cuda::warmLibraries(manifest_.usesCublasLt, manifest_.usesCudnn);
  const cuda::DeviceInfo &dev = cuda::gpuPresence();
  if (!dev.present)
    throw ArtifactError(Status::NoDevice, "no CUDA device to run the artifact on: " + dev.reason +
                                              (manifest_.cpu ? "" : " (and it has no CPU program: export it with --cpu)"));
  bool ptx = false;
  const CudaTargetEntry &target = selectCudaTarget(manifest_, dev.arch(), ptx);
  ExecutionPlan plan = readPlan(c, target.plan, codegen::Backend::Cuda, manifest_);
  runtime::HostStepRunner hostSteps = storedConstants(c, plan, target.constants);
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
      inputs_[i] = emptyTensor(cpu_ ? Device::Cpu : Device::Cuda, t.dtype, t.shape);
    if (cpu_)
      std::memcpy(inputs_[i].data(), data, bytes);
    else
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
      for (const TensorType &t : manifest_.outputs)
        outputs_.push_back(emptyTensor(cpu_ ? Device::Cpu : Device::Cuda, t.dtype, t.shape));
    if (cpu_) {
      std::vector<TensorRef> in, out;
      for (const Tensor &t : inputs_)
        in.push_back(t.ref());
      for (const Tensor &t : outputs_)
        out.push_back(t.ref());
      cpu_->run(in, out);
    } else {
      std::vector<uintptr_t> in, out;
      for (const Tensor &t : inputs_)
        in.push_back((uintptr_t)t.data());
      for (const Tensor &t : outputs_)
        out.push_back((uintptr_t)t.data());
      gpu_->run(in, out);
    }
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
    if (cpu_)
      std::memcpy(data, outputs_[i].data(), bytes);
    else
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
  launch(std::vector<uintptr_t>(inputs, inputs + manifest_.inputs.size()),
         std::vector<uintptr_t>(outputs, outputs + manifest_.outputs.size()));
}

void LoadedProgram::run(const std::vector<Tensor> &inputs, const std::vector<Tensor> &outputs, Device device) const {
  if (device != this->device())
    throw ArtifactError(Status::InvalidArgument, std::string("the artifact was loaded for the ") +
                                                     (cpu_ ? "CPU" : "GPU") + ", not the " +
                                                     (device == Device::Cpu ? "CPU" : "GPU"));
  auto check = [&](const std::vector<Tensor> &given, const std::vector<TensorType> &want, const char *what) {
    if (given.size() != want.size())
      throw ArtifactError(Status::InvalidArgument, std::string("the artifact takes ") + std::to_string(want.size()) +
                                                       " " + what + "s, got " + std::to_string(given.size()));
    std::vector<uintptr_t> out;
    for (size_t k = 0; k < given.size(); ++k) {
      const Tensor &t = given[k];
      if (!t.storage || t.device() != device)
        throw ArtifactError(Status::InvalidArgument, std::string(what) + " " + std::to_string(k + 1) +
                                                         " is not on the artifact's device");
      if (t.dtype != want[k].dtype)
        throw ArtifactError(Status::DType, std::string(what) + " " + std::to_string(k + 1) + " is " +
                                               want[k].str() + "; a " + dtypeName(t.dtype) + " tensor was given");
      if (t.shape != want[k].shape)
        throw ArtifactError(Status::Shape, std::string(what) + " " + std::to_string(k + 1) + " is " + want[k].str() +
                                               "; a tensor of another shape was given");
      out.push_back((uintptr_t)t.data());
    }
    return out;
  };
  launch(check(inputs, manifest_.inputs, "input"), check(outputs, manifest_.outputs, "output"));
}

void LoadedProgram::launch(const std::vector<uintptr_t> &inputs, const std::vector<uintptr_t> &outputs) const {
  try {
    if (cpu_) { // "device memory" is host memory
      std::vector<TensorRef> in, out;
      for (size_t k = 0; k < manifest_.inputs.size(); ++k)
        in.push_back({manifest_.inputs[k].dtype, manifest_.inputs[k].shape, (void *)inputs[k]});
      for (size_t k = 0; k < manifest_.outputs.size(); ++k)
        out.push_back({manifest_.outputs[k].dtype, manifest_.outputs[k].shape, (void *)outputs[k]});
      cpu_->run(in, out);
      return;
    }
    gpu_->run(inputs, outputs);
  } catch (const ArtifactError &) {
    throw;
  } catch (const std::exception &e) {
    throw ArtifactError(Status::Runtime, std::string("running the artifact failed: ") + e.what());
  }
}

} // namespace rfuse::artifact
