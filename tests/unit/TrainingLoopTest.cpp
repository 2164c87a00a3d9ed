// TrainingLoop on the CPU backend: steps run back to back on two alternating sets of tensors, with
// batches gathered in a given sample order, a learning rate read from a per-step table and the
// loss kept in a history, equal the same steps run one by one here; a loop whose tensors do not
// fit the program is refused before anything runs; a step exported as an artifact and loaded by
// rfuse_rt trains as the program it came from.
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Artifact.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/TrainingLoop.h"

#include <gtest/gtest.h>

using namespace rfuse;

namespace {

// loss(w, x, y) = mean((x w - y)^2) over a batch of 4 samples; the data in R's layout: x is
// [features = 3, samples], y [1, samples] (the sample index last, as gatherSamples reads it).
std::shared_ptr<Program> sgdStep() {
  GraphBuilder g;
  TracedValue w = g.input({1, 3}, DType::F64), x = g.input({3, 4}, DType::F64), y = g.input({1, 4}, DType::F64);
  TracedValue d = g.sub(g.matmul(w, x), y);
  g.finish({g.reduceMean(g.mul(d, d), {0, 1})});
  GradientRequest r;
  r.wrt = {0};
  r.optimizer = "sgd";
  r.momentum = 0.5;
  r.learningRateInput = true;
  return compileGradientProgram(g.moduleText(), "default", r);
}

Tensor tensorOf(const HostTensor &h) { return fromHostTensor(h, Device::Cpu); }

// The data, initial weights, sample order and learning rates of the loops below.
struct SgdCase {
  static constexpr int64_t n = 12, batch = 4, steps = 7;
  HostTensor xs, ys, w0;
  std::vector<double> order = {5, 2, 11, 0, 7, 1, 9, 3, 10, 4, 8, 6};
  std::vector<double> lrs = {0.1, 0.09, 0.08, 0.07, 0.06, 0.05, 0.04};
  SgdCase() {
    std::mt19937_64 rng(5);
    xs = test::randomTensor(DType::F64, {3, n}, rng);
    ys = test::randomTensor(DType::F64, {1, n}, rng);
    w0 = test::randomTensor(DType::F64, {1, 3}, rng);
  }
};

// Runs `step` (sgdStep(), or what stands for it) as a training loop on the CPU, in two calls as
// a front end makes them: the final weights and the loss history.
std::pair<HostTensor, HostTensor> runSgdLoop(std::shared_ptr<const StepProgram> step, const SgdCase &c) {
  const int64_t n = c.n, batch = c.batch, steps = c.steps;
  TrainingLoop loop;
  loop.program = step;
  loop.device = Device::Cpu;
  auto empty = [](std::vector<int64_t> s) { return emptyTensor(Device::Cpu, DType::F64, s); };
  std::array<Tensor, 2> w = {tensorOf(c.w0), empty({1, 3})};
  HostTensor zeros(DType::F64, {1, 3});
  std::array<Tensor, 2> m = {tensorOf(zeros), empty({1, 3})};
  std::array<Tensor, 2> xb = {empty({3, batch}), empty({3, batch})}, yb = {empty({1, batch}), empty({1, batch})};
  std::vector<int64_t> one = step->resultTypes()[0].second; // the loss: a one-element tensor
  std::array<Tensor, 2> lr = {empty({1}), empty({1})}, loss = {empty(one), empty(one)};
  for (int k = 0; k < 2; ++k) {
    loop.inputs[k] = {w[k], xb[k], yb[k], m[k], lr[k]};
    loop.outputs[k] = {loss[k], w[1 - k], m[1 - k]};
  }
  loop.batches = {{tensorOf(c.xs), xb}, {tensorOf(c.ys), yb}};
  loop.batchSize = batch;
  loop.batchesPerEpoch = n / batch;
  loop.perStep = {{tensorOf(HostTensor::fromDoubles(DType::F64, {steps}, c.lrs)), lr}};
  Tensor history = empty({steps});
  loop.loss = {loss, history};
  loop.validate();
  HostTensor rows(DType::I32, {n});
  for (int64_t i = 0; i < n; ++i)
    rows.i[i] = (int64_t)c.order[i];
  loop.setRows(fromHostTensor(rows, Device::Cpu));
  EXPECT_EQ(loop.run(1, 3, 0, nullptr), 3);
  EXPECT_EQ(loop.run(4, steps, 0, nullptr), steps);
  return {toHostTensor(w[steps % 2]), toHostTensor(history)}; // an odd last step ran on set 0 and wrote set 1
}

TEST(TrainingLoop, StepsEqualTheSameStepsRunOneByOne) {
  std::shared_ptr<Program> step = sgdStep();
  SgdCase c;
  const int64_t n = c.n, batch = c.batch, steps = c.steps;
  const HostTensor &xs = c.xs, &ys = c.ys, &w0 = c.w0;
  const std::vector<double> &order = c.order, &lrs = c.lrs;
  auto [wl, hl] = runSgdLoop(step, c);
  HostTensor zeros(DType::F64, {1, 3});

  // The same steps one by one through the program's HostTensor API.
  HostTensor wr = w0, mr = zeros;
  std::vector<double> lossRef;
  for (int64_t s = 1; s <= steps; ++s) {
    int64_t b = (s - 1) % (n / batch);
    HostTensor xbr(DType::F64, {3, batch}), ybr(DType::F64, {1, batch});
    for (int64_t j = 0; j < batch; ++j) {
      int64_t sample = (int64_t)order[b * batch + j];
      for (int f = 0; f < 3; ++f)
        xbr.f[f * batch + j] = xs.f[f * n + sample];
      ybr.f[j] = ys.f[sample];
    }
    auto out = step->run({wr, xbr, ybr, mr, HostTensor::fromDoubles(DType::F64, {1}, {lrs[s - 1]})}, Device::Cpu);
    lossRef.push_back(out[0].f[0]);
    wr = out[1];
    mr = out[2];
  }
  for (int e = 0; e < 3; ++e)
    EXPECT_NEAR(wl.f[e], wr.f[e], 1e-14) << e;
  for (int64_t s = 0; s < steps; ++s)
    EXPECT_NEAR(hl.f[s], lossRef[s], 1e-14) << s;
}

// The step exported as an artifact (its CPU program) and loaded by rfuse_rt trains exactly as the
// program it was exported from, and stays loaded while the loop holds it.
TEST(TrainingLoop, AnArtifactLoadedByRfuseRtTrainsAsTheProgram) {
  std::shared_ptr<Program> step = sgdStep();
  std::string path = std::string(::testing::TempDir()) + "/rfuse_training_step.rfuse";
  ExportOptions o;
  o.cuda = false;
  o.cpu = true;
  step->exportArtifact(path, o);
  rfuse_rt_program *loaded = nullptr;
  ASSERT_EQ(rfuse_rt_load(path.c_str(), &loaded), RFUSE_RT_OK) << rfuse_rt_last_error();
  std::shared_ptr<const StepProgram> fromFile = artifact::stepProgramOf(loaded);
  rfuse_rt_free(loaded); // the loop's reference keeps it
  SgdCase c;
  auto [w1, h1] = runSgdLoop(step, c);
  auto [w2, h2] = runSgdLoop(fromFile, c);
  EXPECT_EQ(w2.f, w1.f);
  EXPECT_EQ(h2.f, h1.f);
  // Its CPU program runs on host tensors only.
  std::vector<Tensor> in, out;
  for (const TypedShape &t : fromFile->argumentTypes())
    in.push_back(emptyTensor(Device::Cpu, t.first, t.second));
  for (const TypedShape &t : fromFile->resultTypes())
    out.push_back(emptyTensor(Device::Cpu, t.first, t.second));
  EXPECT_THROW(fromFile->run(in, out, Device::Cuda), artifact::ArtifactError);
  in.pop_back();
  EXPECT_THROW(fromFile->run(in, out, Device::Cpu), artifact::ArtifactError);
  EXPECT_THROW(artifact::stepProgramOf(nullptr), artifact::ArtifactError);
}

// A loop over one fixed batch: set k reads w[k], m[k] and writes the other's.
TrainingLoop fixedBatchLoop(std::shared_ptr<Program> step) {
  TrainingLoop loop;
  loop.program = step;
  auto empty = [](std::vector<int64_t> s) { return emptyTensor(Device::Cpu, DType::F64, s); };
  std::array<Tensor, 2> w = {empty({1, 3}), empty({1, 3})}, m = {empty({1, 3}), empty({1, 3})};
  Tensor x = empty({3, 4}), y = empty({1, 4});
  std::vector<int64_t> one = step->resultTypes()[0].second;
  std::array<Tensor, 2> lr = {empty({1}), empty({1})}, loss = {empty(one), empty(one)};
  for (int k = 0; k < 2; ++k) {
    loop.inputs[k] = {w[k], x, y, m[k], lr[k]};
    loop.outputs[k] = {loss[k], w[1 - k], m[1 - k]};
  }
  loop.loss = {loss, empty({10})};
  return loop;
}

TEST(TrainingLoop, StopEndsTheRunAfterAStep) {
  TrainingLoop loop = fixedBatchLoop(sgdStep());
  loop.validate();
  int calls = 0;
  EXPECT_EQ(loop.run(1, 10, 0, [&] { return ++calls == 3; }), 3);
}

TEST(TrainingLoop, TensorsThatDoNotFitTheProgramAreRefused) {
  TrainingLoop loop = fixedBatchLoop(sgdStep());
  Tensor x = loop.inputs[1][1];
  loop.inputs[1][1] = emptyTensor(Device::Cpu, DType::F64, {3, 5}); // a batch of the wrong size
  EXPECT_THROW(loop.validate(), std::invalid_argument);
  loop.inputs[1][1] = x;
  Tensor w1 = loop.outputs[0][1];
  loop.outputs[0][1] = loop.inputs[0][0]; // a step writing its own input
  EXPECT_THROW(loop.validate(), std::invalid_argument);
  loop.outputs[0][1] = w1;
  loop.validate();
  loop.outputs[1].pop_back();
  EXPECT_THROW(loop.validate(), std::invalid_argument);
}

} // namespace
