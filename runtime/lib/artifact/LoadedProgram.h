// An artifact loaded for this process's GPU, or its CPU (when there is no GPU, the artifact has
// only a CPU program, or the device option says "cpu"): the C API's program (rfuse/rfuse_rt.h).
#ifndef RFUSE_RUNTIME_ARTIFACT_LOADEDPROGRAM_H
#define RFUSE_RUNTIME_ARTIFACT_LOADEDPROGRAM_H

#include "Manifest.h"

#include "rfuse/Runtime/StepProgram.h"
#include "rfuse/Runtime/Tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace rfuse::cuda {
class GpuProgram;
}
namespace rfuse::cpu {
class CpuProgram;
}

namespace rfuse::artifact {

class LoadedProgram : public StepProgram {
public:
  /// Reads, verifies and loads the artifact at `path`. Throws ArtifactError (every failure, with
  /// its Status).
  explicit LoadedProgram(const std::string &path);
  /// The same from a container already read (Container::parse of an artifact's bytes).
  explicit LoadedProgram(const Container &c);
  ~LoadedProgram();
  const Manifest &manifest() const { return manifest_; }
  /// "cuda sm_90 (cubins)", "cuda sm_100 (PTX for sm_90, compiled by the driver)"
  const std::string &description() const { return description_; }

  /// Input i of type `given` (checked against the signature) from host memory.
  /// A metadata entry the exporter stored (ExportOptions::metadata), or null.
  const std::string *metadata(const std::string &name) const {
    auto it = metadata_.find(name);
    return it == metadata_.end() ? nullptr : &it->second;
  }

  void setInput(size_t i, const TensorType &given, const void *data, size_t bytes);
  void run();
  void getOutput(size_t i, void *data, size_t bytes);
  void runDevice(const uint64_t *inputs, const uint64_t *outputs);

  /// As a training loop's step program (StepProgram): on tensors of the device it was loaded
  /// for (Device::Cpu for its CPU program), into the caller's result tensors.
  std::vector<TypedShape> argumentTypes() const override { return arguments_; }
  const std::vector<TypedShape> &resultTypes() const override { return results_; }
  void run(const std::vector<Tensor> &inputs, const std::vector<Tensor> &outputs, Device device) const override;
  Device device() const { return cpu_ ? Device::Cpu : Device::Cuda; }

private:
  Manifest manifest_;
  std::map<std::string, std::string> metadata_;
  std::string description_;
  void loadCpu(const Container &c);
  /// Runs on device pointers (host pointers for the CPU program), of the signature's types.
  void launch(const std::vector<uintptr_t> &inputs, const std::vector<uintptr_t> &outputs) const;
  void loadCuda(const Container &c);
  std::unique_ptr<cuda::GpuProgram> gpu_; // one of the two
  std::unique_ptr<cpu::CpuProgram> cpu_;
  std::vector<Tensor> inputs_, outputs_;
  std::vector<bool> inputSet_;
  std::vector<TypedShape> arguments_, results_;
  bool ran_ = false;
};

} // namespace rfuse::artifact

#endif
