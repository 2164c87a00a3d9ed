#include "RandomGraph.h"
#include "TestUtil.h"

#include "rfuse/Frontend/GraphBuilder.h"

#include <random>

namespace rfuse::test {

RandomGraph generateRandomGraph(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return (int)(rng() % (uint64_t)n); };
  RandomGraph g;
  g.seed = seed;
  g.dtype = pick(2) ? DType::F32 : DType::F64;
  const DType dt = g.dtype;
  GraphBuilder b("main");

  // The base iteration space: [M, N] or [B, M, N].
  std::vector<int64_t> full = {1 + pick(7), 1 + pick(9)};
  if (pick(4) == 0)
    full.insert(full.begin(), 1 + pick(3));
  const int64_t rank = (int64_t)full.size();

  std::vector<TracedValue> pool;
  auto addInput = [&](std::vector<int64_t> shape) {
    TracedValue v = b.input(shape, dt);
    g.inputs.push_back(randomTensor(dt, shape, rng, -1.5, 1.5));
    pool.push_back(v);
    return v;
  };
  int numFull = 1 + pick(3);
  for (int i = 0; i < numFull; ++i)
    addInput(full);
  if (pick(2))
    addInput({full.back()}); // a row vector: broadcasts over leading dims
  if (pick(2)) {
    std::vector<int64_t> col(full.begin(), full.end() - 1);
    col.push_back(1);
    addInput(col); // a column: broadcasts over the last dim
  }

  auto any = [&]() { return pool[pick((int)pool.size())]; };
  auto recent = [&]() { return pool[pool.size() - 1 - pick(std::min<int>(3, (int)pool.size()))]; };
  auto one = [&]() { return b.scalar(1.0, dt); };
  auto rankOf = [&](TracedValue v) { return (int64_t)b.shape(v).size(); };

  int steps = 4 + pick(16);
  for (int s = 0; s < steps; ++s) {
    TracedValue x = pick(3) ? recent() : any();
    TracedValue out;
    switch (pick(15)) {
    case 0: out = b.exp(b.tanh(x)); break;
    case 1: out = b.log(b.add(b.abs(x), one())); break;
    case 2: out = pick(2) ? b.sigmoid(x) : b.gelu(x, pick(2)); break;
    case 3: out = pick(2) ? b.sin(x) : b.cos(x); break;
    case 4: out = b.relu(b.neg(x)); break;
    case 5: out = b.sqrt(b.add(b.mul(x, x), one())); break;
    case 6: case 7: { // binary with broadcasting
      TracedValue y = any();
      try {
        switch (pick(6)) {
        case 0: out = b.add(x, y); break;
        case 1: out = b.sub(x, y); break;
        case 2: out = b.mul(x, y); break;
        case 3: out = b.div(x, b.add(b.abs(y), one())); break;
        case 4: out = b.maximum(x, y); break;
        default: out = b.minimum(x, y); break;
        }
      } catch (const ShapeError &) {
        out = b.sub(x, b.scalar(0.5, dt)); // shapes did not broadcast: a scalar op instead
      }
      break;
    }
    case 8: { // compare + select
      TracedValue y = any();
      try {
        out = b.select(b.compare(pick(2) ? ComparePredicate::Lt : ComparePredicate::Ge, x, y), x, y);
      } catch (const ShapeError &) {
        out = b.mul(x, b.scalar(1.5, dt));
      }
      break;
    }
    case 9: case 10: { // a reduction, often broadcast back and combined (softmax/layernorm-like)
      int64_t r = rankOf(x);
      if (r == 0) {
        out = b.add(x, one());
        break;
      }
      std::vector<int64_t> dims = {(int64_t)pick((int)r)};
      if (r > 1 && pick(4) == 0)
        dims = {0, r - 1};
      bool keep = pick(2);
      switch (pick(4)) {
      case 0: out = b.reduceSum(x, dims, keep); break;
      case 1: out = b.reduceMean(x, dims, keep); break;
      case 2: out = b.reduceMax(x, dims, keep); break;
      default: out = b.reduceMin(x, dims, keep); break;
      }
      if (keep && pick(2))
        out = b.sub(x, out);
      break;
    }
    case 11: { // matmul with a fresh weight: [.., K] x [K, P]
      std::vector<int64_t> xs = b.shape(x);
      if (xs.size() < 2 || xs.size() > 3) {
        out = b.tanh(x);
        break;
      }
      int64_t k = xs.back(), p = 1 + pick(6);
      bool tb = pick(2);
      TracedValue w = addInput(tb ? std::vector<int64_t>{p, k} : std::vector<int64_t>{k, p});
      out = b.matmul(x, w, false, tb);
      if (pick(2))
        out = b.relu(b.add(out, addInput({p})));
      break;
    }
    case 12: { // transpose of the last two dims
      int64_t r = rankOf(x);
      if (r < 2) {
        out = b.neg(x);
        break;
      }
      std::vector<int64_t> perm;
      for (int64_t d = 0; d < r; ++d)
        perm.push_back(d);
      std::swap(perm[r - 1], perm[r - 2]);
      if (r == 3 && pick(2))
        perm = {2, 1, 0}; // R's layout to torch's
      out = b.transpose(x, perm);
      break;
    }
    case 13: { // a reshape (adjacent dims merged, a dim split in two, a unit dim added), and
               // sometimes back after an op: the views torch-style code puts between its ops
      std::vector<int64_t> xs = b.shape(x), to;
      int64_t r = (int64_t)xs.size();
      if (r >= 2 && pick(2)) {
        int64_t d = pick((int)r - 1);
        to.assign(xs.begin(), xs.begin() + d);
        to.push_back(xs[d] * xs[d + 1]);
        to.insert(to.end(), xs.begin() + d + 2, xs.end());
      } else {
        for (int64_t d = 0; d < r && r < 4 && to.empty(); ++d)
          for (int64_t f = 2; f < xs[d]; ++f)
            if (xs[d] % f == 0) {
              to.assign(xs.begin(), xs.begin() + d);
              to.push_back(f);
              to.push_back(xs[d] / f);
              to.insert(to.end(), xs.begin() + d + 1, xs.end());
              break;
            }
        if (to.empty() && r < 4) {
          to = xs;
          to.push_back(1);
        }
      }
      if (to.empty()) {
        out = b.neg(x);
        break;
      }
      out = b.reshape(x, to);
      if (pick(2))
        out = b.reshape(b.tanh(out), xs);
      break;
    }
    default: out = b.mul(b.add(x, b.scalar(0.25, dt)), b.scalar(0.75, dt)); break;
    }
    pool.push_back(out);
    ++g.numOps;
  }
  (void)rank;
  std::vector<TracedValue> outputs = {pool.back()};
  if (pick(2) && pool.size() > 3)
    outputs.push_back(pool[pool.size() - 2 - pick(2)]);
  b.finish(outputs);
  g.moduleText = b.moduleText();
  return g;
}

} // namespace rfuse::test
