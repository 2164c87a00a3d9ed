// Recurrent layers for tests: one layer as rfuse.recurrent, or written out step by step with
// products, slices and the cell's pointwise ops (an independent statement of the same cell), inside
// `main(x, h0, [c0], w_ih, w_hh, b_ih, b_hh, wy, wh, [wc]) -> (loss, y, h_n, [c_n])` where
// loss = sum(y wy) + sum(h_n wh) (+ sum(c_n wc)), so a gradient reaches every result.
#ifndef RFUSE_TESTS_RECURRENTUTIL_H
#define RFUSE_TESTS_RECURRENTUTIL_H

#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"

#include <string>
#include <vector>

namespace rfuse::test {

struct RecurrentCase {
  std::string mode; // lstm, gru, rnn_tanh, rnn_relu
  int64_t batch, steps, input, hidden;
  bool lstm() const { return mode == "lstm"; }
  int64_t gates() const { return mode == "lstm" ? 4 : mode == "gru" ? 3 : 1; }
  std::vector<std::vector<int64_t>> shapes() const {
    int64_t B = batch, GH = gates() * hidden;
    std::vector<std::vector<int64_t>> s = {{steps, B, input}, {B, hidden}}; // (time first)
    if (lstm())
      s.push_back({B, hidden});
    for (auto w : std::vector<std::vector<int64_t>>{{GH, input}, {GH, hidden}, {GH}, {GH}, {steps, B, hidden}, {B, hidden}})
      s.push_back(w);
    if (lstm())
      s.push_back({B, hidden});
    return s;
  }
};

inline std::vector<TracedValue> writtenOutLayer(GraphBuilder &g, const RecurrentCase &c, const std::vector<TracedValue> &v) {
  int64_t B = c.batch, H = c.hidden, I = c.input, GH = c.gates() * H;
  size_t w = c.lstm() ? 3 : 2;
  TracedValue x = v[0], h = v[1], cs = c.lstm() ? v[2] : TracedValue{};
  TracedValue wih = v[w], whh = v[w + 1], bih = g.broadcastTo(v[w + 2], {B, GH}), bhh = g.broadcastTo(v[w + 3], {B, GH});
  auto part = [&](TracedValue a, int64_t k) { return g.slice(a, {0, k * H}, {B, (k + 1) * H}, {1, 1}); };
  std::vector<TracedValue> ys;
  for (int64_t s = 0; s < c.steps; ++s) {
    TracedValue xs = g.reshape(g.slice(x, {s, 0, 0}, {s + 1, B, I}, {1, 1, 1}), {B, I});
    TracedValue gx = g.add(g.matmul(xs, wih, false, true), bih), gh = g.add(g.matmul(h, whh, false, true), bhh);
    if (c.mode == "lstm") {
      TracedValue a = g.add(gx, gh);
      TracedValue i = g.sigmoid(part(a, 0)), f = g.sigmoid(part(a, 1)), gg = g.tanh(part(a, 2)), o = g.sigmoid(part(a, 3));
      cs = g.add(g.mul(f, cs), g.mul(i, gg));
      h = g.mul(o, g.tanh(cs));
    } else if (c.mode == "gru") {
      TracedValue r = g.sigmoid(g.add(part(gx, 0), part(gh, 0))), z = g.sigmoid(g.add(part(gx, 1), part(gh, 1)));
      TracedValue n = g.tanh(g.add(part(gx, 2), g.mul(r, part(gh, 2))));
      h = g.add(g.mul(g.sub(g.scalar(1.0, g.dtype(z)), z), n), g.mul(z, h));
    } else {
      TracedValue a = g.add(gx, gh);
      h = c.mode == "rnn_tanh" ? g.tanh(a) : g.relu(a);
    }
    ys.push_back(g.reshape(h, {1, B, H}));
  }
  std::vector<TracedValue> out = {g.concat(ys, 0), h};
  if (c.lstm())
    out.push_back(cs);
  return out;
}

/// The module text of `c` in `dt`, the layer as rfuse.recurrent or written out.
inline std::string recurrentModule(const RecurrentCase &c, DType dt, bool writtenOut) {
  GraphBuilder g("main");
  std::vector<TracedValue> v;
  for (auto &s : c.shapes())
    v.push_back(g.input(s, dt));
  size_t w = c.lstm() ? 3 : 2;
  std::vector<TracedValue> r =
      writtenOut ? writtenOutLayer(g, c, v)
                 : g.recurrent(c.mode, v[0], v[1], c.lstm() ? v[2] : TracedValue{}, v[w], v[w + 1], v[w + 2], v[w + 3]);
  TracedValue loss = g.add(g.reduceSum(g.mul(r[0], v[w + 4]), {0, 1, 2}), g.reduceSum(g.mul(r[1], v[w + 5]), {0, 1}));
  if (c.lstm())
    loss = g.add(loss, g.reduceSum(g.mul(r[2], v[w + 6]), {0, 1}));
  std::vector<TracedValue> outs = {loss};
  outs.insert(outs.end(), r.begin(), r.end());
  g.finish(outs);
  return g.moduleText();
}

inline std::vector<HostTensor> recurrentInputs(const RecurrentCase &c, DType dt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> in;
  for (auto &s : c.shapes())
    in.push_back(randomTensor(dt, s, rng, -0.8, 0.8));
  return in;
}

inline std::vector<RecurrentCase> recurrentCases() {
  return {{"lstm", 3, 4, 5, 6}, {"gru", 3, 4, 5, 6}, {"rnn_tanh", 2, 5, 3, 4}, {"rnn_relu", 2, 5, 3, 4}};
}

} // namespace rfuse::test

#endif
