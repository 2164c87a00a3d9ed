// rfuse.recurrent and rfuse.recurrent_backward in the interpreter (the oracle cuDNN's calls are
// checked against on the GPU): every cell computes what the layer written out step by step
// computes, forward and gradient (rfuse-autodiff through the op's VJP against autodiff through
// the written-out ops), the LSTM's gradient equals central differences, the verifier refuses
// malformed layers, and the CUDA plan is one cuDNN call.
#include "RecurrentUtil.h"

#include "rfuse/Codegen/ExecutionPlan.h"
#include "rfuse/Passes/Passes.h"
#include "rfuse/Runtime/Engine.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace rfuse;
using namespace rfuse::test;

namespace {

TEST(Recurrent, EveryCellEqualsItsWrittenOutStepsForwardAndGradient) {
  for (const RecurrentCase &c : recurrentCases()) {
    std::vector<HostTensor> in = recurrentInputs(c, DType::F64, 7);
    std::string op = recurrentModule(c, DType::F64, false), steps = recurrentModule(c, DType::F64, true);
    EXPECT_NE(op.find(" " + c.mode + " : ("), std::string::npos) << op; // (the enum prints after "mode = ")
    auto a = compileProgram(op, "default")->run(in, Device::Cpu), b = compileProgram(steps, "default")->run(in, Device::Cpu);
    ASSERT_EQ(a.size(), b.size()) << c.mode;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].shape, b[i].shape) << c.mode << " output " << i;
      EXPECT_LE(relativeL2(a[i], b[i]), 1e-12) << c.mode << " output " << i;
    }
    auto ga = compileGradientProgram(op, "default", GradientRequest{})->run(in, Device::Cpu);
    auto gb = compileGradientProgram(steps, "default", GradientRequest{})->run(in, Device::Cpu);
    ASSERT_EQ(ga.size(), gb.size()) << c.mode;
    for (size_t i = 0; i < ga.size(); ++i)
      EXPECT_LE(relativeL2(ga[i], gb[i]), 1e-12) << c.mode << " gradient output " << i;
  }
}

TEST(Recurrent, LstmGradientEqualsCentralDifferences) {
  RecurrentCase c{"lstm", 2, 3, 3, 4};
  std::vector<HostTensor> in = recurrentInputs(c, DType::F64, 11);
  std::string op = recurrentModule(c, DType::F64, false);
  auto forward = compileProgram(op, "default");
  auto grads = compileGradientProgram(op, "default", GradientRequest{})->run(in, Device::Cpu);
  const double eps = 1e-6;
  for (size_t arg = 0; arg < 7; ++arg) { // x, h0, c0, w_ih, w_hh, b_ih, b_hh
    for (int64_t k = 0; k < in[arg].numel(); k += 3) {
      std::vector<HostTensor> plus = in, minus = in;
      plus[arg].f[k] += eps;
      minus[arg].f[k] -= eps;
      double d = (forward->run(plus, Device::Cpu)[0].f[0] - forward->run(minus, Device::Cpu)[0].f[0]) / (2 * eps);
      EXPECT_NEAR(grads[1 + arg].f[k], d, 1e-7 * std::max(1.0, std::fabs(d))) << "argument " << arg << " element " << k;
    }
  }
}

TEST(Recurrent, TheVerifierNamesWhatIsWrong) {
  GraphBuilder g("main");
  TracedValue x = g.input({3, 2, 4}, DType::F32), h = g.input({2, 5}, DType::F32); // 3 steps, batch 2
  TracedValue wih = g.input({20, 4}, DType::F32), whh = g.input({20, 5}, DType::F32), b = g.input({20}, DType::F32);
  TracedValue wrong = g.input({15, 4}, DType::F32);
  EXPECT_THROW(g.recurrent("lstm", x, h, TracedValue{}, wih, whh, b, b), ShapeError); // no cell state
  EXPECT_THROW(g.recurrent("gru", x, h, h, wih, whh, b, b), ShapeError);              // a GRU has none
  EXPECT_THROW(g.recurrent("lstm", x, h, h, wrong, whh, b, b), ShapeError);           // 3 gates' rows for 4
  EXPECT_THROW(g.recurrent("elman", x, h, TracedValue{}, wih, whh, b, b), ShapeError);
  try {
    g.recurrent("lstm", x, h, h, wrong, whh, b, b);
  } catch (const ShapeError &e) {
    EXPECT_NE(std::string(e.what()).find("w_ih [20, 4]"), std::string::npos) << e.what();
  }
  EXPECT_EQ(g.recurrent("lstm", x, h, h, wih, whh, b, b).size(), 3u);
}

TEST(Recurrent, TheGpuPlanIsOneCudnnCallPerDirectionOfTheStep) {
  RecurrentCase c{"lstm", 4, 6, 8, 16}; // batch 4, 6 steps
  auto program = compileGradientProgram(recurrentModule(c, DType::F32, false), "default", GradientRequest{});
  mlir::DialectRegistry registry;
  registerRfuseDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(program->info().fusedText, &ctx);
  ASSERT_TRUE(module);
  codegen::Target t;
  t.backend = codegen::Backend::Cuda;
  t.cuda.arch = "sm_90";
  std::vector<std::string> steps = codegen::buildExecutionPlan(*module, "main_grad", t, {}).describe();
  int forward = 0, backward = 0;
  for (const std::string &s : steps) {
    forward += s.find("cudnn lstm 4x6x8 hidden 16 f32") != std::string::npos;
    backward += s.find("cudnn lstm backward 4x6x8 hidden 16 f32") != std::string::npos;
  }
  EXPECT_EQ(forward, 1) << ::testing::PrintToString(steps);
  EXPECT_EQ(backward, 1) << ::testing::PrintToString(steps);
}

} // namespace
