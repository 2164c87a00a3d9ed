// Kernel counts of the canonical patterns under the default pipeline, each also checked for
// computing what the unfused graph computes.
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Passes/Passes.h"
#include "rfuse/Runtime/Interpreter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace rfuse;

namespace {

struct Compiled {
  std::string text;
  uint64_t kernels = 0;                  // of @main after the pipeline, per the cost model
  std::vector<std::string> kernelKinds;  // kinds of the outlined kernel functions
  int count(const std::string &needle) const {
    int n = 0;
    for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1))
      ++n;
    return n;
  }
};

Compiled compileGraph(GraphBuilder &g, const std::vector<HostTensor> &inputs,
                      const std::string &pipeline = "default") {
  Compiled c;
  mlir::DialectRegistry registry;
  registerRfuseDialects(registry);
  mlir::MLIRContext ctx(registry);
  std::string diags;
  mlir::ScopedDiagnosticHandler h(&ctx, [&](mlir::Diagnostic &d) {
    diags += d.str() + "\n";
    return mlir::success();
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>(g.moduleText(), &ctx);
  EXPECT_TRUE(module) << diags;
  std::vector<CostEntry> costs;
  EXPECT_TRUE(mlir::succeeded(compile(*module, pipeline, &costs))) << diags;
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*module))) << diags;
  for (const CostEntry &e : costs)
    if (e.function == "main")
      c.kernels = e.kernels; // the last pass's view
  module->walk([&](mlir::func::FuncOp fn) {
    if (auto kind = fn->getAttrOfType<FusionKindAttr>("rfuse.kernel"))
      c.kernelKinds.push_back(stringifyFusionKind(kind.getValue()).str());
  });
  llvm::raw_string_ostream os(c.text);
  module->print(os);
  // Fused and unfused compute the same values.
  auto expected = interpretText(g.moduleText(), "main", inputs);
  auto got = interpretText(c.text, "main", inputs);
  EXPECT_EQ(expected.size(), got.size());
  for (size_t i = 0; i < std::min(expected.size(), got.size()); ++i)
    EXPECT_LT(test::maxRelError(got[i].f, expected[i].f, 1e-3), 1e-6) << "result " << i;
  return c;
}

std::vector<HostTensor> randomInputs(const std::vector<std::vector<int64_t>> &shapes,
                                     uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> out;
  for (auto &s : shapes)
    out.push_back(test::randomTensor(DType::F32, s, rng));
  return out;
}

class ElementwiseChain : public ::testing::TestWithParam<int> {};

TEST_P(ElementwiseChain, AnyLengthIsOneKernel) {
  GraphBuilder g;
  TracedValue x = g.input({16, 8}, DType::F32), y = g.input({16, 8}, DType::F32);
  TracedValue v = x;
  for (int i = 0; i < GetParam(); ++i)
    v = i % 3 == 0 ? g.add(v, y) : i % 3 == 1 ? g.tanh(v) : g.mul(v, g.scalar(0.9, DType::F32));
  g.finish({v});
  Compiled c = compileGraph(g, randomInputs({{16, 8}, {16, 8}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
  EXPECT_EQ(c.kernelKinds, std::vector<std::string>{"pointwise"});
}
INSTANTIATE_TEST_SUITE_P(Lengths, ElementwiseChain, ::testing::Values(1, 2, 5, 30));

TEST(Fusion, W1ElementwiseChainIsOneKernel) {
  // relu(x * a + b) * sigmoid(x) + tanh(b) * 0.5
  GraphBuilder g;
  TracedValue x = g.input({4096}, DType::F32), a = g.input({4096}, DType::F32),
              b = g.input({4096}, DType::F32);
  TracedValue r = g.add(g.mul(g.relu(g.add(g.mul(x, a), b)), g.sigmoid(x)),
                        g.mul(g.tanh(b), g.scalar(0.5, DType::F32)));
  g.finish({r});
  Compiled c = compileGraph(g, randomInputs({{4096}, {4096}, {4096}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
}

TEST(Fusion, TransposeTimesTwoPlusYIsOneKernel) {
  GraphBuilder g;
  TracedValue x = g.input({5, 7}, DType::F32), y = g.input({7, 5}, DType::F32);
  g.finish({g.add(g.mul(g.transpose(x, {1, 0}), g.scalar(2.0, DType::F32)), y)});
  Compiled c = compileGraph(g, randomInputs({{5, 7}, {7, 5}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
}

TEST(Fusion, RowSoftmaxIsOneKernel) {
  GraphBuilder g;
  TracedValue x = g.input({32, 64}, DType::F32);
  TracedValue e = g.exp(g.sub(x, g.reduceMax(x, {1}, true)));
  g.finish({g.div(e, g.reduceSum(e, {1}, true))});
  Compiled c = compileGraph(g, randomInputs({{32, 64}}));
  EXPECT_LE(c.kernels, 2u);
  EXPECT_EQ(c.kernels, 1u) << c.text;
  EXPECT_EQ(c.kernelKinds, std::vector<std::string>{"reduction"});
}

TracedValue layerNorm(GraphBuilder &g, TracedValue x, TracedValue gamma, TracedValue beta) {
  TracedValue xc = g.sub(x, g.reduceMean(x, {1}, true));
  TracedValue var = g.reduceMean(g.mul(xc, xc), {1}, true);
  TracedValue rstd = g.rsqrt(g.add(var, g.scalar(1e-5, DType::F32)));
  return g.add(g.mul(g.mul(xc, rstd), gamma), beta);
}

TEST(Fusion, LayerNormIsOneKernel) {
  GraphBuilder g;
  TracedValue x = g.input({16, 128}, DType::F32), gm = g.input({128}, DType::F32),
              bt = g.input({128}, DType::F32);
  g.finish({layerNorm(g, x, gm, bt)});
  Compiled c = compileGraph(g, randomInputs({{16, 128}, {128}, {128}}));
  EXPECT_LE(c.kernels, 2u);
  EXPECT_EQ(c.kernels, 1u) << c.text;
}

TEST(Fusion, W4LayerNormGeluResidualIsOneKernel) {
  GraphBuilder g;
  TracedValue x = g.input({8, 256}, DType::F32), gm = g.input({256}, DType::F32),
              bt = g.input({256}, DType::F32);
  TracedValue y = g.add(g.mul(g.gelu(layerNorm(g, x, gm, bt)), g.scalar(1.5, DType::F32)), x);
  g.finish({y});
  Compiled c = compileGraph(g, randomInputs({{8, 256}, {256}, {256}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
}

TEST(Fusion, ColSumsOfSquaresOverNIsOneKernel) {
  // colSums(x^2) / n for an R matrix of dim c(n, p): a tensor [p, n], reduced over dim 1.
  GraphBuilder g;
  TracedValue x = g.input({6, 50}, DType::F32);
  g.finish({g.div(g.reduceSum(g.mul(x, x), {1}), g.scalar(50.0, DType::F32))});
  Compiled c = compileGraph(g, randomInputs({{6, 50}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
}

TEST(Fusion, MatmulBiasReluIsOneEpilogueRegion) {
  GraphBuilder g;
  TracedValue x = g.input({32, 64}, DType::F32), w = g.input({64, 16}, DType::F32),
              b = g.input({16}, DType::F32);
  g.finish({g.relu(g.add(g.matmul(x, w), b))});
  Compiled c = compileGraph(g, randomInputs({{32, 64}, {64, 16}, {16}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
  EXPECT_EQ(c.kernelKinds, std::vector<std::string>{"matmul_epilogue"});
}

TEST(Fusion, MatmulResidualAddJoinsTheEpilogue) {
  GraphBuilder g;
  TracedValue x = g.input({8, 8}, DType::F32), w = g.input({8, 8}, DType::F32);
  g.finish({g.add(g.gelu(g.matmul(x, w)), x)});
  Compiled c = compileGraph(g, randomInputs({{8, 8}, {8, 8}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
}

// A linear layer on [batch, seq, features] (torch-style code: the product on the rows
// flattened, a reshape back, then bias and activation): the bias and GELU are the product's
// epilogue, not a kernel behind the reshape.
TEST(Fusion, LinearLayerOnSequencesIsOneEpilogueRegion) {
  GraphBuilder g;
  TracedValue x = g.input({6, 8}, DType::F32), w = g.input({8, 12}, DType::F32),
              b = g.input({12}, DType::F32), res = g.input({2, 3, 12}, DType::F32);
  TracedValue h = g.reshape(g.matmul(x, w), {2, 3, 12});
  g.finish({g.add(g.gelu(g.add(h, b)), res)});
  Compiled c = compileGraph(g, randomInputs({{6, 8}, {8, 12}, {12}, {2, 3, 12}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
  EXPECT_EQ(c.kernelKinds, std::vector<std::string>{"matmul_epilogue"});
}

// Attention's heads split from R's layout (features, seq, batch): a transpose to torch's order,
// the features split into heads, heads before positions, then a scaling. One kernel, one
// transpose, where the reshapes had kept three.
TEST(Fusion, AttentionHeadSplitIsOneKernel) {
  GraphBuilder g;
  TracedValue x = g.input({12, 5, 2}, DType::F32);
  TracedValue t = g.transpose(g.reshape(g.transpose(x, {2, 1, 0}), {2, 5, 3, 4}), {0, 2, 1, 3});
  g.finish({g.mul(g.reshape(t, {6, 5, 4}), g.scalar(0.5, DType::F32))});
  Compiled c = compileGraph(g, randomInputs({{12, 5, 2}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
  EXPECT_EQ(c.count("rfuse.transpose"), 1) << c.text;
}

// And merged back (a batched product's result: attention's output, the heads' gradients) into
// R's layout: one transpose.
TEST(Fusion, AttentionHeadMergeIsOneKernel) {
  GraphBuilder g;
  TracedValue x = g.input({6, 5, 4}, DType::F32);
  TracedValue t = g.transpose(g.reshape(g.transpose(g.reshape(x, {2, 3, 5, 4}), {0, 2, 1, 3}), {2, 5, 12}),
                              {2, 1, 0});
  g.finish({t});
  Compiled c = compileGraph(g, randomInputs({{6, 5, 4}}));
  EXPECT_EQ(c.kernels, 1u) << c.text;
  EXPECT_EQ(c.count("rfuse.transpose"), 1) << c.text;
}

TEST(Fusion, TwoMatmulsAreTwoKernels) {
  GraphBuilder g;
  TracedValue x = g.input({8, 16}, DType::F32), w1 = g.input({16, 32}, DType::F32),
              w2 = g.input({32, 4}, DType::F32);
  g.finish({g.matmul(g.relu(g.matmul(x, w1)), w2)});
  Compiled c = compileGraph(g, randomInputs({{8, 16}, {16, 32}, {32, 4}}));
  EXPECT_EQ(c.kernels, 2u) << c.text;
  EXPECT_EQ(c.count("rfuse.matmul"), 2);
}

TEST(Fusion, ReductionsAlongDifferentAxesAreNotFusedTogether) {
  GraphBuilder g;
  TracedValue x = g.input({12, 10}, DType::F32);
  TracedValue sq = g.mul(x, x);
  g.finish({g.reduceSum(sq, {0}), g.reduceSum(sq, {1})});
  Compiled c = compileGraph(g, randomInputs({{12, 10}}));
  EXPECT_EQ(c.kernelKinds.size(), 2u) << c.text;
  for (const std::string &k : c.kernelKinds)
    EXPECT_EQ(k, "reduction");
}

TEST(Fusion, AReductionIsNeverDuplicated) {
  // s feeds both a reduced-space consumer and a full-space one: computed once.
  GraphBuilder g;
  TracedValue x = g.input({12, 10}, DType::F32);
  TracedValue s = g.reduceSum(x, {1}, true);
  TracedValue scaled = g.div(x, s);
  TracedValue twice = g.mul(s, g.scalar(2.0, DType::F32));
  g.finish({scaled, twice});
  Compiled c = compileGraph(g, randomInputs({{12, 10}}));
  EXPECT_EQ(c.count("rfuse.reduce_sum"), 1) << c.text;
  EXPECT_EQ(c.kernels, 1u) << c.text;
}

TEST(Fusion, NoFusionPipelineKeepsEveryOp) {
  GraphBuilder g;
  TracedValue x = g.input({4, 4}, DType::F32);
  g.finish({g.exp(g.tanh(x))});
  Compiled c = compileGraph(g, randomInputs({{4, 4}}), "no-fusion");
  EXPECT_EQ(c.kernels, 2u);
  EXPECT_TRUE(c.kernelKinds.empty());
}

TEST(Fusion, HelperFunctionsAreInlinedThenFused) {
  GraphBuilder g;
  TracedValue x = g.input({4, 4}, DType::F32);
  g.beginFunction("softplus");
  TracedValue a = g.input({4, 4}, DType::F32);
  TracedFunction sp = g.endFunction({g.log(g.add(g.exp(a), g.scalar(1.0, DType::F32)))});
  g.finish({g.tanh(g.call(sp, {x})[0])});
  Compiled c = compileGraph(g, randomInputs({{4, 4}}));
  EXPECT_EQ(c.count("@softplus"), 0) << c.text;
  EXPECT_EQ(c.kernels, 1u) << c.text;
}

TEST(Fusion, UnknownPipelineIsAnError) {
  mlir::DialectRegistry registry;
  registerRfuseDialects(registry);
  mlir::MLIRContext ctx(registry);
  std::string diags;
  mlir::ScopedDiagnosticHandler h(&ctx, [&](mlir::Diagnostic &d) {
    diags += d.str();
    return mlir::success();
  });
  auto module = mlir::parseSourceString<mlir::ModuleOp>("module {}", &ctx);
  EXPECT_TRUE(mlir::failed(compile(*module, "fastest")));
  EXPECT_NE(diags.find("unknown rfuse pipeline 'fastest'"), std::string::npos) << diags;
}

} // namespace
