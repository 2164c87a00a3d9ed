// Runs an execution plan on the GPU: generated kernels through NVRTC, matmuls through cuBLASLt,
// convolutions and pooling through cuDNN, host steps on the interpreter (with a warning naming
// each), all through the shared step loop; from the second run a program without host steps is
// replayed as one CUDA graph. Internal to the runtime; the Engine is the API.
#ifndef RFUSE_RUNTIME_CUDAEXECUTOR_H
#define RFUSE_RUNTIME_CUDAEXECUTOR_H

#include "rfuse/Codegen/ExecutionPlan.h"
#include "rfuse/Runtime/HostTensor.h"
#include "rfuse/Runtime/Tensor.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rfuse::cuda {

struct GpuTiming {
  double medianMs = 0, minMs = 0;
  int iterations = 0;
};

class GpuProgram {
public:
  /// Compiles the plan's kernels for the current device (a plan made for Backend::Cuda).
  /// `tf32`: whether f32 products may use TF32, fixed for this program (else the tf32 option at
  /// each run).
  explicit GpuProgram(codegen::ExecutionPlan plan, std::optional<bool> tf32 = std::nullopt);
  ~GpuProgram();
  /// Runs on device memory: inputs[k] holds argument k, outputs[k] receives result k (memory
  /// distinct from the inputs). Queued on the device's stream; returns without waiting.
  void run(const std::vector<uintptr_t> &inputs, const std::vector<uintptr_t> &outputs);
  /// Device tensors for the results of one run.
  std::vector<Tensor> allocateResults() const;
  /// The same from and to host memory (uploads, runs, downloads).
  std::vector<HostTensor> run(const std::vector<HostTensor> &inputs);
  /// Uploads `inputs` once, runs the program `iterations` times (after warm-up), timing each run
  /// with CUDA events; returns the median.
  GpuTiming benchmark(const std::vector<HostTensor> &inputs, int iterations);
  /// Steps that run on the host, with the reason (empty when everything runs on the GPU).
  const std::vector<std::string> &hostFallbacks() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace rfuse::cuda

#endif
