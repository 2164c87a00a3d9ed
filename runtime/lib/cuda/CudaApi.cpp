// dlopen-based loading of CUDA's libraries (see CudaApi.h) and the NVRTC kernel compiler with its
// memory and disk cache (see rfuse/Runtime/Cuda.h).
#include "CudaApi.h"
#include "rfuse/Runtime/Options.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/DiskCache.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <list>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <mutex>
#include <sstream>
#include <thread>

#ifndef RFUSE_VERSION
#define RFUSE_VERSION "0.1.0"
#endif

namespace rfuse::cuda {
namespace {

constexpr char kCubinMagic[8] = {'R', 'F', 'C', 'U', 'B', 'I', 'N', '1'};

} // namespace

void *openFirst(const std::vector<std::string> &names, std::string &error, std::string *opened) {
  for (const std::string &n : names)
    if (void *h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      if (opened)
        *opened = n;
      return h;
    }
  const char *why = dlerror(); // dlerror() clears itself: read it once
  error = "cannot load " + names.front() + ": " + (why ? why : "not found");
  return nullptr;
}

void *bindAddress(void *lib, const char *name, std::string &error) {
  void *p = dlsym(lib, name);
  if (!p && error.empty())
    error = std::string("missing symbol ") + name;
  return p;
}

const DriverApi &driver() {
  static DriverApi api = [] {
    DriverApi a{};
    void *lib = openFirst({"libcuda.so.1", "libcuda.so"}, a.error);
    if (!lib)
      return a;
    bool ok = true;
#define RF_BIND(field, sym) ok &= bind(lib, a.field, sym, a.error)
    RF_BIND(cuInit, "cuInit");
    RF_BIND(cuDeviceGetCount, "cuDeviceGetCount");
    RF_BIND(cuDeviceGet, "cuDeviceGet");
    RF_BIND(cuDeviceGetName, "cuDeviceGetName");
    RF_BIND(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    RF_BIND(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    RF_BIND(cuCtxSetCurrent, "cuCtxSetCurrent");
    RF_BIND(cuCtxSynchronize, "cuCtxSynchronize");
    RF_BIND(cuMemAlloc, "cuMemAlloc_v2");
    RF_BIND(cuMemFree, "cuMemFree_v2");
    RF_BIND(cuMemGetInfo, "cuMemGetInfo_v2");
    RF_BIND(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    RF_BIND(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    RF_BIND(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    RF_BIND(cuMemsetD32Async, "cuMemsetD32Async");
    RF_BIND(cuMemsetD8Async, "cuMemsetD8Async");
    RF_BIND(cuModuleLoadData, "cuModuleLoadData");
    RF_BIND(cuModuleUnload, "cuModuleUnload");
    RF_BIND(cuModuleGetFunction, "cuModuleGetFunction");
    RF_BIND(cuFuncSetAttribute, "cuFuncSetAttribute");
    RF_BIND(cuLaunchKernel, "cuLaunchKernel");
    RF_BIND(cuStreamCreate, "cuStreamCreate");
    RF_BIND(cuStreamWaitEvent, "cuStreamWaitEvent");
    RF_BIND(cuStreamDestroy, "cuStreamDestroy_v2");
    RF_BIND(cuStreamSynchronize, "cuStreamSynchronize");
    RF_BIND(cuEventCreate, "cuEventCreate");
    RF_BIND(cuEventRecord, "cuEventRecord");
    RF_BIND(cuEventSynchronize, "cuEventSynchronize");
    RF_BIND(cuEventElapsedTime, "cuEventElapsedTime_v2");
    RF_BIND(cuEventDestroy, "cuEventDestroy_v2");
    RF_BIND(cuGetErrorString, "cuGetErrorString");
    RF_BIND(cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    RF_BIND(cuStreamEndCapture, "cuStreamEndCapture");
    RF_BIND(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    RF_BIND(cuGraphLaunch, "cuGraphLaunch");
    RF_BIND(cuGraphExecDestroy, "cuGraphExecDestroy");
    RF_BIND(cuGraphDestroy, "cuGraphDestroy");
    RF_BIND(cuMemHostAlloc, "cuMemHostAlloc");
    RF_BIND(cuMemFreeHost, "cuMemFreeHost");
    RF_BIND(cuDriverGetVersion, "cuDriverGetVersion");
    a.loaded = ok;
    return a;
  }();
  return api;
}

const NvrtcApi &nvrtc() {
  static NvrtcApi api = [] {
    NvrtcApi a{};
    void *lib = openFirst({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                           "/usr/local/cuda/lib64/libnvrtc.so.13"},
                          a.error);
    if (!lib)
      return a;
    bool ok = true;
    RF_BIND(nvrtcVersion, "nvrtcVersion");
    RF_BIND(nvrtcCreateProgram, "nvrtcCreateProgram");
    RF_BIND(nvrtcCompileProgram, "nvrtcCompileProgram");
    RF_BIND(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
    RF_BIND(nvrtcGetProgramLog, "nvrtcGetProgramLog");
    RF_BIND(nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
    RF_BIND(nvrtcGetCUBIN, "nvrtcGetCUBIN");
    RF_BIND(nvrtcDestroyProgram, "nvrtcDestroyProgram");
    RF_BIND(nvrtcGetErrorString, "nvrtcGetErrorString");
    a.loaded = ok;
    return a;
  }();
  return api;
}

const CublasLtApi &cublasLt() {
  static CublasLtApi api = [] {
    CublasLtApi a{};
    void *lib = openFirst({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                           "/usr/local/cuda/lib64/libcublasLt.so.13"},
                          a.error);
    if (!lib)
      return a;
    bool ok = true;
    RF_BIND(cublasLtCreate, "cublasLtCreate");
    RF_BIND(cublasLtGetVersion, "cublasLtGetVersion");
    RF_BIND(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate");
    RF_BIND(cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy");
    RF_BIND(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
    RF_BIND(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
    RF_BIND(cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    RF_BIND(cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
    RF_BIND(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
    RF_BIND(cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    RF_BIND(cublasLtMatrixTransformDescCreate, "cublasLtMatrixTransformDescCreate");
    RF_BIND(cublasLtMatrixTransformDescDestroy, "cublasLtMatrixTransformDescDestroy");
    RF_BIND(cublasLtMatrixTransformDescSetAttribute, "cublasLtMatrixTransformDescSetAttribute");
    RF_BIND(cublasLtMatrixTransform, "cublasLtMatrixTransform");
    RF_BIND(cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    RF_BIND(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
    RF_BIND(cublasLtMatmul, "cublasLtMatmul");
#undef RF_BIND
    a.loaded = ok;
    return a;
  }();
  return api;
}

const CudnnApi &cudnn() {
  static CudnnApi api = [] {
    CudnnApi a{};
    void *lib = openFirst({"libcudnn.so.9", "libcudnn.so"}, a.error);
    if (!lib)
      return a;
    bool ok = true;
#define RF_BIND(field, sym) ok &= bind(lib, a.field, sym, a.error)
    RF_BIND(cudnnCreate, "cudnnCreate");
    RF_BIND(cudnnGetVersion, "cudnnGetVersion");
    RF_BIND(cudnnSetStream, "cudnnSetStream");
    RF_BIND(cudnnGetErrorString, "cudnnGetErrorString");
    RF_BIND(cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor");
    RF_BIND(cudnnSetTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
    RF_BIND(cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
    RF_BIND(cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor");
    RF_BIND(cudnnSetFilter4dDescriptor, "cudnnSetFilter4dDescriptor");
    RF_BIND(cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor");
    RF_BIND(cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
    RF_BIND(cudnnSetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor");
    RF_BIND(cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount");
    RF_BIND(cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType");
    RF_BIND(cudnnDestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor");
    RF_BIND(cudnnGetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7");
    RF_BIND(cudnnConvolutionForward, "cudnnConvolutionForward");
    RF_BIND(cudnnGetConvolutionBackwardDataAlgorithm_v7, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    RF_BIND(cudnnConvolutionBackwardData, "cudnnConvolutionBackwardData");
    RF_BIND(cudnnGetConvolutionBackwardFilterAlgorithm_v7, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    RF_BIND(cudnnConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter");
    RF_BIND(cudnnPoolingBackward, "cudnnPoolingBackward");
    RF_BIND(cudnnAddTensor, "cudnnAddTensor");
    RF_BIND(cudnnCreatePoolingDescriptor, "cudnnCreatePoolingDescriptor");
    RF_BIND(cudnnSetPooling2dDescriptor, "cudnnSetPooling2dDescriptor");
    RF_BIND(cudnnDestroyPoolingDescriptor, "cudnnDestroyPoolingDescriptor");
    RF_BIND(cudnnPoolingForward, "cudnnPoolingForward");
#undef RF_BIND
    a.loaded = ok;
    return a;
  }();
  return api;
}

void check(CUresult r, const char *call, const std::string &what) {
  if (r == CUDA_SUCCESS)
    return;
  const char *msg = nullptr;
  if (driver().cuGetErrorString)
    driver().cuGetErrorString(r, &msg);
  throw CudaError(what + ": " + call + " failed: " + (msg ? msg : "error " + std::to_string(r)));
}

const DeviceInfo &deviceInfo() {
  static DeviceInfo info = [] {
    DeviceInfo d;
    if (runtimeOptions().disableCuda) {
      d.reason = "disabled by RFUSE_DISABLE_CUDA";
      return d;
    }
    const DriverApi &api = driver();
    if (!api.loaded) {
      d.reason = "no CUDA driver (" + api.error + ")";
      return d;
    }
    int count = 0;
    if (api.cuInit(0) != CUDA_SUCCESS || api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
      d.reason = "no CUDA device";
      return d;
    }
    CUdevice dev;
    char name[256] = {0};
    api.cuDeviceGet(&dev, 0);
    api.cuDeviceGetName(name, sizeof name, dev);
    api.cuDeviceGetAttribute(&d.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    api.cuDeviceGetAttribute(&d.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    api.cuDeviceGetAttribute(&d.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    d.name = name;
    if (!nvrtc().loaded) {
      d.reason = "CUDA device found but NVRTC is missing (" + nvrtc().error + ")";
      return d;
    }
    d.available = true;
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

std::vector<std::string> supportedArchitectures() { return {"sm_86", "sm_89", "sm_90"}; }

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

CompiledKernel nvrtcCompile(const std::string &name, const std::string &source,
                            const std::string &arch) {
  const NvrtcApi &api = nvrtc();
  if (!api.loaded)
    throw CudaError("NVRTC is not available: " + api.error);
  nvrtcProgram prog;
  std::string file = name + ".cu";
  if (api.nvrtcCreateProgram(&prog, source.c_str(), file.c_str(), 0, nullptr, nullptr) != NVRTC_SUCCESS)
    throw NvrtcError("nvrtcCreateProgram failed for kernel " + name);
  std::string archOpt = "--gpu-architecture=" + arch, inc = "--include-path=" + includePath();
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
  api.nvrtcGetCUBINSize(prog, &size);
  k.cubin.resize(size);
  api.nvrtcGetCUBIN(prog, k.cubin.data());
  api.nvrtcDestroyProgram(&prog);
  return k;
}

} // namespace

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
