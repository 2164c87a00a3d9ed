// The CPU backend (pointwise kernels JIT-compiled through linalg and LLVM; the rest interpreted)
// against the reference interpreter on the unfused graph: the corpus and random property graphs.
#include "CorpusUtil.h"
#include "RandomGraph.h"
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Interpreter.h"

#include <gtest/gtest.h>

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
    double tol = ref[i].dtype == DType::F64 ? 1e-12 : 1e-5;
    EXPECT_LE(test::maxRelError(got[i].f, ref[i].f, 1e-3), tol) << name << " output " << i;
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
