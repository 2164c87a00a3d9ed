#include "rfuse/Codegen/LibraryCalls.h"

#include <sstream>

namespace rfuse::codegen {

double LibraryCall::flops() const {
  switch (kind) {
  case Kind::Matmul:
    return 2.0 * matmul.batch * matmul.m * matmul.n * matmul.k;
  case Kind::Conv: { // every direction does the forward's multiply-adds
    const ConvGeometry &c = conv.geometry;
    return 2.0 * c.n * c.o * c.oh * c.ow * (c.c / c.groups) * c.kh * c.kw;
  }
  case Kind::Pool:
    return 0;
  case Kind::Recurrent: { // the two products of every step; the gradient does them twice more
    const RecurrentCall &r = recurrent;
    double forward = 2.0 * r.batch * r.steps * r.gates() * r.hidden * (r.inputSize + r.hidden);
    return r.backward ? 3 * forward : forward;
  }
  }
  return 0;
}

size_t LibraryCall::productBytes() const {
  switch (kind) {
  case Kind::Matmul:
    return (size_t)(matmul.batch * matmul.m * matmul.n) * dtypeSize(matmul.resultDtype());
  case Kind::Conv: {
    const ConvGeometry &c = conv.geometry;
    int64_t n = c.direction == ConvDirection::Forward         ? c.n * c.o * c.oh * c.ow
                : c.direction == ConvDirection::BackwardInput ? c.n * c.c * c.h * c.w
                                                              : c.o * (c.c / c.groups) * c.kh * c.kw;
    return (size_t)n * dtypeSize(conv.dtype);
  }
  case Kind::Pool: {
    const PoolGeometry &p = pool.geometry;
    int64_t n = p.backward ? p.n * p.c * p.h * p.w : p.n * p.c * p.oh * p.ow;
    return (size_t)n * dtypeSize(pool.dtype);
  }
  case Kind::Recurrent: {
    const RecurrentCall &r = recurrent;
    return (size_t)(r.batch * r.steps * (r.backward ? r.inputSize : r.hidden)) * dtypeSize(r.dtype);
  }
  }
  return 0;
}

std::string LibraryCall::describe() const {
  std::ostringstream os;
  switch (kind) {
  case Kind::Matmul: {
    const MatmulCall &m = matmul;
    os << "matmul " << m.batch << "x" << m.m << "x" << m.n << "x" << m.k << " " << dtypeName(m.dtype)
       << (m.transposeLhsFirst ? " (A transposed first)" : "") << (m.transposeA ? " tA" : "")
       << (m.transposeB ? " tB" : "") << (m.f32Result ? " -> f32" : "");
    if (m.alpha != 1)
      os << " alpha=" << m.alpha;
    if (m.biasInput >= 0)
      os << " + bias";
    if (m.residualInput >= 0)
      os << " + residual";
    if (m.activation == Activation::Relu)
      os << ", relu";
    else if (m.activation == Activation::GeluTanh)
      os << ", gelu(tanh)";
    break;
  }
  case Kind::Conv: {
    const ConvGeometry &g = conv.geometry;
    os << (g.direction == ConvDirection::Forward         ? "conv forward "
           : g.direction == ConvDirection::BackwardInput ? "conv backward-input "
                                                         : "conv backward-filter ")
       << g.n << "x" << g.c << "x" << g.h << "x" << g.w << " -> " << g.o << " k" << g.kh << "x" << g.kw
       << " s" << g.strideH << " g" << g.groups << (g.nhwc ? " nhwc " : " nchw ") << dtypeName(conv.dtype)
       << (conv.biasIndex >= 0 ? " + bias" : "");
    break;
  }
  case Kind::Pool: {
    const PoolGeometry &p = pool.geometry;
    os << (p.isMax ? "max" : "avg") << " pool" << (p.backward ? " backward " : " ") << p.n << "x" << p.c << "x"
       << p.h << "x" << p.w << " k" << p.kh << "x" << p.kw << " s" << p.strideH << " " << dtypeName(pool.dtype);
    break;
  }
  case Kind::Recurrent: {
    const RecurrentCall &r = recurrent;
    static const char *cells[] = {"lstm", "gru", "rnn tanh", "rnn relu"};
    os << cells[(int)r.cell] << (r.backward ? " backward " : " ") << r.batch << "x" << r.steps << "x" << r.inputSize
       << " hidden " << r.hidden << " " << dtypeName(r.dtype);
    break;
  }
  }
  return os.str();
}

} // namespace rfuse::codegen
