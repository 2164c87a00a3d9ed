// TrainingLoop: the steps of a training loop run back to back on the device, with no front end in
// between. Each step runs a compiled training-step program on one of two alternating sets of
// tensors (set k reads its parameters and optimizer state and writes the other set's, so on a GPU
// each set's step replays one CUDA graph), after drawing its batch on the device and reading its
// per-step scalars (learning rate, step number) from tables; it keeps its loss and auxiliary
// outputs (batch statistics) in histories on the device. Nothing waits for the device: a front
// end reads the histories when it needs them. MLIR-free, like the rest of the runtime's API.
#ifndef RFUSE_RUNTIME_TRAININGLOOP_H
#define RFUSE_RUNTIME_TRAININGLOOP_H

#include "rfuse/Runtime/StepProgram.h"
#include "rfuse/Runtime/Tensor.h"

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace rfuse {

struct TrainingLoop {
  std::shared_ptr<const StepProgram> program; ///< a compiled Program, or a loaded artifact
  Device device = Device::Cpu;
  /// The program's inputs and outputs for a step of set 0 and of set 1 (steps 1, 3, 5, ... use
  /// set 0). The front end arranges them so that set k's outputs are set 1-k's inputs.
  std::array<std::vector<Tensor>, 2> inputs, outputs;

  /// Batches drawn on the device: before a step, `count` samples of `source` (R's layout: the
  /// sample index is the last tensor dimension) in the order of `rows` (0-based, i32) from
  /// position (b * count), b the step's batch in its epoch, into the set's `batch`.
  struct Batch {
    Tensor source;
    std::array<Tensor, 2> batch;
  };
  std::vector<Batch> batches;
  Tensor rows;              ///< the epoch's sample order (setRows, per epoch)
  int64_t batchSize = 0;
  int64_t batchesPerEpoch = 1;

  /// Per-step values: the n elements from (s - 1) * n of `table` into the set's `value` (n of
  /// them: a scalar, or a dropout's two-word key) before step s.
  struct PerStep {
    Tensor table;
    std::array<Tensor, 2> value;
  };
  std::vector<PerStep> perStep;

  /// Kept after each step: the set's `value` (all of it) into `history` at position
  /// (slot * value's elements), slot counting from the `firstSlot` given to run().
  struct Kept {
    std::array<Tensor, 2> value;
    Tensor history;
  };
  Kept loss;                 ///< the loss: slot = s - 1 (history holds every step's loss)
  std::vector<Kept> kept;    ///< auxiliary outputs: slot = firstSlot + (s - first)

  /// The epoch's last, smaller batch (its samples past batchesPerEpoch full batches): a step
  /// program traced for `size` samples, with sets of its own that hold their own batch tensors
  /// (one pair per Batch of `batches`) and otherwise the main sets' tensors (parameters,
  /// optimizer state, loss, kept outputs). An epoch is then batchesPerEpoch + 1 steps.
  struct Tail {
    std::shared_ptr<const StepProgram> program;
    std::array<std::vector<Tensor>, 2> inputs, outputs;
    std::vector<std::array<Tensor, 2>> batch;
    int64_t size = 0;
  };
  std::optional<Tail> tail;
  int64_t stepsPerEpoch() const { return batchesPerEpoch + (tail ? 1 : 0); }

  /// Checks the sets against the program (counts, dtypes, shapes, devices) once, so that run()
  /// only launches. Throws std::invalid_argument naming what does not fit.
  void validate() const;
  /// The sample order of the epochs that follow (0-based, i32, on the loop's device, covering
  /// batchesPerEpoch * batchSize samples, and the tail's).
  void setRows(Tensor order);

  /// Runs steps first..last (1-based). After each step `stop()` may end the run early (so that a
  /// front end can look at its user's interrupts); returns the last step run. Queued on the
  /// device; returns without waiting (but a device whose queue is full makes the host wait).
  int64_t run(int64_t first, int64_t last, int64_t firstSlot, const std::function<bool()> &stop);
};

} // namespace rfuse

#endif
