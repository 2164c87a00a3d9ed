// rfuse.attention and its backward: the fused program (rfuse-fuse-attention, then rfuse-autodiff
// through the op's VJP) computes what the op-by-op program computes (its softmax given its
// output's VJP, as the training path does), forward and gradients, in the interpreter; and the
// CUDA kernels' plans, and their compilation by NVRTC for every supported architecture.
#include "TestUtil.h"

#include "rfuse/Codegen/CudaCodegen.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Passes/Passes.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Interpreter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace rfuse;

namespace {

struct Shape {
  int64_t b, l, s, d;
};

// loss = sum((softmax(q k^T / sqrt(d)) v - t)^2), written as autocast leaves it: products in the
// narrow type `elem`, the softmax (each row's maximum subtracted) in f32. (The lit test has the
// maximum's stop_gradient after it; this, before it.)
std::string attentionLoss(Shape sh, const std::string &elem) {
  auto T = [&](std::vector<int64_t> s, const std::string &e) { return test::tensorType(s, e); };
  std::string q = T({sh.b, sh.l, sh.d}, elem), kv = T({sh.b, sh.s, sh.d}, elem), o = T({sh.b, sh.l, sh.d}, elem);
  std::string sn = T({sh.b, sh.l, sh.s}, elem), sf = T({sh.b, sh.l, sh.s}, "f32"), row = T({sh.b, sh.l, 1}, "f32");
  std::string of = T({sh.b, sh.l, sh.d}, "f32");
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "func.func @loss(%q: " << q << ", %k: " << kv << ", %v: " << kv << ", %t: " << of << ") -> tensor<1xf32> {\n"
     << "  %s = rfuse.matmul %q, %k {transpose_b = true} : (" << q << ", " << kv << ") -> " << sn << "\n"
     << "  %w = rfuse.cast %s : " << sn << " to " << sf << "\n"
     << "  %c = rfuse.constant dense<" << std::sqrt((double)sh.d) << "> : " << sf << "\n"
     << "  %z = rfuse.div %w, %c : " << sf << "\n"
     << "  %zs = rfuse.stop_gradient %z : " << sf << "\n"
     << "  %ms = rfuse.reduce_max %zs, dims = [2] {keep_dims = true} : (" << sf << ") -> " << row << "\n"
     << "  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (" << row << ") -> " << sf << "\n"
     << "  %zm = rfuse.sub %z, %mb : " << sf << "\n"
     << "  %e = rfuse.exp %zm : " << sf << "\n"
     << "  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (" << sf << ") -> " << row << "\n"
     << "  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (" << row << ") -> " << sf << "\n"
     << "  %p = rfuse.div %e, %sb : " << sf << "\n"
     << "  %pn = rfuse.cast %p : " << sf << " to " << sn << "\n"
     << "  %o = rfuse.matmul %pn, %v : (" << sn << ", " << kv << ") -> " << o << "\n"
     << "  %ow = rfuse.cast %o : " << o << " to " << of << "\n"
     << "  %d = rfuse.sub %ow, %t : " << of << "\n"
     << "  %sq = rfuse.mul %d, %d : " << of << "\n"
     << "  %l = rfuse.reduce_sum %sq, dims = [0, 1, 2] : (" << of << ") -> tensor<f32>\n"
     << "  %r = rfuse.reshape %l : (tensor<f32>) -> tensor<1xf32>\n"
     << "  return %r : tensor<1xf32>\n}\n";
  return os.str();
}

// The module after `pipeline`, as text.
std::string afterPipeline(const std::string &text, const std::string &pipeline) {
  mlir::DialectRegistry registry;
  registerRfuseDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  EXPECT_TRUE(module);
  EXPECT_TRUE(mlir::succeeded(compile(*module, pipeline))) << pipeline;
  std::string out;
  llvm::raw_string_ostream os(out);
  module->print(os);
  return os.str();
}

double maxAbs(const std::vector<double> &v) {
  double m = 0;
  for (double x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

} // namespace

TEST(Attention, FusedProgramEqualsTheOpByOpOneWithItsGradients) {
  for (const char *elem : {"bf16", "f16"}) {
    for (Shape sh : {Shape{3, 37, 29, 16}, Shape{2, 70, 130, 32}}) {
      std::string text = attentionLoss(sh, elem);
      // (after the gradient, custom VJPs expand into their forward functions, as every pipeline
      // starts)
      const char *grad = "rfuse-autodiff{function=loss wrt=0,1,2},rfuse-drop-stop-gradients,rfuse-expand-custom-vjp,inline";
      std::string fused = afterPipeline(text, std::string("builtin.module(func.func(rfuse-fuse-attention),") + grad + ")");
      std::string unfused = afterPipeline(text, std::string("builtin.module(rfuse-softmax-vjp,") + grad + ")");
      ASSERT_NE(fused.find("rfuse.attention_backward"), std::string::npos) << fused;
      ASSERT_EQ(unfused.find("rfuse.attention"), std::string::npos);
      DType dt = std::string(elem) == "bf16" ? DType::BF16 : DType::F16;
      std::mt19937_64 rng(11);
      std::vector<HostTensor> in = {test::randomTensor(dt, {sh.b, sh.l, sh.d}, rng, -1, 1),
                                    test::randomTensor(dt, {sh.b, sh.s, sh.d}, rng, -1, 1),
                                    test::randomTensor(dt, {sh.b, sh.s, sh.d}, rng, -1, 1),
                                    test::randomTensor(DType::F32, {sh.b, sh.l, sh.d}, rng, -1, 1)};
      std::vector<HostTensor> got = interpretText(fused, "loss_grad", in), want = interpretText(unfused, "loss_grad", in);
      ASSERT_EQ(got.size(), 4u);
      ASSERT_EQ(want.size(), 4u);
      std::string where = std::string(elem) + " " + std::to_string(sh.l) + "x" + std::to_string(sh.s);
      // The loss, and each gradient relative to its largest element: the two programs round
      // differently (the op-by-op one rounds the scores to the narrow type), within a few of its
      // units in the last place.
      EXPECT_LE(test::maxRelError(got[0].f, want[0].f), 1e-2) << where;
      for (int i = 1; i < 4; ++i) {
        double scale = maxAbs(want[i].f);
        ASSERT_GT(scale, 0) << where;
        EXPECT_LE(test::maxRelError(got[i].f, want[i].f, scale), 3e-2) << where << ", gradient " << i;
      }
    }
  }
}

TEST(Attention, KernelsArePlannedPerTileAndCompileForEveryArchitecture) {
  // Forward and backward ops as rfuse-fuse-attention and rfuse-autodiff make them, planned alone.
  std::string text = afterPipeline(attentionLoss({4, 100, 70, 64}, "bf16"),
                                   "builtin.module(func.func(rfuse-fuse-attention),"
                                   "rfuse-autodiff{function=loss wrt=0,1,2},rfuse-drop-stop-gradients,canonicalize)");
  mlir::DialectRegistry registry;
  registerRfuseDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  ASSERT_TRUE(module);
  std::vector<std::string> names, sources;
  int planned = 0;
  module->walk([&](mlir::Operation *op) {
    if (!mlir::isa<AttentionOp, AttentionBackwardOp>(op))
      return;
    bool forward = mlir::isa<AttentionOp>(op);
    cuda::KernelPlan p = cuda::planOperation(op, forward ? "attention_fwd" : "attention_bwd");
    ASSERT_TRUE(p.unsupported.empty()) << p.unsupported;
    ASSERT_TRUE(p.kernel);
    EXPECT_EQ(p.kind, "attention");
    EXPECT_EQ(p.kernel->launch, cuda::LaunchKind::Tiles);
    EXPECT_EQ(p.kernel->blockSize, 128);
    // A block per 64 queries; the backward's blocks also one per 64 keys.
    EXPECT_EQ(p.kernel->grid, forward ? 4u * 2 : 4u * (2 + 2));
    EXPECT_EQ(p.kernel->numInputs, forward ? 3u : 6u);
    EXPECT_EQ(p.kernel->numOutputs, forward ? 2u : 3u);
    names.push_back(p.kernel->name);
    sources.push_back(p.kernel->source);
    ++planned;
  });
  EXPECT_EQ(planned, 3); // the loss's forward, the gradient's forward and its backward
  // The batch is the grid's alone: a dynamic-batch program shares one source for every size.
  std::string other = afterPipeline(attentionLoss({7, 100, 70, 64}, "bf16"), "builtin.module(func.func(rfuse-fuse-attention))");
  auto module7 = mlir::parseSourceString<mlir::ModuleOp>(other, &ctx);
  ASSERT_TRUE(module7);
  module7->walk([&](AttentionOp op) {
    cuda::KernelPlan p = cuda::planOperation(op, "attention_fwd");
    ASSERT_TRUE(p.kernel);
    EXPECT_EQ(p.kernel->source, sources[0]);
    EXPECT_EQ(p.kernel->grid, 7u * 2);
  });
  if (cuda::nvrtcVersion() == 0)
    GTEST_SKIP() << "NVRTC is not installed on this machine: the kernels' compilation is not checked";
  for (const char *arch : {"sm_86", "sm_89", "sm_90"})
    EXPECT_NO_THROW(cuda::compileKernels({names[0], names[2]}, {sources[0], sources[2]}, arch)) << arch;
}

TEST(Attention, WhatTheKernelDoesNotTakeRunsInTheInterpreter) {
  // f32 operands, and a head dim of 24, written as the op directly: no GPU kernel, with why.
  for (auto [elem, d] : {std::pair<const char *, int>{"f32", 16}, {"bf16", 24}}) {
    std::string t = test::tensorType({2, 8, d}, elem), l = test::tensorType({2, 8}, "f32");
    std::string text = "func.func @main(%q: " + t + ", %k: " + t + ", %v: " + t + ") -> " + t + " {\n" +
                       "  %o, %lse = rfuse.attention %q, %k, %v scale = 0.25 : (" + t + ", " + t + ", " + t +
                       ") -> (" + t + ", " + l + ")\n  return %o : " + t + "\n}\n";
    mlir::DialectRegistry registry;
    registerRfuseDialects(registry);
    mlir::MLIRContext ctx(registry);
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    ASSERT_TRUE(module) << text;
    AttentionOp op;
    module->walk([&](AttentionOp a) { op = a; });
    cuda::KernelPlan p = cuda::planOperation(op, "attention");
    EXPECT_FALSE(p.kernel);
    EXPECT_NE(p.unsupported.find(std::string(elem) == "f32" ? "bfloat16 or float16" : "multiple of 16"),
              std::string::npos)
        << p.unsupported;
    // The interpreter computes it: each row of the output is a weighted mean of v's rows.
    std::mt19937_64 rng(3);
    DType dt = std::string(elem) == "f32" ? DType::F32 : DType::BF16;
    std::vector<HostTensor> in = {test::randomTensor(dt, {2, 8, d}, rng), test::randomTensor(dt, {2, 8, d}, rng),
                                  test::randomTensor(dt, {2, 8, d}, rng)};
    HostTensor o = interpretText(text, "main", in)[0];
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t c = 0; c < d; ++c) {
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t s = 0; s < 8; ++s) {
          double x = in[2].f[((r / 8) * 8 + s) * d + c];
          lo = std::min(lo, x);
          hi = std::max(hi, x);
        }
        double x = o.f[r * d + c];
        EXPECT_TRUE(x >= lo - 1e-2 && x <= hi + 1e-2) << x << " outside [" << lo << ", " << hi << "]";
      }
  }
}

TEST(Attention, VerifierNamesWhatIsWrong) {
  std::string text = "func.func @main(%q: tensor<2x8x16xbf16>, %k: tensor<2x9x16xbf16>, %v: tensor<2x8x16xbf16>) {\n"
                     "  %o, %lse = rfuse.attention %q, %k, %v scale = 0.25 : (tensor<2x8x16xbf16>, tensor<2x9x16xbf16>, "
                     "tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x8xf32>)\n  return\n}\n";
  try {
    interpretText(text, "main", {});
    FAIL() << "a k of 9 keys and a v of 8 verified";
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("shapes do not agree"), std::string::npos) << e.what();
  }
}
