// StepProgram: what a loop of steps runs (TrainingLoop). A program with typed arguments and
// results that runs on tensors of one device into the caller's result tensors, so that a loop
// alternating between two sets of tensors reuses them (and on a GPU replays one CUDA graph per
// set). A JIT-compiled Program is one; so is an ahead-of-time artifact that rfuse_rt loaded
// (artifact::stepProgramOf), which is how a training step exported from R trains in a new
// session without tracing or compiling.
#ifndef RFUSE_RUNTIME_STEPPROGRAM_H
#define RFUSE_RUNTIME_STEPPROGRAM_H

#include "rfuse/Runtime/Tensor.h"

#include <utility>
#include <vector>

namespace rfuse {

/// A dtype and a shape: an argument's or a result's type.
using TypedShape = std::pair<DType, std::vector<int64_t>>;

class StepProgram {
public:
  virtual ~StepProgram() = default;
  /// The entry function's arguments: dtype and shape of each.
  virtual std::vector<TypedShape> argumentTypes() const = 0;
  /// The entry function's results: dtype and shape of each.
  virtual const std::vector<TypedShape> &resultTypes() const = 0;
  /// Runs on tensors that live on `device` into the caller's result tensors (of the result
  /// types, on `device`, not overlapping the inputs). Throws when the program cannot run there.
  virtual void run(const std::vector<Tensor> &inputs, const std::vector<Tensor> &outputs, Device device) const = 0;
};

} // namespace rfuse

#endif
