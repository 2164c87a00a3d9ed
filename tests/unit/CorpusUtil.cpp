#include "CorpusUtil.h"
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"

#include <functional>

namespace rfuse::test {

namespace {
CorpusGraph make(const std::string &name, const std::vector<std::vector<int64_t>> &shapes, DType dt,
                 const std::function<std::vector<TracedValue>(GraphBuilder &, std::vector<TracedValue> &)> &body,
                 uint64_t seed) {
  GraphBuilder g("main");
  std::vector<TracedValue> in;
  std::mt19937_64 rng(seed);
  CorpusGraph c;
  c.name = name;
  for (auto &s : shapes) {
    in.push_back(g.input(s, dt));
    c.inputs.push_back(randomTensor(dt, s, rng, -1.5, 1.5));
  }
  g.finish(body(g, in));
  c.moduleText = g.moduleText();
  return c;
}

TracedValue layerNorm(GraphBuilder &g, TracedValue x, TracedValue gamma, TracedValue beta, int64_t dim) {
  DType dt = g.dtype(x);
  TracedValue xc = g.sub(x, g.reduceMean(x, {dim}, true));
  TracedValue var = g.reduceMean(g.mul(xc, xc), {dim}, true);
  TracedValue rstd = g.rsqrt(g.add(var, g.scalar(1e-5, dt)));
  return g.add(g.mul(g.mul(xc, rstd), gamma), beta);
}
} // namespace

std::vector<CorpusGraph> canonicalCorpus() {
  std::vector<CorpusGraph> out;
  uint64_t seed = 100;
  using V = std::vector<TracedValue>;
  for (DType dt : {DType::F32, DType::F64}) {
    std::string sfx = dt == DType::F32 ? "_f32" : "_f64";
    out.push_back(make("w1" + sfx, {{1000}, {1000}, {1000}}, dt, [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      return V{g.add(g.mul(g.relu(g.add(g.mul(v[0], v[1]), v[2])), g.sigmoid(v[0])),
                     g.mul(g.tanh(v[2]), g.scalar(0.5, d)))};
    }, seed++));
    out.push_back(make("w4" + sfx, {{32, 96}, {96}, {96}}, dt, [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      return V{g.add(g.mul(g.gelu(layerNorm(g, v[0], v[1], v[2], 1)), g.scalar(1.5, d)), v[0])};
    }, seed++));
    out.push_back(make("softmax_rows" + sfx, {{17, 33}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue e = g.exp(g.sub(v[0], g.reduceMax(v[0], {1}, true)));
      return V{g.div(e, g.reduceSum(e, {1}, true))};
    }, seed++));
    out.push_back(make("softmax_cols" + sfx, {{33, 17}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue e = g.exp(g.sub(v[0], g.reduceMax(v[0], {0}, true)));
      return V{g.div(e, g.reduceSum(e, {0}, true))};
    }, seed++));
    // A column softmax whose exp is read by three outputs, the first of which does not read it:
    // the CPU lowering writes exp(x) to output 1 in the sum's pass and reads it back after.
    out.push_back(make("softmax_cols_shared_exp" + sfx, {{33, 17}}, dt, [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      TracedValue e = g.exp(v[0]);
      return V{g.mul(v[0], g.scalar(3.0, d)), g.div(e, g.reduceSum(e, {0}, true)), g.mul(e, g.scalar(2.0, d))};
    }, seed++));
    // Powers: x^2, x^3, x^4 (products after canonicalization; in f64 x^3, x^4 stay pow) and a
    // fractional power of a positive base.
    out.push_back(make("pow_small_integers" + sfx, {{257}}, dt, [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      TracedValue pos = g.add(g.abs(v[0]), g.scalar(0.5, d));
      return V{g.pow(v[0], g.scalar(2.0, d)), g.pow(v[0], g.scalar(3.0, d)), g.pow(v[0], g.scalar(4.0, d)),
               g.pow(pos, g.scalar(2.5, d))};
    }, seed++));
    // A layer norm + GELU and a softmax over the rows of R matrices (tensor dim 0) with enough
    // columns for the GPU's register-cached column tiles (and a tile count over the SMs' waves).
    out.push_back(make("layernorm_cols_cached" + sfx, {{256, 4096}, {256}, {256}}, dt, [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      TracedValue xc = g.sub(v[0], g.reduceMean(v[0], {0}, true));
      TracedValue var = g.reduceMean(g.mul(xc, xc), {0}, true);
      TracedValue y = g.div(xc, g.sqrt(g.add(var, g.scalar(1e-5, d))));
      TracedValue gamma = g.broadcastInDim(v[1], {256, 4096}, {0}), beta = g.broadcastInDim(v[2], {256, 4096}, {0});
      // (No residual here: gelu(y) * 1.5 + x cancels to ~1e-3 at some elements, where the sums'
      // order alone moves f64 results by 1e-12 relative.)
      return V{g.mul(g.gelu(g.add(g.mul(y, gamma), beta)), g.scalar(1.5, d))};
    }, seed++));
    // A layer norm of a sum over R's layout: two inputs of 2048 reduced rows, which on sm_90
    // split over a cluster of 8 blocks (256 rows each).
    out.push_back(make("layernorm_cols_cluster" + sfx, {{2048, 1024}, {2048, 1024}, {2048}, {2048}}, dt,
                       [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      TracedValue z = g.add(v[0], v[1]);
      TracedValue zc = g.sub(z, g.reduceMean(z, {0}, true));
      TracedValue var = g.reduceMean(g.mul(zc, zc), {0}, true);
      TracedValue y = g.div(zc, g.sqrt(g.add(var, g.scalar(1e-5, d))));
      TracedValue gamma = g.broadcastInDim(v[2], {2048, 1024}, {0}), beta = g.broadcastInDim(v[3], {2048, 1024}, {0});
      // (+ 4 keeps the outputs away from 0, where the sums' order would show at 1e-12 relative)
      return V{g.add(g.mul(g.gelu(g.add(g.mul(y, gamma), beta)), g.scalar(1.5, d)), g.scalar(4.0, d))};
    }, seed++));
    // A batch norm's gradient over NHWC channels (ResNet-18's last stage: 256 x 2 x 2 images, 256
    // channels): two chained channel sums, the second over values made from the first, and an
    // output read from both, and the second sum itself. Eight tiles of 32 channels: on sm_90 each
    // splits over a cluster of 8 blocks of 128 rows.
    out.push_back(make("batchnorm_grad_cols" + sfx, {{256, 2, 2, 256}, {256, 2, 2, 256}, {256}}, dt,
                       [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      TracedValue s1 = g.reduceSum(g.mul(v[0], v[1]), {0, 1, 2}, true);
      TracedValue scale = g.mul(g.broadcastInDim(v[2], {1, 1, 1, 256}, {3}), g.scalar(1.0 / 1024, d));
      TracedValue y = g.add(v[1], g.mul(g.mul(s1, scale), v[0]));
      TracedValue s2 = g.reduceSum(y, {0, 1, 2}, true);
      return V{g.add(y, g.mul(s2, g.scalar(-1.0 / 1024, d))), s2}; // (and a per-channel output)
    }, dt == DType::F32 ? 9001 : 9002)); // (a seed of its own: the graphs after it keep their inputs)
    out.push_back(make("softmax_cols_cached" + sfx, {{128, 8192}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue m = g.reduceMax(v[0], {0}, true), e = g.exp(g.sub(v[0], m));
      return V{g.div(e, g.reduceSum(e, {0}, true)), m}; // (and the per-column max as an output)
    }, seed++));
    out.push_back(make("colsums_sq" + sfx, {{7, 50}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.div(g.reduceSum(g.mul(v[0], v[0]), {1}), g.scalar(50.0, g.dtype(v[0]))),
               g.reduceMin(v[0], {0})};
    }, seed++));
    // An LSTM step as torch for R's nn_lstm traces it: the gates h U + x_t W + b, sliced four ways
    // (one matmul region whose epilogue reads the product, the step's input projection and the
    // bias through slices, over the [batch, hidden] state).
    out.push_back(make("lstm_step" + sfx, {{24, 16}, {16, 64}, {24, 3, 64}, {64}, {24, 16}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue xt = g.reshape(g.slice(v[2], {0, 1, 0}, {24, 2, 64}, {1, 1, 1}), {24, 64});
      TracedValue b = g.broadcastInDim(v[3], {24, 64}, {1});
      TracedValue gates = g.add(g.add(g.matmul(v[0], v[1]), xt), b);
      auto part = [&](int64_t k) { return g.slice(gates, {0, 16 * k}, {24, 16 * k + 16}, {1, 1}); };
      TracedValue c = g.add(g.mul(g.sigmoid(part(1)), v[4]), g.mul(g.sigmoid(part(0)), g.tanh(part(2))));
      return V{c, g.mul(g.sigmoid(part(3)), g.tanh(c))};
    }, seed++));
    out.push_back(make("mm_bias_relu" + sfx, {{24, 40}, {40, 16}, {16}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.relu(g.add(g.matmul(v[0], v[1]), v[2]))};
    }, seed++));
    out.push_back(make("mm_bias_scalar" + sfx, {{24, 40}, {40, 16}, {1}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.add(g.matmul(v[0], v[1]), v[2])}; // one value added to every element, not a bias[n]
    }, seed++));
    out.push_back(make("mm_bias_gelu_tanh" + sfx, {{24, 40}, {40, 16}, {16}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.gelu(g.add(g.matmul(v[0], v[1]), v[2]), true)};
    }, seed++));
    out.push_back(make("mm_residual" + sfx, {{16, 16}, {16, 16}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.add(g.matmul(v[0], v[1], false, true), v[0])};
    }, seed++));
    out.push_back(make("mm_gelu_erf_epilogue" + sfx, {{12, 20}, {20, 8}, {8}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.mul(g.gelu(g.add(g.matmul(v[0], v[1]), v[2])), g.scalar(2.0, g.dtype(v[0])))};
    }, seed++));
    out.push_back(make("bmm_transposed" + sfx, {{3, 10, 6}, {3, 5, 10}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.matmul(v[0], v[1], true, true)};
    }, seed++));
    out.push_back(make("transpose_chain" + sfx, {{5, 7}, {7, 5}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.add(g.mul(g.transpose(v[0], {1, 0}), g.scalar(2.0, g.dtype(v[0]))), v[1])};
    }, seed++));
    // Transposed reads of inputs whose innermost dim moves (attention's head split): x and w
    // through shared-memory tiles of dims 1 and 3 on the GPU (ragged: 50 and 45 are no multiples
    // of 32), v's (innermost dim to a dim of 7) read in place, y in order.
    out.push_back(make("transposes_tiled" + sfx, {{45, 3, 7, 50}, {7, 45, 3, 50}, {3, 50, 45, 7}, {3, 50, 7, 45}}, dt,
                       [](GraphBuilder &g, V &v) {
      TracedValue x = g.transpose(v[0], {1, 3, 2, 0}), w = g.transpose(v[1], {2, 3, 0, 1});
      TracedValue t = g.transpose(v[2], {0, 1, 3, 2});
      // (products, not sums: no cancellation for the CPU JIT's tanh to be compared across)
      return V{g.mul(g.mul(g.tanh(x), v[3]), g.mul(w, g.exp(t))), g.mul(x, v[3])};
    }, seed++));
    out.push_back(make("transpose_2d_tiled" + sfx, {{100, 70}, {70, 100}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.exp(g.sub(g.transpose(v[0], {1, 0}), v[1]))};
    }, seed++));
    // Indexing read through index maps, fused into the pointwise work that reads them.
    out.push_back(make("stencil_slices" + sfx, {{1000}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue mid = g.slice(v[0], {1}, {999}, {1}), left = g.slice(v[0], {0}, {998}, {1});
      TracedValue right = g.slice(v[0], {2}, {1000}, {1});
      TracedValue lap = g.add(g.sub(left, g.mul(mid, g.scalar(2.0, g.dtype(v[0])))), right);
      return V{g.add(mid, g.mul(lap, g.scalar(0.25, g.dtype(v[0])))), g.slice(v[0], {3}, {1000}, {7})};
    }, seed++));
    out.push_back(make("heat_step_boundaries" + sfx, {{300}, {299}}, dt, [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      TracedValue mid = g.slice(v[0], {1}, {299}, {1});
      TracedValue lap = g.add(g.sub(g.slice(v[0], {0}, {298}, {1}), g.mul(mid, g.scalar(2.0, d))),
                              g.slice(v[0], {2}, {300}, {1}));
      TracedValue inner = g.add(mid, g.mul(lap, g.scalar(0.2, d)));
      TracedValue next = g.concat({g.slice(v[0], {0}, {1}, {1}), inner, g.slice(v[0], {299}, {300}, {1})}, 0);
      // diff(x) with a leading 0: a pad of a computed value.
      TracedValue dx = g.sub(g.slice(v[1], {1}, {299}, {1}), g.slice(v[1], {0}, {298}, {1}));
      return V{g.mul(next, next), g.exp(g.pad(g.mul(dx, dx), {1}, {0}, {0}, 0.0))};
    }, seed++));
    out.push_back(make("scans" + sfx, {{5, 40}, {3, 7}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue small = g.add(g.mul(v[1], g.scalar(0.1, g.dtype(v[1]))), g.scalar(1.0, g.dtype(v[1])));
      return V{g.scan(v[0], 1, "sum"), g.scan(v[0], 0, "max"), g.scan(small, 1, "prod"), g.scan(v[1], 0, "min")};
    }, seed++));
    out.push_back(make("gathered_columns" + sfx, {{7, 50}, {7, 50}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue cols = g.add(g.gather(v[0], {3, 0, 0, 6}, 0), g.gather(v[0], {2, 2, 2, 2}, 0)); // (a splat)
      TracedValue rows = g.slice(v[1], {1, 0}, {5, 50}, {1, 1});
      return V{g.mul(g.tanh(cols), rows)};
    }, seed++));
    // Positions computed from the data (R's x[which.max(x)], lookup[k]): in range by construction.
    out.push_back(make("gathered_at_computed" + sfx, {{7, 50}, {5}}, dt, [](GraphBuilder &g, V &v) {
      DType t = g.dtype(v[1]);
      TracedValue pos = g.floor(g.mul(g.sigmoid(v[1]), g.scalar(49.99, t)));
      TracedValue picked = g.gatherAt(v[0], pos, 1);
      return V{g.add(g.exp(picked), g.gatherAt(g.reduceMax(v[0], {1}, false), g.floor(g.mul(g.sigmoid(v[1]), g.scalar(6.99, t))), 0))};
    }, seed++));
    out.push_back(make("reverse_pad_concat" + sfx, {{10}, {5}, {4, 3}, {4, 2}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue a = g.reverse(v[0], {0}), b = g.pad(v[1], {2}, {1}, {1}, 0.5);
      TracedValue wide = g.concat({v[2], g.reverse(v[3], {0, 1})}, 1);
      return V{g.tanh(g.concat({a, b, g.slice(v[0], {4}, {7}, {1})}, 0)), g.mul(wide, wide)};
    }, seed++));
    out.push_back(make("index_chains" + sfx, {{6, 9}, {9}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue t = g.slice(g.gather(g.transpose(v[0], {1, 0}), {5, 1, 2}, 1), {1, 0}, {9, 3}, {3, 1});
      TracedValue b = g.broadcastInDim(g.slice(v[1], {2}, {5}, {1}), {3, 3}, {1});
      return V{g.add(g.exp(t), b), g.pad(g.slice(v[1], {0}, {9}, {2}), {1}, {2}, {0}, -1.0)};
    }, seed++));
    out.push_back(make("cnn_block" + sfx, {{4, 3, 12, 12}, {8, 3, 3, 3}, {8}}, dt, [](GraphBuilder &g, V &v) {
      Conv2dParams c;
      c.padding = {1, 1, 1, 1};
      return V{g.maxPool2d(g.relu(g.conv2d(v[0], v[1], v[2], c)))};
    }, seed++));
    out.push_back(make("conv_nhwc_grouped" + sfx, {{2, 11, 10, 4}, {6, 3, 3, 2}}, dt, [](GraphBuilder &g, V &v) {
      Conv2dParams c;
      c.strides = {2, 2};
      c.dilation = {2, 1};
      c.groups = 2;
      c.layout = ImageLayout::NHWC;
      Pool2dParams p{{3, 3}, {1, 1}, {1, 1, 1, 1}, ImageLayout::NHWC, false};
      return V{g.avgPool2d(g.conv2d(v[0], v[1], TracedValue{}, c), p)};
    }, seed++));
    out.push_back(make("every_pointwise" + sfx, {{6, 9}, {6, 9}}, dt, [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      TracedValue a = v[0], b = v[1], one = g.scalar(1.0, d);
      TracedValue pos = g.add(g.abs(b), one);
      TracedValue t = g.add(g.add(g.neg(a), g.exp(a)), g.log(pos));
      t = g.add(t, g.add(g.sqrt(pos), g.rsqrt(pos)));
      t = g.add(t, g.add(g.tanh(a), g.sigmoid(b)));
      t = g.add(t, g.add(g.relu(a), g.gelu(b)));
      t = g.add(t, g.add(g.gelu(a, true), g.sin(a)));
      t = g.add(t, g.mul(g.cos(b), g.div(a, pos)));
      t = g.add(t, g.sub(g.pow(pos, a), g.maximum(a, b)));
      t = g.add(t, g.minimum(a, b));
      t = g.add(t, g.add(g.floor(a), g.erfc(b)));
      t = g.add(t, g.add(g.mul(g.roundEven(g.mul(a, g.scalar(3.0, d))), g.scalar(0.1, d)), g.tan(b)));
      t = g.add(t, g.add(g.atan(a), g.atan2(a, b)));
      t = g.add(t, g.sub(g.asin(g.tanh(a)), g.acos(g.tanh(b))));
      t = g.add(t, g.add(g.lgamma(pos), g.mul(g.tgamma(pos), g.normalQuantile(g.sigmoid(a)))));
      TracedValue m = g.logicalOr(g.logicalAnd(g.compare(ComparePredicate::Lt, a, b),
                                               g.compare(ComparePredicate::Ge, a, g.scalar(-0.5, d))),
                                  g.logicalNot(g.compare(ComparePredicate::Ne, a, b)));
      return V{g.select(m, t, g.neg(t)), m, g.cast(g.mul(a, g.scalar(3.0, d)), DType::I32)};
    }, seed++));
    // A softmax's backward over R's layout, as attention's gradient traces it: three inputs of
    // 256 reduced rows, whose 32-column tiles on sm_90 split over a cluster of 2 (48 KiB a block,
    // beside the kernel's static slots: past the 48 KiB a launch has without asking for more).
    out.push_back(make("softmax_grad_cols_cluster" + sfx, {{256, 1024}, {256, 1024}, {256, 1024}}, dt,
                       [](GraphBuilder &g, V &v) {
      DType d = g.dtype(v[0]);
      TracedValue den = g.add(g.abs(v[2]), g.scalar(1.0, d));
      TracedValue s = g.reduceMean(g.div(g.mul(v[0], v[1]), den), {0}, true);
      return V{g.sub(g.div(v[0], den), s)};
    }, 9000 + (dt == DType::F64))); // (its own seeds: the others' stay as they were)
    // Attention's scores: a batched product divided by a constant (sqrt of the head size); on
    // the GPU in f32 cuBLASLt's alpha, with no epilogue kernel.
    out.push_back(make("bmm_scaled" + sfx, {{3, 24, 40}, {3, 40, 16}}, dt, [](GraphBuilder &g, V &v) {
      return V{g.div(g.matmul(v[0], v[1]), g.scalar(8.0, g.dtype(v[0])))};
    }, 9002 + (dt == DType::F64)));
  }
  { // A dropout as R traces it: uniform draws (rfuse.random_uniform, a kernel of its own) from a
    // seed input, compared with p's threshold and scaled in the consumer's kernel; the draws
    // themselves are an output too.
    GraphBuilder g("main");
    TracedValue key = g.input({2}, DType::I32), x = g.input({129, 37}, DType::F32);
    TracedValue u = g.randomUniform(key, {129, 37});
    TracedValue keep = g.cast(g.compare(ComparePredicate::Ge, u, g.scalar(0.25, DType::F32)), DType::F32);
    g.finish({g.mul(x, g.mul(keep, g.scalar(1.0 / 0.75, DType::F32))), u});
    CorpusGraph c;
    c.name = "dropout";
    c.moduleText = g.moduleText();
    HostTensor k(DType::I32, {2});
    k.i = {20261207, -123456789};
    std::mt19937_64 rng(9004); // (its own seed: the others' stay as they were)
    c.inputs = {k, randomTensor(DType::F32, {129, 37}, rng, -1.5, 1.5)};
    out.push_back(c);
  }
  for (DType dt : {DType::F16, DType::BF16})
    out.push_back(make(std::string("half_chain_") + dtypeName(dt), {{64, 8}, {8}}, dt, [](GraphBuilder &g, V &v) {
      TracedValue e = g.exp(g.sub(v[0], g.reduceMax(v[0], {1}, true)));
      return V{g.add(g.div(e, g.reduceSum(e, {1}, true)), v[1])};
    }, seed++));
  return out;
}

} // namespace rfuse::test
