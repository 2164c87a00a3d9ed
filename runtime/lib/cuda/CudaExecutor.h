// Runs an execution plan on the GPU: generated kernels through NVRTC, matmuls through cuBLASLt,
// convolutions and pooling through cuDNN, host steps on the interpreter (with a warning naming
// each), all through the shared step loop; from the second run a program without host steps is
// replayed as one CUDA graph. Internal to the runtime; the Engine is the API.
#ifndef RFUSE_RUNTIME_CUDAEXECUTOR_H
#define RFUSE_RUNTIME_CUDAEXECUTOR_H

#include "../StepLoop.h"
#include "rfuse/Codegen/Plan.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/HostTensor.h"
#include "rfuse/Runtime/Tensor.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rfuse::cuda {

struct GpuTiming {
  double medianMs = 0, minMs = 0;
  int iterations = 0;
};

/// Where a GPU program's kernels come from: a binary for each of the plan's kernels (names[k],
/// generated as sources[k]) for `arch` — a cubin, or PTX the driver compiles. The JIT compiles
/// them with NVRTC (compileKernels); an ahead-of-time artifact holds them.
using KernelLoader = std::function<std::vector<CompiledKernel>(
    const std::vector<std::string> &names, const std::vector<std::string> &sources, const std::string &arch)>;

class GpuProgram {
public:
  /// Loads the plan's kernels for the current device (a plan made for Backend::Cuda) through
  /// `kernels`; host steps and constants are computed by `hostSteps`. `tf32`: whether f32
  /// products may use TF32, fixed for this program (else the tf32 option at each run).
  GpuProgram(codegen::ExecutionPlan plan, const KernelLoader &kernels, runtime::HostStepRunner hostSteps,
             std::optional<bool> tf32 = std::nullopt);
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
