// BatchTemplate: one compiled program for every batch size. Programs made from the template
// equal the programs compiled for that size; their CUDA kernels are one source for every size;
// code that depends on the batch size in any other way is refused.
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Options.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

using namespace rfuse;

namespace {

std::vector<double> values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1, 1);
  std::vector<double> v(n);
  for (double &x : v)
    x = uni(rng);
  return v;
}

// A classifier head over a batch of rows (the batch is dim 0): row softmax of relu(x w1 + b1) w2.
std::string mlp(int64_t batch) {
  GraphBuilder g;
  TracedValue x = g.input({batch, 16}, DType::F32, "x");
  TracedValue w1 = g.constant(values(16 * 32, 1), {16, 32}, DType::F32);
  TracedValue b1 = g.constant(values(32, 2), {32}, DType::F32);
  TracedValue w2 = g.constant(values(32 * 8, 3), {32, 8}, DType::F32);
  TracedValue z = g.matmul(g.relu(g.add(g.matmul(x, w1), b1)), w2);
  TracedValue e = g.exp(g.sub(z, g.reduceMax(z, {1}, true)));
  g.finish({g.div(e, g.reduceSum(e, {1}, true))});
  return g.moduleText(true);
}

// The batch is the last dim, as an R matrix's rows are: columns scaled and shifted.
std::string columnMajor(int64_t batch) {
  GraphBuilder g;
  TracedValue x = g.input({24, batch}, DType::F32, "x");
  TracedValue s = g.constant(values(24, 4), {24, 1}, DType::F32);
  g.finish({g.tanh(g.add(g.mul(x, s), g.scalar(0.5, DType::F32)))});
  return g.moduleText(true);
}

// A mean over the batch: rfuse.reduce_mean, whose divisor its operand's type gives.
std::string batchMean(int64_t batch) {
  GraphBuilder g;
  TracedValue x = g.input({batch, 8}, DType::F32, "x");
  g.finish({g.reduceMean(x, {0})});
  return g.moduleText(true);
}

// The same mean as R code writes it, colSums(x) / nrow(x): the divisor is a constant.
std::string batchMeanByConstant(int64_t batch) {
  GraphBuilder g;
  TracedValue x = g.input({batch, 8}, DType::F32, "x");
  g.finish({g.div(g.reduceSum(x, {0}), g.scalar((double)batch, DType::F32))});
  return g.moduleText(true);
}

HostTensor input(const std::vector<int64_t> &shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return test::randomTensor(DType::F32, shape, rng);
}

void expectSameResults(const Program &made, const Program &compiled, const std::vector<int64_t> &shape) {
  HostTensor x = input(shape, 11);
  std::vector<HostTensor> a = made.run({x}, Device::Cpu), b = compiled.run({x}, Device::Cpu);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].shape, b[k].shape);
    EXPECT_EQ(a[k].f, b[k].f) << "result " << k; // the same program: the same bits
  }
}

} // namespace

TEST(BatchTemplate, ProgramsForOtherSizesEqualTheirCompiledProgramsAndRunNoPasses) {
  auto a = compileProgram(mlp(2), "default"), b = compileProgram(mlp(3), "default");
  std::string why;
  auto t = BatchTemplate::make(*a, 2, *b, 3, why);
  ASSERT_TRUE(t) << why;
  for (int64_t n : {1, 7, 64, 257}) {
    ProgramCacheStats before = programCacheStats();
    auto made = t->specialize(mlp(n), n, why);
    ASSERT_TRUE(made) << "batch " << n << ": " << why;
    ProgramCacheStats after = programCacheStats();
    EXPECT_EQ(after.passRuns, before.passRuns) << "no pass pipeline for a made program";
    EXPECT_EQ(after.specializations, before.specializations + 1);
    EXPECT_EQ(made->resultTypes()[0].second, (std::vector<int64_t>{n, 8}));
    expectSameResults(*made, *compileProgram(mlp(n), "default"), {n, 16});
  }
}

TEST(BatchTemplate, AReductionOverTheBatchIsMadeForEachSize) {
  auto a = compileProgram(batchMean(2), "default"), b = compileProgram(batchMean(3), "default");
  std::string why;
  auto t = BatchTemplate::make(*a, 2, *b, 3, why);
  ASSERT_TRUE(t) << why;
  for (int64_t n : {1, 7, 300}) {
    auto made = t->specialize(batchMean(n), n, why);
    ASSERT_TRUE(made) << why;
    expectSameResults(*made, *compileProgram(batchMean(n), "default"), {n, 8});
  }
}

TEST(BatchTemplate, EveryBatchSizeSharesOneKernelSourceThatTakesTheSize) {
  for (auto build : {std::function<std::string(int64_t)>(mlp), std::function<std::string(int64_t)>(columnMajor)}) {
    auto a = compileProgram(build(40), "default"), b = compileProgram(build(41), "default");
    std::string why;
    auto t = BatchTemplate::make(*a, 40, *b, 41, why);
    ASSERT_TRUE(t) << why;
    auto p = t->specialize(build(100), 100, why);
    ASSERT_TRUE(p) << why;
    const auto &sp = p->info().cudaSources;
    ASSERT_FALSE(sp.empty());
    bool anyTakesBatch = false;
    for (const auto &[label, source] : sp) {
      anyTakesBatch |= source.find("long long rf_batch)") != std::string::npos;
      EXPECT_EQ(source.find(" 100LL"), std::string::npos) << "a literal of the size is left in\n" << source;
    }
    // (batch 1 may trace differently: a broadcast a unit dim makes unnecessary; then it is
    // refused and compiles a program of its own)
    for (int64_t n : {2, 7, 333}) {
      auto q = t->specialize(build(n), n, why);
      ASSERT_TRUE(q) << "batch " << n << ": " << why;
      const auto &sq = q->info().cudaSources;
      ASSERT_EQ(sp.size(), sq.size());
      for (size_t k = 0; k < sp.size(); ++k)
        EXPECT_EQ(sp[k].second, sq[k].second) << sp[k].first << ": one source for batch 100 and " << n;
    }
    EXPECT_TRUE(anyTakesBatch);
    expectSameResults(*p, *compileProgram(build(100), "default"), p->argumentTypes()[0].second);
  }
}

TEST(BatchTemplate, CodeThatDependsOnTheBatchSizeOtherwiseIsRefused) {
  std::string why;
  // A constant computed from the size (a mean's divisor).
  auto m2 = compileProgram(batchMeanByConstant(2), "default"), m3 = compileProgram(batchMeanByConstant(3), "default");
  EXPECT_FALSE(BatchTemplate::make(*m2, 2, *m3, 3, why));
  EXPECT_NE(why.find("differ"), std::string::npos) << why;
  // Different functions, and the same size twice.
  why.clear();
  auto a = compileProgram(mlp(4), "default"), c = compileProgram(columnMajor(5), "default");
  EXPECT_FALSE(BatchTemplate::make(*a, 4, *c, 5, why));
  EXPECT_FALSE(why.empty());
  why.clear();
  EXPECT_FALSE(BatchTemplate::make(*a, 4, *a, 4, why));
  EXPECT_FALSE(why.empty());
  // A trace at a new size that is not the template's function at that size (R code that
  // branched on the size) is not specialized.
  auto b = compileProgram(mlp(5), "default");
  auto t = BatchTemplate::make(*a, 4, *b, 5, why);
  ASSERT_TRUE(t) << why;
  why.clear();
  EXPECT_FALSE(t->specialize(columnMajor(9), 9, why));
  EXPECT_FALSE(why.empty());
  why.clear();
  EXPECT_FALSE(t->specialize(mlp(9), 10, why)) << "a trace at 9 is not the program at 10";
  EXPECT_FALSE(why.empty());
  // Its own size (a program dropped from a cache is made again).
  why.clear();
  auto own = t->specialize(mlp(4), 4, why);
  ASSERT_TRUE(own) << why;
  expectSameResults(*own, *a, {4, 16});
}
