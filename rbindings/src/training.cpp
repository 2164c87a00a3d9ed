// rf_train()'s loop on the device: R describes the loop once (the step program and the handles of
// its alternating tensor sets, batches, tables and histories), then runs it a chunk of steps per
// call. Between steps nothing returns to R, so a step costs what the device takes, not R's
// handling of ~100 handles; R keeps what needs R between chunks (new epochs' sample orders, the
// batch-statistics updates, progress, and the interrupt).
#include "glue.h"

#include "rfuse/Runtime/Timeline.h"
#include "rfuse/Runtime/TrainingLoop.h"

using namespace Rcpp;
using rfuse::Tensor;
using rfuse::TrainingLoop;
using rfuse::r::fail;
using rfuse::r::guarded;
using rfuse::r::tensorOf;

namespace {
std::vector<Tensor> tensors(List handles) {
  std::vector<Tensor> out;
  out.reserve(handles.size());
  for (R_xlen_t k = 0; k < handles.size(); ++k)
    out.push_back(tensorOf(handles[k]));
  return out;
}

// Per item: a tensor of `one` and the pair of a's and b's (one per set), made into T by `make`.
template <class T, class Make> std::vector<T> zipped(List one, List a, List b, const char *what, Make make) {
  if (a.size() != b.size() || a.size() != one.size())
    fail("rfuse_error", std::string("internal: the training loop's ") + what + " differ in number");
  std::vector<T> out;
  for (R_xlen_t k = 0; k < a.size(); ++k)
    out.push_back(make(tensorOf(one[k]), std::array<Tensor, 2>{tensorOf(a[k]), tensorOf(b[k])}));
  return out;
}

TrainingLoop &loopOf(SEXP handle) {
  if (TYPEOF(handle) != EXTPTRSXP || !R_ExternalPtrAddr(handle))
    fail("rfuse_error", "the training loop is no longer valid");
  return *static_cast<TrainingLoop *>(R_ExternalPtrAddr(handle));
}

void finalizeLoop(SEXP handle) {
  auto *loop = static_cast<TrainingLoop *>(R_ExternalPtrAddr(handle));
  R_ClearExternalPtr(handle);
  try {
    delete loop;
  } catch (...) { // a finalizer never throws into R
  }
}
} // namespace

// [[Rcpp::export(.rf_training_loop, rng = false)]]
SEXP rf_training_loop(SEXP program, List inputs1, List inputs2, List outputs1, List outputs2, List sources,
                      List batches1, List batches2, double batchSize, double batchesPerEpoch, List tables,
                      List values1, List values2, SEXP lossHistory, SEXP loss1, SEXP loss2, List keptHistories,
                      List kept1, List kept2, std::string device, SEXP tailProgram, List tailInputs1,
                      List tailInputs2, List tailOutputs1, List tailOutputs2, List tailBatches1, List tailBatches2,
                      double tailSize) {
  return guarded([&]() -> SEXP {
    auto loop = std::make_unique<TrainingLoop>();
    loop->program = rfuse::r::stepProgramPtr(program);
    loop->device = device == "cuda" ? rfuse::Device::Cuda : rfuse::Device::Cpu;
    loop->inputs = {tensors(inputs1), tensors(inputs2)};
    loop->outputs = {tensors(outputs1), tensors(outputs2)};
    using Pair = std::array<Tensor, 2>;
    loop->batches = zipped<TrainingLoop::Batch>(sources, batches1, batches2, "batches",
                                                [](Tensor s, Pair p) { return TrainingLoop::Batch{s, p}; });
    loop->batchSize = (int64_t)batchSize;
    loop->batchesPerEpoch = (int64_t)batchesPerEpoch;
    loop->perStep = zipped<TrainingLoop::PerStep>(tables, values1, values2, "per-step values",
                                                  [](Tensor t, Pair p) { return TrainingLoop::PerStep{t, p}; });
    loop->loss = {{tensorOf(loss1), tensorOf(loss2)}, tensorOf(lossHistory)};
    loop->kept = zipped<TrainingLoop::Kept>(keptHistories, kept1, kept2, "kept outputs",
                                            [](Tensor h, Pair p) { return TrainingLoop::Kept{p, h}; });
    if (!Rf_isNull(tailProgram)) { // the epoch's last, smaller batch
      TrainingLoop::Tail t;
      t.program = rfuse::r::stepProgramPtr(tailProgram);
      t.inputs = {tensors(tailInputs1), tensors(tailInputs2)};
      t.outputs = {tensors(tailOutputs1), tensors(tailOutputs2)};
      if (tailBatches1.size() != tailBatches2.size())
        fail("rfuse_error", "internal: the last batch's sets differ");
      for (R_xlen_t j = 0; j < tailBatches1.size(); ++j)
        t.batch.push_back({tensorOf(tailBatches1[j]), tensorOf(tailBatches2[j])});
      t.size = (int64_t)tailSize;
      loop->tail = std::move(t);
    }
    loop->validate();
    SEXP handle = PROTECT(R_MakeExternalPtr(loop.release(), R_NilValue, R_NilValue));
    R_RegisterCFinalizerEx(handle, finalizeLoop, TRUE);
    UNPROTECT(1);
    return handle;
  });
}

// The sample order of the epochs that follow (0-based, i32, on the loop's device).
// [[Rcpp::export(.rf_training_loop_rows, rng = false)]]
void rf_training_loop_rows(SEXP loop, SEXP rows) {
  guarded([&] { loopOf(loop).setRows(tensorOf(rows)); });
}

// Runs steps first..last, or as many as are queued in `seconds` of this thread's time; returns the
// last step run. Back in R, R sees an interrupt (or a time limit) between two such calls, with
// every tensor valid: R's own check cannot run inside C++ without skipping its destructors.
// [[Rcpp::export(.rf_training_loop_run, rng = false)]]
double rf_training_loop_run(SEXP loop, double first, double last, double firstSlot, double seconds) {
  return guarded([&] {
    rfuse::TimelineSpan span("training loop run", "steps " + std::to_string((int64_t)first) + " to " +
                                                      std::to_string((int64_t)last));
    auto start = std::chrono::steady_clock::now();
    return (double)loopOf(loop).run((int64_t)first, (int64_t)last, (int64_t)firstSlot, [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds;
    });
  });
}
