#include "Device.h"

#include <algorithm>

namespace rfuse::cuda {

Device &Device::get() {
  static Device d;
  return d;
}

Device::Device() {
  const DeviceInfo &info = deviceInfo();
  if (!info.available)
    throw CudaError("no usable CUDA device: " + info.reason);
  const DriverApi &api = driver();
  CUdevice dev;
  check(api.cuDeviceGet(&dev, 0), "cuDeviceGet", "opening device 0");
  CUcontext ctx;
  check(api.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", "opening device 0");
  check(api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", "opening device 0");
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
    return p;
  }
  CUdeviceptr p = 0;
  CUresult r = driver().cuMemAlloc(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) { // give cached blocks back and try once more
    releaseCached();
    r = driver().cuMemAlloc(&p, bytes);
  }
  check(r, "cuMemAlloc", "allocating " + std::to_string(bytes) + " bytes of device memory");
  return p;
}

void Device::release(CUdeviceptr p, size_t bytes) {
  bytes = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  std::lock_guard<std::mutex> lock(mu);
  freeLists[bytes].push_back(p);
}

void Device::releaseCached() {
  for (auto &[size, list] : freeLists)
    for (CUdeviceptr p : list)
      driver().cuMemFree(p);
  freeLists.clear();
}

CUfunction Device::function(const std::string &name, const CompiledKernel &k) {
  std::lock_guard<std::mutex> lock(mu);
  std::string key = name + "@" + std::to_string(std::hash<std::string>()(std::string(k.cubin.begin(), k.cubin.end())));
  auto it = functions.find(key);
  if (it != functions.end())
    return it->second;
  CUmodule mod;
  check(driver().cuModuleLoadData(&mod, k.cubin.data()), "cuModuleLoadData", "loading kernel " + name);
  CUfunction fn;
  check(driver().cuModuleGetFunction(&fn, mod, name.c_str()), "cuModuleGetFunction", "kernel " + name);
  functions[key] = fn;
  return fn;
}

cublasLtHandle_t Device::lt() {
  if (ltHandle)
    return ltHandle;
  const CublasLtApi &api = cublasLt();
  if (!api.loaded)
    throw CudaError("cuBLASLt is not available: " + api.error);
  if (api.cublasLtCreate(&ltHandle) != CUBLAS_STATUS_SUCCESS)
    throw CudaError("cublasLtCreate failed");
  return ltHandle;
}

CUdeviceptr Device::workspace() {
  if (!workspace_)
    workspace_ = alloc(workspaceSize);
  return workspace_;
}

cudnnHandle_t Device::dnn() {
  if (dnnHandle)
    return dnnHandle;
  const CudnnApi &api = cudnn();
  if (!api.loaded)
    throw CudaError("cuDNN is not available: " + api.error);
  cudnnStatus_t st = api.cudnnCreate(&dnnHandle);
  if (st != CUDNN_STATUS_SUCCESS)
    throw CudaError(std::string("cudnnCreate failed: ") + api.cudnnGetErrorString(st));
  st = api.cudnnSetStream(dnnHandle, (cudaStream_t)stream);
  if (st != CUDNN_STATUS_SUCCESS)
    throw CudaError(std::string("cudnnSetStream failed: ") + api.cudnnGetErrorString(st));
  return dnnHandle;
}

} // namespace rfuse::cuda
