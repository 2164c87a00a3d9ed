// NVRTC compiles of generated kernels through the kernel cache (memory, then disk), and whether the
// GPU is usable for the JIT (a device and NVRTC): the JIT's side of the GPU runtime (rfuse_rt
// loads its kernels from an artifact and never touches NVRTC).
#include "CudaApi.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/DiskCache.h"
#include "rfuse/Runtime/Options.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <fstream>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#ifndef RFUSE_VERSION
#define RFUSE_VERSION "0.1.0"
#endif

namespace rfuse::cuda {

const DeviceInfo &deviceInfo() {
  static DeviceInfo info = [] {
    DeviceInfo d = gpuPresence();
    if (d.present && !nvrtc().loaded)
      d.reason = "CUDA device found but NVRTC is missing (" + nvrtc().error + ")";
    d.available = d.present && nvrtc().loaded;
    return d;
  }();
  return info;
}

int nvrtcVersion() {
  if (!nvrtc().loaded)
    return 0;
  int major = 0, minor = 0;
  nvrtc().nvrtcVersion(&major, &minor);
  return major * 1000 + minor * 10;
}

LibraryVersions libraryVersions() {
  LibraryVersions v;
  const DriverApi &d = driver();
  if (d.loaded)
    d.cuDriverGetVersion(&v.driver);
  else
    v.driverError = d.error;
  v.nvrtc = nvrtcVersion();
  if (!nvrtc().loaded)
    v.nvrtcError = nvrtc().error;
  const CublasLtApi &lt = cublasLt();
  if (lt.loaded)
    v.cublasLt = lt.cublasLtGetVersion();
  else
    v.cublasLtError = lt.error;
  const CudnnApi &dnn = cudnn();
  if (dnn.loaded)
    v.cudnn = dnn.cudnnGetVersion();
  else
    v.cudnnError = dnn.error;
  return v;
}

namespace {
constexpr char kCubinMagic[8] = {'R', 'F', 'C', 'U', 'B', 'I', 'N', '1'};
} // namespace

// ---- Kernel cache ----------------------------------------------------------------------------

namespace {

// The in-memory cache of compiled kernels, least recently used first out beyond
// kMemoryCacheBytes of binaries (every distinct shape is a new kernel: unbounded, a process
// tracing many shapes would keep them all; the disk cache still has them).
std::mutex cacheMutex;
constexpr size_t kMemoryCacheBytes = 64u << 20;
struct MemoryCache {
  std::list<std::string> order; // least recently used first
  std::map<std::string, std::pair<CompiledKernel, std::list<std::string>::iterator>> entries;
  size_t bytes = 0;
  const CompiledKernel *find(const std::string &key) {
    auto it = entries.find(key);
    if (it == entries.end())
      return nullptr;
    order.splice(order.end(), order, it->second.second);
    return &it->second.first;
  }
  void put(const std::string &key, const CompiledKernel &k) {
    if (entries.count(key))
      return;
    order.push_back(key);
    entries.emplace(key, std::make_pair(k, std::prev(order.end())));
    bytes += k.cubin.size();
    while (bytes > kMemoryCacheBytes && order.size() > 1) {
      auto victim = entries.find(order.front());
      bytes -= victim->second.first.cubin.size();
      entries.erase(victim);
      order.pop_front();
    }
  }
  void clear() {
    order.clear();
    entries.clear();
    bytes = 0;
  }
} memoryCache;
KernelCacheStats stats;



std::string includePath() {
  if (std::string p = runtimeOptions().cudaInclude; !p.empty())
    return p;
  for (const char *c : {"/usr/local/cuda/include", "/usr/local/cuda-13.0/include", "/usr/include"})
    if (llvm::sys::fs::exists(std::string(c) + "/cuda_fp16.h"))
      return c;
  return "/usr/local/cuda/include";
}

// A cubin for `arch` (sm_XX), or with `ptx` PTX for its virtual architecture (compute_XX).
CompiledKernel nvrtcCompile(const std::string &name, const std::string &source, const std::string &arch,
                            bool ptx = false) {
  const NvrtcApi &api = nvrtc();
  if (!api.loaded)
    throw CudaError("NVRTC is not available: " + api.error);
  nvrtcProgram prog;
  std::string file = name + ".cu";
  if (api.nvrtcCreateProgram(&prog, source.c_str(), file.c_str(), 0, nullptr, nullptr) != NVRTC_SUCCESS)
    throw NvrtcError("nvrtcCreateProgram failed for kernel " + name);
  std::string target = ptx && arch.rfind("sm_", 0) == 0 ? "compute_" + arch.substr(3) : arch;
  std::string archOpt = "--gpu-architecture=" + target, inc = "--include-path=" + includePath();
  const char *opts[] = {archOpt.c_str(), "-default-device", "--std=c++17", inc.c_str()};
  nvrtcResult r = api.nvrtcCompileProgram(prog, 4, opts);
  size_t logSize = 0;
  api.nvrtcGetProgramLogSize(prog, &logSize);
  std::string log(logSize, '\0');
  if (logSize)
    api.nvrtcGetProgramLog(prog, log.data());
  if (r != NVRTC_SUCCESS) {
    api.nvrtcDestroyProgram(&prog);
    // Keep the source where a person can read it.
    llvm::SmallString<128> path;
    llvm::sys::path::system_temp_directory(true, path);
    llvm::sys::path::append(path, "rfuse-failed-" + name + "-" + arch + ".cu");
    std::ofstream(std::string(path)) << source;
    throw NvrtcError("NVRTC could not compile kernel " + name + " for " + arch + " (" +
                     api.nvrtcGetErrorString(r) + "); source saved to " + std::string(path) +
                     "\n" + log);
  }
  CompiledKernel k;
  k.arch = arch;
  k.log = log;
  size_t size = 0;
  if (ptx) {
    api.nvrtcGetPTXSize(prog, &size); // with its terminating NUL, as cuModuleLoadData wants it
    k.cubin.resize(size);
    api.nvrtcGetPTX(prog, k.cubin.data());
  } else {
    api.nvrtcGetCUBINSize(prog, &size);
    k.cubin.resize(size);
    api.nvrtcGetCUBIN(prog, k.cubin.data());
  }
  api.nvrtcDestroyProgram(&prog);
  return k;
}

} // namespace

CompiledKernel compilePtx(const std::string &name, const std::string &source, const std::string &arch) {
  return nvrtcCompile(name, source, arch, true);
}

std::string kernelCacheDir() {
  return runtimeOptions().cacheDir;
}

std::string kernelCacheKey(const std::string &source, const std::string &arch) {
  return cacheKeyHex(llvm::xxh3_64bits(source + "\n//arch " + arch + "\n//rfuse " + RFUSE_VERSION +
                               "\n//nvrtc " + std::to_string(nvrtcVersion())));
}

CompiledKernel compileKernel(const std::string &name, const std::string &source,
                             const std::string &arch) {
  bool useCache = runtimeOptions().diskCache;
  std::string key = kernelCacheKey(source, arch);
  if (useCache) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (const CompiledKernel *hit = memoryCache.find(key)) {
      ++stats.memoryHits;
      CompiledKernel k = *hit;
      k.cached = true;
      return k;
    }
  }
  std::string dir = kernelCacheDir();
  bool useDisk = useCache && trustedCacheDir(dir);
  if (useDisk) {
    std::vector<char> cubin;
    std::string problem;
    std::string path = dir + "/" + key + ".cubin";
    if (readCacheEntry(path, kCubinMagic, key, cubin, problem)) {
      CompiledKernel k{arch, std::move(cubin), "", true};
      std::lock_guard<std::mutex> lock(cacheMutex);
      ++stats.diskHits;
      memoryCache.put(key, k);
      return k;
    }
    if (!problem.empty()) {
      llvm::errs() << "rfuse: warning: ignoring kernel cache entry " << path << " (" << problem
                   << "); recompiling\n";
      std::lock_guard<std::mutex> lock(cacheMutex);
      ++stats.rejected;
    }
  }
  CompiledKernel k = nvrtcCompile(name, source, arch);
  std::lock_guard<std::mutex> lock(cacheMutex);
  ++stats.compiles;
  if (useCache)
    memoryCache.put(key, k);
  if (useDisk && writeCacheEntry(dir + "/" + key + ".cubin", kCubinMagic, key, k.cubin))
    ++stats.diskWrites;
  return k;
}

std::vector<CompiledKernel> compileKernels(const std::vector<std::string> &names,
                                           const std::vector<std::string> &sources,
                                           const std::string &arch) {
  std::vector<CompiledKernel> out(sources.size());
  std::atomic<size_t> next{0};
  std::vector<std::future<void>> workers;
  unsigned n = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), sources.size()));
  for (unsigned w = 0; w < n; ++w)
    workers.push_back(std::async(std::launch::async, [&] {
      for (size_t i; (i = next++) < sources.size();)
        out[i] = compileKernel(names[i], sources[i], arch);
    }));
  for (auto &f : workers)
    f.get(); // rethrows the first failure
  return out;
}

KernelCacheStats kernelCacheStats() {
  std::lock_guard<std::mutex> lock(cacheMutex);
  return stats;
}

void clearMemoryKernelCache() {
  std::lock_guard<std::mutex> lock(cacheMutex);
  memoryCache.clear();
}

} // namespace rfuse::cuda
