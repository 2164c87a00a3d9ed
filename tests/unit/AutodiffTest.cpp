// rfuse-autodiff against central finite differences in f64: the gradient of every differentiable
// op (relative error <= 1e-6), through the whole compile path (autodiff, fusion, the CPU backend);
// random DAGs of differentiable ops; and the errors for what cannot be differentiated.
#include "RandomGraph.h"
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Frontend/Models.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Interpreter.h"

#include <gtest/gtest.h>

#include <functional>

using namespace rfuse;

namespace {

using Build = std::function<TracedValue(GraphBuilder &, std::vector<TracedValue> &)>;

struct Case {
  std::string name;
  std::vector<std::vector<int64_t>> shapes;
  Build build;
  double lo = -2.0, hi = 2.0; // input range (away from kinks and poles where it matters)
};

// loss = sum(op(inputs) * W) for a fixed random W, so every output element matters.
std::string lossModule(const Case &c, std::mt19937_64 &rng) {
  GraphBuilder g;
  std::vector<TracedValue> in;
  for (const auto &s : c.shapes)
    in.push_back(g.input(s, DType::F64));
  TracedValue y = c.build(g, in);
  std::vector<int64_t> ys = g.shape(y);
  HostTensor w = test::randomTensor(DType::F64, ys, rng);
  TracedValue weighted = g.mul(y, g.constant(w.f, ys, DType::F64));
  std::vector<int64_t> all(ys.size());
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = i;
  g.finish({all.empty() ? weighted : g.reduceSum(weighted, all)});
  return g.moduleText();
}

double lossAt(const std::string &text, const std::vector<HostTensor> &in) {
  return interpretText(text, "main", in)[0].f[0];
}

void expectGradientsMatchFiniteDifferences(const Case &c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string text = lossModule(c, rng);
  std::vector<HostTensor> in;
  for (const auto &s : c.shapes)
    in.push_back(test::randomTensor(DType::F64, s, rng, c.lo, c.hi));
  std::shared_ptr<Program> program;
  try {
    program = compileGradientProgram(text, "default", {});
  } catch (const std::exception &e) {
    FAIL() << c.name << ": " << e.what();
  }
  std::vector<HostTensor> got = program->run(in, Device::Cpu);
  ASSERT_EQ(got.size(), in.size() + 1) << c.name;
  EXPECT_NEAR(got[0].f[0], lossAt(text, in), 1e-9 * std::max(1.0, std::fabs(got[0].f[0]))) << c.name;
  for (size_t a = 0; a < in.size(); ++a) {
    double num = 0, den = 0;
    for (int64_t k = 0; k < in[a].numel(); ++k) {
      double h = 1e-6 * std::max(1.0, std::fabs(in[a].f[k]));
      std::vector<HostTensor> plus = in, minus = in;
      plus[a].f[k] += h;
      minus[a].f[k] -= h;
      double fd = (lossAt(text, plus) - lossAt(text, minus)) / (2 * h);
      num += (got[a + 1].f[k] - fd) * (got[a + 1].f[k] - fd);
      den += fd * fd;
    }
    EXPECT_LE(std::sqrt(num / std::max(den, 1e-300)), 1e-6) << c.name << ": d/d input " << a;
  }
}

using V = std::vector<TracedValue>;

std::vector<Case> everyDifferentiableOp() {
  std::vector<int64_t> s = {3, 4};
  auto unary = [&](std::string n, std::function<TracedValue(GraphBuilder &, TracedValue)> f, double lo = -2,
                   double hi = 2) {
    return Case{n, {s}, [f](GraphBuilder &g, V &v) { return f(g, v[0]); }, lo, hi};
  };
  auto binary = [&](std::string n, std::function<TracedValue(GraphBuilder &, TracedValue, TracedValue)> f,
                    double lo = -2, double hi = 2) {
    return Case{n, {s, s}, [f](GraphBuilder &g, V &v) { return f(g, v[0], v[1]); }, lo, hi};
  };
  using G = GraphBuilder;
  using T = TracedValue;
  return {
      unary("neg", [](G &g, T x) { return g.neg(x); }),
      unary("abs", [](G &g, T x) { return g.abs(x); }),
      unary("exp", [](G &g, T x) { return g.exp(x); }),
      unary("log", [](G &g, T x) { return g.log(x); }, 0.5, 3),
      unary("sqrt", [](G &g, T x) { return g.sqrt(x); }, 0.5, 3),
      unary("rsqrt", [](G &g, T x) { return g.rsqrt(x); }, 0.5, 3),
      unary("tanh", [](G &g, T x) { return g.tanh(x); }),
      unary("sigmoid", [](G &g, T x) { return g.sigmoid(x); }),
      unary("relu", [](G &g, T x) { return g.relu(x); }),
      unary("gelu_erf", [](G &g, T x) { return g.gelu(x, false); }),
      unary("gelu_tanh", [](G &g, T x) { return g.gelu(x, true); }),
      unary("sin", [](G &g, T x) { return g.sin(x); }),
      unary("cos", [](G &g, T x) { return g.cos(x); }),
      unary("floor", [](G &g, T x) { return g.floor(x); }, 0.1, 0.9), // away from the steps
      unary("erfc", [](G &g, T x) { return g.erfc(x); }),
      unary("tan", [](G &g, T x) { return g.tan(x); }, -1, 1),
      unary("atan", [](G &g, T x) { return g.atan(x); }),
      unary("asin", [](G &g, T x) { return g.asin(x); }, -0.8, 0.8),
      unary("acos", [](G &g, T x) { return g.acos(x); }, -0.8, 0.8),
      unary("qnorm", [](G &g, T x) { return g.normalQuantile(x); }, 0.05, 0.95),
      unary("lgamma", [](G &g, T x) { return g.lgamma(x); }, 0.5, 4),
      unary("tgamma", [](G &g, T x) { return g.tgamma(x); }, 0.5, 3),
      unary("digamma", [](G &g, T x) { return g.digammaFunction(x); }, 0.5, 4),
      unary("cast_f32_roundtrip_free", [](G &g, T x) { return g.cast(g.cast(x, DType::F64), DType::F64); }),
      binary("add", [](G &g, T a, T b) { return g.add(a, b); }),
      binary("sub", [](G &g, T a, T b) { return g.sub(a, b); }),
      binary("mul", [](G &g, T a, T b) { return g.mul(a, b); }),
      binary("div", [](G &g, T a, T b) { return g.div(a, b); }, 0.5, 3),
      binary("pow", [](G &g, T a, T b) { return g.pow(a, b); }, 0.5, 2),
      binary("atan2", [](G &g, T a, T b) { return g.atan2(a, b); }, 0.5, 2),
      binary("max", [](G &g, T a, T b) { return g.maximum(a, b); }),
      binary("min", [](G &g, T a, T b) { return g.minimum(a, b); }),
      binary("select", [](G &g, T a, T b) {
        return g.select(g.compare(ComparePredicate::Gt, a, b), g.mul(a, a), g.exp(b));
      }),
      Case{"broadcast_in_dim", {{4}, {3, 1}},
           [](G &g, V &v) { return g.mul(g.broadcastInDim(v[0], {2, 3, 4}, {2}), g.broadcastInDim(v[1], {2, 3, 4}, {1, 2})); }},
      Case{"transpose", {{2, 3, 4}}, [](G &g, V &v) { return g.transpose(g.exp(v[0]), {2, 0, 1}); }},
      Case{"reshape", {{2, 6}}, [](G &g, V &v) { return g.tanh(g.reshape(v[0], {3, 4})); }},
      Case{"reduce_sum", {{3, 4, 5}}, [](G &g, V &v) { return g.reduceSum(g.mul(v[0], v[0]), {0, 2}); }},
      Case{"reduce_sum_keep", {{3, 4}}, [](G &g, V &v) { return g.reduceSum(g.exp(v[0]), {1}, true); }},
      Case{"reduce_mean", {{3, 4}}, [](G &g, V &v) { return g.reduceMean(g.tanh(v[0]), {0}); }},
      Case{"reduce_max", {{3, 4}}, [](G &g, V &v) { return g.reduceMax(v[0], {1}); }},
      Case{"reduce_min", {{3, 4}}, [](G &g, V &v) { return g.reduceMin(v[0], {0}, true); }},
      Case{"matmul", {{3, 5}, {5, 4}}, [](G &g, V &v) { return g.matmul(v[0], v[1]); }},
      Case{"matmul_ta", {{5, 3}, {5, 4}}, [](G &g, V &v) { return g.matmul(v[0], v[1], true, false); }},
      Case{"matmul_tb", {{3, 5}, {4, 5}}, [](G &g, V &v) { return g.matmul(v[0], v[1], false, true); }},
      Case{"matmul_ta_tb", {{5, 3}, {4, 5}}, [](G &g, V &v) { return g.matmul(v[0], v[1], true, true); }},
      Case{"matmul_batched", {{2, 3, 5}, {2, 5, 4}}, [](G &g, V &v) { return g.matmul(v[0], v[1]); }},
      Case{"matmul_broadcast_rhs", {{2, 3, 5}, {5, 4}}, [](G &g, V &v) { return g.matmul(v[0], v[1]); }},
      Case{"conv2d", {{2, 3, 6, 7}, {4, 3, 3, 2}, {4}}, [](G &g, V &v) { return g.conv2d(v[0], v[1], v[2]); }},
      Case{"conv2d_padded_dilated", {{2, 2, 7, 7}, {3, 2, 3, 3}}, [](G &g, V &v) {
             Conv2dParams p;
             p.padding = {1, 1, 2, 2};
             p.dilation = {2, 1};
             return g.conv2d(v[0], v[1], TracedValue{}, p);
           }},
      Case{"conv2d_strided_padded", {{2, 3, 7, 8}, {4, 3, 3, 3}}, [](G &g, V &v) { // a ResNet downsampling conv
             Conv2dParams p;
             p.strides = {2, 2};
             p.padding = {1, 1, 1, 1};
             return g.conv2d(v[0], v[1], TracedValue{}, p);
           }},
      Case{"conv2d_grouped_nhwc", {{2, 5, 6, 4}, {6, 3, 3, 2}, {6}}, [](G &g, V &v) {
             Conv2dParams p;
             p.strides = {1, 2};
             p.padding = {0, 1, 1, 0};
             p.groups = 2;
             p.layout = ImageLayout::NHWC;
             return g.conv2d(v[0], v[1], v[2], p);
           }},
      Case{"max_pool2d", {{2, 3, 6, 4}}, [](G &g, V &v) { return g.maxPool2d(g.sin(v[0])); }},
      Case{"max_pool2d_overlapping_padded", {{2, 2, 7, 6}}, [](G &g, V &v) { // the ResNet stem's pool
             Pool2dParams p;
             p.kernel = {3, 3};
             p.strides = {2, 2};
             p.padding = {1, 1, 1, 1};
             return g.maxPool2d(g.sin(v[0]), p);
           }},
      Case{"avg_pool2d_padded_nhwc", {{2, 5, 6, 3}}, [](G &g, V &v) {
             Pool2dParams p;
             p.kernel = {3, 2};
             p.strides = {2, 1};
             p.padding = {1, 1, 0, 1};
             p.layout = ImageLayout::NHWC;
             p.countIncludePad = false;
             return g.avgPool2d(v[0], p);
           }},
      Case{"max_pool2d_uncovered_edge", {{2, 2, 7, 5}}, [](G &g, V &v) { return g.maxPool2d(g.exp(v[0])); }},
      Case{"avg_pool2d", {{2, 3, 6, 4}}, [](G &g, V &v) {
             Pool2dParams p;
             p.kernel = p.strides = {3, 2};
             return g.avgPool2d(v[0], p);
           }},
      // Composites the R package builds: softmax cross-entropy and a layernorm.
      Case{"log_softmax", {{4, 6}}, [](G &g, V &v) {
             TracedValue m = g.reduceMax(v[0], {1}, true);
             TracedValue z = g.sub(v[0], g.broadcastTo(m, {4, 6}));
             return g.sub(z, g.broadcastTo(g.log(g.reduceSum(g.exp(z), {1}, true)), {4, 6}));
           }},
      // Softmax over rows (its maximum detached, as the R package writes it) and over the
      // leading dim of a 3-D array: rfuse-softmax-vjp gives both the gradient of their output.
      Case{"softmax", {{4, 6}}, [](G &g, V &v) {
             TracedValue m = g.stopGradient(g.reduceMax(v[0], {1}, true));
             TracedValue e = g.exp(g.sub(v[0], g.broadcastTo(m, {4, 6})));
             return g.div(e, g.broadcastTo(g.reduceSum(e, {1}, true), {4, 6}));
           }},
      Case{"softmax_leading_dim", {{5, 2, 3}}, [](G &g, V &v) {
             TracedValue e = g.exp(g.mul(v[0], g.scalar(0.5, DType::F64)));
             return g.div(e, g.broadcastTo(g.reduceSum(e, {0}, true), {5, 2, 3}));
           }},
      Case{"layernorm", {{4, 6}}, [](G &g, V &v) {
             TracedValue mu = g.broadcastTo(g.reduceMean(v[0], {1}, true), {4, 6});
             TracedValue xc = g.sub(v[0], mu);
             TracedValue var = g.reduceMean(g.mul(xc, xc), {1}, true);
             return g.mul(xc, g.broadcastTo(g.rsqrt(g.add(var, g.scalar(1e-5, DType::F64))), {4, 6}));
           }},
  };
}

TEST(Autodiff, EveryOpMatchesFiniteDifferences) {
  uint64_t seed = 1;
  for (const Case &c : everyDifferentiableOp())
    expectGradientsMatchFiniteDifferences(c, seed++);
}

// Random chains of differentiable ops over a few inputs, through the same checks.
TEST(Autodiff, RandomGraphsMatchFiniteDifferences) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 pick(seed);
    int nOps = 2 + pick() % 6;
    std::vector<int> kinds;
    for (int i = 0; i < nOps; ++i)
      kinds.push_back(pick() % 10);
    int nIn = 1 + pick() % 3;
    Case c{"random seed " + std::to_string(seed), std::vector<std::vector<int64_t>>(nIn, {3, 5}),
           [kinds](GraphBuilder &g, V &v) {
             std::vector<TracedValue> pool = v;
             size_t k = 0;
             for (int kind : kinds) {
               TracedValue a = pool[(k * 7 + 3) % pool.size()], b = pool[(k * 5 + 1) % pool.size()];
               ++k;
               TracedValue r;
               switch (kind) {
               case 0: r = g.add(a, b); break;
               case 1: r = g.mul(a, b); break;
               case 2: r = g.sub(a, g.tanh(b)); break;
               case 3: r = g.sigmoid(a); break;
               case 4: r = g.div(a, g.add(g.exp(b), g.scalar(1.0, DType::F64))); break;
               case 5: r = g.broadcastTo(g.reduceSum(a, {1}, true), {3, 5}); break;
               case 6: r = g.gelu(a, false); break;
               case 7: r = g.matmul(a, b, false, true); r = g.matmul(r, b); break;
               case 8: r = g.sin(g.mul(a, g.scalar(0.5, DType::F64))); break;
               default: r = g.broadcastTo(g.reduceMean(g.mul(a, a), {0}, true), {3, 5}); break;
               }
               pool.push_back(r);
             }
             return pool.back();
           },
           -1.5, 1.5};
    expectGradientsMatchFiniteDifferences(c, 1000 + seed);
    if (HasFailure())
      break;
  }
}

// The recompute option changes where values are computed, not the gradients.
TEST(Autodiff, RecomputingPointwiseValuesGivesTheSameGradients) {
  GraphBuilder g;
  TracedValue x = g.input({8, 16}, DType::F64), w = g.input({16, 4}, DType::F64);
  TracedValue h = g.matmul(g.tanh(x), w);
  g.finish({g.reduceSum(g.mul(h, h), {0, 1})});
  std::mt19937_64 rng(3);
  std::vector<HostTensor> in = {test::randomTensor(DType::F64, {8, 16}, rng), test::randomTensor(DType::F64, {16, 4}, rng)};
  auto saved = compileGradientProgram(g.moduleText(), "default", {})->run(in, Device::Cpu);
  GradientRequest r;
  r.recomputePointwise = true;
  auto recomputed = compileGradientProgram(g.moduleText(), "default", r)->run(in, Device::Cpu);
  for (size_t i = 0; i < saved.size(); ++i)
    EXPECT_LE(test::maxRelError(recomputed[i].f, saved[i].f, 1e-9), 1e-12) << "output " << i;
}

// A custom VJP (GraphBuilder::customVjp, R's autograd_function): the gradient program uses the
// given backward function — here 3 * g * tanh(x), not tanh's own derivative — and the program
// itself computes the forward function's value; the functions are gone after compiling.
TEST(Autodiff, ACustomVjpUsesItsBackwardFunction) {
  GraphBuilder g;
  TracedValue x = g.input({4, 3}, DType::F64), w = g.input({4, 3}, DType::F64);
  g.beginFunction("tanh_fwd");
  TracedValue a = g.input({4, 3}, DType::F64);
  TracedValue t = g.tanh(a);
  TracedFunction fwd = g.endFunction({t, t}); // the output, and the residual the backward reads
  g.beginFunction("tanh_bwd");
  TracedValue saved = g.input({4, 3}, DType::F64), cot = g.input({4, 3}, DType::F64);
  TracedFunction bwd = g.endFunction({g.mul(g.mul(cot, saved), g.scalar(3.0, DType::F64))});
  std::vector<TracedValue> r = g.customVjp(fwd, bwd, {x}, 1);
  ASSERT_EQ(r.size(), 2u);
  g.finish({g.reduceSum(g.mul(r[0], w), {0, 1})});
  std::mt19937_64 rng(11);
  std::vector<HostTensor> in = {test::randomTensor(DType::F64, {4, 3}, rng), test::randomTensor(DType::F64, {4, 3}, rng)};
  GradientRequest req;
  req.wrt = {0, 1};
  std::shared_ptr<Program> p = compileGradientProgram(g.moduleText(), "default", req);
  std::vector<HostTensor> out = p->run(in, Device::Cpu);
  ASSERT_EQ(out.size(), 3u);
  double loss = 0;
  for (int i = 0; i < 12; ++i) {
    double th = std::tanh(in[0].f[i]);
    loss += th * in[1].f[i];
    EXPECT_NEAR(out[1].f[i], 3 * in[1].f[i] * th, 1e-12) << i; // d/dx: the backward's
    EXPECT_NEAR(out[2].f[i], th, 1e-12) << i;                  // d/dw: differentiated as usual
  }
  EXPECT_NEAR(out[0].f[0], loss, 1e-12);
  EXPECT_EQ(p->info().kernelCount > 0, true);
  // A backward of the wrong type is refused when the op is built, naming it.
  GraphBuilder h;
  TracedValue y = h.input({2}, DType::F64);
  h.beginFunction("f");
  TracedValue b = h.input({2}, DType::F64);
  TracedFunction f = h.endFunction({h.exp(b)});
  h.beginFunction("wrong");
  TracedValue c = h.input({3}, DType::F64);
  TracedFunction wrong = h.endFunction({c});
  try {
    h.customVjp(f, wrong, {y}, 1);
    ADD_FAILURE() << "a backward of the wrong type was accepted";
  } catch (const ShapeError &e) {
    EXPECT_NE(std::string(e.what()).find("backward @wrong"), std::string::npos) << e.what();
  }
}

void expectCompileError(const std::string &text, const GradientRequest &r, const std::string &needle) {
  try {
    compileGradientProgram(text, "default", r);
    ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
  } catch (const CompileError &e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Autodiff, ExplainsWhatItCannotDifferentiate) {
  {
    GraphBuilder g; // not a scalar loss
    TracedValue x = g.input({3}, DType::F32);
    g.finish({g.exp(x)});
    expectCompileError(g.moduleText(), {}, "not a one-element float tensor");
  }
  {
    GraphBuilder g; // an integer argument
    TracedValue x = g.input({3}, DType::F32), n = g.input({3}, DType::I32);
    g.finish({g.reduceSum(g.mul(x, g.cast(n, DType::F32)), {0})});
    GradientRequest r;
    r.wrt = {1};
    expectCompileError(g.moduleText(), r, "only float arguments have gradients");
  }
  // An op without a vector-Jacobian product (a convolution's gradient: rfuse has no second
  // derivatives of the library ops).
  expectCompileError(R"(
func.func @main(%g: tensor<1x2x2x2xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<f32> {
  %d = rfuse.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x2x2x2xf32>, tensor<2x1x3x3xf32>) -> tensor<1x1x6x6xf32>
  %s = rfuse.reduce_sum %d, dims = [0, 1, 2, 3] : (tensor<1x1x6x6xf32>) -> tensor<f32>
  return %s : tensor<f32>
})",
                     {}, "'rfuse.conv2d_backward_input' op has no vector-Jacobian product");
}

} // namespace

namespace {
// The optimizer options make @main_grad a training step: three steps of SGD (momentum, weight
// decay), Adam and AdamW equal the same updates computed here from the plain gradient program.
TEST(Autodiff, OptimizerStepsEqualTheirDefinitions) {
  GraphBuilder g;
  TracedValue x = g.input({6, 4}, DType::F64), w = g.input({4, 3}, DType::F64), b = g.input({3}, DType::F64);
  TracedValue h = g.tanh(g.add(g.matmul(x, w), g.broadcastTo(b, {6, 3})));
  g.finish({g.reduceMean(g.mul(h, h), {0, 1})});
  std::mt19937_64 rng(31);
  HostTensor xv = test::randomTensor(DType::F64, {6, 4}, rng);
  std::vector<HostTensor> params = {test::randomTensor(DType::F64, {4, 3}, rng), test::randomTensor(DType::F64, {3}, rng)};
  GradientRequest plain;
  plain.wrt = {1, 2};
  auto gradProgram = compileGradientProgram(g.moduleText(), "default", plain);
  for (std::string opt : {"sgd", "adam", "adamw"}) {
    GradientRequest r = plain;
    r.optimizer = opt;
    r.learningRate = 0.05;
    r.momentum = opt == "sgd" ? 0.9 : 0;
    r.weightDecay = 0.01;
    auto step = compileGradientProgram(g.moduleText(), "default", r);
    std::vector<HostTensor> p = params, ref = params;
    size_t n = p.size();
    std::vector<HostTensor> s1, s2, r1, r2; // optimizer state: momentum / first, second moments
    for (const HostTensor &t : params) {
      s1.push_back(HostTensor(DType::F64, t.shape));
      s2.push_back(HostTensor(DType::F64, t.shape));
      r1.push_back(HostTensor(DType::F64, t.shape));
      r2.push_back(HostTensor(DType::F64, t.shape));
    }
    for (int t = 1; t <= 3; ++t) {
      std::vector<HostTensor> in = {xv, p[0], p[1]};
      if (opt == "sgd") {
        in.insert(in.end(), s1.begin(), s1.end());
      } else {
        in.insert(in.end(), s1.begin(), s1.end());
        in.insert(in.end(), s2.begin(), s2.end());
        in.push_back(HostTensor::fromDoubles(DType::F64, {1}, {(double)t}));
      }
      auto out = step->run(in, Device::Cpu);
      ASSERT_EQ(out.size(), 1 + n * (opt == "sgd" ? 2 : 3)) << opt;
      for (size_t k = 0; k < n; ++k) {
        p[k] = out[1 + k];
        s1[k] = out[1 + n + k];
        if (opt != "sgd")
          s2[k] = out[1 + 2 * n + k];
      }
      // The reference update, from the gradients at the reference parameters.
      auto grads = gradProgram->run({xv, ref[0], ref[1]}, Device::Cpu);
      for (size_t k = 0; k < n; ++k)
        for (int64_t e = 0; e < ref[k].numel(); ++e) {
          double &pv = ref[k].f[e], gv = grads[1 + k].f[e];
          if (opt == "sgd") {
            gv += 0.01 * pv;
            r1[k].f[e] = 0.9 * r1[k].f[e] + gv;
            pv -= 0.05 * r1[k].f[e];
            continue;
          }
          if (opt == "adam")
            gv += 0.01 * pv;
          else
            pv -= 0.05 * 0.01 * pv;
          r1[k].f[e] = 0.9 * r1[k].f[e] + 0.1 * gv;
          r2[k].f[e] = 0.999 * r2[k].f[e] + 0.001 * gv * gv;
          double mhat = r1[k].f[e] / (1 - std::pow(0.9, t)), vhat = r2[k].f[e] / (1 - std::pow(0.999, t));
          pv -= 0.05 * mhat / (std::sqrt(vhat) + 1e-8);
        }
      for (size_t k = 0; k < n; ++k)
        EXPECT_LE(test::maxRelError(p[k].f, ref[k].f, 1e-6), 1e-10) << opt << " step " << t << " param " << k;
    }
  }
}
} // namespace

namespace {
// A whole (small) ResNet: strided and 1x1 convolutions, batch norm in training mode, the stem's
// overlapping max pool, residual adds, global average pooling and cross-entropy. Its gradient
// program (run by the CPU backend) equals central differences of the compiled loss on sampled
// elements of every parameter, in both layouts.
TEST(Autodiff, SmallResNetGradientsMatchFiniteDifferences) {
  for (ImageLayout layout : {ImageLayout::NCHW, ImageLayout::NHWC}) {
    ResNetConfig c;
    c.batch = 4;
    c.imageSize = 12;
    c.classes = 3;
    c.widths = {4, 6};
    c.blocks = {1, 1};
    c.dtype = DType::F64;
    c.layout = layout;
    GraphBuilder g;
    ModelGraph m = buildResNetLoss(g, c);
    std::string text = g.moduleText();
    std::mt19937_64 rng(layout == ImageLayout::NCHW ? 5 : 6);
    std::vector<HostTensor> in;
    for (const auto &s : m.inputShapes)
      in.push_back(test::randomTensor(DType::F64, s, rng, -1.0, 1.0));
    HostTensor &labels = in.back();
    for (int64_t i = 0; i < c.batch; ++i)
      for (int64_t k = 0; k < c.classes; ++k)
        labels.f[i * c.classes + k] = (i % c.classes) == k;
    GradientRequest r;
    for (size_t p = 0; p < m.parameterCount(); ++p)
      r.wrt.push_back(p);
    auto grad = compileGradientProgram(text, "default", r)->run(in, Device::Cpu);
    auto loss = compileProgram(text, "default");
    ASSERT_EQ(grad.size(), m.parameterCount() + 1);
    std::uniform_int_distribution<int64_t> pick(0, 1 << 30);
    for (size_t p = 0; p < m.parameterCount(); ++p)
      for (int sample = 0; sample < 4; ++sample) {
        int64_t k = pick(rng) % in[p].numel();
        double h = 1e-5;
        std::vector<HostTensor> plus = in, minus = in;
        plus[p].f[k] += h;
        minus[p].f[k] -= h;
        double fd = (loss->run(plus, Device::Cpu)[0].f[0] - loss->run(minus, Device::Cpu)[0].f[0]) / (2 * h);
        EXPECT_NEAR(grad[p + 1].f[k], fd, 1e-6 * std::max(1.0, std::fabs(fd)))
            << m.parameterNames[p] << "[" << k << "], " << (layout == ImageLayout::NCHW ? "NCHW" : "NHWC");
      }
  }
}
} // namespace

// A training step's autocast (rf_train's precision = "bf16-mixed") is the step written with the
// casts by hand: the same loss, gradients' updates and weights, bit for bit; and not the f32 step.
TEST(Autodiff, AutocastStepEqualsTheStepWithExplicitCasts) {
  auto build = [](bool explicitCasts) {
    GraphBuilder g;
    TracedValue x = g.input({16, 32}, DType::F32), w = g.input({32, 8}, DType::F32), b = g.input({8}, DType::F32);
    TracedValue y = g.input({16, 8}, DType::F32);
    TracedValue m = explicitCasts
                        ? g.cast(g.matmul(g.cast(x, DType::BF16), g.cast(w, DType::BF16)), DType::F32)
                        : g.matmul(x, w);
    TracedValue d = g.sub(g.tanh(g.add(m, g.broadcastTo(b, {16, 8}))), y);
    g.finish({g.reduceMean(g.mul(d, d), {0, 1})});
    return g.moduleText();
  };
  std::mt19937_64 rng(11);
  std::vector<HostTensor> in = {test::randomTensor(DType::F32, {16, 32}, rng), test::randomTensor(DType::F32, {32, 8}, rng),
                                test::randomTensor(DType::F32, {8}, rng), test::randomTensor(DType::F32, {16, 8}, rng)};
  GradientRequest r;
  r.wrt = {1, 2};
  r.optimizer = "sgd";
  r.learningRate = 0.5;
  auto byHand = compileGradientProgram(build(true), "default", r)->run(in, Device::Cpu);
  auto f32 = compileGradientProgram(build(false), "default", r)->run(in, Device::Cpu);
  r.autocast = "bf16";
  auto autocast = compileGradientProgram(build(false), "default", r)->run(in, Device::Cpu);
  ASSERT_EQ(autocast.size(), 3u);
  double differsFromF32 = 0;
  for (size_t i = 0; i < autocast.size(); ++i) {
    ASSERT_EQ(autocast[i].dtype, DType::F32) << "output " << i << ": master weights stay float32";
    EXPECT_EQ(autocast[i].f, byHand[i].f) << "output " << i;
    differsFromF32 = std::max(differsFromF32, test::maxRelError(autocast[i].f, f32[i].f, 1e-3));
  }
  EXPECT_GT(differsFromF32, 1e-4) << "bfloat16 products round at 2^-8; the step cannot equal float32's";
  EXPECT_LT(differsFromF32, 0.1);
  r.autocast = "f8";
  expectCompileError(build(false), r, "dtype must be bf16 or f16");
}

// Dynamic loss scaling (rf_train's precision = "16-mixed", torch's GradScaler): a power-of-two
// scale changes no finite step (the scaled gradients divide back exactly), counts it towards
// growth and doubles after the interval; a step whose scaled gradients overflow keeps the
// parameters and the momentum as they were and halves the scale.
TEST(Autodiff, LossScalingSkipsOverflowingStepsAndGrowsAfterTheInterval) {
  GraphBuilder g;
  TracedValue x = g.input({8, 4}, DType::F32), w = g.input({4, 2}, DType::F32), y = g.input({8, 2}, DType::F32);
  TracedValue d = g.sub(g.matmul(x, w), y);
  g.finish({g.reduceMean(g.mul(d, d), {0, 1})});
  std::mt19937_64 rng(21);
  std::vector<HostTensor> in = {test::randomTensor(DType::F32, {8, 4}, rng), test::randomTensor(DType::F32, {4, 2}, rng),
                                test::randomTensor(DType::F32, {8, 2}, rng), test::randomTensor(DType::F32, {4, 2}, rng)};
  GradientRequest r;
  r.wrt = {1};
  r.optimizer = "sgd";
  r.learningRate = 0.1;
  r.momentum = 0.9;
  auto plain = compileGradientProgram(g.moduleText(), "default", r)->run(in, Device::Cpu); // loss, w', v'
  r.lossScale = true;
  r.lossScaleGrowthInterval = 3;
  auto scaled = compileGradientProgram(g.moduleText(), "default", r);
  auto withScale = [&](double scale, double growth) {
    std::vector<HostTensor> inputs = in;
    HostTensor s(DType::F32, {1}), k(DType::F32, {1});
    s.f[0] = scale;
    k.f[0] = growth;
    inputs.push_back(s);
    inputs.push_back(k);
    return scaled->run(inputs, Device::Cpu); // loss, w', v', scale', growth'
  };
  auto finite = withScale(1024, 0);
  ASSERT_EQ(finite.size(), 5u);
  EXPECT_EQ(finite[0].f, plain[0].f) << "the loss is reported unscaled";
  EXPECT_EQ(finite[1].f, plain[1].f) << "a power-of-two scale divides back exactly";
  EXPECT_EQ(finite[2].f, plain[2].f);
  EXPECT_EQ(finite[3].f[0], 1024);
  EXPECT_EQ(finite[4].f[0], 1);
  auto grown = withScale(1024, 2); // the third finite step in a row
  EXPECT_EQ(grown[1].f, plain[1].f);
  EXPECT_EQ(grown[3].f[0], 2048);
  EXPECT_EQ(grown[4].f[0], 0);
  auto overflow = withScale(1e38, 2); // the scaled gradients overflow float32
  EXPECT_EQ(overflow[0].f, plain[0].f);
  EXPECT_EQ(overflow[1].f, in[1].f) << "the skipped step keeps the parameters";
  EXPECT_EQ(overflow[2].f, in[3].f) << "... and the momentum";
  EXPECT_FLOAT_EQ(overflow[3].f[0], 5e37f);
  EXPECT_EQ(overflow[4].f[0], 0);
  // Adam: the step-number input is the count of steps taken; a finite step equals the plain
  // step numbered one more and counts; an overflowing one keeps everything and does not.
  GradientRequest adam;
  adam.wrt = {1};
  adam.optimizer = "adam";
  adam.learningRate = 0.01;
  HostTensor v = in[3]; // a second moment: not negative
  for (double &e : v.f)
    e = std::fabs(e);
  std::vector<HostTensor> adamIn = {in[0], in[1], in[2], in[3], v}; // x, w, y, m, v
  HostTensor t(DType::F32, {1});
  t.f[0] = 4;
  adamIn.push_back(t);
  auto plainAdam = compileGradientProgram(g.moduleText(), "default", adam)->run(adamIn, Device::Cpu);
  adam.lossScale = true;
  auto scaledAdam = compileGradientProgram(g.moduleText(), "default", adam);
  auto adamWith = [&](double scale, double count) {
    std::vector<HostTensor> inputs(adamIn.begin(), adamIn.end() - 1);
    HostTensor c(DType::F32, {1}), s(DType::F32, {1}), k(DType::F32, {1});
    c.f[0] = count;
    s.f[0] = scale;
    k.f[0] = 0;
    inputs.push_back(c);
    inputs.push_back(s);
    inputs.push_back(k);
    return scaledAdam->run(inputs, Device::Cpu); // loss, w', m', v', scale', growth', count'
  };
  auto adamFinite = adamWith(256, 3);
  ASSERT_EQ(adamFinite.size(), 7u);
  for (int i = 1; i <= 3; ++i)
    EXPECT_EQ(adamFinite[i].f, plainAdam[i].f) << "adam output " << i;
  EXPECT_EQ(adamFinite[6].f[0], 4);
  auto adamOverflow = adamWith(1e38, 3);
  EXPECT_EQ(adamOverflow[1].f, in[1].f);
  EXPECT_EQ(adamOverflow[2].f, in[3].f);
  EXPECT_EQ(adamOverflow[3].f, v.f);
  EXPECT_EQ(adamOverflow[6].f[0], 3) << "a skipped step does not count";
  GradientRequest none = r;
  none.optimizer = "none";
  expectCompileError(g.moduleText(), none, "loss-scale needs an optimizer");
}
