#include "Recurrent.h"

#include <cmath>

namespace rfuse::interp {

namespace {

double sigmoid(double a) { return 1 / (1 + std::exp(-a)); }

struct Dims {
  int64_t B, T, I, H, G;
  int64_t A; ///< activations a step keeps per batch row (GRU: 4 H, else G H)
};

Dims dimsOf(RecurrentMode cell, const std::vector<HostTensor> &in) {
  int64_t H = in[1].shape[1], G = cell == RecurrentMode::lstm ? 4 : cell == RecurrentMode::gru ? 3 : 1;
  return {in[0].shape[1], in[0].shape[0], in[0].shape[2], H, G, // (x is [T, B, I])
          cell == RecurrentMode::gru ? 4 * H : G * H};
}

// out[g] = b[g] + sum_k w[g, k] v[k] for the G H rows of w.
void affine(const HostTensor &w, const HostTensor &b, const double *v, int64_t k, int64_t rows, double *out) {
  for (int64_t g = 0; g < rows; ++g) {
    double s = b.f[g];
    const double *wr = &w.f[g * k];
    for (int64_t j = 0; j < k; ++j)
      s += wr[j] * v[j];
    out[g] = s;
  }
}

// One batch row's forward over every step, keeping what the backward pass needs: the states h_0
// .. h_T (and c_0 .. c_T) and, with `keep`, each step's activations (LSTM: i f g o; GRU: r z n and
// the hidden part of n's pre-activation; RNN: the new state).
struct Trace {
  std::vector<double> h, c, act;
};

Trace run(RecurrentMode cell, const Dims &d, const std::vector<HostTensor> &in, int64_t b, bool keep) {
  const HostTensor &x = in[0], &h0 = in[1];
  bool lstm = cell == RecurrentMode::lstm;
  const HostTensor &wih = in[lstm ? 3 : 2], &whh = in[lstm ? 4 : 3], &bih = in[lstm ? 5 : 4], &bhh = in[lstm ? 6 : 5];
  int64_t H = d.H, GH = d.G * H;
  Trace t;
  std::vector<double> h(&h0.f[b * H], &h0.f[(b + 1) * H]), c(H, 0.0), gx(GH), gh(GH);
  if (lstm)
    c.assign(&in[2].f[b * H], &in[2].f[(b + 1) * H]);
  // t.h (t.c): the states h_0 .. h_T, the state after step s at index s + 1.
  t.h.reserve((d.T + 1) * H);
  t.h.insert(t.h.end(), h.begin(), h.end());
  if (lstm)
    t.c.insert(t.c.end(), c.begin(), c.end());
  if (keep)
    t.act.reserve(d.T * d.A);
  for (int64_t s = 0; s < d.T; ++s) {
    affine(wih, bih, &x.f[(s * d.B + b) * d.I], d.I, GH, gx.data());
    affine(whh, bhh, h.data(), H, GH, gh.data());
    for (int64_t j = 0; j < H; ++j) {
      switch (cell) {
      case RecurrentMode::lstm: {
        double i = sigmoid(gx[j] + gh[j]), f = sigmoid(gx[H + j] + gh[H + j]), g = std::tanh(gx[2 * H + j] + gh[2 * H + j]),
               o = sigmoid(gx[3 * H + j] + gh[3 * H + j]);
        c[j] = f * c[j] + i * g;
        h[j] = o * std::tanh(c[j]);
        if (keep)
          t.act.insert(t.act.end(), {i, f, g, o});
        break;
      }
      case RecurrentMode::gru: {
        double r = sigmoid(gx[j] + gh[j]), z = sigmoid(gx[H + j] + gh[H + j]),
               n = std::tanh(gx[2 * H + j] + r * gh[2 * H + j]);
        if (keep)
          t.act.insert(t.act.end(), {r, z, n, gh[2 * H + j]});
        h[j] = (1 - z) * n + z * h[j];
        break;
      }
      case RecurrentMode::rnn_tanh: h[j] = std::tanh(gx[j] + gh[j]); break;
      case RecurrentMode::rnn_relu: h[j] = std::max(gx[j] + gh[j], 0.0); break;
      }
    }
    if (keep && (cell == RecurrentMode::rnn_tanh || cell == RecurrentMode::rnn_relu))
      t.act.insert(t.act.end(), h.begin(), h.end());
    t.h.insert(t.h.end(), h.begin(), h.end());
    if (lstm)
      t.c.insert(t.c.end(), c.begin(), c.end());
  }
  return t;
}

} // namespace

std::vector<HostTensor> recurrentForward(RecurrentMode cell, const std::vector<HostTensor> &in) {
  Dims d = dimsOf(cell, in);
  DType dt = in[0].dtype;
  HostTensor y(dt, {d.T, d.B, d.H}), hn(dt, {d.B, d.H}), cn(dt, {d.B, d.H});
  for (int64_t b = 0; b < d.B; ++b) {
    Trace t = run(cell, d, in, b, false);
    for (int64_t s = 0; s < d.T; ++s)
      for (int64_t j = 0; j < d.H; ++j)
        y.set((s * d.B + b) * d.H + j, t.h[(s + 1) * d.H + j]);
    for (int64_t j = 0; j < d.H; ++j) {
      hn.set(b * d.H + j, t.h[d.T * d.H + j]);
      if (cell == RecurrentMode::lstm)
        cn.set(b * d.H + j, t.c[d.T * d.H + j]);
    }
  }
  if (cell == RecurrentMode::lstm)
    return {y, hn, cn};
  return {y, hn};
}

std::vector<HostTensor> recurrentBackward(RecurrentMode cell, const std::vector<HostTensor> &in) {
  Dims d = dimsOf(cell, in);
  bool lstm = cell == RecurrentMode::lstm;
  size_t w0 = lstm ? 3 : 2, g0 = w0 + 4;
  const HostTensor &x = in[0], &wih = in[w0], &whh = in[w0 + 1];
  const HostTensor &gy = in[g0], &ghn = in[g0 + 1];
  int64_t H = d.H, GH = d.G * H;
  std::vector<double> dwih(GH * d.I, 0.0), dwhh(GH * H, 0.0), dbih(GH, 0.0), dbhh(GH, 0.0);
  HostTensor dx(x.dtype, x.shape), dh0(x.dtype, {d.B, H}), dc0(x.dtype, {d.B, H});
  std::vector<double> dh(H), dc(H), dgx(GH), dgh(GH), dprev(H);
  for (int64_t b = 0; b < d.B; ++b) {
    Trace t = run(cell, d, in, b, true);
    for (int64_t j = 0; j < H; ++j) {
      dh[j] = ghn.f[b * H + j];
      dc[j] = lstm ? in[g0 + 2].f[b * H + j] : 0.0;
    }
    for (int64_t s = d.T - 1; s >= 0; --s) {
      const double *hprev = &t.h[s * H], *act = &t.act[s * d.A];
      for (int64_t j = 0; j < H; ++j) {
        double g = dh[j] + gy.f[(s * d.B + b) * H + j];
        switch (cell) {
        case RecurrentMode::lstm: {
          double i = act[4 * j], f = act[4 * j + 1], gg = act[4 * j + 2], o = act[4 * j + 3];
          double c = t.c[(s + 1) * H + j], cprev = t.c[s * H + j];
          double tc = std::tanh(c), dcs = dc[j] + g * o * (1 - tc * tc);
          dgx[j] = dcs * gg * i * (1 - i);
          dgx[H + j] = dcs * cprev * f * (1 - f);
          dgx[2 * H + j] = dcs * i * (1 - gg * gg);
          dgx[3 * H + j] = g * tc * o * (1 - o);
          dc[j] = dcs * f;
          dprev[j] = 0;
          break;
        }
        case RecurrentMode::gru: {
          double r = act[4 * j], z = act[4 * j + 1], n = act[4 * j + 2], hn = act[4 * j + 3];
          double dn = g * (1 - z) * (1 - n * n);
          dgx[j] = dn * hn * r * (1 - r);
          dgx[H + j] = g * (hprev[j] - n) * z * (1 - z);
          dgx[2 * H + j] = dn;
          dgh[j] = dgx[j];
          dgh[H + j] = dgx[H + j];
          dgh[2 * H + j] = dn * r;
          dprev[j] = g * z;
          break;
        }
        case RecurrentMode::rnn_tanh: {
          double hn = act[j];
          dgx[j] = g * (1 - hn * hn);
          dprev[j] = 0;
          break;
        }
        case RecurrentMode::rnn_relu:
          dgx[j] = act[j] > 0 ? g : 0.0;
          dprev[j] = 0;
          break;
        }
      }
      if (cell != RecurrentMode::gru)
        dgh = dgx;
      const double *xs = &x.f[(s * d.B + b) * d.I];
      for (int64_t r = 0; r < GH; ++r) {
        dbih[r] += dgx[r];
        dbhh[r] += dgh[r];
        for (int64_t k = 0; k < d.I; ++k)
          dwih[r * d.I + k] += dgx[r] * xs[k];
        for (int64_t k = 0; k < H; ++k)
          dwhh[r * H + k] += dgh[r] * hprev[k];
      }
      for (int64_t k = 0; k < d.I; ++k) {
        double acc = 0;
        for (int64_t r = 0; r < GH; ++r)
          acc += dgx[r] * wih.f[r * d.I + k];
        dx.set((s * d.B + b) * d.I + k, acc);
      }
      for (int64_t k = 0; k < H; ++k) {
        double acc = dprev[k];
        for (int64_t r = 0; r < GH; ++r)
          acc += dgh[r] * whh.f[r * H + k];
        dh[k] = acc;
      }
    }
    for (int64_t j = 0; j < H; ++j) {
      dh0.set(b * H + j, dh[j]);
      dc0.set(b * H + j, dc[j]);
    }
  }
  auto fill = [&](const HostTensor &like, const std::vector<double> &v) {
    HostTensor t(like.dtype, like.shape);
    for (size_t k = 0; k < v.size(); ++k)
      t.set((int64_t)k, v[k]);
    return t;
  };
  std::vector<HostTensor> out = {dx, dh0};
  if (lstm)
    out.push_back(dc0);
  out.push_back(fill(wih, dwih));
  out.push_back(fill(whh, dwhh));
  out.push_back(fill(in[w0 + 2], dbih));
  out.push_back(fill(in[w0 + 3], dbhh));
  return out;
}

} // namespace rfuse::interp
