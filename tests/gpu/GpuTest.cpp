// GPU tests (ctest label "gpu"): every corpus graph and random property graphs run on the GPU and
// must equal the reference interpreter. Without a usable GPU every test skips with the reason.
#include "../unit/CorpusUtil.h"
#include "../unit/RandomGraph.h"
#include "../unit/RecurrentUtil.h"
#include "../unit/TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Frontend/Models.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Options.h"
#include "rfuse/Runtime/Profile.h"
#include "rfuse/Runtime/Interpreter.h"
#include "rfuse/Runtime/ProcessGroup.h"
#include "rfuse/Runtime/Artifact.h"
#include "rfuse/rfuse_rt.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>

#include <unistd.h>

using namespace rfuse;

namespace {

class Gpu : public ::testing::Test {
protected:
  void SetUp() override {
    const cuda::DeviceInfo &d = cuda::deviceInfo();
    if (!d.available)
      GTEST_SKIP() << "no usable GPU: " << d.reason;
    setOption("tf32", "0"); // exact f32 matmuls for comparisons
  }
};

double tolerance(DType dt) {
  switch (dt) {
  case DType::F64: return 1e-12;
  case DType::F16: case DType::BF16: return 2e-2; // narrow storage, intermediates kept in f32
  default: return 1e-5;
  }
}

// Runs `text` fused on the GPU and unfused on the interpreter; compares every output.
void expectGpuMatchesInterpreter(const std::string &name, const std::string &text,
                                 const std::vector<HostTensor> &inputs,
                                 const std::string &pipeline = "default") {
  auto program = compileProgram(text, pipeline);
  std::vector<HostTensor> ref = interpretText(text, "main", inputs);
  std::vector<HostTensor> got;
  try {
    got = program->run(inputs, Device::Cuda);
  } catch (const std::exception &e) {
    ADD_FAILURE() << name << ": " << e.what() << "\n" << program->info().fusedText;
    return;
  }
  ASSERT_EQ(got.size(), ref.size()) << name;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(got[i].shape, ref[i].shape) << name << " output " << i;
    if (!ref[i].isFloat()) {
      size_t diff = 0;
      for (int64_t k = 0; k < ref[i].numel(); ++k)
        diff += got[i].i[k] != ref[i].i[k];
      // A comparison can flip where two computations differ in the last bit.
      EXPECT_LE(diff, (size_t)ref[i].numel() / 100) << name << " output " << i;
      continue;
    }
    std::vector<double> a = got[i].f, b = ref[i].f;
    double num = 0, den = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      num += (a[k] - b[k]) * (a[k] - b[k]);
      den += b[k] * b[k];
    }
    double err = std::sqrt(num / std::max(den, 1e-300));
    EXPECT_LE(err, tolerance(ref[i].dtype)) << name << " output " << i << "\n" << program->info().fusedText;
  }
}

TEST_F(Gpu, CorpusMatchesInterpreter) {
  for (const test::CorpusGraph &g : test::canonicalCorpus())
    expectGpuMatchesInterpreter(g.name, g.moduleText, g.inputs);
}

// `column_split` (the default): column reductions with fewer tiles than SMs split over thread
// block clusters (sm_90), against the interpreter; and the tiles left whole, as without it.
TEST_F(Gpu, ColumnTilesSplitOverClustersMatchTheInterpreter) {
  // (split, registers): split tiles plain, split tiles with column_split_registers, no split
  for (auto [split, registers] : {std::pair{"1", "0"}, std::pair{"1", "1"}, std::pair{"0", "0"}}) {
    setOption("column_split", split);
    setOption("column_split_registers", registers);
    for (const test::CorpusGraph &g : test::canonicalCorpus())
      if (g.name.find("_cols") != std::string::npos)
        expectGpuMatchesInterpreter(g.name + " (column_split " + split + ", column_split_registers " + registers + ")",
                                    g.moduleText, g.inputs);
  }
  setOption("column_split", "1");
  setOption("column_split_registers", "0");
}

// `column_prefetch`: the cluster tiles copy the next tile in while the current one computes, as
// many clusters as are resident looping over the tiles (more tiles than clusters in
// layernorm_cols_cluster), against the interpreter.
TEST_F(Gpu, PrefetchedColumnTilesMatchTheInterpreter) {
  setOption("column_prefetch", "1");
  for (const test::CorpusGraph &g : test::canonicalCorpus())
    if (g.name.find("_cols") != std::string::npos)
      expectGpuMatchesInterpreter(g.name + " (column_prefetch)", g.moduleText, g.inputs);
  setOption("column_prefetch", "0");
}

// Exports `text` (archs: cubins; the newest also as PTX), loads it through rfuse_rt's C API and
// runs it twice (the second a replayed graph); every output must equal the interpreter's (within
// the dtype's tolerance, or `tol`).
void expectArtifactMatchesInterpreter(const std::string &name, const std::string &text,
                                      const std::vector<HostTensor> &inputs, const ExportOptions &options,
                                      const std::string &expectDescription, double tol = 0) {
  std::string path = std::string(::testing::TempDir()) + "/rfuse_gpu_artifact.rfuse";
  compileProgram(text, "default")->exportArtifact(path, options);
  rfuse_rt_program *p = nullptr;
  ASSERT_EQ(rfuse_rt_load(path.c_str(), &p), RFUSE_RT_OK) << name << ": " << rfuse_rt_last_error();
  EXPECT_NE(std::string(rfuse_rt_describe(p)).find(expectDescription), std::string::npos)
      << name << ": " << rfuse_rt_describe(p);
  std::vector<HostTensor> ref = interpretText(text, "main", inputs);
  ASSERT_EQ(rfuse_rt_num_inputs(p), inputs.size());
  ASSERT_EQ(rfuse_rt_num_outputs(p), ref.size());
  for (int rep = 0; rep < 2; ++rep) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::vector<char> b = inputs[i].toBytes();
      ASSERT_EQ(rfuse_rt_set_input(p, i, artifact::toRtDType(inputs[i].dtype), inputs[i].shape.data(), inputs[i].shape.size(),
                                   b.data(), b.size()),
                RFUSE_RT_OK)
          << name << ": " << rfuse_rt_last_error();
    }
    ASSERT_EQ(rfuse_rt_run(p), RFUSE_RT_OK) << name << ": " << rfuse_rt_last_error();
    for (size_t i = 0; i < ref.size(); ++i) {
      std::vector<char> b(rfuse_rt_output_bytes(p, i));
      ASSERT_EQ(b.size(), ref[i].toBytes().size()) << name << " output " << i;
      ASSERT_EQ(rfuse_rt_get_output(p, i, b.data(), b.size()), RFUSE_RT_OK) << rfuse_rt_last_error();
      HostTensor got = HostTensor::fromBytes(ref[i].dtype, ref[i].shape, b.data());
      if (!ref[i].isFloat()) {
        size_t diff = 0;
        for (int64_t k = 0; k < ref[i].numel(); ++k)
          diff += got.i[k] != ref[i].i[k];
        EXPECT_LE(diff, (size_t)ref[i].numel() / 100) << name << " output " << i;
        continue;
      }
      double num = 0, den = 0;
      for (size_t k = 0; k < got.f.size(); ++k) {
        num += (got.f[k] - ref[i].f[k]) * (got.f[k] - ref[i].f[k]);
        den += ref[i].f[k] * ref[i].f[k];
      }
      EXPECT_LE(std::sqrt(num / std::max(den, 1e-300)), tol > 0 ? tol : tolerance(ref[i].dtype)) << name << " output " << i;
    }
  }
  rfuse_rt_free(p);
}

// The ahead-of-time path (issue 18): every corpus graph exported and run through rfuse_rt equals
// the interpreter — from this GPU's cubins, and from PTX for an older architecture (compute_80,
// which the driver compiles for this GPU).
TEST_F(Gpu, ArtifactsRunThroughRfuseRtLikeTheInterpreter) {
  const cuda::DeviceInfo &d = cuda::deviceInfo();
  for (const test::CorpusGraph &g : test::canonicalCorpus())
    expectArtifactMatchesInterpreter(g.name, g.moduleText, g.inputs, {{d.arch()}, true}, "(cubins)");
  for (const test::CorpusGraph &g : test::canonicalCorpus())
    expectArtifactMatchesInterpreter(g.name + " (PTX)", g.moduleText, g.inputs, {{"sm_80"}, true}, "PTX for sm_80");
}

// A small ResNet's SGD-momentum training step (module text and request) with random inputs and
// momentum buffers, for the GPU-against-CPU step tests.
struct SmallResNetStep {
  std::string text;
  GradientRequest sgd;
  std::vector<HostTensor> inputs;
};
SmallResNetStep smallResNetStep(ImageLayout layout, unsigned seed) {
  ResNetConfig c;
  c.batch = 8;
  c.imageSize = 16;
  c.classes = 4;
  c.widths = {8, 16};
  c.blocks = {1, 1};
  c.layout = layout;
  GraphBuilder g;
  ModelGraph m = buildResNetLoss(g, c);
  SmallResNetStep step;
  step.text = g.moduleText();
  std::mt19937_64 rng(seed);
  for (const auto &s : m.inputShapes)
    step.inputs.push_back(test::randomTensor(DType::F32, s, rng, -1.0, 1.0));
  for (size_t p = 0; p < m.parameterCount(); ++p) {
    step.sgd.wrt.push_back(p);
    step.inputs.push_back(test::randomTensor(DType::F32, m.inputShapes[p], rng)); // momentum buffers
  }
  step.sgd.optimizer = "sgd";
  step.sgd.learningRate = 0.1;
  step.sgd.momentum = 0.9;
  return step;
}

// A ResNet training step (cuDNN convolutions, cuBLASLt, batch norm) through rfuse_rt equals the
// JIT's step on the same inputs.
TEST_F(Gpu, AnExportedResNetTrainingStepEqualsTheJitStep) {
  SmallResNetStep step = smallResNetStep(ResNetConfig{}.layout, 9);
  auto program = compileGradientProgram(step.text, "default", step.sgd);
  const std::vector<HostTensor> &inputs = step.inputs;
  std::vector<HostTensor> jit = program->run(inputs, Device::Cuda);
  std::string path = std::string(::testing::TempDir()) + "/rfuse_gpu_resnet.rfuse";
  program->exportArtifact(path, {{cuda::deviceInfo().arch()}, false});
  rfuse_rt_program *p = nullptr;
  ASSERT_EQ(rfuse_rt_load(path.c_str(), &p), RFUSE_RT_OK) << rfuse_rt_last_error();
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<char> b = inputs[i].toBytes();
    ASSERT_EQ(rfuse_rt_set_input(p, i, RFUSE_RT_F32, inputs[i].shape.data(), inputs[i].shape.size(), b.data(),
                                 b.size()),
              RFUSE_RT_OK)
        << rfuse_rt_last_error();
  }
  ASSERT_EQ(rfuse_rt_run(p), RFUSE_RT_OK) << rfuse_rt_last_error();
  ASSERT_EQ(rfuse_rt_num_outputs(p), jit.size());
  for (size_t i = 0; i < jit.size(); ++i) {
    std::vector<char> b(rfuse_rt_output_bytes(p, i));
    ASSERT_EQ(rfuse_rt_get_output(p, i, b.data(), b.size()), RFUSE_RT_OK) << rfuse_rt_last_error();
    HostTensor got = HostTensor::fromBytes(jit[i].dtype, jit[i].shape, b.data());
    EXPECT_LE(test::maxRelError(got.f, jit[i].f, 1e-3), 1e-5) << "output " << i;
  }
  rfuse_rt_free(p);
}

// From the second run on, a program runs as a replayed CUDA graph with fixed buffers: fresh
// inputs each run must still give the interpreter's answers (and a program with a host fallback
// keeps running step by step).
TEST_F(Gpu, RepeatedRunsReplayTheCapturedGraph) {
  for (const test::CorpusGraph &g : test::canonicalCorpus()) {
    auto program = compileProgram(g.moduleText, "default");
    for (int rep = 0; rep < 4; ++rep) {
      std::mt19937_64 rng(100 + rep);
      std::vector<HostTensor> in;
      for (const HostTensor &t : g.inputs)
        in.push_back(t.isFloat() ? test::randomTensor(t.dtype, t.shape, rng) : t);
      std::vector<HostTensor> ref = interpretText(g.moduleText, "main", in);
      std::vector<HostTensor> got = program->run(in, Device::Cuda);
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        if (!ref[i].isFloat())
          continue;
        double num = 0, den = 0;
        for (size_t k = 0; k < ref[i].f.size(); ++k) {
          num += (got[i].f[k] - ref[i].f[k]) * (got[i].f[k] - ref[i].f[k]);
          den += ref[i].f[k] * ref[i].f[k];
        }
        EXPECT_LE(std::sqrt(num / std::max(den, 1e-300)), tolerance(ref[i].dtype))
            << g.name << " run " << rep << " output " << i;
      }
    }
  }
}

// Gradient programs (rfuse-autodiff, fused like any other) give the CPU backend's gradients.
TEST_F(Gpu, GradientsOnTheGpuEqualTheCpus) {
  struct G {
    std::string name;
    std::vector<std::vector<int64_t>> shapes;
    std::function<TracedValue(GraphBuilder &, std::vector<TracedValue> &)> build;
  };
  std::vector<G> graphs = {
      {"mlp", {{64, 32}, {32, 48}, {48}, {48, 8}}, [](GraphBuilder &g, std::vector<TracedValue> &v) {
         TracedValue h = g.gelu(g.add(g.matmul(v[0], v[1]), g.broadcastTo(v[2], {64, 48})));
         TracedValue o = g.matmul(h, v[3]);
         return g.reduceMean(g.mul(o, o), {0, 1});
       }},
      {"cross_entropy", {{128, 10}, {128, 10}}, [](GraphBuilder &g, std::vector<TracedValue> &v) {
         TracedValue s = g.sub(v[0], g.broadcastTo(g.reduceMax(v[0], {1}, true), {128, 10}));
         TracedValue lse = g.log(g.reduceSum(g.exp(s), {1}, true));
         return g.reduceMean(g.sub(g.broadcastTo(lse, {128, 10}), g.mul(s, v[1])), {0, 1});
       }},
      {"cnn", {{4, 1, 12, 12}, {3, 1, 3, 3}, {3}, {4, 3, 3, 3}}, [](GraphBuilder &g, std::vector<TracedValue> &v) {
         TracedValue h = g.maxPool2d(g.relu(g.conv2d(v[0], v[1], v[2]))); // 10x10 -> 5x5
         h = g.maxPool2d(g.conv2d(h, v[3], TracedValue{}));                // 3x3 -> 1x1, an uncovered edge
         TracedValue o = g.reshape(h, {4, 4});
         return g.reduceSum(g.mul(o, o), {0, 1});
       }},
      {"layernorm_gelu_tanh", {{32, 256}, {256}}, [](GraphBuilder &g, std::vector<TracedValue> &v) {
         TracedValue xc = g.sub(v[0], g.broadcastTo(g.reduceMean(v[0], {1}, true), {32, 256}));
         TracedValue var = g.reduceMean(g.mul(xc, xc), {1}, true);
         TracedValue y = g.mul(g.mul(xc, g.broadcastTo(g.rsqrt(g.add(var, g.scalar(1e-5, DType::F32))), {32, 256})),
                               g.broadcastTo(v[1], {32, 256}));
         return g.reduceSum(g.gelu(y, true), {0, 1});
       }},
  };
  for (G &c : graphs) {
    GraphBuilder g;
    std::vector<TracedValue> in;
    for (auto &s : c.shapes)
      in.push_back(g.input(s, DType::F32));
    g.finish({c.build(g, in)});
    std::mt19937_64 rng(21);
    std::vector<HostTensor> inputs;
    for (auto &s : c.shapes)
      inputs.push_back(test::randomTensor(DType::F32, s, rng));
    GradientRequest sgd; // a training step: W - lr dW goes to cuBLASLt as alpha = -lr, beta = 1
    sgd.optimizer = "sgd";
    sgd.learningRate = 0.1;
    for (const GradientRequest &request : {GradientRequest{}, sgd}) {
    auto program = compileGradientProgram(g.moduleText(), "default", request);
    auto cpu = program->run(inputs, Device::Cpu);
    for (int rep = 0; rep < 3; ++rep) { // the second and third runs replay a CUDA graph
      auto gpu = program->run(inputs, Device::Cuda);
      ASSERT_EQ(gpu.size(), cpu.size());
      for (size_t i = 0; i < cpu.size(); ++i) {
        double num = 0, den = 0;
        for (size_t k = 0; k < cpu[i].f.size(); ++k) {
          num += (gpu[i].f[k] - cpu[i].f[k]) * (gpu[i].f[k] - cpu[i].f[k]);
          den += cpu[i].f[k] * cpu[i].f[k];
        }
        EXPECT_LE(std::sqrt(num / std::max(den, 1e-300)), 1e-5)
            << c.name << " (" << request.optimizer << ") output " << i << " run " << rep;
      }
    }
    }
  }
}

// Recurrent layers through cuDNN's RNN API (rfuse.recurrent and its gradient, one cuDNN call
// each) equal the interpreter's step-by-step loops: every cell, f32 (TF32 off) and f64, forward
// and gradient, over three runs (the later two replay a CUDA graph), with each of cuDNN's
// algorithms the cudnn_rnn_algo option names (one it refuses falls back to the standard one).
TEST_F(Gpu, RecurrentLayersThroughCudnnEqualTheInterpreter) {
  for (const char *algo : {"auto", "standard", "persist_static_small_h", "persist_dynamic"}) {
    setOption("cudnn_rnn_algo", algo);
    for (DType dt : {DType::F32, DType::F64})
      for (test::RecurrentCase c : test::recurrentCases()) {
        c.batch *= 8; // (a batch cuDNN's persistent kernels take)
        c.hidden *= 8;
        std::string text = test::recurrentModule(c, dt, false), what = c.mode + " " + algo + " " + dtypeName(dt);
        std::vector<HostTensor> in = test::recurrentInputs(c, dt, 5);
        auto forward = compileProgram(text, "default");
        auto gradient = compileGradientProgram(text, "default", GradientRequest{});
        std::vector<HostTensor> ref = interpretText(text, "main", in), gref = gradient->run(in, Device::Cpu);
        // (f32: cuDNN's persistent kernels sum in another order than the standard algorithm's
        // products: up to 4e-5 measured on an H100)
        double tol = dt == DType::F32 ? 1e-4 : 1e-10;
        for (int rep = 0; rep < 3; ++rep) {
          std::vector<HostTensor> got = forward->run(in, Device::Cuda), ggot = gradient->run(in, Device::Cuda);
          ASSERT_EQ(got.size(), ref.size()) << what;
          ASSERT_EQ(ggot.size(), gref.size()) << what;
          for (size_t i = 0; i < ref.size(); ++i)
            EXPECT_LE(test::relativeL2(got[i], ref[i]), tol) << what << " output " << i << " run " << rep;
          for (size_t i = 0; i < gref.size(); ++i)
            EXPECT_LE(test::relativeL2(ggot[i], gref[i]), tol) << what << " gradient " << i << " run " << rep;
        }
      }
  }
  setOption("cudnn_rnn_algo", "auto");
  // Deployed: an exported LSTM layer runs through rfuse_rt like the interpreter.
  test::RecurrentCase lstm{"lstm", 16, 5, 8, 32};
  expectArtifactMatchesInterpreter("lstm artifact", test::recurrentModule(lstm, DType::F32, false),
                                   test::recurrentInputs(lstm, DType::F32, 9), {{cuda::deviceInfo().arch()}, true},
                                   "(cubins)", 1e-4);
}

// A small ResNet's SGD-momentum training step (strided and 1x1 convolutions, batch norm, the
// stem's overlapping max pool, residual adds) runs entirely on the GPU — cuDNN's backward-data,
// backward-filter and pooling-backward calls included — and equals the CPU backend's.
TEST_F(Gpu, ResNetTrainingStepOnTheGpuEqualsTheCpus) {
  for (ImageLayout layout : {ImageLayout::NCHW, ImageLayout::NHWC}) {
    SmallResNetStep step = smallResNetStep(layout, 8);
    auto program = compileGradientProgram(step.text, "default", step.sgd);
    const std::vector<HostTensor> &inputs = step.inputs;
    std::string name = layout == ImageLayout::NCHW ? "NCHW" : "NHWC";
    EXPECT_TRUE(program->info().gpuFallbacks.empty()) << name << ": " << program->info().gpuFallbacks[0];
    auto cpu = program->run(inputs, Device::Cpu);
    for (int rep = 0; rep < 2; ++rep) {
      auto gpu = program->run(inputs, Device::Cuda);
      ASSERT_EQ(gpu.size(), cpu.size());
      for (size_t i = 0; i < cpu.size(); ++i)
        EXPECT_LE(test::maxRelError(gpu[i].f, cpu[i].f, 1e-3), 1e-4) << name << " output " << i << " run " << rep;
    }
  }
}

// A library call's plan (cuDNN's heuristics, cuBLASLt's choice) is made once per problem: the
// same step compiled again recalls every plan from memory, and after the memory is forgotten (a
// new session) from disk, choosing none afresh; an entry on disk that is not a plan file's is
// ignored. The results do not change.
TEST_F(Gpu, LibraryPlansAreRememberedPerProblem) {
  std::string dir = std::string(::testing::TempDir()) + "/rfuse_plan_cache_" + std::to_string(::getpid());
  llvm::sys::fs::remove_directories(dir);
  std::string previousDir = getOption("cache_dir");
  setOption("cache_dir", dir);
  cuda::clearMemoryPlanCache();
  SmallResNetStep step = smallResNetStep(ImageLayout::NHWC, 8);
  auto runOnce = [&] { // a program of its own each time (its library calls' first runs)
    clearCompiledCaches();
    auto program = compileGradientProgram(step.text, "default", step.sgd);
    return program->run(step.inputs, Device::Cuda);
  };
  cuda::LibraryCallStats s0 = cuda::libraryCallStats();
  std::vector<HostTensor> first = runOnce();
  cuda::LibraryCallStats s1 = cuda::libraryCallStats();
  uint64_t calls = s1.firstCalls - s0.firstCalls;
  ASSERT_GE(calls, 10u) << "the step's convolutions in three directions and its product";
  EXPECT_GT(s1.plansChosen, s0.plansChosen);
  EXPECT_LT(s1.plansChosen - s0.plansChosen, calls) << "problems repeated within the step are recalled";
  std::vector<HostTensor> again = runOnce();
  cuda::LibraryCallStats s2 = cuda::libraryCallStats();
  EXPECT_EQ(s2.plansChosen, s1.plansChosen) << "every plan recalled from memory";
  EXPECT_EQ(s2.plansRecalledInMemory - s1.plansRecalledInMemory, calls);
  cuda::clearMemoryPlanCache();
  std::vector<HostTensor> fromDisk = runOnce();
  cuda::LibraryCallStats s3 = cuda::libraryCallStats();
  EXPECT_EQ(s3.plansChosen, s2.plansChosen) << "every plan recalled from disk";
  EXPECT_GT(s3.plansRecalledFromDisk, s2.plansRecalledFromDisk);
  EXPECT_EQ(s3.plansRefused, s0.plansRefused);
  for (const std::vector<HostTensor> *got : {&again, &fromDisk})
    for (size_t i = 0; i < first.size(); ++i)
      EXPECT_LE(test::maxRelError((*got)[i].f, first[i].f, 1e-3), 1e-5) << "output " << i;
  // A damaged entry (its bytes overwritten) is not read: that plan is chosen afresh.
  std::error_code ec;
  int damaged = 0;
  for (llvm::sys::fs::directory_iterator it(dir + "/plans", ec), end; it != end && !ec; it.increment(ec)) {
    std::FILE *f = std::fopen(it->path().c_str(), "r+b");
    if (!f)
      continue;
    std::fseek(f, -1, SEEK_END);
    std::fputc(0x5a, f);
    std::fclose(f);
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  cuda::clearMemoryPlanCache();
  std::vector<HostTensor> afterDamage = runOnce();
  cuda::LibraryCallStats s4 = cuda::libraryCallStats();
  EXPECT_GT(s4.plansChosen, s3.plansChosen);
  for (size_t i = 0; i < first.size(); ++i)
    EXPECT_LE(test::maxRelError(afterDamage[i].f, first[i].f, 1e-3), 1e-5) << "output " << i;
  setOption("cache_dir", previousDir);
  llvm::sys::fs::remove_directories(dir);
}

// Option conv_autotune: cuDNN's algorithms timed on a convolution's first run (PyTorch's
// cudnn.benchmark) instead of its heuristics' first. The timed and heuristic choices are separate
// plans (turning the option on times problems whose heuristic choice is remembered); with TF32
// off the timed choice keeps FMA math: the step equals the CPU's to f32 precision either way.
TEST_F(Gpu, TimedConvolutionAlgorithmsKeepTheProgramsNumerics) {
  std::string previous = getOption("conv_autotune"), previousDir = getOption("cache_dir");
  std::string dir = std::string(::testing::TempDir()) + "/rfuse_timed_conv_" + std::to_string(::getpid());
  llvm::sys::fs::remove_directories(dir);
  setOption("cache_dir", dir); // no plan remembered by an earlier run
  cuda::clearMemoryPlanCache();
  SmallResNetStep step = smallResNetStep(ImageLayout::NHWC, 16);
  std::vector<HostTensor> cpu;
  for (const char *timed : {"FALSE", "TRUE"}) {
    setOption("conv_autotune", timed);
    clearCompiledCaches();
    auto program = compileGradientProgram(step.text, "default", step.sgd);
    if (cpu.empty())
      cpu = program->run(step.inputs, Device::Cpu);
    cuda::LibraryCallStats before = cuda::libraryCallStats();
    auto gpu = program->run(step.inputs, Device::Cuda);
    cuda::LibraryCallStats after = cuda::libraryCallStats();
    ASSERT_EQ(gpu.size(), cpu.size());
    for (size_t i = 0; i < cpu.size(); ++i)
      EXPECT_LE(test::maxRelError(gpu[i].f, cpu[i].f, 1e-3), 1e-4) << "conv_autotune " << timed << " output " << i;
    if (std::string(timed) == "TRUE")
      EXPECT_GT(after.plansChosen, before.plansChosen) << "heuristic plans are not taken for timed ones";
  }
  setOption("conv_autotune", previous);
  setOption("cache_dir", previousDir);
  llvm::sys::fs::remove_directories(dir);
}

// Mixed precision (rf_train's precision = "bf16-mixed"): cuBLASLt's and cuDNN's bfloat16
// products, forward and backward, agree with the CPU's (the interpreter's exact-rounded
// emulation) to bfloat16's precision; the weights stay float32.
TEST_F(Gpu, Bf16MixedTrainingStepsAgreeWithTheCpus) {
  SmallResNetStep step = smallResNetStep(ImageLayout::NHWC, 18);
  step.sgd.autocast = "bf16";
  auto program = compileGradientProgram(step.text, "default", step.sgd);
  const std::vector<HostTensor> &inputs = step.inputs;
  EXPECT_TRUE(program->info().gpuFallbacks.empty()) << program->info().gpuFallbacks[0];
  int bf16Calls = 0;
  for (const std::string &call : program->info().libraryCalls)
    bf16Calls += call.find("bf16") != std::string::npos;
  EXPECT_GE(bf16Calls, 10) << "the convolutions, their backward calls and the classifier's products";
  auto cpu = program->run(inputs, Device::Cpu);
  auto gpu = program->run(inputs, Device::Cuda);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(gpu[i].dtype, DType::F32) << "output " << i;
    // Sums in another order can round a product to the neighbouring bfloat16 (2^-8 apart).
    EXPECT_LE(test::maxRelError(gpu[i].f, cpu[i].f, 1e-1), 3e-2) << "output " << i;
  }
}

TEST_F(Gpu, UnfusedPipelinesRunEveryOpOnTheGpu) {
  for (const char *pipeline : {"no-fusion", "elementwise-only"})
    for (const test::CorpusGraph &g : test::canonicalCorpus())
      expectGpuMatchesInterpreter(g.name + " (" + pipeline + ")", g.moduleText, g.inputs, pipeline);
}

TEST_F(Gpu, RandomGraphsMatchInterpreter) {
  int count = std::getenv("RFUSE_GPU_PROPERTY_COUNT") ? std::atoi(std::getenv("RFUSE_GPU_PROPERTY_COUNT")) : 300;
  for (int seed = 1; seed <= count; ++seed) {
    test::RandomGraph g = test::generateRandomGraph(seed);
    expectGpuMatchesInterpreter("seed " + std::to_string(seed), g.moduleText, g.inputs);
    if (HasFailure())
      break;
  }
}

TEST_F(Gpu, LargeShapesExerciseGridStrideAndVectorTails) {
  for (int64_t n : {(int64_t)1 << 20, ((int64_t)1 << 20) + 3}) {
    GraphBuilder g;
    TracedValue x = g.input({n}, DType::F32), y = g.input({n}, DType::F32);
    g.finish({g.add(g.mul(g.tanh(x), y), g.scalar(0.25, DType::F32))});
    std::mt19937_64 rng(n);
    expectGpuMatchesInterpreter("n=" + std::to_string(n), g.moduleText(),
                                {test::randomTensor(DType::F32, {n}, rng), test::randomTensor(DType::F32, {n}, rng)});
  }
  GraphBuilder g; // long rows: a 1024-thread block per row
  TracedValue x = g.input({64, 20000}, DType::F32);
  TracedValue e = g.exp(g.sub(x, g.reduceMax(x, {1}, true)));
  g.finish({g.div(e, g.reduceSum(e, {1}, true))});
  std::mt19937_64 rng(3);
  expectGpuMatchesInterpreter("long rows", g.moduleText(), {test::randomTensor(DType::F32, {64, 20000}, rng)});
  GraphBuilder w4; // W4's row kernel: 16 elements per thread, 128-bit chunks, launch bounds
  TracedValue xr = w4.input({64, 4096}, DType::F32), gm = w4.input({4096}, DType::F32);
  TracedValue xc = w4.sub(xr, w4.broadcastTo(w4.reduceMean(xr, {1}, true), {64, 4096}));
  TracedValue vr = w4.reduceMean(w4.mul(xc, xc), {1}, true);
  TracedValue yn = w4.mul(w4.mul(xc, w4.broadcastTo(w4.rsqrt(w4.add(vr, w4.scalar(1e-5, DType::F32))), {64, 4096})),
                          w4.broadcastTo(gm, {64, 4096}));
  w4.finish({w4.add(w4.gelu(yn), xr)});
  expectGpuMatchesInterpreter("W4 rows", w4.moduleText(),
                              {test::randomTensor(DType::F32, {64, 4096}, rng), test::randomTensor(DType::F32, {4096}, rng)});
  GraphBuilder t; // A^T B with a large A: A is transposed by cuBLASLt first
  TracedValue ta = t.input({2048, 2048}, DType::F32), tb = t.input({2048, 16}, DType::F32);
  t.finish({t.matmul(ta, tb, /*transposeA=*/true, false)});
  expectGpuMatchesInterpreter("transposed lhs", t.moduleText(),
                              {test::randomTensor(DType::F32, {2048, 2048}, rng), test::randomTensor(DType::F32, {2048, 16}, rng)});
  GraphBuilder s; // reductions rfuse-split-reductions makes two-stage
  TracedValue a = s.input({512, 64}, DType::F32), c = s.input({8192, 16}, DType::F32);
  s.finish({s.reduceMean(s.mul(a, a), {0, 1}), s.reduceSum(s.exp(c), {0}, true)});
  expectGpuMatchesInterpreter("split reductions", s.moduleText(),
                              {test::randomTensor(DType::F32, {512, 64}, rng), test::randomTensor(DType::F32, {8192, 16}, rng)});
}

// Narrow floats four at a time (CudaCodegen.NarrowFloatsLoadAndStoreFourElementsAtOnce): a
// mixed bfloat16 / f16 / f32 pointwise kernel with a tail (63 x 1001 elements), and a softmax's
// row kernel storing f32 and narrow probabilities 128 and 64 bits wide.
TEST_F(Gpu, NarrowFloatVectorAccessesMatchTheInterpreter) {
  std::mt19937_64 rng(11);
  for (DType narrow : {DType::BF16, DType::F16}) {
    GraphBuilder g;
    TracedValue p = g.input({63, 1001}, narrow), s = g.input({63, 1001}, DType::F32);
    TracedValue y = g.mul(g.cast(p, DType::F32), s);
    TracedValue z = g.input({4096, 256}, DType::F32);
    TracedValue e = g.exp(g.sub(z, g.broadcastTo(g.reduceMax(z, {1}, true), {4096, 256})));
    TracedValue sm = g.div(e, g.broadcastTo(g.reduceSum(e, {1}, true), {4096, 256}));
    g.finish({y, g.cast(y, narrow), sm, g.cast(sm, narrow)});
    expectGpuMatchesInterpreter(narrow == DType::BF16 ? "bf16" : "f16", g.moduleText(),
                                {test::randomTensor(narrow, {63, 1001}, rng), test::randomTensor(DType::F32, {63, 1001}, rng),
                                 test::randomTensor(DType::F32, {4096, 256}, rng)});
  }
}

// A widened bfloat16 product written in f32 by cuBLASLt (CudaCodegen.
// WidenedNarrowProductsAreWrittenInF32ByTheLibrary): attention's scaled scores equal the
// interpreter's, which rounds the product to bfloat16 first, within that rounding (2^-8); and
// closer than that rounding allows where the widening is not folded (lt_f32_results = FALSE).
TEST_F(Gpu, WidenedNarrowProductsMatchTheInterpreter) {
  GraphBuilder g;
  TracedValue q = g.input({32, 128, 64}, DType::BF16), k = g.input({32, 128, 64}, DType::BF16);
  TracedValue s = g.cast(g.matmul(q, k, false, true), DType::F32);
  g.finish({g.div(s, g.scalar(8.0, DType::F32))});
  std::mt19937_64 rng(5);
  std::vector<HostTensor> inputs = {test::randomTensor(DType::BF16, {32, 128, 64}, rng),
                                    test::randomTensor(DType::BF16, {32, 128, 64}, rng)};
  std::vector<HostTensor> ref = interpretText(g.moduleText(), "main", inputs);
  for (const char *folded : {"1", "0"}) {
    setOption("lt_f32_results", folded);
    auto program = compileProgram(g.moduleText(), "default");
    bool f32Result = false;
    for (const std::string &step : program->info().gpuPlan) // (the plan's steps, as described)
      f32Result |= step.find("bf16 tB -> f32 alpha=0.125") != std::string::npos;
    EXPECT_EQ(f32Result, std::string(folded) == "1");
    auto got = program->run(inputs, Device::Cuda);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_LE(test::maxRelError(got[0].f, ref[0].f, 1e-1), 8e-3) << "lt_f32_results " << folded;
  }
  setOption("lt_f32_results", "1");
}

// rfuse.attention and its backward as generated kernels (flash attention on the tensor cores)
// against the interpreter: bf16 and f16, ragged tiles (queries and keys not multiples of 64, one
// query), head dims 16 to 128; then attention written op by op (fused by the compile).
TEST_F(Gpu, AttentionKernelsMatchTheInterpreter) {
  // Masks: causal (query l sees keys up to l; more queries than keys, and the diagonal inside a
  // key tile), a mask operand spread over queries or batches or full, a finite fill (masked
  // scores still weigh: no tile is skipped). Key 0 is never masked: no row is masked everywhere.
  // Dropout (p = 0.25) with the draws in torch's layout [B, L, S] or R's [S, L, B] (the strides).
  struct Case {
    DType dt;
    int64_t b, l, s, d;
    bool causal = false;
    std::vector<int64_t> maskDims = {};
    double fill = -INFINITY;
    std::vector<int64_t> dropStrides = {};
  };
  for (Case c : {Case{DType::BF16, 2, 100, 70, 64}, Case{DType::F16, 3, 33, 130, 128}, Case{DType::BF16, 4, 64, 64, 16},
                 Case{DType::F16, 2, 1, 5, 32}, Case{DType::BF16, 2, 100, 70, 64, true},
                 Case{DType::F16, 3, 33, 130, 128, false, {3, 1, 130}}, Case{DType::BF16, 4, 64, 64, 16, true, {1, 64, 64}},
                 Case{DType::F16, 2, 1, 5, 32, true, {2, 1, 5}, -2.0}, Case{DType::BF16, 2, 130, 150, 32, true, {2, 130, 150}},
                 Case{DType::F16, 2, 90, 200, 64, true, {}, -3.0},
                 Case{DType::BF16, 2, 100, 70, 64, false, {}, -INFINITY, {7000, 70, 1}},
                 Case{DType::F16, 3, 33, 130, 128, false, {3, 1, 130}, -INFINITY, {1, 3, 99}},
                 Case{DType::BF16, 2, 130, 150, 32, true, {}, -INFINITY, {1, 2, 260}}}) {
    std::string e = c.dt == DType::BF16 ? "bf16" : "f16";
    std::string q = test::tensorType({c.b, c.l, c.d}, e), kv = test::tensorType({c.b, c.s, c.d}, e);
    std::string of = test::tensorType({c.b, c.l, c.d}, "f32"), row = test::tensorType({c.b, c.l}, "f32");
    std::string mask = c.maskDims.empty() ? "" : test::tensorType(c.maskDims, "i1");
    std::string maskArg = mask.empty() ? "" : ", %m: " + mask, maskUse = mask.empty() ? "" : " mask %m",
                maskType = mask.empty() ? "" : ", " + mask;
    bool dropout = !c.dropStrides.empty();
    if (dropout) {
      maskArg += ", %seed: tensor<2xi32>";
      maskUse += " dropout %seed";
      maskType += ", tensor<2xi32>";
    }
    std::vector<std::string> dict;
    if (!std::isinf(c.fill))
      dict.push_back("mask_value = " + std::to_string(c.fill) + " : f64");
    if (dropout)
      dict.push_back("dropout_threshold = 0.25 : f64, dropout_scale = 1.3333333730697632 : f64, dropout_strides = "
                     "array<i64: " + std::to_string(c.dropStrides[0]) + ", " + std::to_string(c.dropStrides[1]) + ", " +
                     std::to_string(c.dropStrides[2]) + ">");
    std::string attrs = std::string(c.causal ? " causal" : "") + (dict.empty() ? "" : " {" + llvm::join(dict, ", ") + "}");
    std::string text =
        "func.func @main(%q: " + q + ", %k: " + kv + ", %v: " + kv + ", %g: " + q + maskArg + ") -> (" + q + ", " + row +
        ", " + q + ", " + kv + ", " + kv + ") {\n" + "  %o, %lse = rfuse.attention %q, %k, %v" + maskUse +
        " scale = 0.17" + attrs + " : (" + q + ", " + kv + ", " + kv + maskType + ") -> (" + q + ", " + row + ")\n" +
        "  %gw = rfuse.cast %g : " + q + " to " + of + "\n" + "  %ow = rfuse.cast %o : " + q + " to " + of + "\n" +
        "  %go = rfuse.mul %gw, %ow : " + of + "\n" + "  %delta = rfuse.reduce_sum %go, dims = [2] : (" + of + ") -> " +
        row + "\n" + "  %dq, %dk, %dv = rfuse.attention_backward %q, %k, %v, %g, %lse, %delta" + maskUse +
        " scale = 0.17" + attrs + " : (" + q + ", " + kv + ", " + kv + ", " + q + ", " + row + ", " + row + maskType +
        ") -> (" + q + ", " + kv + ", " + kv + ")\n" + "  return %o, %lse, %dq, %dk, %dv : " + q + ", " + row + ", " + q +
        ", " + kv + ", " + kv + "\n}\n";
    std::mt19937_64 rng(9);
    std::vector<HostTensor> in = {test::randomTensor(c.dt, {c.b, c.l, c.d}, rng), test::randomTensor(c.dt, {c.b, c.s, c.d}, rng),
                                  test::randomTensor(c.dt, {c.b, c.s, c.d}, rng), test::randomTensor(c.dt, {c.b, c.l, c.d}, rng)};
    if (!mask.empty()) { // about a third masked
      HostTensor m = test::randomTensor(DType::I1, c.maskDims, rng, -2, 1);
      for (int64_t k = 0; k < m.numel(); k += c.maskDims[2])
        m.i[k] = 0;
      in.push_back(m);
    }
    if (dropout) {
      HostTensor seed(DType::I32, {2});
      seed.i[0] = 77;
      seed.i[1] = -2026;
      in.push_back(seed);
    }
    std::string name = e + " " + std::to_string(c.l) + "x" + std::to_string(c.s) + " d" + std::to_string(c.d) +
                       (c.causal ? " causal" : "") + (mask.empty() ? "" : " mask " + mask) + attrs;
    int kernels = 0;
    auto program = compileProgram(text, "default"); // (held: the loop reads its info)
    for (const std::string &step : program->info().gpuPlan)
      kernels += step.find("attention, a block per 64 rows") != std::string::npos;
    EXPECT_EQ(kernels, 2) << name;
    expectGpuMatchesInterpreter(name, text, in);
  }
  // softmax(q k^T / 8) v op by op in bf16, as autocast leaves it: one attention kernel.
  GraphBuilder g;
  TracedValue q = g.input({8, 96, 64}, DType::BF16), k = g.input({8, 80, 64}, DType::BF16), v = g.input({8, 80, 64}, DType::BF16);
  TracedValue z = g.div(g.cast(g.matmul(q, k, false, true), DType::F32), g.scalar(8.0, DType::F32));
  TracedValue e = g.exp(g.sub(z, g.broadcastTo(g.reduceMax(g.stopGradient(z), {2}, true), {8, 96, 80})));
  TracedValue p = g.div(e, g.broadcastTo(g.reduceSum(e, {2}, true), {8, 96, 80}));
  g.finish({g.matmul(g.cast(p, DType::BF16), v)});
  auto program = compileProgram(g.moduleText(), "default");
  bool fused = false;
  for (const std::string &step : program->info().gpuPlan)
    fused |= step.find("attention, a block per 64 rows") != std::string::npos;
  EXPECT_TRUE(fused) << program->info().fusedText;
  std::mt19937_64 rng(10);
  expectGpuMatchesInterpreter("attention op by op", g.moduleText(),
                              {test::randomTensor(DType::BF16, {8, 96, 64}, rng), test::randomTensor(DType::BF16, {8, 80, 64}, rng),
                               test::randomTensor(DType::BF16, {8, 80, 64}, rng)});
}

TEST_F(Gpu, HostFallbackRunsPooling) {
  GraphBuilder g;
  TracedValue x = g.input({2, 3, 8, 8}, DType::F32);
  g.finish({g.relu(g.maxPool2d(g.exp(x)))});
  std::mt19937_64 rng(4);
  expectGpuMatchesInterpreter("pool", g.moduleText(), {test::randomTensor(DType::F32, {2, 3, 8, 8}, rng)});
}

// Option max_pool_backward_kernel: max pooling's gradient as a generated gather kernel, against
// the interpreter (first maximum of each window; ties from inputs of a few levels, a NaN), in
// both layouts, three dtypes and windows that overlap (3x3 stride 1 and 2) or do not (2x2 stride 2).
TEST_F(Gpu, GeneratedMaxPoolBackwardMatchesTheInterpreter) {
  setOption("max_pool_backward_kernel", "1");
  struct Window { int64_t k, s, p; };
  for (DType dt : {DType::F32, DType::F64, DType::BF16})
    for (bool nhwc : {true, false})
      for (Window w : {Window{3, 2, 1}, Window{2, 2, 0}, Window{3, 1, 1}}) {
        int64_t n = 3, c = 5, h = 9, wd = 10;
        int64_t oh = (h + 2 * w.p - w.k) / w.s + 1, ow = (wd + 2 * w.p - w.k) / w.s + 1;
        auto shape = [&](int64_t a, int64_t b) {
          return nhwc ? std::vector<int64_t>{n, a, b, c} : std::vector<int64_t>{n, c, a, b};
        };
        auto type = [&](const std::vector<int64_t> &sh) {
          std::string t = "tensor<";
          for (int64_t d : sh) t += std::to_string(d) + "x";
          return t + dtypeName(dt) + ">";
        };
        std::string in = type(shape(h, wd)), out = type(shape(oh, ow));
        std::string attrs = "{kernel = array<i64: " + std::to_string(w.k) + ", " + std::to_string(w.k) +
                            ">, strides = array<i64: " + std::to_string(w.s) + ", " + std::to_string(w.s) +
                            ">, padding = array<i64: " + std::to_string(w.p) + ", " + std::to_string(w.p) + ", " +
                            std::to_string(w.p) + ", " + std::to_string(w.p) + ">, layout = #rfuse.layout<" +
                            (nhwc ? "NHWC" : "NCHW") + ">}";
        std::string text = "func.func @main(%x: " + in + ", %dy: " + out + ") -> " + in + " {\n" +
                           "  %y = rfuse.max_pool2d %x " + attrs + " : (" + in + ") -> " + out + "\n" +
                           "  %dx = rfuse.max_pool2d_backward %x, %y, %dy " + attrs + " : (" + in + ", " + out + ", " +
                           out + ") -> " + in + "\n  return %dx : " + in + "\n}\n";
        std::mt19937_64 rng(11);
        HostTensor x = test::randomTensor(dt, shape(h, wd), rng);
        for (double &v : x.f)
          v = std::floor(v * 2); // a few levels: windows with tied maxima
        x.f[7] = std::nan("");
        HostTensor dy = test::randomTensor(dt, shape(oh, ow), rng);
        std::string name = std::string("max_pool2d_backward ") + dtypeName(dt) + (nhwc ? " NHWC " : " NCHW ") +
                           std::to_string(w.k) + "/" + std::to_string(w.s);
        auto program = compileProgram(text, "default");
        EXPECT_NE(program->info().fusedText.find("max_pool2d_backward"), std::string::npos) << name;
        expectGpuMatchesInterpreter(name, text, {x, dy});
      }
  setOption("max_pool_backward_kernel", "0");
}

// rfuse.solve runs on the host (LAPACK, as R's solve) between device kernels, in f64 and f32.
TEST_F(Gpu, SolveRunsOnTheHostBetweenDeviceKernels) {
  for (DType dt : {DType::F64, DType::F32}) {
    GraphBuilder g;
    TracedValue a = g.input({6, 6}, dt), b = g.input({3, 6}, dt);
    TracedValue spd = g.add(g.matmul(a, a, true, false), g.broadcastTo(g.scalar(6.0, dt), {6, 6}));
    g.finish({g.tanh(g.solve(spd, g.exp(b), 2.220446049250313e-16))});
    std::mt19937_64 rng(6);
    std::vector<HostTensor> in = {test::randomTensor(dt, {6, 6}, rng), test::randomTensor(dt, {3, 6}, rng)};
    try {
      interpretText(g.moduleText(), "main", in);
    } catch (const std::exception &e) { // the GPU box has LAPACK only with R's libraries unpacked
      if (std::string(e.what()).find("LAPACK") != std::string::npos)
        GTEST_SKIP() << "no LAPACK on this machine: " << e.what();
      throw;
    }
    expectGpuMatchesInterpreter(dt == DType::F64 ? "solve f64" : "solve f32", g.moduleText(), in);
  }
}

TEST_F(Gpu, Tf32IsOnByDefaultAndClose) {
  setOption("tf32", "1");
  GraphBuilder g;
  TracedValue a = g.input({256, 256}, DType::F32), b = g.input({256, 256}, DType::F32);
  g.finish({g.matmul(a, b)});
  std::mt19937_64 rng(5);
  std::vector<HostTensor> in = {test::randomTensor(DType::F32, {256, 256}, rng),
                                test::randomTensor(DType::F32, {256, 256}, rng)};
  auto got = compileProgram(g.moduleText(), "default")->run(in, Device::Cuda)[0];
  auto ref = interpretText(g.moduleText(), "main", in)[0];
  double num = 0, den = 0;
  for (size_t k = 0; k < ref.f.size(); ++k) {
    num += (got.f[k] - ref.f[k]) * (got.f[k] - ref.f[k]);
    den += ref.f[k] * ref.f[k];
  }
  EXPECT_LT(std::sqrt(num / den), 2e-3) << "tf32 is near 3e-4 relative";
}

} // namespace

// ---- Device-resident tensors (rfuse/Runtime/Tensor.h) ----------------------------------------

TEST_F(Gpu, DeviceTensorsRoundTripEveryDtypeThroughPinnedStaging) {
  // Three staging chunks and a ragged tail for f32; small ones for the rest.
  for (int64_t n : {(int64_t)37, (int64_t)((40 << 20) / 4 + 5)}) {
    std::vector<double> v(n);
    for (int64_t k = 0; k < n; ++k)
      v[k] = std::sin((double)k * 0.37) * 300 + (k % 7 == 0 ? 0 : 0.25);
    for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::I1}) {
      Tensor h = emptyTensor(Device::Cpu, dt, {n}), d = emptyTensor(Device::Cuda, dt, {n});
      copyFromDoubles(v.data(), h);
      copyFromDoubles(v.data(), d);
      std::vector<double> a(n), b(n);
      copyToDoubles(h, a.data());
      copyToDoubles(d, b.data());
      ASSERT_EQ(a, b) << dtypeName(dt) << " n " << n;
      HostTensor viaHost = toHostTensor(d);
      EXPECT_EQ(viaHost.dtype, dt);
    }
  }
}

TEST_F(Gpu, ProgramsOnDeviceTensorsMoveNothingThroughTheHostAndMatchTheInterpreter) {
  for (const test::CorpusGraph &g : test::canonicalCorpus()) {
    auto program = compileProgram(g.moduleText, "default");
    std::vector<HostTensor> ref = interpretText(g.moduleText, "main", g.inputs);
    std::vector<Tensor> in;
    for (const HostTensor &h : g.inputs)
      in.push_back(fromHostTensor(h, Device::Cuda));
    program->run(in, Device::Cuda); // the first run tunes and computes constants
    TransferStats before = transferStats();
    // Alternating between two sets of results, several times: graphs by address (or staged).
    std::vector<Tensor> a = program->run(in, Device::Cuda), b = program->run(in, Device::Cuda);
    for (int rep = 0; rep < 3; ++rep) {
      program->run(in, a, Device::Cuda);
      program->run(in, b, Device::Cuda);
    }
    TransferStats after = transferStats();
    EXPECT_EQ(after.hostToDeviceBytes, before.hostToDeviceBytes) << g.name;
    EXPECT_EQ(after.deviceToHostBytes, before.deviceToHostBytes) << g.name;
    for (const std::vector<Tensor> *out : {&a, &b})
      for (size_t i = 0; i < ref.size(); ++i) {
        HostTensor got = toHostTensor((*out)[i]);
        ASSERT_EQ(got.shape, ref[i].shape) << g.name;
        if (!ref[i].isFloat())
          continue;
        double num = 0, den = 0;
        for (size_t k = 0; k < ref[i].f.size(); ++k) {
          num += (got.f[k] - ref[i].f[k]) * (got.f[k] - ref[i].f[k]);
          den += ref[i].f[k] * ref[i].f[k];
        }
        EXPECT_LE(std::sqrt(num / std::max(den, 1e-300)), tolerance(ref[i].dtype)) << g.name << " output " << i;
      }
  }
}

TEST_F(Gpu, NewInputValuesAtTheSameAddressesGiveNewResults) {
  // A replayed graph reads its inputs' memory at replay time: new values written in place count.
  GraphBuilder gb("main");
  TracedValue x = gb.input({256, 64}, DType::F32, "x"), w = gb.input({64, 32}, DType::F32, "w");
  TracedValue h = gb.relu(gb.matmul(x, w));
  TracedValue y = gb.tanh(gb.matmul(h, gb.transpose(w, {1, 0})));
  gb.finish({gb.reduceSum(gb.mul(y, y), {1}), h});
  std::string text = gb.moduleText();
  auto program = compileProgram(text, "default");
  std::mt19937_64 rng(11);
  HostTensor wx = test::randomTensor(DType::F32, {64, 32}, rng);
  Tensor dx = emptyTensor(Device::Cuda, DType::F32, {256, 64}), dw = fromHostTensor(wx, Device::Cuda);
  std::vector<Tensor> out = program->run({dx, dw}, Device::Cuda);
  for (int rep = 0; rep < 5; ++rep) {
    HostTensor hx = test::randomTensor(DType::F32, {256, 64}, rng);
    std::vector<double> vals = hx.f;
    copyFromDoubles(vals.data(), dx);
    program->run({dx, dw}, out, Device::Cuda);
    std::vector<HostTensor> ref = interpretText(text, "main", {hx, wx});
    EXPECT_LE(test::maxRelError(toHostTensor(out[0]).f, ref[0].f, 1e-3), 1e-4) << rep;
  }
}

// Data-parallel training on one GPU, through NCCL for real: a group of one rank (rendezvous,
// ncclCommInitRank), a training step whose gradients are all-reduced in one bucket on the
// collectives' stream, replayed as a CUDA graph from its second run and through alternating
// tensor sets: every step equals the plain step (the mean over one rank is the gradient), and the
// front end's all-reduce and broadcast leave a tensor's values as they are.
TEST_F(Gpu, AllReducedTrainingStepOverNcclEqualsThePlainStep) {
  GraphBuilder g;
  TracedValue x = g.input({64, 32}, DType::F32), w = g.input({32, 16}, DType::F32), b = g.input({16}, DType::F32);
  TracedValue h = g.tanh(g.add(g.matmul(x, w), g.broadcastTo(b, {64, 16})));
  g.finish({g.reduceMean(g.mul(h, h), {0, 1})});
  GradientRequest plain;
  plain.wrt = {1, 2};
  plain.optimizer = "sgd";
  plain.learningRate = 0.1;
  plain.momentum = 0.9;
  GradientRequest ddp = plain;
  ddp.gradientAllReduce = "mean";
  auto p = compileGradientProgram(g.moduleText(), "default", plain);
  auto d = compileGradientProgram(g.moduleText(), "default", ddp);
  ProcessGroupOptions o;
  o.masterPort = 29700 + (int)(std::random_device{}() % 1000);
  o.timeoutSeconds = 30;
  try {
    initProcessGroup(o);
  } catch (const DistributedError &e) {
    if (std::string(e.what()).find("NCCL is not available") != std::string::npos)
      GTEST_SKIP() << e.what();
    throw;
  }
  ProcessGroupInfo info = processGroupInfo();
  EXPECT_EQ(info.backend.rfind("nccl ", 0), 0u) << info.backend;
  std::mt19937_64 rng(9);
  std::vector<HostTensor> in = {test::randomTensor(DType::F32, {64, 32}, rng), test::randomTensor(DType::F32, {32, 16}, rng),
                                test::randomTensor(DType::F32, {16}, rng), HostTensor(DType::F32, {32, 16}),
                                HostTensor(DType::F32, {16})};
  std::vector<Tensor> pin, din;
  for (const HostTensor &t : in) {
    pin.push_back(fromHostTensor(t, Device::Cuda));
    din.push_back(fromHostTensor(t, Device::Cuda));
  }
  std::vector<Tensor> pout = p->run(pin, Device::Cuda), dout = d->run(din, Device::Cuda);
  auto emptyLike = [](const std::vector<Tensor> &ts) { // fresh result tensors of the same types
    std::vector<Tensor> out;
    for (const Tensor &t : ts)
      out.push_back(emptyTensor(Device::Cuda, t.dtype, t.shape));
    return out;
  };
  // Steps 2..6 into the same result tensors (graph replays), parameters and momentum fed back.
  for (int step = 2; step <= 6; ++step) {
    for (size_t k = 0; k < pout.size(); ++k)
      EXPECT_EQ(toHostTensor(pout[k]).f, toHostTensor(dout[k]).f) << "step " << step - 1 << " output " << k;
    std::vector<Tensor> pnext = {pin[0], pout[1], pout[2], pout[3], pout[4]};
    std::vector<Tensor> dnext = {din[0], dout[1], dout[2], dout[3], dout[4]};
    pin = pnext;
    din = dnext;
    std::vector<Tensor> po = emptyLike(pout), dO = emptyLike(dout);
    p->run(pin, po, Device::Cuda);
    d->run(din, dO, Device::Cuda);
    pout = po;
    dout = dO;
  }
  bool bucket = false;
  for (const std::string &line : d->info().gpuPlan)
    bucket |= line.find("all-reduce (mean) of 2 tensors") != std::string::npos && line.find("NCCL") != std::string::npos;
  EXPECT_TRUE(bucket);
  Tensor t = fromHostTensor(in[1], Device::Cuda);
  allReduce({t}, true);
  broadcast({t}, 0);
  EXPECT_EQ(toHostTensor(t).f, in[1].f);
  destroyProcessGroup();
  // The graphs captured under that communicator are not replayed under the next group, nor
  // without one: the same steps, the same values.
  for (bool again : {true, false}) {
    if (again) {
      o.masterPort += 1;
      initProcessGroup(o);
    }
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<Tensor> po = emptyLike(pout), dO = emptyLike(dout);
      p->run(pin, po, Device::Cuda);
      d->run(din, dO, Device::Cuda);
      for (size_t k = 0; k < po.size(); ++k)
        EXPECT_EQ(toHostTensor(po[k]).f, toHostTensor(dO[k]).f) << (again ? "new group" : "no group") << " output " << k;
    }
    if (again)
      destroyProcessGroup();
  }
}

TEST_F(Gpu, DroppedProgramsUnloadTheirKernels) {
  // Every shape is a new kernel: a process tracing many must not keep them all loaded.
  size_t before = cuda::loadedKernelModules();
  for (int n = 1; n <= 20; ++n) {
    GraphBuilder g("main");
    TracedValue x = g.input({n * 37}, DType::F32, "x");
    g.finish({g.add(g.exp(x), x)});
    auto program = compileProgram(g.moduleText(), "default");
    HostTensor in = HostTensor::fromDoubles(DType::F32, {n * 37}, std::vector<double>(n * 37, 0.5));
    std::vector<HostTensor> out = program->run({in}, Device::Cuda);
    EXPECT_NEAR(out[0].f[0], std::exp(0.5) + 0.5, 1e-5);
    EXPECT_GT(cuda::loadedKernelModules(), before);
  }
  EXPECT_EQ(cuda::loadedKernelModules(), before);
}

TEST_F(Gpu, OutOfMemorySaysHowMuchAndTheDeviceStaysUsable) {
  size_t huge = (size_t)1 << 46; // 64 TiB
  try {
    emptyTensor(Device::Cuda, DType::F32, {(int64_t)(huge / 4)});
    ADD_FAILURE() << "allocated 64 TiB";
  } catch (const OutOfMemoryError &e) {
    EXPECT_GE(e.requested, huge);
    EXPECT_GT(e.total, 0u);
    EXPECT_NE(std::string(e.what()).find("out of device memory: asked for 65536.0 GiB"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GiB are free"), std::string::npos) << e.what();
  }
  Tensor t = emptyTensor(Device::Cuda, DType::F32, {1024});
  std::vector<double> v(1024, 2.5), back(1024);
  copyFromDoubles(v.data(), t);
  copyToDoubles(t, back.data());
  EXPECT_EQ(back, v);
}

TEST_F(Gpu, ProfilingAStagedProgramKeepsItsFixedBuffers) {
  // Small arguments and results: a staged graph over fixed buffers. A profiled run (graphs off)
  // must stage through the same buffers, and the graph replayed after it must see new inputs.
  GraphBuilder gb("main");
  TracedValue x = gb.input({64, 32}, DType::F32, "x"), w = gb.input({32, 16}, DType::F32, "w");
  gb.finish({gb.reduceSum(gb.tanh(gb.matmul(gb.relu(x), w)), {1})});
  std::string text = gb.moduleText();
  auto program = compileProgram(text, "default");
  std::mt19937_64 rng(12);
  HostTensor wx = test::randomTensor(DType::F32, {32, 16}, rng);
  Tensor dw = fromHostTensor(wx, Device::Cuda);
  for (int rep = 0; rep < 6; ++rep) {
    HostTensor hx = test::randomTensor(DType::F32, {64, 32}, rng);
    if (rep == 3)
      startProfile();
    std::vector<Tensor> out = program->run({fromHostTensor(hx, Device::Cuda), dw}, Device::Cuda);
    if (rep == 3)
      EXPECT_FALSE(stopProfile().empty());
    std::vector<HostTensor> ref = interpretText(text, "main", {hx, wx});
    EXPECT_LE(test::maxRelError(toHostTensor(out[0]).f, ref[0].f, 1e-3), 1e-4) << "run " << rep;
  }
}

namespace {
// A two-layer head over a batch of rows (the batch is the last dim, as R's rows are), with row
// reductions and broadcasts: its kernels index through the batch size.
std::string batchHead(int64_t batch) {
  GraphBuilder g("main");
  std::mt19937_64 rng(21);
  auto weights = [&](std::vector<int64_t> shape) {
    HostTensor t = test::randomTensor(DType::F32, shape, rng, -0.5, 0.5);
    return g.constant(t.f, shape, DType::F32);
  };
  TracedValue x = g.input({64, batch}, DType::F32, "x");
  TracedValue h = g.relu(g.add(g.matmul(weights({128, 64}), x), weights({128, 1})));
  TracedValue z = g.tanh(g.matmul(weights({16, 128}), h));
  TracedValue e = g.exp(g.sub(z, g.reduceMax(z, {0}, true)));
  g.finish({g.div(e, g.reduceSum(e, {0}, true))});
  return g.moduleText(true);
}
} // namespace

TEST_F(Gpu, ProgramsMadeForABatchSizeEqualTheCompiledOnesAndCompileNoKernels) {
  auto a = compileProgram(batchHead(40), "default"), b = compileProgram(batchHead(41), "default");
  std::string why;
  auto t = BatchTemplate::make(*a, 40, *b, 41, why);
  ASSERT_TRUE(t) << why;
  bool first = true;
  for (int64_t n : {64, 257, 7, 2}) {
    auto made = t->specialize(batchHead(n), n, why);
    ASSERT_TRUE(made) << why;
    std::mt19937_64 rng(n);
    HostTensor x = test::randomTensor(DType::F32, {64, n}, rng);
    cuda::KernelCacheStats before = cuda::kernelCacheStats();
    std::vector<HostTensor> got = made->run({x}, Device::Cuda);
    cuda::KernelCacheStats after = cuda::kernelCacheStats();
    if (!first) // the first made size compiled (or read from disk) the shared kernels
      EXPECT_EQ(after.compiles + after.diskHits, before.compiles + before.diskHits)
          << "batch " << n << " compiled kernels of its own";
    first = false;
    std::vector<HostTensor> ref = compileProgram(batchHead(n), "default")->run({x}, Device::Cuda);
    ASSERT_EQ(got[0].shape, ref[0].shape);
    EXPECT_LE(test::maxRelError(got[0].f, ref[0].f, 1e-6), 1e-5) << "batch " << n;
    std::vector<HostTensor> interp = interpretText(batchHead(n), "main", {x});
    EXPECT_LE(test::maxRelError(got[0].f, interp[0].f, 1e-6), 1e-4) << "batch " << n;
  }
}
