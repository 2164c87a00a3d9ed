#include "Manifest.h"

#include <cstdint>
#include <cstdlib>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace rfuse::artifact {

using nlohmann::json;

namespace {
json typeJson(const TensorType &t) { return {{"dtype", dtypeName(t.dtype)}, {"shape", t.shape}}; }
TensorType typeFrom(const json &j) {
  TensorType t;
  if (!parseDType(j.at("dtype").get<std::string>(), t.dtype))
    throw ArtifactError(Status::Corrupt, "the artifact's manifest names an unknown dtype " + j.at("dtype").dump());
  j.at("shape").get_to(t.shape);
  for (int64_t d : t.shape)
    if (d < 0)
      throw ArtifactError(Status::Corrupt, "the artifact's manifest has a negative extent");
  return t;
}
} // namespace

namespace {
#if defined(__x86_64__)
// The host's extensions by CPUID (not __builtin_cpu_supports: clang 14 knows fewer names than
// gcc 12, and the sanitizer build uses clang). Vector extensions count only when the OS saves
// their registers (XCR0), as __builtin_cpu_supports does.
struct HostCpuFeature {
  const char *name;
  bool have;
};
std::vector<HostCpuFeature> hostCpuFeatures() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(0, a, b, c, d);
  unsigned maxLeaf = a;
  unsigned l1c = 0, l7b = 0, l7c = 0, l7d = 0, l71a = 0;
  __cpuid(1, a, b, l1c, d);
  if (maxLeaf >= 7) {
    __cpuid_count(7, 0, a, l7b, l7c, l7d);
    unsigned sub = a;
    if (sub >= 1)
      __cpuid_count(7, 1, l71a, b, c, d);
  }
  uint64_t xcr0 = 0;
  if (l1c & (1u << 27)) { // OSXSAVE
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = ((uint64_t)hi << 32) | lo;
  }
  bool ymm = (xcr0 & 0x6) == 0x6, zmm = ymm && (xcr0 & 0xe0) == 0xe0;
  auto bit = [](unsigned r, int i) { return ((r >> i) & 1u) != 0; };
  return {{"sse4.1", bit(l1c, 19)},
          {"sse4.2", bit(l1c, 20)},
          {"popcnt", bit(l1c, 23)},
          {"avx", ymm && bit(l1c, 28)},
          {"fma", ymm && bit(l1c, 12)},
          {"f16c", ymm && bit(l1c, 29)},
          {"avx2", ymm && bit(l7b, 5)},
          {"bmi", bit(l7b, 3)},
          {"bmi2", bit(l7b, 8)},
          {"avx512f", zmm && bit(l7b, 16)},
          {"avx512dq", zmm && bit(l7b, 17)},
          {"avx512cd", zmm && bit(l7b, 28)},
          {"avx512bw", zmm && bit(l7b, 30)},
          {"avx512vl", zmm && bit(l7b, 31)},
          {"avx512vnni", zmm && bit(l7c, 11)},
          {"avx512fp16", zmm && bit(l7d, 23)},
          {"avx512bf16", zmm && bit(l71a, 5)}};
}
#endif
} // namespace

std::vector<std::string> missingCpuFeatures(const std::string &features) {
#if defined(__x86_64__)
  // The extensions LLVM's host CPUs list that change what code may run.
  static const std::vector<HostCpuFeature> known = hostCpuFeatures();
  std::vector<std::string> missing;
  size_t b = 0;
  while (b < features.size()) {
    size_t e = features.find(',', b);
    if (e == std::string::npos)
      e = features.size();
    std::string f = features.substr(b, e - b);
    if (f.size() > 1 && f[0] == '+')
      for (const HostCpuFeature &k : known)
        if (f.compare(1, std::string::npos, k.name) == 0 && !k.have)
          missing.push_back(k.name);
    b = e + 1;
  }
  return missing;
#else
  return {};
#endif
}

int archNumber(const std::string &arch) {
  if (arch.size() < 4 || arch.compare(0, 3, "sm_") != 0)
    return -1;
  char *end = nullptr;
  long n = std::strtol(arch.c_str() + 3, &end, 10);
  return *end || n <= 0 ? -1 : (int)n;
}

json Manifest::toJson() const {
  json j = {{"format", format}, {"rfuse_version", rfuseVersion}, {"entry", entry}, {"tf32", tf32},
            {"inputs", json::array()}, {"outputs", json::array()}, {"cuda", json::array()}, {"ptx_arch", ptxArch},
            {"libraries", json::array()}};
  if (usesCublasLt)
    j["libraries"].push_back("cublaslt");
  if (usesCudnn)
    j["libraries"].push_back("cudnn");
  for (const TensorType &t : inputs)
    j["inputs"].push_back(typeJson(t));
  for (const TensorType &t : outputs)
    j["outputs"].push_back(typeJson(t));
  if (cpu) {
    json constants = json::object();
    for (const auto &[slot, entry] : cpu->constants)
      constants[std::to_string(slot)] = entry;
    j["cpu"] = {{"plan", cpu->plan}, {"library", cpu->library}, {"cpu", cpu->cpu}, {"features", cpu->features},
                {"constants", constants}};
  }
  for (const CudaTargetEntry &c : cuda) {
    json kernels = json::object(), constants = json::object();
    for (const auto &[name, f] : c.kernels)
      kernels[name] = {{"cubin", f.cubin}, {"ptx", f.ptx}};
    for (const auto &[slot, entry] : c.constants)
      constants[std::to_string(slot)] = entry;
    j["cuda"].push_back({{"arch", c.arch}, {"multiprocessors", c.multiprocessors}, {"plan", c.plan},
                         {"kernels", kernels}, {"constants", constants}});
  }
  return j;
}

Manifest Manifest::fromJson(const std::string &text, const std::string &runtimeVersion) {
  Manifest m;
  try {
    json j = json::parse(text);
    j.at("format").get_to(m.format);
    if (m.format != kFormatVersion)
      throw ArtifactError(Status::Version, "the artifact's manifest is format " + std::to_string(m.format) +
                                               "; this runtime reads " + std::to_string(kFormatVersion));
    j.at("rfuse_version").get_to(m.rfuseVersion);
    if (m.rfuseVersion != runtimeVersion)
      throw ArtifactError(Status::Version, "the artifact was written by rfuse " + m.rfuseVersion +
                                               "; this runtime is rfuse " + runtimeVersion +
                                               " (export it again with this version)");
    j.at("entry").get_to(m.entry);
    j.at("tf32").get_to(m.tf32);
    if (m.tf32 != "option" && m.tf32 != "allowed" && m.tf32 != "exact")
      throw ArtifactError(Status::Corrupt, "the artifact's manifest has tf32 = " + m.tf32);
    for (const json &t : j.at("inputs"))
      m.inputs.push_back(typeFrom(t));
    for (const json &t : j.at("outputs"))
      m.outputs.push_back(typeFrom(t));
    for (const json &c : j.at("cuda")) {
      CudaTargetEntry e;
      c.at("arch").get_to(e.arch);
      c.at("multiprocessors").get_to(e.multiprocessors);
      c.at("plan").get_to(e.plan);
      for (const auto &[name, f] : c.at("kernels").items())
        e.kernels[name] = {f.at("cubin").get<std::string>(), f.at("ptx").get<std::string>()};
      for (const auto &[slot, entry] : c.at("constants").items())
        e.constants[std::stoi(slot)] = entry.get<std::string>();
      m.cuda.push_back(std::move(e));
    }
    if (j.contains("cpu")) {
      const json &c = j.at("cpu");
      CpuTargetEntry e;
      c.at("plan").get_to(e.plan);
      c.at("library").get_to(e.library);
      c.at("cpu").get_to(e.cpu);
      c.at("features").get_to(e.features);
      for (const auto &[slot, entry] : c.at("constants").items())
        e.constants[std::stoi(slot)] = entry.get<std::string>();
      m.cpu = std::move(e);
    }
    j.at("ptx_arch").get_to(m.ptxArch);
    for (const json &l : j.at("libraries")) {
      std::string name = l.get<std::string>();
      if (name == "cublaslt")
        m.usesCublasLt = true;
      else if (name == "cudnn")
        m.usesCudnn = true;
      else
        throw ArtifactError(Status::Unsupported, "the artifact calls the library " + name + ", which rfuse_rt does not know");
    }
  } catch (const json::exception &e) {
    throw ArtifactError(Status::Corrupt, std::string("the artifact's manifest is invalid: ") + e.what());
  } catch (const std::logic_error &e) { // stoi
    throw ArtifactError(Status::Corrupt, std::string("the artifact's manifest is invalid: ") + e.what());
  }
  return m;
}

const CudaTargetEntry &selectCudaTarget(const Manifest &m, const std::string &deviceArch, bool &ptx) {
  ptx = false;
  int dev = archNumber(deviceArch), newest = archNumber(m.ptxArch);
  // A cubin runs on its own architecture and on later minor versions of the same major one
  // (sm_86 code on an sm_89 GPU): the closest such cubin.
  const CudaTargetEntry *best = nullptr;
  for (const CudaTargetEntry &c : m.cuda) {
    int a = archNumber(c.arch);
    if (a > 0 && a / 10 == dev / 10 && a <= dev && (!best || a > archNumber(best->arch)))
      best = &c;
  }
  if (best)
    return *best;
  if (newest > 0 && dev >= newest)
    for (const CudaTargetEntry &c : m.cuda)
      if (c.arch == m.ptxArch) {
        ptx = true;
        return c;
      }
  std::string has;
  for (const CudaTargetEntry &c : m.cuda)
    has += (has.empty() ? "" : ", ") + c.arch;
  if (m.cuda.empty())
    throw ArtifactError(Status::Architecture, "the artifact has no GPU program (it was exported for the CPU)");
  throw ArtifactError(Status::Architecture,
                      "the artifact has cubins for " + has +
                          (m.ptxArch.empty() ? std::string(" and no PTX")
                                             : " and PTX for " + m.ptxArch + " (which runs on " + m.ptxArch +
                                                   " and newer)") +
                          " (a cubin runs on later GPUs of its major version only)" +
                          "; this GPU is " + deviceArch + " (export it with --arch " + deviceArch + ")");
}

} // namespace rfuse::artifact
