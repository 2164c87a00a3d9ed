// The GPU every program of the process shares: its context and stream, a caching allocator,
// loaded kernels, and the cuBLASLt / cuDNN handles with their workspace.
#ifndef RFUSE_RUNTIME_CUDA_DEVICE_H
#define RFUSE_RUNTIME_CUDA_DEVICE_H

#include "CudaApi.h"

#include "rfuse/Runtime/Cuda.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace rfuse::cuda {

class Device {
public:
  /// Device 0, opened on first use. Throws CudaError when there is no usable GPU.
  static Device &get();

  CUstream stream = nullptr;
  int sms = 0;
  std::string arch;

  /// Device memory from the caching allocator (sizes rounded up to 256 bytes); on running out,
  /// the cache is given back to the driver and the allocation tried once more.
  CUdeviceptr alloc(size_t bytes);
  /// Back to the cache (stream-ordered reuse: the stream orders later users after earlier ones).
  void release(CUdeviceptr p, size_t bytes);
  /// The loaded function `name` of a compiled kernel (loaded once per binary).
  CUfunction function(const std::string &name, const CompiledKernel &k);

  /// cuBLASLt's handle (and the shared workspace), created on first use.
  cublasLtHandle_t lt();
  /// cuDNN's handle on the stream, created on first use.
  cudnnHandle_t dnn();
  CUdeviceptr workspace();
  const size_t workspaceSize = 32u << 20;

private:
  Device();
  std::mutex mu;
  std::map<size_t, std::vector<CUdeviceptr>> freeLists;
  std::map<std::string, CUfunction> functions;
  cublasLtHandle_t ltHandle = nullptr;
  cudnnHandle_t dnnHandle = nullptr;
  CUdeviceptr workspace_ = 0;
  void releaseCached();
};

} // namespace rfuse::cuda

#endif
