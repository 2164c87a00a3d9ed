// Reference model graphs (see Models.h).
#include "rfuse/Frontend/Models.h"

namespace rfuse {

TracedValue crossEntropy(GraphBuilder &g, TracedValue logits, TracedValue oneHot) {
  TracedValue m = g.reduceMax(logits, {1}, true);
  TracedValue z = g.sub(logits, m);
  TracedValue lse = g.log(g.reduceSum(g.exp(z), {1}, true));
  TracedValue picked = g.reduceSum(g.mul(z, oneHot), {1}, true);
  return g.reduceMean(g.sub(lse, picked), {0, 1});
}

namespace {
class ResNetBuilder {
public:
  ResNetBuilder(GraphBuilder &g, const ResNetConfig &c) : g(g), c(c), nhwc(c.layout == ImageLayout::NHWC) {}

  ModelGraph build() {
    // Parameters first (they are the leading function arguments), in the order used below.
    int64_t in = c.inChannels;
    conv("conv1", c.widths[0], in, 7);
    norm("bn1", c.widths[0]);
    in = c.widths[0];
    for (size_t s = 0; s < c.widths.size(); ++s)
      for (int64_t b = 0; b < c.blocks[s]; ++b) {
        std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b) + ".";
        int64_t w = c.widths[s];
        conv(p + "conv1", w, in, 3);
        norm(p + "bn1", w);
        conv(p + "conv2", w, w, 3);
        norm(p + "bn2", w);
        if (in != w || (s > 0 && b == 0)) {
          conv(p + "downsample.0", w, in, 1);
          norm(p + "downsample.1", w);
        }
        in = w;
      }
    param("fc.weight", {c.classes, in});
    param("fc.bias", {c.classes});
    graph.inputShapes.push_back(imageShape(c.batch, c.imageSize, c.imageSize, c.inChannels));
    graph.inputShapes.push_back({c.batch, c.classes});
    TracedValue images = g.input(graph.inputShapes[graph.inputShapes.size() - 2], c.dtype, "images");
    TracedValue labels = g.input(graph.inputShapes.back(), c.dtype, "labels");

    // The forward pass.
    size_t next = 0;
    auto take = [&]() { return params[next++]; };
    TracedValue w0 = take(), g0 = take(), b0 = take(); // (argument order is unspecified in C++)
    TracedValue h = g.relu(batchNorm(convolve(images, w0, 2, 3), g0, b0));
    Pool2dParams pool;
    pool.kernel = {3, 3};
    pool.strides = {2, 2};
    pool.padding = {1, 1, 1, 1};
    pool.layout = c.layout;
    h = g.maxPool2d(h, pool);
    in = c.widths[0];
    for (size_t s = 0; s < c.widths.size(); ++s)
      for (int64_t b = 0; b < c.blocks[s]; ++b) {
        int64_t w = c.widths[s], stride = (s > 0 && b == 0) ? 2 : 1;
        TracedValue w1 = take(), g1 = take(), b1 = take(), w2 = take(), g2 = take(), b2 = take();
        TracedValue y = g.relu(batchNorm(convolve(h, w1, stride, 1), g1, b1));
        y = batchNorm(convolve(y, w2, 1, 1), g2, b2);
        TracedValue shortcut = h;
        if (in != w || stride != 1) {
          TracedValue wd = take(), gd = take(), bd = take();
          shortcut = batchNorm(convolve(h, wd, stride, 0), gd, bd);
        }
        h = g.relu(g.add(y, shortcut));
        in = w;
      }
    TracedValue pooled = g.reduceMean(h, nhwc ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 3}); // [N, C]
    TracedValue fcw = take(), fcb = take();
    TracedValue logits = g.add(g.matmul(pooled, fcw, false, true), fcb);
    g.finish({crossEntropy(g, logits, labels)});
    return graph;
  }

private:
  GraphBuilder &g;
  const ResNetConfig &c;
  bool nhwc;
  ModelGraph graph;
  std::vector<TracedValue> params;

  std::vector<int64_t> imageShape(int64_t n, int64_t h, int64_t w, int64_t ch) const {
    return nhwc ? std::vector<int64_t>{n, h, w, ch} : std::vector<int64_t>{n, ch, h, w};
  }
  void param(const std::string &name, const std::vector<int64_t> &shape) {
    graph.parameterNames.push_back(name);
    graph.inputShapes.push_back(shape);
    params.push_back(g.input(shape, c.dtype, name));
  }
  void conv(const std::string &name, int64_t out, int64_t in, int64_t k) {
    param(name + ".weight", nhwc ? std::vector<int64_t>{out, k, k, in} : std::vector<int64_t>{out, in, k, k});
  }
  void norm(const std::string &name, int64_t ch) {
    param(name + ".weight", {ch});
    param(name + ".bias", {ch});
  }

  TracedValue convolve(TracedValue x, TracedValue w, int64_t stride, int64_t pad) {
    Conv2dParams p;
    p.strides = {stride, stride};
    p.padding = {pad, pad, pad, pad};
    p.layout = c.layout;
    return g.conv2d(x, w, TracedValue{}, p);
  }

  // Training-mode batch norm: statistics over all but the channel dim (biased variance).
  TracedValue batchNorm(TracedValue x, TracedValue gamma, TracedValue beta) {
    std::vector<int64_t> dims = nhwc ? std::vector<int64_t>{0, 1, 2} : std::vector<int64_t>{0, 2, 3};
    std::vector<int64_t> shape = g.shape(x);
    TracedValue xc = g.sub(x, g.reduceMean(x, dims, true));
    TracedValue var = g.reduceMean(g.mul(xc, xc), dims, true);
    TracedValue rstd = g.rsqrt(g.add(var, g.scalar(c.epsilon, c.dtype)));
    int64_t ch = nhwc ? 3 : 1;
    TracedValue scale = g.broadcastInDim(gamma, shape, {ch}), shift = g.broadcastInDim(beta, shape, {ch});
    return g.add(g.mul(g.mul(xc, rstd), scale), shift);
  }
};
} // namespace

ModelGraph buildResNetLoss(GraphBuilder &g, const ResNetConfig &config) {
  return ResNetBuilder(g, config).build();
}

} // namespace rfuse
