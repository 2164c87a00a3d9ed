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

// How the scores are masked after the scale: not at all; a constant causal mask with the last
// batch's keys 1 and 2 masked too (masked_fill with -inf); a mask given at run time filled
// with -30 (finite: masked scores still weigh, and a row masked everywhere is uniform).
enum class Masking { None, CausalAndPadding, RuntimeFinite };

// The constant of CausalAndPadding, [b, l, s].
std::string causalAndPaddingLiteral(Shape sh) {
  std::string lit = "[";
  for (int64_t b = 0; b < sh.b; ++b) {
    lit += b ? ", [" : "[";
    for (int64_t l = 0; l < sh.l; ++l) {
      lit += l ? ", [" : "[";
      for (int64_t s = 0; s < sh.s; ++s)
        lit += std::string(s ? ", " : "") + (s > l || (b == sh.b - 1 && (s == 1 || s == 2)) ? "true" : "false");
      lit += "]";
    }
    lit += "]";
  }
  return lit + "]";
}

// loss = sum((softmax(q k^T / sqrt(d)) v - t)^2), written as autocast leaves it: products in the
// narrow type `elem`, the softmax (each row's maximum subtracted) in f32. (The lit test has the
// maximum's stop_gradient after it; this, before it.) With RuntimeFinite the mask is a fifth
// argument. With `dropout`, the probabilities are dropped as nnf_dropout traces it (p = 0.3),
// the draws made [S, B, L] and transposed (strides b: L, l: 1, s: B L), the seed the last
// argument.
std::string attentionLoss(Shape sh, const std::string &elem, Masking masking = Masking::None, bool dropout = false) {
  auto T = [&](std::vector<int64_t> s, const std::string &e) { return test::tensorType(s, e); };
  std::string q = T({sh.b, sh.l, sh.d}, elem), kv = T({sh.b, sh.s, sh.d}, elem), o = T({sh.b, sh.l, sh.d}, elem);
  std::string sn = T({sh.b, sh.l, sh.s}, elem), sf = T({sh.b, sh.l, sh.s}, "f32"), row = T({sh.b, sh.l, 1}, "f32");
  std::string of = T({sh.b, sh.l, sh.d}, "f32");
  std::string s;
  llvm::raw_string_ostream os(s);
  std::string mask = T({sh.b, sh.l, sh.s}, "i1");
  os << "func.func @loss(%q: " << q << ", %k: " << kv << ", %v: " << kv << ", %t: " << of
     << (masking == Masking::RuntimeFinite ? ", %m: " + mask : "") << (dropout ? ", %seed: tensor<2xi32>" : "")
     << ") -> tensor<1xf32> {\n"
     << "  %s = rfuse.matmul %q, %k {transpose_b = true} : (" << q << ", " << kv << ") -> " << sn << "\n"
     << "  %w = rfuse.cast %s : " << sn << " to " << sf << "\n"
     << "  %c = rfuse.constant dense<" << std::sqrt((double)sh.d) << "> : " << sf << "\n";
  if (masking == Masking::None) {
    os << "  %z = rfuse.div %w, %c : " << sf << "\n";
  } else {
    if (masking == Masking::CausalAndPadding)
      os << "  %m = rfuse.constant dense<" << causalAndPaddingLiteral(sh) << "> : " << mask << "\n";
    os << "  %fill = rfuse.constant dense<" << (masking == Masking::CausalAndPadding ? "0xFF800000" : "-30.0")
       << "> : " << sf << "\n"
       << "  %z0 = rfuse.div %w, %c : " << sf << "\n"
       << "  %z = rfuse.select %m, %fill, %z0 : " << mask << ", " << sf << "\n";
  }
  os << "  %zs = rfuse.stop_gradient %z : " << sf << "\n"
     << "  %ms = rfuse.reduce_max %zs, dims = [2] {keep_dims = true} : (" << sf << ") -> " << row << "\n"
     << "  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (" << row << ") -> " << sf << "\n"
     << "  %zm = rfuse.sub %z, %mb : " << sf << "\n"
     << "  %e = rfuse.exp %zm : " << sf << "\n"
     << "  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (" << sf << ") -> " << row << "\n"
     << "  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (" << row << ") -> " << sf << "\n"
     << "  " << (dropout ? "%p0" : "%p") << " = rfuse.div %e, %sb : " << sf << "\n";
  if (dropout) {
    std::string drawn = T({sh.s, sh.b, sh.l}, "f32");
    os << "  %u0 = rfuse.random_uniform %seed : tensor<2xi32> -> " << drawn << "\n"
       << "  %u = rfuse.transpose %u0, perm = [1, 2, 0] : (" << drawn << ") -> " << sf << "\n"
       << "  %thr = rfuse.constant dense<0.300000012> : " << sf << "\n"
       << "  %keep = rfuse.compare ge, %u, %thr : " << sf << "\n"
       << "  %kf = rfuse.cast %keep : " << T({sh.b, sh.l, sh.s}, "i1") << " to " << sf << "\n"
       << "  %c7 = rfuse.constant dense<1.42857146> : " << sf << "\n"
       << "  %factor = rfuse.mul %kf, %c7 : " << sf << "\n"
       << "  %p = rfuse.mul %p0, %factor : " << sf << "\n";
  }
  os << "  %pn = rfuse.cast %p : " << sf << " to " << sn << "\n"
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
  struct Case {
    const char *elem;
    Masking masking;
    bool dropout;
  };
  for (auto [elem, masking, dropout] : {Case{"bf16", Masking::None, false}, {"f16", Masking::None, false},
                                        {"bf16", Masking::CausalAndPadding, false}, {"f16", Masking::RuntimeFinite, false},
                                        {"bf16", Masking::None, true}, {"f16", Masking::CausalAndPadding, true}}) {
    for (Shape sh : {Shape{3, 37, 29, 16}, Shape{2, 70, 130, 32}}) {
      std::string text = attentionLoss(sh, elem, masking, dropout);
      // (after the gradient, custom VJPs expand into their forward functions, as every pipeline
      // starts)
      const char *grad = "rfuse-autodiff{function=loss wrt=0,1,2},rfuse-drop-stop-gradients,rfuse-expand-custom-vjp,inline";
      std::string fused = afterPipeline(text, std::string("builtin.module(func.func(rfuse-fuse-attention),") + grad + ")");
      std::string unfused = afterPipeline(text, std::string("builtin.module(rfuse-softmax-vjp,") + grad + ")");
      ASSERT_NE(fused.find("rfuse.attention_backward"), std::string::npos) << fused;
      ASSERT_EQ(unfused.find("rfuse.attention"), std::string::npos);
      if (masking == Masking::CausalAndPadding) // causal, and the padding as a [b, 1, s] mask
        EXPECT_NE(fused.find(dropout ? std::string("causal {dropout_scale")
                                     : "causal : (" + test::tensorType({sh.b, sh.l, sh.d}, elem)),
                  std::string::npos)
            << fused;
      if (masking != Masking::None)
        EXPECT_NE(fused.find(masking == Masking::CausalAndPadding ? test::tensorType({sh.b, 1, sh.s}, "i1")
                                                                  : "mask_value = -3.000000e+01"),
                  std::string::npos)
            << fused;
      if (dropout) { // the draws' layout as strides along [b, l, s]; no draws left in the program
        EXPECT_NE(fused.find("dropout_strides = array<i64: " + std::to_string(sh.l) + ", 1, " +
                             std::to_string(sh.b * sh.l) + ">"),
                  std::string::npos)
            << fused;
        EXPECT_EQ(fused.find("rfuse.random_uniform"), std::string::npos) << fused;
        EXPECT_NE(unfused.find("rfuse.random_uniform"), std::string::npos);
      }
      DType dt = std::string(elem) == "bf16" ? DType::BF16 : DType::F16;
      std::mt19937_64 rng(11);
      std::vector<HostTensor> in = {test::randomTensor(dt, {sh.b, sh.l, sh.d}, rng, -1, 1),
                                    test::randomTensor(dt, {sh.b, sh.s, sh.d}, rng, -1, 1),
                                    test::randomTensor(dt, {sh.b, sh.s, sh.d}, rng, -1, 1),
                                    test::randomTensor(DType::F32, {sh.b, sh.l, sh.d}, rng, -1, 1)};
      if (masking == Masking::RuntimeFinite) { // about a third masked, and one row everywhere
        HostTensor m = test::randomTensor(DType::I1, {sh.b, sh.l, sh.s}, rng, -2, 1);
        for (int64_t s = 0; s < sh.s; ++s)
          m.i[sh.l * sh.s + s] = 1; // batch 0, row 1
        in.push_back(m);
      }
      if (dropout) { // (a negative word: the key's bits as unsigned)
        HostTensor seed(DType::I32, {2});
        seed.i[0] = 20261207;
        seed.i[1] = -12345;
        in.push_back(seed);
      }
      std::vector<HostTensor> got = interpretText(fused, "loss_grad", in), want = interpretText(unfused, "loss_grad", in);
      ASSERT_EQ(got.size(), 4u);
      ASSERT_EQ(want.size(), 4u);
      std::string where = std::string(elem) + " " + std::to_string(sh.l) + "x" + std::to_string(sh.s) + " masking " +
                          std::to_string((int)masking) + (dropout ? " dropout" : "");
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
  // Masked: the mask an input after q, k, v (and after the backward's six), causal a constant of
  // the source. Dropout: the seed an input after those, the threshold, scale and strides
  // constants of the source.
  for (auto [maskingCase, dropoutCase] : {std::pair{Masking::CausalAndPadding, false}, {Masking::RuntimeFinite, false},
                                          {Masking::RuntimeFinite, true}}) {
    Masking masking = maskingCase; // (structured bindings are not captured by lambdas before C++20)
    bool dropout = dropoutCase;
    std::string masked = afterPipeline(attentionLoss({4, 100, 70, 64}, "bf16", masking, dropout),
                                       "builtin.module(func.func(rfuse-fuse-attention),"
                                       "rfuse-autodiff{function=loss wrt=0,1,2},rfuse-drop-stop-gradients,canonicalize)");
    auto maskedModule = mlir::parseSourceString<mlir::ModuleOp>(masked, &ctx);
    ASSERT_TRUE(maskedModule);
    bool seen[2] = {false, false}; // a forward and a backward
    maskedModule->walk([&](mlir::Operation *op) {
      if (!mlir::isa<AttentionOp, AttentionBackwardOp>(op))
        return;
      bool forward = mlir::isa<AttentionOp>(op);
      if (std::exchange(seen[forward], true))
        return;
      std::string name = std::string(forward ? "attention_fwd" : "attention_bwd") + "_masked" +
                         std::to_string((int)masking) + (dropout ? "_dropout" : "");
      cuda::KernelPlan p = cuda::planOperation(op, name);
      ASSERT_TRUE(p.kernel) << p.unsupported;
      EXPECT_EQ(p.kernel->numInputs, (forward ? 4u : 7u) + (dropout ? 1u : 0u));
      EXPECT_NE(p.kernel->source.find(dropout ? "DROPOUT = true" : "DROPOUT = false"), std::string::npos);
      if (dropout)
        EXPECT_NE(p.kernel->source.find("DROP_B = 100, DROP_L = 1, DROP_S = 400"), std::string::npos) << p.kernel->source;
      bool causal = masking == Masking::CausalAndPadding;
      EXPECT_NE(p.kernel->source.find(causal ? "CAUSAL = true" : "CAUSAL = false"), std::string::npos);
      EXPECT_NE(p.kernel->source.find(causal ? "SKIP_ABOVE_DIAGONAL = true" : "SKIP_ABOVE_DIAGONAL = false"),
                std::string::npos);
      EXPECT_NE(p.kernel->source.find(causal ? "MASK_B = 70, MASK_L = 0, MASK_S = 1" : "MASK_B = 7000, MASK_L = 70"),
                std::string::npos)
          << p.kernel->source;
      names.push_back(p.kernel->name);
      sources.push_back(p.kernel->source);
    });
    EXPECT_TRUE(seen[0] && seen[1]);
  }
  if (cuda::nvrtcVersion() == 0)
    GTEST_SKIP() << "NVRTC is not installed on this machine: the kernels' compilation is not checked";
  std::vector<std::string> compiledNames = {names[0], names[2]}, compiledSources = {sources[0], sources[2]};
  compiledNames.insert(compiledNames.end(), names.begin() + 3, names.end());
  compiledSources.insert(compiledSources.end(), sources.begin() + 3, sources.end());
  for (const char *arch : {"sm_86", "sm_89", "sm_90"})
    EXPECT_NO_THROW(cuda::compileKernels(compiledNames, compiledSources, arch)) << arch;
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

namespace {
// Interpreting `text` fails in the verifier with a message holding `want`.
void expectVerifierError(const std::string &text, const std::string &want) {
  try {
    interpretText(text, "main", {});
    ADD_FAILURE() << "verified:\n" << text;
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}
} // namespace

TEST(Attention, VerifierNamesWhatIsWrong) {
  // A k of 9 keys and a v of 8.
  expectVerifierError("func.func @main(%q: tensor<2x8x16xbf16>, %k: tensor<2x9x16xbf16>, %v: tensor<2x8x16xbf16>) {\n"
                      "  %o, %lse = rfuse.attention %q, %k, %v scale = 0.25 : (tensor<2x8x16xbf16>, tensor<2x9x16xbf16>, "
                      "tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x8xf32>)\n  return\n}\n",
                      "shapes do not agree");
  // A [2, 3, 9] mask of [2, 8, 9] scores: it spreads over neither the batch nor the queries as
  // [B or 1, L or 1, S or 1] does.
  expectVerifierError("func.func @main(%q: tensor<2x8x16xbf16>, %k: tensor<2x9x16xbf16>, %m: tensor<2x3x9xi1>) {\n"
                      "  %o, %lse = rfuse.attention %q, %k, %k mask %m scale = 0.25 causal : (tensor<2x8x16xbf16>, "
                      "tensor<2x9x16xbf16>, tensor<2x9x16xbf16>, tensor<2x3x9xi1>) -> (tensor<2x8x16xbf16>, tensor<2x8xf32>)\n"
                      "  return\n}\n",
                      "mask must be i1 [B or 1, L or 1, S or 1] = [2 or 1, 8 or 1, 9 or 1]");
  // Dropout: a seed without its attributes, attributes without a seed, a seed of three words, a
  // threshold past 1, two strides.
  auto dropout = [](const std::string &seedType, const std::string &seedOperand, const std::string &attrs) {
    std::string t = "tensor<2x8x16xbf16>";
    return "func.func @main(%q: " + t + ", %s: " + seedType + ") {\n  %o, %lse = rfuse.attention %q, %q, %q " +
           seedOperand + "scale = 0.25 " + attrs + " : (" + t + ", " + t + ", " + t +
           (seedOperand.empty() ? "" : ", " + seedType) + ") -> (" + t + ", tensor<2x8xf32>)\n  return\n}\n";
  };
  std::string all = "{dropout_threshold = 0.5, dropout_scale = 2.0, dropout_strides = array<i64: 64, 8, 1>}";
  expectVerifierError(dropout("tensor<2xi32>", "dropout %s ", ""), "dropout needs a dropout seed with");
  expectVerifierError(dropout("tensor<2xi32>", "", all), "dropout needs a dropout seed with");
  expectVerifierError(dropout("tensor<3xi32>", "dropout %s ", all), "dropout seed must be i32 [2]");
  expectVerifierError(dropout("tensor<2xi32>", "dropout %s ",
                              "{dropout_threshold = 1.5, dropout_scale = 2.0, dropout_strides = array<i64: 64, 8, 1>}"),
                      "dropout_threshold must be in [0, 1]");
  expectVerifierError(dropout("tensor<2xi32>", "dropout %s ",
                              "{dropout_threshold = 0.5, dropout_scale = 2.0, dropout_strides = array<i64: 8, 1>}"),
                      "dropout_strides must be three non-negative strides");
}
