// The one step loop every backend runs a plan with: binds arguments, resolves aliases, computes
// constants once, runs host steps on the interpreter, sequences a library call and its epilogue
// (with a temporary for the library's result when needed), and gives each buffer back after its
// last reader. What a step computes is the backend's (StepBackend).
#ifndef RFUSE_RUNTIME_STEPLOOP_H
#define RFUSE_RUNTIME_STEPLOOP_H

#include "rfuse/Codegen/Plan.h"
#include "rfuse/Runtime/HostTensor.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace rfuse::runtime {

using codegen::BufferSlot;
using codegen::ExecutionPlan;
using codegen::Step;

/// A buffer's address: a host pointer on the CPU, a device pointer on the GPU.
using Buffer = uintptr_t;

class StepLoop;

/// Computes a host step or a constant — step `index` of the plan — from its operands: the
/// interpreter in the JIT's runtime (interpreter/HostSteps.h), the values an ahead-of-time
/// artifact stores in its runtime (which has no interpreter).
using HostStepRunner =
    std::function<std::vector<HostTensor>(const Step &step, size_t index, const std::vector<HostTensor> &operands)>;

/// What a backend does for the loop.
class StepBackend {
public:
  virtual ~StepBackend() = default;
  virtual Buffer allocate(size_t bytes) = 0;
  virtual void release(Buffer b, size_t bytes) = 0;
  /// The step's generated (compiled) kernel — for a library step, its epilogue, whose inputs
  /// are the library's result then the epilogue inputs: reads `ins`, writes `outs`.
  virtual void runKernel(StepLoop &loop, size_t step, const std::vector<Buffer> &ins,
                         const std::vector<Buffer> &outs) = 0;
  /// A library call writing its result into `products[0]` (a recurrent call: output k into
  /// `products[k]`, every output of its step).
  virtual void runLibrary(StepLoop &loop, size_t step, const std::vector<Buffer> &ins,
                          const std::vector<Buffer> &products) = 0;
  /// A collective: input k reduced over the process group's ranks into output k.
  virtual void runCollective(StepLoop &loop, size_t step, const std::vector<Buffer> &ins,
                             const std::vector<Buffer> &outs) = 0;
  /// Host steps: a buffer's value as a HostTensor, and back.
  virtual HostTensor read(Buffer b, const BufferSlot &slot) = 0;
  virtual void write(Buffer b, const HostTensor &t) = 0;
  /// Around every step (profiling).
  virtual void beforeStep(size_t) {}
  virtual void afterStep(size_t) {}
};

class StepLoop {
public:
  StepLoop(const ExecutionPlan &plan, HostStepRunner hostSteps)
      : plan(plan), hostSteps(std::move(hostSteps)), buffers(plan.slots.size()), owned(plan.slots.size()),
        computed(plan.slots.size()) {}

  /// Binds `slot` to memory the loop does not own (the caller's inputs or result buffers).
  void bind(int slot, Buffer b) {
    buffers[slot] = b;
    owned[slot] = false;
  }
  /// Forgets a binding made by bind() (the slot is allocated again on its next use).
  void unbind(int slot) {
    if (!owned[slot])
      buffers[slot] = 0;
  }
  /// The slot's buffer, allocated (and owned) on first use.
  Buffer buffer(StepBackend &backend, int slot);
  /// Runs every step.
  void run(StepBackend &backend);
  /// Gives back every owned buffer except constants (and, with keepBuffers, keeps them all).
  void releaseAll(StepBackend &backend);
  /// Gives back every owned buffer, constants too (the program is going away).
  void releaseEverything(StepBackend &backend);
  /// Ends keepBuffers: gives back the kept temporaries and every owned buffer but constants.
  void unfix(StepBackend &backend);
  /// Gives back one owned buffer (not a constant's, not while buffers are kept).
  void releaseSlot(StepBackend &backend, int slot);

  /// A temporary for the duration of a step; `done` gives it back (or keeps it while a CUDA
  /// graph is being captured: the graph holds its address).
  Buffer temporary(StepBackend &backend, size_t bytes);
  void done(StepBackend &backend, Buffer b, size_t bytes);

  /// Buffers fixed for the program's life (CUDA graphs): nothing is given back between steps or
  /// runs, temporaries included.
  bool keepBuffers = false;
  /// A CUDA graph is being captured: temporaries are kept too (with keepBuffers).
  bool capturing = false;

  const ExecutionPlan &plan;
  const HostStepRunner hostSteps;

private:
  std::vector<Buffer> buffers;
  std::vector<bool> owned;
  std::vector<bool> computed; // constants holding their value
  std::vector<std::pair<Buffer, size_t>> keptTemps;
  void releaseIfDead(StepBackend &backend, int slot, size_t step);
};

} // namespace rfuse::runtime

#endif
