// The CUDA side of the runtime, MLIR-free: device discovery, NVRTC compilation with a memory and
// disk kernel cache. CUDA's libraries (libcuda.so.1, NVRTC, cuBLASLt) are dlopen'd on first use,
// so rfuse loads and works (on the CPU) on machines with no GPU, no driver and no toolkit.
#ifndef RFUSE_RUNTIME_CUDA_H
#define RFUSE_RUNTIME_CUDA_H

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rfuse::cuda {

/// A CUDA failure: the message names the call, the error, and what was being done (a kernel's
/// name and launch configuration, an allocation's size, ...).
class CudaError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// NVRTC rejected a kernel: the message carries NVRTC's log and the path of the saved source.
class NvrtcError : public CudaError {
public:
  using CudaError::CudaError;
};

struct DeviceInfo {
  bool present = false;   ///< a driver and a device: memory, transfers and loaded kernels work
  bool available = false; ///< present and NVRTC loads: the JIT can compile for it
  std::string reason; ///< why not, when !available ("no CUDA driver (libcuda.so.1)", ...)
  std::string name;
  int major = 0, minor = 0, multiprocessors = 0;
  std::string arch() const { return "sm_" + std::to_string(major * 10 + minor); }
};

/// Probes the driver and device 0 once, and whether NVRTC loads (the JIT runtime's question);
/// never throws. RFUSE_DISABLE_CUDA=1 hides the GPU.
const DeviceInfo &deviceInfo();
/// The driver and device 0 only, without touching NVRTC (`available` stays false): what rfuse_rt,
/// which compiles nothing, asks.
const DeviceInfo &gpuPresence();

/// NVRTC's version as major * 1000 + minor * 10, or 0 when NVRTC cannot be loaded.
int nvrtcVersion();

/// What rf_sitrep() reports: the libraries found and their versions (0 / the error when not),
/// the architectures rfuse generates code for.
struct LibraryVersions {
  int driver = 0;                  ///< cuDriverGetVersion (e.g. 13000)
  std::string driverError;
  int nvrtc = 0;                   ///< as nvrtcVersion()
  std::string nvrtcError;
  size_t cublasLt = 0;             ///< cublasLtGetVersion
  std::string cublasLtError;
  size_t cudnn = 0;                ///< cudnnGetVersion
  std::string cudnnError;
};
LibraryVersions libraryVersions();
/// The architectures rfuse's generated kernels are made and tested for.
std::vector<std::string> supportedArchitectures();

struct CompiledKernel {
  std::string arch;
  std::vector<char> cubin; ///< a cubin for `arch`, or PTX text (NUL-terminated) the driver compiles
  std::string log;
  bool cached = false; ///< from the memory or disk cache
};

/// Compiles CUDA C++ `source` for `arch` (e.g. "sm_90") with NVRTC, through the kernel cache:
/// memory, then disk under kernelCacheDir() (skipped with RFUSE_DISABLE_CACHE=1). Throws
/// NvrtcError / CudaError.
CompiledKernel compileKernel(const std::string &name, const std::string &source,
                             const std::string &arch);

/// PTX of `source` for `arch`'s virtual architecture (sm_90 -> compute_90), which the driver
/// compiles for that GPU and any newer one (no cache). Throws NvrtcError / CudaError.
CompiledKernel compilePtx(const std::string &name, const std::string &source, const std::string &arch);

/// Compiles several kernels in parallel (one thread per hardware core).
std::vector<CompiledKernel> compileKernels(const std::vector<std::string> &names,
                                           const std::vector<std::string> &sources,
                                           const std::string &arch);

/// RFUSE_CACHE_DIR, else $XDG_CACHE_HOME/rfuse, else ~/.cache/rfuse.
std::string kernelCacheDir();

struct KernelCacheStats {
  uint64_t memoryHits = 0, diskHits = 0, compiles = 0, diskWrites = 0, rejected = 0;
};
KernelCacheStats kernelCacheStats();
/// Library calls' first runs in this process (a cuBLASLt product's or cuDNN convolution's plan
/// and algorithm chosen, and the library's own first work for it), and their wall time.
struct LibraryCallStats {
  uint64_t firstCalls = 0;
  double firstCallSeconds = 0;
  double planSeconds = 0; ///< of which making the calls' plans (descriptors, algorithms chosen)
  double longestPlanSeconds = 0; ///< the longest plan (a library's one-time start shows here)
  /// Plans whose algorithm was found remembered (PlanCache: earlier in the process, or on disk),
  /// of those the ones the library refused, and plans chosen afresh (heuristics, and timing for
  /// large products: no entry, or a refused one).
  uint64_t plansRecalledInMemory = 0, plansRecalledFromDisk = 0, plansRefused = 0, plansChosen = 0;
};
LibraryCallStats libraryCallStats();
/// Starts cuBLASLt's and cuDNN's one-time initialization on threads of their own (once each per
/// process; a no-op without a GPU or the library): a front end that knows a GPU program with
/// library calls is coming (a training loop, before it traces) calls it early.
void warmLibraries(bool cublasLt, bool cudnn);
/// Forgets the in-memory cache (the disk cache stays).
void clearMemoryKernelCache();
/// Forgets the library plans remembered in memory (those on disk stay): the next program's
/// library calls read theirs from disk, as a new process would.
void clearMemoryPlanCache();
/// Kernel modules loaded on the device now (programs hold theirs while they live; 0 without a
/// device in use).
size_t loadedKernelModules();

/// The cache key of a kernel: hash of source (the canonical kernel, with its shapes and dtypes),
/// arch, rfuse version and NVRTC version.
std::string kernelCacheKey(const std::string &source, const std::string &arch);

} // namespace rfuse::cuda

#endif
