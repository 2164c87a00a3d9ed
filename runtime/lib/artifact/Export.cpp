#include "Export.h"
#include "Manifest.h"
#include "PlanJson.h"

#include "../cpu/CpuJit.h"
#include "rfuse/Codegen/ExecutionPlan.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Interpreter.h"
#include "rfuse/Runtime/Options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#ifndef RFUSE_VERSION
#define RFUSE_VERSION "0.1.0"
#endif

namespace rfuse::artifact {

using codegen::ExecutionPlan;
using codegen::Step;

namespace {

// Launch shapes are chosen for a GPU's multiprocessors: the device at hand for its own
// architecture, else a typical part of that architecture (A10/A40, L4/RTX 4090, H100/H200).
int multiprocessorsFor(const std::string &arch) {
  const cuda::DeviceInfo &d = cuda::deviceInfo();
  if (d.present && d.arch() == arch)
    return d.multiprocessors;
  if (arch == "sm_86")
    return 84;
  if (arch == "sm_89")
    return 128;
  return 132;
}

TensorType typeOf(const codegen::BufferSlot &s) { return {s.dtype, s.shape}; }

// Constant steps' values, computed now (the runtime has no interpreter), as entries under `dir`.
void storeConstants(const ExecutionPlan &plan, const std::string &dir, Container &c, std::map<int, std::string> &out) {
  for (const Step &s : plan.steps)
    if (s.kind == Step::Kind::Constant) {
      std::vector<HostTensor> v = interpretOperation(s.op, {});
      std::vector<char> bytes = v.at(0).toBytes();
      std::string name = dir + "constant/" + std::to_string(s.out[0]);
      c.entries[name] = std::string(bytes.begin(), bytes.end());
      out[s.out[0]] = name;
    }
}

void refuseHostSteps(const ExecutionPlan &plan, const char *where) {
  for (const Step &s : plan.steps)
    if (s.kind == Step::Kind::Host)
      throw ArtifactError(Status::Unsupported, "step " + s.label + " would run on the host interpreter " + where + " (" +
                                                   s.why + "); an artifact holds only compiled steps");
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The CPU plan's kernels in one shared library: each distinct lowered function compiled to an
// object under a name of its own (the lowering names every function rfuse_cpu_kernel), linked
// with the system's compiler driver. Renames the plan's functions to match.
std::string linkCpuKernels(ExecutionPlan &plan) {
  std::map<std::string, std::string> nameOf; // lowered text -> its name in the library
  std::vector<std::string> objects;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    Step &s = plan.steps[i];
    if (!s.cpuFunction)
      continue;
    auto it = nameOf.find(s.cpuModule);
    if (it == nameOf.end()) {
      std::string name = "rfuse_aot_" + std::to_string(nameOf.size());
      std::string text = s.cpuModule;
      for (size_t at = 0; (at = text.find(s.cpuFunction->name, at)) != std::string::npos; at += name.size())
        text.replace(at, s.cpuFunction->name.size(), name);
      objects.push_back(cpu::compileObject(text, name));
      it = nameOf.emplace(s.cpuModule, name).first;
    }
    s.cpuFunction->name = it->second;
  }
  char dirTemplate[] = "/tmp/rfuse-aot-XXXXXX";
  if (!mkdtemp(dirTemplate))
    throw ArtifactError(Status::Io, std::string("cannot make a temporary directory: ") + std::strerror(errno));
  std::string dir = dirTemplate, cmd;
  const char *cc = std::getenv("CC");
  cmd = std::string(cc && *cc ? cc : "cc") + " -shared -o " + dir + "/kernels.so";
  for (size_t k = 0; k < objects.size(); ++k) {
    std::string obj = dir + "/k" + std::to_string(k) + ".o";
    std::ofstream(obj, std::ios::binary) << objects[k];
    cmd += " " + obj;
  }
  // Every symbol resolved now (libm, and glibc's vector math that the vectorizer calls), so the
  // runtime's dlopen cannot fail on a missing one.
  cmd += " -Wl,--no-undefined -lmvec -lm > " + dir + "/link.log 2>&1";
  int rc = std::system(cmd.c_str());
  std::string library = rc == 0 ? readAll(dir + "/kernels.so") : "", log = readAll(dir + "/link.log");
  std::system(("rm -rf " + dir).c_str());
  if (rc != 0 || library.empty())
    throw ArtifactError(Status::Unsupported, "linking the CPU kernels into a shared library failed (" + cmd + "): " + log);
  return library;
}

} // namespace

ExportSummary writeArtifact(mlir::ModuleOp fused, const std::string &entry, Tf32 tf32, const ExportOptions &options,
                            const std::string &path) {
  std::vector<std::string> archs = options.archs;
  if (archs.empty())
    archs = cuda::supportedArchitectures();
  for (const std::string &a : archs)
    if (archNumber(a) < 0)
      throw ArtifactError(Status::Unsupported, "--arch " + a + " is not a GPU architecture (sm_86, sm_89, sm_90, ...)");
  std::sort(archs.begin(), archs.end(), [](const std::string &a, const std::string &b) {
    return archNumber(a) < archNumber(b);
  });
  archs.erase(std::unique(archs.begin(), archs.end()), archs.end());

  Container c;
  Manifest m;
  m.rfuseVersion = RFUSE_VERSION;
  m.entry = entry;
  m.tf32 = tf32 == Tf32::FromOptions ? "option" : tf32 == Tf32::Allowed ? "allowed" : "exact";
  if (options.ptx)
    m.ptxArch = archs.back();
  ExportSummary summary;
  if (!options.cuda)
    archs.clear(), m.ptxArch.clear();
  if (options.cpu) {
    codegen::Target target; // Backend::Cpu
    ExecutionPlan plan = codegen::buildExecutionPlan(fused, entry, target, runtimeOptions().codegen);
    refuseHostSteps(plan, "on the CPU");
    for (int sl : plan.argSlots)
      m.inputs.push_back(typeOf(plan.slots[sl]));
    for (int sl : plan.resultSlots)
      m.outputs.push_back(typeOf(plan.slots[sl]));
    CpuTargetEntry t;
    t.plan = "cpu/plan.json";
    t.library = "cpu/kernels.so";
    std::tie(t.cpu, t.features) = cpu::jitTarget();
    storeConstants(plan, "cpu/", c, t.constants);
    c.entries[t.library] = linkCpuKernels(plan);
    c.entries[t.plan] = planToJson(plan).dump();
    summary.cpu = t.cpu;
    summary.steps = plan.steps.size();
    m.cpu = std::move(t);
  }
  if (archs.empty() && !options.cpu)
    throw ArtifactError(Status::InvalidArgument, "an artifact for no GPU and not the CPU holds nothing");
  for (const std::string &arch : archs) {
    codegen::Target target;
    target.backend = codegen::Backend::Cuda;
    target.cuda.arch = arch;
    target.cuda.multiprocessors = multiprocessorsFor(arch);
    ExecutionPlan plan = codegen::buildExecutionPlan(fused, entry, target, runtimeOptions().codegen);
    refuseHostSteps(plan, "on a GPU");
    if (m.inputs.empty() && m.outputs.empty()) {
      for (int sl : plan.argSlots)
        m.inputs.push_back(typeOf(plan.slots[sl]));
      for (int sl : plan.resultSlots)
        m.outputs.push_back(typeOf(plan.slots[sl]));
    }
    CudaTargetEntry t;
    t.arch = arch;
    t.multiprocessors = target.cuda.multiprocessors;
    std::string dir = "cuda/" + arch + "/";
    t.plan = dir + "plan.json";
    std::vector<std::string> names, sources;
    for (const Step &s : plan.steps) {
      if (s.kind == Step::Kind::Library)
        (s.library->kind == codegen::LibraryCall::Kind::Matmul ? m.usesCublasLt : m.usesCudnn) = true;
      if (s.cudaKernel && std::find(names.begin(), names.end(), s.cudaKernel->name) == names.end()) {
        names.push_back(s.cudaKernel->name);
        sources.push_back(s.cudaKernel->source);
      }
    }
    storeConstants(plan, dir, c, t.constants);
    std::vector<cuda::CompiledKernel> cubins = cuda::compileKernels(names, sources, arch);
    for (size_t k = 0; k < names.size(); ++k) {
      KernelFiles f;
      f.cubin = dir + names[k] + ".cubin";
      c.entries[f.cubin] = std::string(cubins[k].cubin.begin(), cubins[k].cubin.end());
      if (arch == m.ptxArch) {
        cuda::CompiledKernel ptx = cuda::compilePtx(names[k], sources[k], arch);
        f.ptx = dir + names[k] + ".ptx";
        c.entries[f.ptx] = std::string(ptx.cubin.data(), strnlen(ptx.cubin.data(), ptx.cubin.size()));
      }
      t.kernels[names[k]] = f;
    }
    c.entries[t.plan] = planToJson(plan).dump();
    summary.kernels = names.size();
    summary.steps = plan.steps.size();
    m.cuda.push_back(std::move(t));
  }
  for (const auto &[name, bytes] : options.metadata) {
    if (name.empty() || name.front() == '/' || name.back() == '/')
      throw ArtifactError(Status::InvalidArgument, "metadata entry '" + name + "' needs a name");
    c.entries["metadata/" + name] = bytes;
  }
  c.entries["manifest.json"] = m.toJson().dump(1);
  c.write(path);
  summary.archs = archs;
  summary.ptxArch = m.ptxArch;
  for (const auto &e : c.entries)
    summary.bytes += e.second.size();
  return summary;
}

} // namespace rfuse::artifact
