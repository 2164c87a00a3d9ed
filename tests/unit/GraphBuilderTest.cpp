// The tracing API: ops recorded, broadcasting made explicit, shape errors thrown, hashes stable.
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Interpreter.h"

#include <gtest/gtest.h>

using namespace rfuse;

namespace {

bool contains(const std::string &s, const std::string &what) {
  return s.find(what) != std::string::npos;
}

template <class F> std::string shapeErrorOf(F &&f) {
  try {
    f();
  } catch (const ShapeError &e) {
    return e.what();
  }
  return "<no ShapeError>";
}

TEST(GraphBuilder, RecordsOpsAndReturnsText) {
  GraphBuilder g("f");
  TracedValue x = g.input({2, 3}, DType::F32, "x");
  TracedValue y = g.tanh(g.mul(x, g.scalar(2.0, DType::F32)));
  g.finish({y});
  std::string text = g.moduleText();
  EXPECT_TRUE(contains(text, "func.func @f(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32>")) << text;
  EXPECT_TRUE(contains(text, "rfuse.constant dense<2.000000e+00> : tensor<f32>")) << text;
  EXPECT_TRUE(contains(text, "rfuse.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x3xf32>")) << text;
  EXPECT_TRUE(contains(text, "rfuse.tanh")) << text;
  EXPECT_EQ(g.shape(y), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.dtype(y), DType::F32);
}

TEST(GraphBuilder, NumpyBroadcastingBecomesExplicit) {
  GraphBuilder g;
  TracedValue a = g.input({4, 1, 3}, DType::F64);
  TracedValue b = g.input({5, 1}, DType::F64);
  TracedValue c = g.add(a, b);
  EXPECT_EQ(g.shape(c), (std::vector<int64_t>{4, 5, 3}));
  g.finish({c});
  std::string text = g.moduleText();
  EXPECT_TRUE(contains(text, "dims = [0, 1, 2] : (tensor<4x1x3xf64>) -> tensor<4x5x3xf64>")) << text;
  EXPECT_TRUE(contains(text, "dims = [1, 2] : (tensor<5x1xf64>) -> tensor<4x5x3xf64>")) << text;

  // And it computes what broadcasting means.
  std::mt19937_64 rng(1);
  HostTensor av = test::randomTensor(DType::F64, {4, 1, 3}, rng), bv = test::randomTensor(DType::F64, {5, 1}, rng);
  HostTensor out = interpretText(text, "main", {av, bv})[0];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(out.f[(i * 5 + j) * 3 + k], av.f[i * 3 + k] + bv.f[j]);
}

TEST(GraphBuilder, ShapeErrorsNameTheOpAndOperands) {
  GraphBuilder g;
  TracedValue a = g.input({3, 4}, DType::F32);
  TracedValue b = g.input({5, 2}, DType::F32);
  TracedValue v = g.input({2}, DType::F32);
  TracedValue d = g.input({3, 4}, DType::F64);
  EXPECT_EQ(shapeErrorOf([&] { g.matmul(a, b); }),
            "matmul: non-conformable arguments: lhs [3, 4] has 4 columns but rhs [5, 2] has 5 rows");
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.add(a, v); }),
                       "add: shapes [3, 4] and [2] are not broadcast-compatible (4 vs 2)"));
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.mul(a, d); }), "mul: operand dtypes differ (f32 vs f64)"));
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.reduceSum(a, {2}); }),
                       "reduce_sum: reduction dimension 2 is out of range"));
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.transpose(a, {0}); }), "transpose: perm has 1 entries"));
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.reshape(a, {5}); }), "reshape: cannot reshape [3, 4]"));
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.broadcastInDim(v, {3, 4}, {1}); }),
                       "broadcast_in_dim: operand dimension 0 (size 2) cannot be broadcast"));
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.select(a, a, a); }), "select: condition must be a boolean"));
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.conv2d(a, b, TracedValue{}); }), "conv2d: input must have rank 4"));
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.maxPool2d(a); }), "max_pool2d: input must have rank 4"));
  // A dtype the op does not accept is reported through the verifier's own words.
  TracedValue i = g.input({3}, DType::I32);
  EXPECT_TRUE(contains(shapeErrorOf([&] { g.exp(i); }), "exp: operand #0 must be")) << shapeErrorOf([&] { g.exp(i); });
  // After errors the builder is still usable and nothing half-built was left behind.
  TracedValue ok = g.add(a, a);
  g.finish({ok});
  EXPECT_FALSE(contains(g.moduleText(), "rfuse.matmul"));
}

TEST(GraphBuilder, SignatureHashIsStableAndDiscriminating) {
  auto build = [](std::vector<int64_t> shape, DType dt, const std::string &argName, bool useExp) {
    GraphBuilder g("main");
    TracedValue x = g.input(shape, dt, argName);
    g.finish({useExp ? g.exp(x) : g.log(x)});
    return g.signatureHash();
  };
  uint64_t h = build({3, 4}, DType::F32, "x", true);
  EXPECT_EQ(h, build({3, 4}, DType::F32, "renamed", true)); // names do not matter
  EXPECT_NE(h, build({4, 3}, DType::F32, "x", true));       // shapes do
  EXPECT_NE(h, build({3, 4}, DType::F64, "x", true));       // dtypes do
  EXPECT_NE(h, build({3, 4}, DType::F32, "x", false));      // ops do
}

TEST(GraphBuilder, HelperFunctionsBecomeCalls) {
  GraphBuilder g;
  TracedValue x = g.input({3}, DType::F32, "x");
  g.beginFunction("softplus");
  TracedValue a = g.input({3}, DType::F32, "a");
  EXPECT_THROW(g.exp(x), TraceError); // x belongs to @main
  TracedValue sp = g.log(g.add(g.exp(a), g.scalar(1.0, DType::F32)));
  TracedFunction fn = g.endFunction({sp});
  TracedValue r = g.call(fn, {x})[0];
  TracedValue r2 = g.call(fn, {r})[0];
  g.finish({r2});
  std::string text = g.moduleText();
  EXPECT_TRUE(contains(text, "func.func private @softplus")) << text;
  EXPECT_TRUE(contains(text, "call @softplus")) << text;
  HostTensor xv = HostTensor::fromDoubles(DType::F32, {3}, {-1.0, 0.5, 2.0});
  HostTensor out = interpretText(text, "main", {xv})[0];
  for (int k = 0; k < 3; ++k) {
    double once = std::log1p(std::exp(xv.f[k]));
    EXPECT_NEAR(out.f[k], std::log1p(std::exp(once)), 1e-6);
  }
  GraphBuilder g2;
  g2.beginFunction("h");
  TracedValue b = g2.input({2}, DType::F32);
  TracedFunction h = g2.endFunction({b});
  TracedValue y = g2.input({3}, DType::F32);
  EXPECT_THROW(g2.call(h, {y}), ShapeError); // traced for tensor<2xf32>
}

TEST(GraphBuilder, MisuseIsReported) {
  GraphBuilder g;
  TracedValue x = g.input({2}, DType::F32);
  EXPECT_THROW(g.exp(TracedValue{}), TraceError);
  EXPECT_THROW(g.endFunction({x}), TraceError);
  g.finish({x});
  EXPECT_THROW(g.exp(x), TraceError);
  EXPECT_THROW(g.input({-1}, DType::F32), TraceError);
}

TEST(GraphBuilder, StructuredOpsComputeCorrectShapes) {
  GraphBuilder g;
  TracedValue img = g.input({8, 1, 28, 28}, DType::F32, "x");
  TracedValue w1 = g.input({8, 1, 3, 3}, DType::F32), b1 = g.input({8}, DType::F32);
  TracedValue w2 = g.input({16, 8, 3, 3}, DType::F32), b2 = g.input({16}, DType::F32);
  TracedValue fw = g.input({400, 10}, DType::F32), fb = g.input({10}, DType::F32);
  TracedValue h = g.maxPool2d(g.relu(g.conv2d(img, w1, b1)));
  h = g.maxPool2d(g.relu(g.conv2d(h, w2, b2)));
  EXPECT_EQ(g.shape(h), (std::vector<int64_t>{8, 16, 5, 5}));
  TracedValue logits = g.add(g.matmul(g.reshape(h, {8, 400}), fw), fb);
  EXPECT_EQ(g.shape(logits), (std::vector<int64_t>{8, 10}));
  TracedValue avg = g.avgPool2d(img, Pool2dParams{{3, 3}, {1, 1}, {1, 1, 1, 1}, ImageLayout::NCHW, false});
  EXPECT_EQ(g.shape(avg), (std::vector<int64_t>{8, 1, 28, 28}));
  g.finish({logits, avg});
  EXPECT_TRUE(contains(g.moduleText(), "rfuse.conv2d"));
}

TEST(GraphBuilder, SourceLocationsAreKept) {
  GraphBuilder g;
  TracedValue x = g.input({2}, DType::F32, "x");
  g.setSourceLocation("exp(x) + 1");
  TracedValue y = g.exp(x);
  g.finish({y});
  EXPECT_TRUE(contains(g.moduleText(true), "\"exp(x) + 1\"")) << g.moduleText(true);
  EXPECT_TRUE(contains(g.moduleText(true), "\"x\"")) << g.moduleText(true);
  EXPECT_FALSE(contains(g.moduleText(false), "exp(x) + 1"));
}

} // namespace
