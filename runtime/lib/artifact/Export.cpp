#include "Export.h"
#include "Manifest.h"
#include "PlanJson.h"

#include "rfuse/Codegen/ExecutionPlan.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Interpreter.h"
#include "rfuse/Runtime/Options.h"

#include <algorithm>
#include <cstring>

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
  for (const std::string &arch : archs) {
    codegen::Target target;
    target.backend = codegen::Backend::Cuda;
    target.cuda.arch = arch;
    target.cuda.multiprocessors = multiprocessorsFor(arch);
    ExecutionPlan plan = codegen::buildExecutionPlan(fused, entry, target, runtimeOptions().codegen);
    for (const Step &s : plan.steps)
      if (s.kind == Step::Kind::Host)
        throw ArtifactError(Status::Unsupported, "step " + s.label + " would run on the host interpreter (" + s.why +
                                                     "); an artifact holds only GPU steps");
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
      if (s.kind == Step::Kind::Constant) { // computed now: the runtime has no interpreter
        std::vector<HostTensor> v = interpretOperation(s.op, {});
        std::string entryName = dir + "constant/" + std::to_string(s.out[0]);
        std::vector<char> bytes = v.at(0).toBytes();
        c.entries[entryName] = std::string(bytes.begin(), bytes.end());
        t.constants[s.out[0]] = entryName;
      }
    }
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
