#include "Device.h"
#include "Libraries.h"

#include "rfuse/Runtime/Tensor.h"
#include "rfuse/Runtime/Timeline.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace rfuse::cuda {

Device &Device::get() {
  // Never destroyed: programs and tensors that outlive it in static storage (a cache of the R
  // glue, say) release into it during exit, in whatever order statics go.
  static Device &d = *new Device;
  // The driver's current context is per thread: every thread that uses the device (R's, and
  // the worker threads an interruptible compile runs on) makes the primary context current once.
  thread_local bool current = false;
  if (!current) {
    check(driver().cuCtxSetCurrent(d.context), "cuCtxSetCurrent", "using device 0 on this thread");
    current = true;
  }
  return d;
}

Device::Device() {
  TimelineSpan span("CUDA context");
  const DeviceInfo &info = gpuPresence();
  if (!info.present)
    throw CudaError("no usable CUDA device: " + info.reason);
  const DriverApi &api = driver();
  CUdevice dev;
  check(api.cuDeviceGet(&dev, 0), "cuDeviceGet", "opening device 0");
  check(api.cuDevicePrimaryCtxRetain(&context, dev), "cuDevicePrimaryCtxRetain", "opening device 0");
  check(api.cuCtxSetCurrent(context), "cuCtxSetCurrent", "opening device 0");
  check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "creating a stream");
  sms = info.multiprocessors;
  arch = info.arch();
}

CUdeviceptr Device::alloc(size_t bytes) {
  bytes = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  std::lock_guard<std::mutex> lock(mu);
  auto it = freeLists.find(bytes);
  if (it != freeLists.end() && !it->second.empty()) {
    CUdeviceptr p = it->second.back();
    it->second.pop_back();
    cached -= bytes;
    inUse += bytes;
    return p;
  }
  CUdeviceptr p = 0;
  auto began = std::chrono::steady_clock::now();
  CUresult r = driver().cuMemAlloc(&p, bytes);
  // A slow allocation (the driver busy on another thread, say) is marked on the timeline.
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
  if (ms >= 1)
    timelineMark("slow cuMemAlloc", std::to_string(bytes) + " bytes, " + std::to_string(ms) + " ms");
  if (r == CUDA_ERROR_OUT_OF_MEMORY) { // give cached blocks back and try once more
    // Blocks released on the stream may still be read by queued work: wait for it first.
    driver().cuStreamSynchronize(stream);
    releaseCached();
    r = driver().cuMemAlloc(&p, bytes);
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t free = 0, total = 0;
    driver().cuMemGetInfo(&free, &total);
    throw OutOfMemoryError(bytes, free, total);
  }
  check(r, "cuMemAlloc", "allocating " + std::to_string(bytes) + " bytes of device memory");
  inUse += bytes;
  return p;
}

void Device::release(CUdeviceptr p, size_t bytes) {
  bytes = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  std::lock_guard<std::mutex> lock(mu);
  freeLists[bytes].push_back(p);
  inUse -= bytes;
  cached += bytes;
}

void Device::releaseCached() {
  for (auto &[size, list] : freeLists)
    for (CUdeviceptr p : list)
      driver().cuMemFree(p);
  freeLists.clear();
  cached = 0;
}

void Device::ensureStaging() {
  if (staging[0])
    return;
  const DriverApi &api = driver();
  TimelineSpan span("pinned staging");
  for (int k = 0; k < 2; ++k) {
    check(api.cuMemHostAlloc(&staging[k], stagingChunk, 0), "cuMemHostAlloc",
          "allocating " + std::to_string(stagingChunk) + " bytes of pinned staging memory");
    check(api.cuEventCreate(&stagingFree[k], CU_EVENT_DISABLE_TIMING), "cuEventCreate", "staging");
    check(api.cuEventRecord(stagingFree[k], stream), "cuEventRecord", "staging");
  }
}

void Device::countTransfer(bool toDevice, size_t bytes, double seconds) {
  uint64_t ns = (uint64_t)(seconds * 1e9);
  if (toDevice) {
    uploadedBytes += bytes;
    uploads += 1;
    uploadNanos += ns;
  } else {
    downloadedBytes += bytes;
    downloads += 1;
    downloadNanos += ns;
  }
}

void Device::upload(CUdeviceptr dst, size_t bytes, const std::function<void(size_t, size_t, void *)> &fill) {
  auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(stagingMu);
  ensureStaging();
  const DriverApi &api = driver();
  int k = 0;
  for (size_t off = 0; off < bytes; off += stagingChunk, k ^= 1) {
    size_t n = std::min(stagingChunk, bytes - off);
    auto waited = std::chrono::steady_clock::now();
    check(api.cuEventSynchronize(stagingFree[k]), "cuEventSynchronize", "uploading (staging buffer)");
    // A long wait for the staging buffer (its last copy queued behind other work) is marked.
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - waited).count();
    if (ms >= 1)
      timelineMark("slow staging wait", std::to_string(ms) + " ms");
    fill(off, n, staging[k]);
    check(api.cuMemcpyHtoDAsync(dst + off, staging[k], n, stream), "cuMemcpyHtoDAsync",
          "uploading " + std::to_string(bytes) + " bytes");
    check(api.cuEventRecord(stagingFree[k], stream), "cuEventRecord", "uploading");
  }
  countTransfer(true, bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void Device::download(CUdeviceptr src, size_t bytes, const std::function<void(size_t, size_t, const void *)> &drain) {
  auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(stagingMu);
  ensureStaging();
  const DriverApi &api = driver();
  auto issue = [&](size_t off, int k) {
    size_t n = std::min(stagingChunk, bytes - off);
    check(api.cuMemcpyDtoHAsync(staging[k], src + off, n, stream), "cuMemcpyDtoHAsync",
          "downloading " + std::to_string(bytes) + " bytes");
    check(api.cuEventRecord(stagingFree[k], stream), "cuEventRecord", "downloading");
  };
  if (bytes)
    issue(0, 0);
  int k = 0;
  for (size_t off = 0; off < bytes; off += stagingChunk, k ^= 1) {
    if (off + stagingChunk < bytes)
      issue(off + stagingChunk, k ^ 1); // the next chunk copies while this one is drained
    check(api.cuEventSynchronize(stagingFree[k]), "cuEventSynchronize", "downloading");
    drain(off, std::min(stagingChunk, bytes - off), staging[k]);
  }
  countTransfer(false, bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

Device::KernelRef Device::acquireFunction(const std::string &name, const CompiledKernel &k) {
  std::lock_guard<std::mutex> lock(mu);
  std::string key = name + "@" + std::to_string(std::hash<std::string>()(std::string(k.cubin.begin(), k.cubin.end())));
  auto it = modules.find(key);
  if (it == modules.end()) {
    LoadedModule m;
    check(driver().cuModuleLoadData(&m.module, k.cubin.data()), "cuModuleLoadData", "loading kernel " + name);
    if (CUresult r = driver().cuModuleGetFunction(&m.function, m.module, name.c_str()); r != CUDA_SUCCESS) {
      driver().cuModuleUnload(m.module);
      check(r, "cuModuleGetFunction", "kernel " + name);
    }
    it = modules.emplace(key, m).first;
  }
  ++it->second.users;
  return {it->second.function, key};
}

size_t loadedKernelModules() {
  return gpuPresence().present ? Device::get().moduleCount() : 0;
}

void Device::releaseFunction(const std::string &key) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = modules.find(key);
  if (it == modules.end() || --it->second.users > 0)
    return;
  // The last program using it is gone; nothing queued may still run its kernel.
  driver().cuStreamSynchronize(stream);
  driver().cuModuleUnload(it->second.module);
  modules.erase(it);
}

cublasLtHandle_t Device::lt() {
  std::call_once(ltOnce, [&] {
    TimelineSpan span("cublasLtCreate");
    const CublasLtApi &api = cublasLt();
    if (!api.loaded)
      throw CudaError("cuBLASLt is not available: " + api.error);
    if (api.cublasLtCreate(&ltHandle) != CUBLAS_STATUS_SUCCESS)
      throw CudaError("cublasLtCreate failed");
  });
  return ltHandle;
}

CUdeviceptr Device::workspace() {
  if (!workspace_)
    workspace_ = alloc(workspaceSize);
  return workspace_;
}

cudnnHandle_t Device::dnn() {
  std::call_once(dnnOnce, [&] {
    TimelineSpan span("cudnnCreate");
    const CudnnApi &api = cudnn();
    if (!api.loaded)
      throw CudaError("cuDNN is not available: " + api.error);
    cudnnHandle_t h = nullptr;
    cudnnStatus_t st = api.cudnnCreate(&h);
    if (st != CUDNN_STATUS_SUCCESS)
      throw CudaError(std::string("cudnnCreate failed: ") + api.cudnnGetErrorString(st));
    st = api.cudnnSetStream(h, (cudaStream_t)stream);
    if (st != CUDNN_STATUS_SUCCESS)
      throw CudaError(std::string("cudnnSetStream failed: ") + api.cudnnGetErrorString(st));
    dnnHandle = h;
  });
  return dnnHandle;
}

namespace {
// The warming threads, joined at exit (a library's initialization is not left half done).
struct Warmers {
  std::mutex mu;
  std::vector<std::thread> threads;
  std::once_flag lt, dnn;
  ~Warmers() {
    for (std::thread &t : threads)
      if (t.joinable())
        t.join();
  }
} warmers;
} // namespace

void warmLibraries(bool wantLt, bool wantDnn) {
  auto start = [](std::once_flag &once, void (*body)()) {
    std::call_once(once, [&] {
      std::lock_guard<std::mutex> lock(warmers.mu);
      warmers.threads.emplace_back([body] {
        try {
          body();
        } catch (...) { // the first real use reports it
        }
      });
    });
  };
  if (wantLt)
    start(warmers.lt, [] {
      TimelineSpan span("warming cuBLASLt");
      if (cublasLt().loaded && gpuPresence().present) {
        Device::get().lt();
        TimelineSpan heuristics("warming cuBLASLt's heuristics");
        warmMatmulHeuristics();
      }
    });
  if (wantDnn)
    start(warmers.dnn, [] {
      TimelineSpan span("warming cuDNN");
      if (cudnn().loaded && gpuPresence().present) {
        Device::get().dnn();
        TimelineSpan engines("warming cuDNN's convolution engines");
        warmConvolutionEngines();
      }
    });
}

} // namespace rfuse::cuda
