// The CPU backend (pointwise kernels JIT-compiled through linalg and LLVM; the rest interpreted)
// against the reference interpreter on the unfused graph: the corpus and random property graphs.
#include "CorpusUtil.h"
#include "RandomGraph.h"
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Options.h"
#include "rfuse/Runtime/Interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

using namespace rfuse;

namespace {

void expectCpuMatchesInterpreter(const std::string &name, const std::string &text,
                                 const std::vector<HostTensor> &inputs) {
  auto program = compileProgram(text, "default");
  auto ref = interpretText(text, "main", inputs);
  auto got = program->run(inputs, Device::Cpu);
  ASSERT_EQ(got.size(), ref.size()) << name;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(got[i].shape, ref[i].shape) << name;
    ASSERT_EQ(got[i].dtype, ref[i].dtype) << name;
    if (!ref[i].isFloat()) {
      EXPECT_EQ(got[i].i, ref[i].i) << name << " output " << i;
      continue;
    }
    // Relative error, with an absolute floor below which values count as ~0. f32's floor is
    // higher: glibc's vector expf/erfcf (≤ 4 ulp) may differ from scalar libm in the last bit
    // of an intermediate, and a graph that cancels (W4's gelu(y) + x ~ 0 from terms ~0.3) shows
    // that bit as ~3e-8 absolute.
    bool f64 = ref[i].dtype == DType::F64;
    EXPECT_LE(test::maxRelError(got[i].f, ref[i].f, f64 ? 1e-3 : 1e-2), f64 ? 1e-12 : 1e-5)
        << name << " output " << i;
  }
}

// The program's results with 1 thread and with 4 agree bit for bit.
void expectThreadCountsAgree(const std::string &name, const std::string &text, const std::vector<HostTensor> &in) {
  auto program = compileProgram(text, "default");
  setOption("cpu_threads", "1");
  auto one = program->run(in, Device::Cpu);
  setOption("cpu_threads", "4");
  auto four = program->run(in, Device::Cpu);
  setOption("cpu_threads", "0");
  for (size_t i = 0; i < one.size(); ++i) {
    int64_t first = -1, count = 0;
    for (size_t k = 0; k < one[i].f.size(); ++k)
      if (one[i].f[k] != four[i].f[k]) {
        if (first < 0)
          first = k;
        ++count;
      }
    EXPECT_EQ(count, 0) << name << " output " << i << ": " << count << " elements differ, the first at " << first;
  }
}

TEST(CpuJit, CorpusMatchesInterpreter) {
  for (const test::CorpusGraph &g : test::canonicalCorpus())
    expectCpuMatchesInterpreter(g.name, g.moduleText, g.inputs);
}

TEST(CpuJit, RandomGraphsMatchInterpreter) {
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    test::RandomGraph g = test::generateRandomGraph(seed);
    expectCpuMatchesInterpreter("seed " + std::to_string(seed), g.moduleText, g.inputs);
    if (HasFailure())
      break;
  }
}

TEST(CpuJit, ElementwiseChainIsJitCompiled) {
  // A chain over 2^16 doubles: the same numbers as the interpreter, bit for bit in f64 for
  // these correctly rounded operations.
  GraphBuilder g;
  int64_t n = 1 << 16;
  TracedValue x = g.input({n}, DType::F64), a = g.input({n}, DType::F64), b = g.input({n}, DType::F64);
  g.finish({g.add(g.mul(g.relu(g.add(g.mul(x, a), b)), g.div(g.scalar(1.0, DType::F64),
                                                              g.add(g.scalar(1.0, DType::F64), g.exp(g.neg(x))))),
                  g.mul(g.tanh(b), g.scalar(0.5, DType::F64)))});
  std::mt19937_64 rng(9);
  std::vector<HostTensor> in = {test::randomTensor(DType::F64, {n}, rng), test::randomTensor(DType::F64, {n}, rng),
                                test::randomTensor(DType::F64, {n}, rng)};
  expectCpuMatchesInterpreter("chain", g.moduleText(), in);
}

} // namespace

namespace {

using namespace rfuse;

// Every step of the canonical graphs runs on the CPU backend (none falls back to the
// interpreter), except those it documents as interpreted (f16/bf16).
TEST(CpuJit, CanonicalKernelsAreCompiled) {
  for (const test::CorpusGraph &g : test::canonicalCorpus()) { // f16 and bf16 ones included
    auto program = compileProgram(g.moduleText, "default");
    for (const std::string &s : program->cpuSteps())
      EXPECT_EQ(s.find("interpreted"), std::string::npos) << g.name << ": " << s;
  }
}

// f16 / bf16 kernels compute in f32 and round each op's result to its dtype, as the interpreter
// does: pointwise chains with casts between the two, splat constants, broadcasts and transposes
// of narrow inputs, reductions over trailing and leading dims (row and column mode).
TEST(CpuJit, NarrowFloatKernelsAreCompiledAndRoundAsTheInterpreter) {
  const std::string text = R"(
func.func @main(%x: tensor<64x37xbf16>, %y: tensor<37xf16>, %z: tensor<37x64xbf16>) -> (tensor<64x37xbf16>, tensor<64xbf16>, tensor<37xf16>, tensor<64x37xf32>, tensor<64x37xi1>) {
  %c = rfuse.constant dense<1.5> : tensor<64x37xbf16>
  %yb = rfuse.broadcast_in_dim %y, dims = [1] : (tensor<37xf16>) -> tensor<64x37xf16>
  %yc = rfuse.cast %yb : tensor<64x37xf16> to tensor<64x37xbf16>
  %zt = rfuse.transpose %z, perm = [1, 0] : (tensor<37x64xbf16>) -> tensor<64x37xbf16>
  %a = rfuse.mul %x, %c : tensor<64x37xbf16>
  %b = rfuse.add %a, %yc : tensor<64x37xbf16>
  %d = rfuse.sub %b, %zt : tensor<64x37xbf16>
  %e = rfuse.exp %d : tensor<64x37xbf16>
  %s = rfuse.reduce_sum %e, dims = [1] : (tensor<64x37xbf16>) -> tensor<64xbf16>
  %h = rfuse.cast %e : tensor<64x37xbf16> to tensor<64x37xf16>
  %t = rfuse.reduce_max %h, dims = [0] : (tensor<64x37xf16>) -> tensor<37xf16>
  %f = rfuse.cast %e : tensor<64x37xbf16> to tensor<64x37xf32>
  %m = rfuse.compare gt, %d, %x : tensor<64x37xbf16>
  return %e, %s, %t, %f, %m : tensor<64x37xbf16>, tensor<64xbf16>, tensor<37xf16>, tensor<64x37xf32>, tensor<64x37xi1>
}
)";
  std::mt19937_64 rng(5);
  std::vector<HostTensor> in = {test::randomTensor(DType::BF16, {64, 37}, rng, -1, 1),
                                test::randomTensor(DType::F16, {37}, rng, -1, 1),
                                test::randomTensor(DType::BF16, {37, 64}, rng, -1, 1)};
  for (const char *pipeline : {"default", "no-fusion"}) {
    auto program = compileProgram(text, pipeline);
    for (const std::string &s : program->cpuSteps())
      EXPECT_EQ(s.find("interpreted"), std::string::npos) << pipeline << ": " << s;
    auto ref = interpretText(text, "main", in);
    auto got = program->run(in, Device::Cpu);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(got[i].dtype, ref[i].dtype);
      if (!ref[i].isFloat()) {
        EXPECT_EQ(got[i].i, ref[i].i) << pipeline << " output " << i;
        continue;
      }
      // Each op rounds as the interpreter's: the same values, but for an exp that libm and the
      // compiled code round differently in f32 before the rounding to bf16 (one bf16 ulp).
      size_t same = 0;
      for (size_t k = 0; k < ref[i].f.size(); ++k)
        same += got[i].f[k] == ref[i].f[k];
      EXPECT_GE(same, ref[i].f.size() * 99 / 100) << pipeline << " output " << i;
      EXPECT_LE(test::maxRelError(got[i].f, ref[i].f, 1e-2), 1.0 / 128) << pipeline << " output " << i;
    }
  }
}

// f16 / bf16 products and convolutions: f64 BLAS on the widened operands, rounded once (as the
// interpreter's long-double accumulation), the epilogue compiled in f32.
TEST(CpuJit, NarrowFloatProductsRunOnBlasAndRoundOnce) {
  const std::string text = R"(
func.func @main(%x: tensor<32x48xbf16>, %w: tensor<48x16xbf16>, %b: tensor<16xbf16>, %i: tensor<2x3x8x8xf16>, %f: tensor<4x3x3x3xf16>) -> (tensor<32x16xbf16>, tensor<2x4x6x6xf16>) {
  %m = rfuse.matmul %x, %w : (tensor<32x48xbf16>, tensor<48x16xbf16>) -> tensor<32x16xbf16>
  %bb = rfuse.broadcast_in_dim %b, dims = [1] : (tensor<16xbf16>) -> tensor<32x16xbf16>
  %s = rfuse.add %m, %bb : tensor<32x16xbf16>
  %r = rfuse.tanh %s : tensor<32x16xbf16>
  %c = rfuse.conv2d %i, %f {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf16>, tensor<4x3x3x3xf16>) -> tensor<2x4x6x6xf16>
  return %r, %c : tensor<32x16xbf16>, tensor<2x4x6x6xf16>
}
)";
  std::mt19937_64 rng(9);
  std::vector<HostTensor> in = {test::randomTensor(DType::BF16, {32, 48}, rng, -1, 1),
                                test::randomTensor(DType::BF16, {48, 16}, rng, -1, 1),
                                test::randomTensor(DType::BF16, {16}, rng, -1, 1),
                                test::randomTensor(DType::F16, {2, 3, 8, 8}, rng, -1, 1),
                                test::randomTensor(DType::F16, {4, 3, 3, 3}, rng, -1, 1)};
  auto program = compileProgram(text, "default");
  for (const std::string &s : program->cpuSteps())
    EXPECT_EQ(s.find("interpreted"), std::string::npos) << s;
  auto ref = interpretText(text, "main", in);
  auto got = program->run(in, Device::Cpu);
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_LE(test::maxRelError(got[i].f, ref[i].f, 1e-2), 1.0 / 128) << "output " << i;
  EXPECT_EQ(got[1].f, ref[1].f) << "a convolution rounds once, as the interpreter's";
}

// Without fusion each op is its own step, compiled alone (a host function run entirely on the
// CPU backend).
TEST(CpuJit, UnfusedGraphsMatchInterpreter) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    test::RandomGraph g = test::generateRandomGraph(seed);
    auto program = compileProgram(g.moduleText, "no-fusion");
    auto ref = interpretText(g.moduleText, "main", g.inputs);
    auto got = program->run(g.inputs, Device::Cpu);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      if (!ref[i].isFloat()) {
        EXPECT_EQ(got[i].i, ref[i].i) << "seed " << seed;
        continue;
      }
      bool f64 = ref[i].dtype == DType::F64;
      EXPECT_LE(test::maxRelError(got[i].f, ref[i].f, f64 ? 1e-3 : 1e-2), f64 ? 1e-12 : 1e-5) << "seed " << seed;
    }
  }
}

// Splitting work across threads changes nothing: every output element is computed by one call
// in the same order whatever the split. 1 thread and the machine's threads agree bit for bit.
TEST(CpuJit, ThreadsDoNotChangeResults) {
  GraphBuilder g;
  TracedValue x = g.input({512, 384}, DType::F64), gamma = g.input({384}, DType::F64);
  TracedValue sm = g.div(g.exp(x), g.broadcastTo(g.reduceSum(g.exp(x), {1}, true), {512, 384}));
  TracedValue cs = g.reduceMean(g.mul(x, g.broadcastTo(gamma, {512, 384})), {0}, false);
  g.finish({sm, cs, g.tanh(g.add(x, g.broadcastTo(gamma, {512, 384})))});
  std::mt19937_64 rng(5);
  std::vector<HostTensor> in = {test::randomTensor(DType::F64, {512, 384}, rng), test::randomTensor(DType::F64, {384}, rng)};
  expectThreadCountsAgree("threads", g.moduleText(), in);
  expectCpuMatchesInterpreter("threads", g.moduleText(), in);
}

// Products through the host's BLAS (k > 32) and rfuse's short-k kernel (k <= 32), in every
// transpose combination and batched, equal the interpreter, whatever the thread count.
TEST(CpuJit, ProductsOfEveryLayoutMatchInterpreter) {
  for (int64_t k : {1, 5, 32, 33, 100})
    for (int flags = 0; flags < 4; ++flags) {
      bool ta = flags & 1, tb = flags & 2;
      GraphBuilder g;
      int64_t m = 300, n = 170;
      TracedValue a = g.input(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, DType::F64);
      TracedValue b = g.input(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, DType::F64);
      TracedValue ab = g.input(ta ? std::vector<int64_t>{3, k, 20} : std::vector<int64_t>{3, 20, k}, DType::F64);
      TracedValue bb = g.input(tb ? std::vector<int64_t>{3, 9, k} : std::vector<int64_t>{3, k, 9}, DType::F64);
      g.finish({g.exp(g.mul(g.matmul(a, b, ta, tb), g.scalar(0.01, DType::F64))), g.matmul(ab, bb, ta, tb)});
      std::mt19937_64 rng(k * 4 + flags);
      std::vector<HostTensor> in;
      for (TracedValue v : {a, b, ab, bb})
        in.push_back(test::randomTensor(DType::F64, g.shape(v), rng));
      std::string name = "k=" + std::to_string(k) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      expectCpuMatchesInterpreter(name, g.moduleText(), in);
      expectThreadCountsAgree(name, g.moduleText(), in);
    }
}

// Equal kernels of different programs share one compiled function.
TEST(CpuJit, CompiledFunctionsAreSharedByKey) {
  GraphBuilder g;
  TracedValue x = g.input({1000}, DType::F64);
  g.finish({g.mul(g.sin(x), g.scalar(3.25, DType::F64))});
  std::vector<HostTensor> in = {HostTensor(DType::F64, {1000})};
  compileProgram(g.moduleText(), "default")->run(in, Device::Cpu);
  CpuJitStats before = cpuJitStats();
  compileProgram(g.moduleText(), "default")->run(in, Device::Cpu);
  CpuJitStats after = cpuJitStats();
  EXPECT_EQ(after.compiled, before.compiled);
  EXPECT_EQ(after.reused, before.reused + 1);
}

} // namespace

namespace {
// rfuse-split-reductions (in the default pipeline) turns big few-output reductions into two
// stages: the values stay the interpreter's.
TEST(CpuJit, SplitReductionsKeepTheirValues) {
  for (DType dt : {DType::F64, DType::F32}) {
    GraphBuilder g;
    TracedValue x = g.input({512, 64}, dt), y = g.input({8192, 16}, dt);
    TracedValue d = g.sub(x, g.scalar(0.25, dt));
    g.finish({g.reduceMean(g.mul(d, d), {0, 1}), g.reduceSum(g.exp(y), {0}, true), g.reduceMax(y, {0})});
    std::mt19937_64 rng(12);
    std::vector<HostTensor> in = {test::randomTensor(dt, {512, 64}, rng), test::randomTensor(dt, {8192, 16}, rng)};
    auto program = compileProgram(g.moduleText(), "default");
    EXPECT_NE(program->info().fusedText.find("tensor<256x32x16x"), std::string::npos)
        << "the column sum was split into [256, 32, 16]";
    expectCpuMatchesInterpreter(dt == DType::F64 ? "split f64" : "split f32", g.moduleText(), in);
  }
}
} // namespace

namespace {
// The gradient ops of convolutions run as im2col / col2im + BLAS (with a compiled epilogue: the
// ops anchor fusion regions like matmuls) and equal the interpreter's direct loops.
TEST(CpuJit, ConvolutionGradientsMatchInterpreter) {
  const char *nchw = R"(
func.func @main(%x: tensor<2x3x9x8xf64>, %w: tensor<4x3x3x3xf64>, %g: tensor<2x4x5x4xf64>) -> (tensor<2x3x9x8xf64>, tensor<4x3x3x3xf64>) {
  %dx = rfuse.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<2x4x5x4xf64>, tensor<4x3x3x3xf64>) -> tensor<2x3x9x8xf64>
  %m = rfuse.mul %dx, %x : tensor<2x3x9x8xf64>
  %dw = rfuse.conv2d_backward_filter %x, %g {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<2x3x9x8xf64>, tensor<2x4x5x4xf64>) -> tensor<4x3x3x3xf64>
  %u = rfuse.sub %w, %dw : tensor<4x3x3x3xf64>
  return %m, %u : tensor<2x3x9x8xf64>, tensor<4x3x3x3xf64>
})";
  const char *nhwcGrouped = R"(
func.func @main(%x: tensor<2x7x6x4xf32>, %w: tensor<6x3x2x2xf32>, %g: tensor<2x4x3x6xf32>) -> (tensor<2x7x6x4xf32>, tensor<6x3x2x2xf32>) {
  %dx = rfuse.conv2d_backward_input %g, %w {strides = array<i64: 1, 2>, padding = array<i64: 0, 1, 1, 0>, dilation = array<i64: 2, 1>, groups = 2 : i64, layout = #rfuse.layout<NHWC>} : (tensor<2x4x3x6xf32>, tensor<6x3x2x2xf32>) -> tensor<2x7x6x4xf32>
  %dw = rfuse.conv2d_backward_filter %x, %g {strides = array<i64: 1, 2>, padding = array<i64: 0, 1, 1, 0>, dilation = array<i64: 2, 1>, groups = 2 : i64, layout = #rfuse.layout<NHWC>} : (tensor<2x7x6x4xf32>, tensor<2x4x3x6xf32>) -> tensor<6x3x2x2xf32>
  return %dx, %dw : tensor<2x7x6x4xf32>, tensor<6x3x2x2xf32>
})";
  std::mt19937_64 rng(31);
  expectCpuMatchesInterpreter("nchw strided", nchw,
                              {test::randomTensor(DType::F64, {2, 3, 9, 8}, rng), test::randomTensor(DType::F64, {4, 3, 3, 3}, rng),
                               test::randomTensor(DType::F64, {2, 4, 5, 4}, rng)});
  expectCpuMatchesInterpreter("nhwc grouped", nhwcGrouped,
                              {test::randomTensor(DType::F32, {2, 7, 6, 4}, rng), test::randomTensor(DType::F32, {6, 3, 2, 2}, rng),
                               test::randomTensor(DType::F32, {2, 4, 3, 6}, rng)});
  auto program = compileProgram(nchw, "default");
  std::string steps;
  for (const std::string &s : program->cpuSteps())
    steps += s + "\n";
  EXPECT_EQ(steps.find("interpret"), std::string::npos) << steps;
  EXPECT_NE(program->info().fusedText.find("conv_epilogue"), std::string::npos) << "the update fuses into the gradient call";
}
} // namespace

namespace {

// Every scalar op kind of ScalarOps.def has a CPU lowering (derived from ScalarOps.h) that
// compiles and computes what the interpreter computes, in f32 and f64. A kind added to the
// table without an op here fails the first test.
struct KindOp {
  const char *body; // `%r = ...` over %x, %y (floats) and %p, %q (i1)
  const char *result; // "float" or "bool"
};
const std::map<std::string, KindOp> &kindOps() {
  static const std::map<std::string, KindOp> ops = {
      {"Neg", {"%r = rfuse.neg %x : T", "float"}},
      {"Abs", {"%r = rfuse.abs %x : T", "float"}},
      {"Exp", {"%r = rfuse.exp %x : T", "float"}},
      {"Log", {"%a = rfuse.abs %x : T\n  %r = rfuse.log %a : T", "float"}},
      {"Sqrt", {"%a = rfuse.abs %x : T\n  %r = rfuse.sqrt %a : T", "float"}},
      {"Rsqrt", {"%a = rfuse.abs %x : T\n  %r = rfuse.rsqrt %a : T", "float"}},
      {"Tanh", {"%r = rfuse.tanh %x : T", "float"}},
      {"Sigmoid", {"%r = rfuse.sigmoid %x : T", "float"}},
      {"Relu", {"%r = rfuse.relu %x : T", "float"}},
      {"GeluErf", {"%r = rfuse.gelu %x approximate = none : T", "float"}},
      {"GeluTanh", {"%r = rfuse.gelu %x approximate = tanh : T", "float"}},
      {"GeluErfGrad", {"%r = rfuse.gelu_grad %x : T", "float"}},
      {"GeluTanhGrad", {"%r = rfuse.gelu_grad %x approximate = tanh : T", "float"}},
      {"Sin", {"%r = rfuse.sin %x : T", "float"}},
      {"Cos", {"%r = rfuse.cos %x : T", "float"}},
      {"Floor", {"%r = rfuse.floor %x : T", "float"}},
      {"Erfc", {"%r = rfuse.erfc %x : T", "float"}},
      {"RoundEven", {"%r = rfuse.round_even %x : T", "float"}},
      {"Tan", {"%r = rfuse.tan %x : T", "float"}},
      {"Atan", {"%r = rfuse.atan %x : T", "float"}},
      {"Asin", {"%h = rfuse.tanh %x : T\n  %r = rfuse.asin %h : T", "float"}},
      {"Acos", {"%h = rfuse.tanh %x : T\n  %r = rfuse.acos %h : T", "float"}},
      {"Atan2", {"%r = rfuse.atan2 %x, %y : T", "float"}},
      {"Tgamma", {"%r = rfuse.tgamma %x : T", "float"}},
      {"Lgamma", {"%r = rfuse.lgamma %x : T", "float"}},
      {"Qnorm", {"%s = rfuse.sigmoid %x : T\n  %r = rfuse.qnorm %s : T", "float"}},
      {"Digamma", {"%r = rfuse.digamma %x : T", "float"}},
      {"Trigamma", {"%r = rfuse.trigamma %x : T", "float"}},
      {"Add", {"%r = rfuse.add %x, %y : T", "float"}},
      {"Sub", {"%r = rfuse.sub %x, %y : T", "float"}},
      {"Mul", {"%r = rfuse.mul %x, %y : T", "float"}},
      {"Div", {"%r = rfuse.div %x, %y : T", "float"}},
      {"Pow", {"%a = rfuse.abs %x : T\n  %r = rfuse.pow %a, %y : T", "float"}},
      {"Max", {"%r = rfuse.max %x, %y : T", "float"}},
      {"Min", {"%r = rfuse.min %x, %y : T", "float"}},
      {"Eq", {"%r = rfuse.compare eq, %x, %y : T", "bool"}},
      {"Ne", {"%r = rfuse.compare ne, %x, %y : T", "bool"}},
      {"Lt", {"%r = rfuse.compare lt, %x, %y : T", "bool"}},
      {"Le", {"%r = rfuse.compare le, %x, %y : T", "bool"}},
      {"Gt", {"%r = rfuse.compare gt, %x, %y : T", "bool"}},
      {"Ge", {"%r = rfuse.compare ge, %x, %y : T", "bool"}},
      {"Not", {"%r = rfuse.not %p : B", "bool"}},
      {"And", {"%r = rfuse.and %p, %q : B", "bool"}},
      {"Or", {"%r = rfuse.or %p, %q : B", "bool"}},
  };
  return ops;
}

std::vector<std::string> scalarKinds() {
  std::vector<std::string> kinds;
#define RFUSE_UNARY(K, FN) kinds.push_back(#K);
#define RFUSE_BINARY(K, FN) kinds.push_back(#K);
#define RFUSE_COMPARE(K, FN) kinds.push_back(#K);
#define RFUSE_LOGIC1(K, FN) kinds.push_back(#K);
#define RFUSE_LOGIC2(K, FN) kinds.push_back(#K);
#include "rfuse/IR/ScalarOps.def"
  return kinds;
}

std::string replaceAll(std::string s, const std::string &from, const std::string &to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

TEST(CpuJit, EveryScalarOpKindHasACpuLowering) {
  for (const std::string &kind : scalarKinds())
    EXPECT_TRUE(kindOps().count(kind)) << "ScalarOps.def's " << kind << " has no case here: add one";
  for (const char *dt : {"f32", "f64"}) {
    std::string T = std::string("tensor<300x") + dt + ">", B = "tensor<300xi1>";
    for (const auto &[kind, op] : kindOps()) {
      std::string body = replaceAll(replaceAll(op.body, " T", " " + T), " B", " " + B);
      std::string text = "func.func @main(%x: " + T + ", %y: " + T + ") -> " +
                         (std::string(op.result) == "bool" ? B : T) + " {\n" +
                         "  %z = rfuse.constant dense<0.0> : " + T + "\n" +
                         "  %p = rfuse.compare gt, %x, %z : " + T + "\n" +
                         "  %q = rfuse.compare lt, %y, %z : " + T + "\n  " + body +
                         "\n  return %r : " + (std::string(op.result) == "bool" ? B : T) + "\n}\n";
      std::string name = kind + " " + dt;
      auto program = compileProgram(text, "no-fusion");
      for (const std::string &s : program->cpuSteps())
        EXPECT_EQ(s.find("interpreted"), std::string::npos) << name << ": " << s;
      std::mt19937_64 rng(11);
      DType d = std::string(dt) == "f32" ? DType::F32 : DType::F64;
      std::vector<HostTensor> in = {test::randomTensor(d, {300}, rng), test::randomTensor(d, {300}, rng)};
      // NaN, infinities and signed zeros take part too.
      in[0].f[0] = std::nan(""), in[0].f[1] = INFINITY, in[0].f[2] = -INFINITY, in[0].f[3] = -0.0;
      in[1].f[4] = std::nan(""), in[1].f[5] = 0.0, in[1].f[6] = -INFINITY;
      auto ref = interpretText(text, "main", in);
      auto got = program->run(in, Device::Cpu);
      ASSERT_EQ(got.size(), 1u) << name;
      if (!ref[0].isFloat()) {
        EXPECT_EQ(got[0].i, ref[0].i) << name;
        continue;
      }
      for (size_t k = 0; k < ref[0].f.size(); ++k) {
        double a = got[0].f[k], b = ref[0].f[k];
        if (std::isnan(b)) {
          EXPECT_TRUE(std::isnan(a)) << name << " element " << k;
          continue;
        }
        double tol = (d == DType::F64 ? 1e-13 : 3e-6) * std::max(1.0, std::fabs(b));
        EXPECT_TRUE(a == b || std::fabs(a - b) <= tol) << name << " element " << k << ": " << a << " vs " << b;
      }
    }
  }
}

} // namespace
