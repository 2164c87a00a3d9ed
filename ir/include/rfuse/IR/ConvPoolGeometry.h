// The index spaces of convolution and pooling (ConvGeometry, PoolGeometry) as plain C++: the
// execution plan's library calls hold them, and the ahead-of-time runtime reads them without
// MLIR. Geometry.h reads them off the ops.
#ifndef RFUSE_IR_CONVPOOLGEOMETRY_H
#define RFUSE_IR_CONVPOOLGEOMETRY_H

#include "rfuse/IR/ScalarOps.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace rfuse {

/// Which quantity a convolution op computes: the forward output, or the gradient of the
/// forward input or filter.
enum class ConvDirection { Forward, BackwardInput, BackwardFilter };

struct ConvGeometry {
  ConvDirection direction = ConvDirection::Forward;
  bool nhwc = false;
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t strideH = 1, strideW = 1, padTop = 0, padBottom = 0, padLeft = 0, padRight = 0;
  int64_t dilationH = 1, dilationW = 1, groups = 1;

  /// Flat offsets of an element of the input [N,C,H,W], filter [O,C/G,KH,KW] and output
  /// [N,O,OH,OW] (or their NHWC orders).
  int64_t inputAt(int64_t n_, int64_t ch, int64_t y, int64_t x) const {
    return nhwc ? ((n_ * h + y) * w + x) * c + ch : ((n_ * c + ch) * h + y) * w + x;
  }
  int64_t filterAt(int64_t o_, int64_t ci, int64_t ky, int64_t kx) const {
    return nhwc ? ((o_ * kh + ky) * kw + kx) * (c / groups) + ci : ((o_ * (c / groups) + ci) * kh + ky) * kw + kx;
  }
  int64_t outputAt(int64_t n_, int64_t o_, int64_t y, int64_t x) const {
    return nhwc ? ((n_ * oh + y) * ow + x) * o + o_ : ((n_ * o + o_) * oh + y) * ow + x;
  }

  /// Calls f(inputOffset, filterOffset, outputOffset) for every multiply of the forward
  /// convolution (taps in the padding skipped): each direction is a different accumulation over
  /// the same taps.
  template <class F> void forEachTap(F &&f) const {
    int64_t cg = c / groups, og = o / groups;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x) {
            int64_t out = outputAt(b, oc, y, x), g = oc / og;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t ky = 0; ky < kh; ++ky) {
                int64_t iy = y * strideH - padTop + ky * dilationH;
                if (iy < 0 || iy >= h)
                  continue;
                for (int64_t kx = 0; kx < kw; ++kx) {
                  int64_t ix = x * strideW - padLeft + kx * dilationW;
                  if (ix >= 0 && ix < w)
                    f(inputAt(b, g * cg + ci, iy, ix), filterAt(oc, ci, ky, kx), out);
                }
              }
          }
  }
};

struct PoolGeometry {
  bool nhwc = false, isMax = true, countIncludePad = true, backward = false;
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 0, kw = 0, padTop = 0, padBottom = 0, padLeft = 0, padRight = 0, strideH = 1, strideW = 1;

  int64_t inputAt(int64_t n_, int64_t ch, int64_t y, int64_t x) const {
    return nhwc ? ((n_ * h + y) * w + x) * c + ch : ((n_ * c + ch) * h + y) * w + x;
  }
  int64_t outputAt(int64_t n_, int64_t ch, int64_t y, int64_t x) const {
    return nhwc ? ((n_ * oh + y) * ow + x) * c + ch : ((n_ * c + ch) * oh + y) * ow + x;
  }
  /// Calls f(outputOffset, inputOffsets) per window, with the offsets of the window's elements
  /// inside the input (padding skipped) in row-major window order.
  template <class F> void forEachWindow(F &&f) const {
    std::vector<int64_t> taps;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x) {
            taps.clear();
            int64_t y0 = y * strideH - padTop, x0 = x * strideW - padLeft;
            for (int64_t iy = y0; iy < y0 + kh; ++iy)
              for (int64_t ix = x0; ix < x0 + kw; ++ix)
                if (iy >= 0 && iy < h && ix >= 0 && ix < w)
                  taps.push_back(inputAt(b, ch, iy, ix));
            f(outputAt(b, ch, y, x), (const std::vector<int64_t> &)taps);
          }
  }

  /// The op's result, accumulated in Acc: `operand(k, offset)` reads element `offset` of operand
  /// k (forward: input; max backward: input, output, grad_output; avg backward: grad_output).
  /// Max propagates NaN; a max window's gradient goes to its first maximum (PyTorch's rule); an
  /// average window's is spread over the window (the kernel size, or the elements inside the
  /// input without count_include_pad). The interpreter and the CPU backend both run this.
  template <class Acc, class Operand> void run(Operand operand, std::vector<Acc> &result) const {
    std::fill(result.begin(), result.end(), Acc(0));
    forEachWindow([&](int64_t yi, const std::vector<int64_t> &taps) {
      Acc divisor = countIncludePad ? Acc(kh * kw) : Acc(taps.size());
      if (!backward) {
        Acc v = isMax ? -std::numeric_limits<Acc>::infinity() : Acc(0);
        for (int64_t t : taps)
          v = isMax ? scalar::rf_max(v, (Acc)operand(0, t)) : v + (Acc)operand(0, t);
        result[yi] = isMax ? v : v / divisor;
      } else if (isMax) {
        double y = operand(1, yi);
        for (int64_t t : taps)
          if (operand(0, t) == y || std::isnan(y)) {
            result[t] += (Acc)operand(2, yi);
            break;
          }
      } else {
        for (int64_t t : taps)
          result[t] += (Acc)operand(0, yi) / divisor;
      }
    });
  }
};

} // namespace rfuse

#endif
