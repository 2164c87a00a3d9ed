// The GPU every program of the process shares: its context and stream, a caching allocator,
// loaded kernels, and the cuBLASLt / cuDNN handles with their workspace.
#ifndef RFUSE_RUNTIME_CUDA_DEVICE_H
#define RFUSE_RUNTIME_CUDA_DEVICE_H

#include "CudaApi.h"

#include "rfuse/Runtime/Cuda.h"

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace rfuse::cuda {

/// Loads cuBLASLt and/or cuDNN and creates their handles on a thread of their own, so that a
/// program's first run does not wait for them (hundreds of milliseconds of dlopen and
/// initialization) while its kernels load. Safe before the device is opened; failures are left
/// to the first real use to report. Each library is warmed once per process.
void warmLibraries(bool cublasLt, bool cudnn);

class Device {
public:
  /// Device 0, opened on first use. Throws CudaError when there is no usable GPU.
  static Device &get();

  CUstream stream = nullptr;
  int sms = 0;
  std::string arch;

  /// Device memory from the caching allocator (sizes rounded up to 256 bytes); on running out,
  /// the cache is given back to the driver and the allocation tried once more, then
  /// OutOfMemoryError (asked, free) is thrown.
  CUdeviceptr alloc(size_t bytes);
  /// Back to the cache (stream-ordered reuse: the stream orders later users after earlier ones).
  void release(CUdeviceptr p, size_t bytes);
  /// The loaded function `name` of a compiled kernel: its module is loaded once per binary and
  /// unloaded when the last user releases it (programs hold their kernels while they live, so
  /// dropped programs give their modules back).
  struct KernelRef {
    CUfunction function = nullptr;
    std::string key;
  };
  KernelRef acquireFunction(const std::string &name, const CompiledKernel &k);
  void releaseFunction(const std::string &key);
  size_t moduleCount() {
    std::lock_guard<std::mutex> lock(mu);
    return modules.size();
  }

  /// cuBLASLt's handle (and the shared workspace), created on first use (once, whichever thread
  /// asks first; the others wait for it).
  cublasLtHandle_t lt();
  /// cuDNN's handle on the stream, created on first use (likewise).
  cudnnHandle_t dnn();
  CUdeviceptr workspace();
  const size_t workspaceSize = 32u << 20;

  /// Host memory into device memory through two pinned staging buffers: fill(offset, n, staging)
  /// writes bytes [offset, offset + n) of the destination into `staging` while the previous chunk
  /// copies. Returns once the last chunk is queued (the stream orders later work after it).
  void upload(CUdeviceptr dst, size_t bytes, const std::function<void(size_t, size_t, void *)> &fill);
  /// The reverse: drain(offset, n, staging) reads each chunk as the next one copies; returns when
  /// everything has been drained.
  void download(CUdeviceptr src, size_t bytes, const std::function<void(size_t, size_t, const void *)> &drain);
  /// Every copy between host and device is counted here (bytes, copies, seconds).
  void countTransfer(bool toDevice, size_t bytes, double seconds);
  std::atomic<uint64_t> uploadedBytes{0}, downloadedBytes{0}, uploads{0}, downloads{0};
  std::atomic<uint64_t> uploadNanos{0}, downloadNanos{0};
  /// Bytes the allocator has handed out (live) and holds in its cache.
  size_t bytesInUse() const { return inUse; }
  size_t bytesCached() const { return cached; }
  static constexpr size_t stagingChunk = 16u << 20;
  /// Frees the cached blocks (the caller has synchronized: none is in flight).
  void releaseCache() {
    std::lock_guard<std::mutex> lock(mu);
    releaseCached();
  }

private:
  Device();
  CUcontext context = nullptr;
  std::mutex mu;
  std::map<size_t, std::vector<CUdeviceptr>> freeLists;
  struct LoadedModule {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    int users = 0;
  };
  std::map<std::string, LoadedModule> modules; // by kernel name and cubin hash
  cublasLtHandle_t ltHandle = nullptr;
  cudnnHandle_t dnnHandle = nullptr;
  std::once_flag ltOnce, dnnOnce;
  CUdeviceptr workspace_ = 0;
  size_t inUse = 0, cached = 0;
  void *staging[2] = {nullptr, nullptr};
  CUevent stagingFree[2] = {nullptr, nullptr};
  std::mutex stagingMu;
  void ensureStaging();
  void releaseCached(); // with `mu` held
};

} // namespace rfuse::cuda

#endif
