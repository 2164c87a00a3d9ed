// rfuse-trace-demo: the foundation's end-to-end slice. Traces a small model (a two-layer MLP with
// GELU and a row softmax, the shape of what R users write) through the C++ GraphBuilder, prints
// the rfuse IR, runs it on the reference interpreter in f32 and checks it against the same graph
// computed in f64. Uses only MLIR-free public headers, as the R bindings will.
#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Interpreter.h"

#include <cmath>
#include <cstdio>
#include <random>

using namespace rfuse;

int main() {
  const int64_t batch = 4, in = 8, hidden = 16, out = 3;
  GraphBuilder g("mlp_softmax");
  TracedValue x = g.input({batch, in}, DType::F32, "x");
  TracedValue w1 = g.input({in, hidden}, DType::F32, "w1");
  TracedValue b1 = g.input({hidden}, DType::F32, "b1");
  TracedValue w2 = g.input({hidden, out}, DType::F32, "w2");
  TracedValue b2 = g.input({out}, DType::F32, "b2");
  g.setSourceLocation("h <- gelu(x %*% w1 + b1)");
  TracedValue h = g.gelu(g.add(g.matmul(x, w1), b1));
  g.setSourceLocation("z <- h %*% w2 + b2");
  TracedValue z = g.add(g.matmul(h, w2), b2);
  g.setSourceLocation("e <- exp(z - rowmax(z)); e / rowSums(e)");
  TracedValue e = g.exp(g.sub(z, g.reduceMax(z, {1}, /*keepDims=*/true)));
  TracedValue p = g.div(e, g.reduceSum(e, {1}, /*keepDims=*/true));
  g.finish({p});

  std::printf("== traced rfuse IR (signature %016llx) ==\n%s\n",
              (unsigned long long)g.signatureHash(), g.moduleText().c_str());

  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto randomTensor = [&](std::vector<int64_t> shape, double scale) {
    HostTensor t(DType::F32, shape);
    for (int64_t k = 0; k < t.numel(); ++k)
      t.set(k, normal(rng) * scale);
    return t;
  };
  std::vector<HostTensor> inputs = {randomTensor({batch, in}, 1.0), randomTensor({in, hidden}, 0.4),
                                    randomTensor({hidden}, 0.1), randomTensor({hidden, out}, 0.4),
                                    randomTensor({out}, 0.1)};
  HostTensor p32 = interpretText(g.moduleText(), "mlp_softmax", inputs)[0];
  InterpreterOptions f64;
  f64.floatOverride = DType::F64;
  HostTensor p64 = interpretText(g.moduleText(), "mlp_softmax", inputs, f64)[0];

  std::printf("== interpreter output (f32), softmax rows ==\n");
  double maxRel = 0;
  for (int64_t i = 0; i < batch; ++i) {
    double rowSum = 0;
    for (int64_t j = 0; j < out; ++j) {
      double v = p32.f[i * out + j], r = p64.f[i * out + j];
      rowSum += v;
      maxRel = std::max(maxRel, std::fabs(v - r) / std::fabs(r));
      std::printf(" %10.6f", v);
    }
    std::printf("   (row sum %.6f)\n", rowSum);
  }
  std::printf("max relative difference f32 vs f64 evaluation: %.3g\n", maxRel);
  if (!(maxRel < 1e-5)) {
    std::printf("FAILED: f32 result drifts from the f64 reference\n");
    return 1;
  }
  std::printf("OK: f32 interpreter matches the f64 reference\n");
  return 0;
}
