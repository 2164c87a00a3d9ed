#include "rfuse/Runtime/TrainingLoop.h"

#include <stdexcept>
#include <string>

namespace rfuse {

namespace {
void expectSame(const Tensor &a, const Tensor &b, const std::string &what) {
  if (a.dtype != b.dtype || a.device() != b.device())
    throw std::invalid_argument(what + ": tensors of different dtypes or devices");
}

void expectOn(const Tensor &t, Device d, const std::string &what) {
  if (!t.storage)
    throw std::invalid_argument(what + " has no memory");
  if (t.device() != d)
    throw std::invalid_argument(what + " is not on the training device");
}

// One program's two sets of inputs and outputs against its types (`what`: "set", "the last
// batch's set").
void validateSets(const StepProgram &program, const std::array<std::vector<Tensor>, 2> &inputs,
                  const std::array<std::vector<Tensor>, 2> &outputs, Device device, const std::string &what) {
  const auto &results = program.resultTypes();
  const auto arguments = program.argumentTypes();
  for (int k = 0; k < 2; ++k) {
    if (outputs[k].size() != results.size())
      throw std::invalid_argument("the step program has " + std::to_string(results.size()) + " results, set " +
                                  std::to_string(k + 1) + " gives " + std::to_string(outputs[k].size()) +
                                  " outputs");
    for (size_t i = 0; i < outputs[k].size(); ++i) {
      const Tensor &t = outputs[k][i];
      expectOn(t, device, "output " + std::to_string(i + 1));
      if (t.dtype != results[i].first || t.shape != results[i].second)
        throw std::invalid_argument("output " + std::to_string(i + 1) + " of set " + std::to_string(k + 1) +
                                    " does not match the program's result type");
      for (const Tensor &in : inputs[k])
        if (in.data() == t.data())
          throw std::invalid_argument("output " + std::to_string(i + 1) + " of set " + std::to_string(k + 1) +
                                      " is also one of its inputs");
    }
    if (inputs[k].size() != arguments.size())
      throw std::invalid_argument("the step program takes " + std::to_string(arguments.size()) + " inputs, set " +
                                  std::to_string(k + 1) + " gives " + std::to_string(inputs[k].size()));
    for (size_t i = 0; i < inputs[k].size(); ++i) {
      expectOn(inputs[k][i], device, "input " + std::to_string(i + 1));
      if (inputs[k][i].dtype != arguments[i].first || inputs[k][i].shape != arguments[i].second)
        throw std::invalid_argument("input " + std::to_string(i + 1) + " of " + what + " " + std::to_string(k + 1) +
                                    " does not match the program's argument type");
    }
  }
}

int64_t perSample(const Tensor &source) {
  return source.shape.empty() || !source.shape.back() ? 0 : source.numel() / source.shape.back();
}
} // namespace

void TrainingLoop::validate() const {
  if (!program)
    throw std::invalid_argument("a training loop needs a program");
  validateSets(*program, inputs, outputs, device, "set");
  if (tail) {
    if (!tail->program || tail->size < 1)
      throw std::invalid_argument("the last batch's step needs a program and a size");
    validateSets(*tail->program, tail->inputs, tail->outputs, device, "the last batch's set");
    if (tail->batch.size() != batches.size())
      throw std::invalid_argument("the last batch has " + std::to_string(tail->batch.size()) + " batch tensors for " +
                                  std::to_string(batches.size()) + " sources");
  }
  for (int k = 0; k < 2; ++k) {
    for (size_t j = 0; j < batches.size(); ++j) {
      const Batch &b = batches[j];
      expectSame(b.source, b.batch[k], "a batch");
      if (b.batch[k].numel() != perSample(b.source) * batchSize)
        throw std::invalid_argument("a batch tensor does not hold batchSize samples of its source");
      if (tail) {
        expectSame(b.source, tail->batch[j][k], "the last batch");
        if (tail->batch[j][k].numel() != perSample(b.source) * tail->size)
          throw std::invalid_argument("a batch tensor of the last batch does not hold its samples");
      }
    }
    for (const PerStep &p : perStep)
      expectSame(p.table, p.value[k], "a per-step value");
    expectSame(loss.history, loss.value[k], "the loss history");
    for (const Kept &a : kept)
      expectSame(a.history, a.value[k], "a kept output");
  }
  if (!batches.empty() && (batchSize < 1 || batchesPerEpoch < 1))
    throw std::invalid_argument("a training loop that draws batches needs their size and number");
}

void TrainingLoop::setRows(Tensor order) {
  if (order.dtype != DType::I32 || order.device() != device ||
      order.numel() < batchSize * batchesPerEpoch + (tail ? tail->size : 0))
    throw std::invalid_argument("the sample order does not cover an epoch's batches");
  rows = std::move(order);
}

int64_t TrainingLoop::run(int64_t first, int64_t last, int64_t firstSlot, const std::function<bool()> &stop) {
  if (!batches.empty() && !rows.storage)
    throw std::invalid_argument("the training loop has no sample order");
  for (int64_t s = first; s <= last; ++s) {
    int k = (s - 1) % 2; // steps 1, 3, 5, ... run on set 0
    int64_t b = (s - 1) % stepsPerEpoch();
    bool tailStep = tail && b == batchesPerEpoch; // the epoch's smaller last batch
    for (size_t j = 0; j < batches.size(); ++j)
      gatherSamples(batches[j].source, rows, b * batchSize, tailStep ? tail->size : batchSize,
                    tailStep ? tail->batch[j][k] : batches[j].batch[k]);
    for (const PerStep &p : perStep) {
      int64_t n = p.value[k].numel();
      copyElements(p.value[k], 0, p.table, (s - 1) * n, n);
    }
    if (tailStep)
      tail->program->run(tail->inputs[k], tail->outputs[k], device);
    else
      program->run(inputs[k], outputs[k], device);
    copyElements(loss.history, s - 1, loss.value[k], 0, 1);
    int64_t slot = firstSlot + (s - first);
    for (const Kept &a : kept) {
      int64_t n = a.value[k].numel();
      copyElements(a.history, slot * n, a.value[k], 0, n);
    }
    if (s < last && stop && stop())
      return s;
  }
  return last;
}

} // namespace rfuse
