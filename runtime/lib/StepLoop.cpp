#include "StepLoop.h"

#include <stdexcept>

namespace rfuse::runtime {

using codegen::LibraryCall;

Buffer StepLoop::buffer(StepBackend &backend, int slot) {
  int root = plan.root(slot);
  if (!buffers[root]) {
    buffers[root] = backend.allocate(plan.slots[root].bytes);
    owned[root] = true;
  }
  return buffers[root];
}

Buffer StepLoop::temporary(StepBackend &backend, size_t bytes) { return backend.allocate(bytes); }

void StepLoop::done(StepBackend &backend, Buffer b, size_t bytes) {
  if (keepBuffers && capturing)
    keptTemps.push_back({b, bytes});
  else
    backend.release(b, bytes);
}

void StepLoop::releaseIfDead(StepBackend &backend, int slot, size_t step) {
  if (plan.slots[plan.root(slot)].lastUse <= (int)step)
    releaseSlot(backend, slot);
}

void StepLoop::run(StepBackend &backend) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step &s = plan.steps[i];
    backend.beforeStep(i);
    switch (s.kind) {
    case Step::Kind::Alias:
      break; // buffer() resolves aliases to their root
    case Step::Kind::Constant:
    case Step::Kind::Host: {
      if (s.kind == Step::Kind::Constant && computed[s.out[0]])
        break; // computed on the first run
      std::vector<HostTensor> operands;
      for (int sl : s.in)
        operands.push_back(backend.read(buffer(backend, sl), plan.slots[sl]));
      std::vector<HostTensor> results = hostSteps(s, i, operands);
      if (results.size() != s.out.size())
        throw std::logic_error("host step " + s.label + " gave " + std::to_string(results.size()) +
                               " results for " + std::to_string(s.out.size()) + " outputs");
      for (size_t o = 0; o < s.out.size(); ++o)
        backend.write(buffer(backend, s.out[o]), results[o]);
      if (s.kind == Step::Kind::Constant)
        computed[s.out[0]] = true;
      break;
    }
    case Step::Kind::Collective:
    case Step::Kind::Kernel: {
      std::vector<Buffer> ins, outs;
      for (int sl : s.in)
        ins.push_back(buffer(backend, sl));
      for (int sl : s.out)
        outs.push_back(buffer(backend, sl));
      if (s.kind == Step::Kind::Collective)
        backend.runCollective(*this, i, ins, outs);
      else
        backend.runKernel(*this, i, ins, outs);
      break;
    }
    case Step::Kind::Library: {
      const LibraryCall &call = *s.library;
      std::vector<Buffer> ins;
      for (int sl : s.in)
        ins.push_back(buffer(backend, sl));
      if (call.kind == LibraryCall::Kind::Recurrent) { // (every output its own, no epilogue)
        std::vector<Buffer> outs;
        for (int sl : s.out)
          outs.push_back(buffer(backend, sl));
        backend.runLibrary(*this, i, ins, outs);
        break;
      }
      // The result goes to output 0 unless an epilogue computes the outputs from it.
      bool temp = s.hasEpilogue() && !call.productIsOutput;
      size_t productBytes = call.productBytes();
      Buffer product = temp ? temporary(backend, productBytes) : buffer(backend, s.out[0]);
      backend.runLibrary(*this, i, ins, {product});
      if (s.hasEpilogue()) {
        std::vector<Buffer> eins = {product}, eouts;
        for (int k : call.epilogueInputs)
          eins.push_back(ins[k]);
        for (size_t o = call.productIsOutput ? 1 : 0; o < s.out.size(); ++o)
          eouts.push_back(buffer(backend, s.out[o]));
        backend.runKernel(*this, i, eins, eouts);
      }
      if (temp)
        done(backend, product, productBytes);
      break;
    }
    }
    backend.afterStep(i);
    // Buffers whose last reader has run (or, on a stream, been enqueued: later work that reuses
    // them is ordered after it) go back to the backend.
    for (int sl : s.in)
      releaseIfDead(backend, sl, i);
  }
}

void StepLoop::releaseAll(StepBackend &backend) {
  if (keepBuffers)
    return;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i] && owned[i] && !plan.slots[i].constant) {
      backend.release(buffers[i], plan.slots[i].bytes);
      buffers[i] = 0;
      owned[i] = false;
    }
}

void StepLoop::releaseSlot(StepBackend &backend, int slot) {
  int root = plan.root(slot);
  if (keepBuffers || !owned[root] || !buffers[root] || plan.slots[root].constant || plan.slots[root].argument >= 0)
    return;
  backend.release(buffers[root], plan.slots[root].bytes);
  buffers[root] = 0;
  owned[root] = false;
}

void StepLoop::releaseEverything(StepBackend &backend) {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i] && owned[i])
      backend.release(buffers[i], plan.slots[i].bytes);
  for (auto [b, n] : keptTemps)
    backend.release(b, n);
  keptTemps.clear();
  std::fill(buffers.begin(), buffers.end(), 0);
  std::fill(owned.begin(), owned.end(), false);
  std::fill(computed.begin(), computed.end(), false);
}

void StepLoop::unfix(StepBackend &backend) {
  keepBuffers = false;
  for (auto [b, n] : keptTemps)
    backend.release(b, n);
  keptTemps.clear();
  releaseAll(backend);
}

} // namespace rfuse::runtime
