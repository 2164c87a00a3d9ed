// The artifact's manifest (entry "manifest.json"): what the writer records and the loader reads.
//
//   {"format": 1, "rfuse_version": "0.1.0", "entry": "main", "tf32": "option" | "allowed" | "exact",
//    "inputs": [{"dtype": "f32", "shape": [...]}, ...], "outputs": [...],
//    "cuda": [{"arch": "sm_90", "multiprocessors": 132, "plan": "cuda/sm_90/plan.json",
//              "kernels": {"<name>": {"cubin": "cuda/sm_90/<name>.cubin", "ptx": "..."}},
//              "constants": {"<slot>": "cuda/sm_90/constant/<slot>"}}, ...],
//    "cpu": {"plan": "cpu/plan.json", "library": "cpu/kernels.so", "cpu": "skylake-avx512",
//            "features": "+avx2,+avx512f,...", "constants": {...}}   (absent without --cpu)
//    "ptx_arch": "sm_90",      (the target whose kernels also come as PTX; "" when none)
//    "libraries": ["cublaslt", "cudnn"]}   (what the plans' library steps call)
#ifndef RFUSE_RUNTIME_ARTIFACT_MANIFEST_H
#define RFUSE_RUNTIME_ARTIFACT_MANIFEST_H

#include "rfuse/Runtime/Artifact.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace rfuse::artifact {

struct KernelFiles {
  std::string cubin, ptx; ///< entry names ("" when absent)
};

struct CudaTargetEntry {
  std::string arch;
  int multiprocessors = 0;
  std::string plan;
  std::map<std::string, KernelFiles> kernels;
  std::map<int, std::string> constants; ///< slot -> entry
};

/// The host-CPU program: its plan, its kernels as a shared library, and the CPU they were
/// compiled for (LLVM's name and "+feature" list: the loading machine must have the features).
struct CpuTargetEntry {
  std::string plan, library, cpu, features;
  std::map<int, std::string> constants; ///< slot -> entry
};

struct Manifest {
  uint32_t format = kFormatVersion;
  std::string rfuseVersion, entry, tf32 = "option";
  std::vector<TensorType> inputs, outputs;
  std::vector<CudaTargetEntry> cuda;
  std::optional<CpuTargetEntry> cpu;
  std::string ptxArch;
  bool usesCublasLt = false, usesCudnn = false;

  nlohmann::json toJson() const;
  /// Throws ArtifactError: Corrupt (a missing or mistyped field), Version (another format or
  /// rfuse version than `runtimeVersion`).
  static Manifest fromJson(const std::string &text, const std::string &runtimeVersion);
};

/// Which target runs on a GPU of `deviceArch` ("sm_90"): the one with cubins for it (or for the
/// closest earlier minor version of its major one, which the GPU runs), else the PTX target when
/// the GPU is at least its architecture. Sets `ptx`. Throws ArtifactError
/// (Architecture) naming what the artifact holds.
const CudaTargetEntry &selectCudaTarget(const Manifest &m, const std::string &deviceArch, bool &ptx);

/// The "+feature"s of `features` this CPU lacks (of those it can tell: the x86 extensions
/// CPUID reports); empty when it has them all.
std::vector<std::string> missingCpuFeatures(const std::string &features);

/// 90 for "sm_90"; -1 when not of that form.
int archNumber(const std::string &arch);

} // namespace rfuse::artifact

#endif
