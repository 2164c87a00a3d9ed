// Runs a fused, outlined rfuse module on the GPU: generated kernels through NVRTC, matmuls
// through cuBLASLt, everything else (and any kernel codegen could not handle) on the host
// interpreter, with a warning naming it. Internal to the runtime; the Engine is the API.
#ifndef RFUSE_RUNTIME_CUDAEXECUTOR_H
#define RFUSE_RUNTIME_CUDAEXECUTOR_H

#include "rfuse/Runtime/HostTensor.h"

#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <string>
#include <vector>

namespace rfuse::cuda {

struct GpuTiming {
  double medianMs = 0, minMs = 0;
  int iterations = 0;
};

class GpuProgram {
public:
  /// Plans every step of `entry` and compiles its kernels for the current device.
  GpuProgram(mlir::ModuleOp module, const std::string &entry);
  ~GpuProgram();
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
