// Rcpp glue over rfuse's MLIR-free C++ API (GraphBuilder, Engine). Every entry point converts
// rfuse's C++ exceptions into classed R conditions (glue.h's fail()). No C++ exception ever
// crosses into R unconverted.
#include "glue.h"

#include "rfuse/Frontend/CallKey.h"
#include "rfuse/Frontend/GraphBuilder.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Interpreter.h"
#include "rfuse/Runtime/Options.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

using namespace Rcpp;
using rfuse::GraphBuilder;
using rfuse::TracedValue;

using rfuse::r::fail;
using rfuse::r::guarded;
using rfuse::r::builder;
using rfuse::r::dtypeOf;
using rfuse::r::toShape;
using rfuse::r::tv;

// [[Rcpp::export(.rf_builder_new, rng = false)]]
SEXP rf_builder_new(std::string entry) {
  return guarded([&] { return XPtr<GraphBuilder>(new GraphBuilder(entry), true); });
}

// [[Rcpp::export(.rf_b_input, rng = false)]]
int rf_b_input(SEXP b, IntegerVector shape, std::string dtype, std::string name) {
  return guarded([&] { return builder(b).input(toShape(shape), dtypeOf(dtype), name).id; });
}

// [[Rcpp::export(.rf_b_constant, rng = false)]]
int rf_b_constant(SEXP b, NumericVector values, IntegerVector shape, std::string dtype) {
  return guarded([&] {
    return builder(b)
        .constant(std::vector<double>(values.begin(), values.end()), toShape(shape),
                  dtypeOf(dtype))
        .id;
  });
}

// [[Rcpp::export(.rf_b_unary, rng = false)]]
int rf_b_unary(SEXP b, std::string op, int x) {
  return guarded([&] {
    GraphBuilder &g = builder(b);
    TracedValue v = tv(x);
    if (op == "neg") return g.neg(v).id;
    if (op == "abs") return g.abs(v).id;
    if (op == "exp") return g.exp(v).id;
    if (op == "log") return g.log(v).id;
    if (op == "sqrt") return g.sqrt(v).id;
    if (op == "rsqrt") return g.rsqrt(v).id;
    if (op == "tanh") return g.tanh(v).id;
    if (op == "sigmoid") return g.sigmoid(v).id;
    if (op == "stop_gradient") return g.stopGradient(v).id;
    if (op == "relu") return g.relu(v).id;
    if (op == "gelu") return g.gelu(v, false).id;
    if (op == "gelu_tanh") return g.gelu(v, true).id;
    if (op == "sin") return g.sin(v).id;
    if (op == "cos") return g.cos(v).id;
    if (op == "floor") return g.floor(v).id;
    if (op == "erfc") return g.erfc(v).id;
    if (op == "round_even") return g.roundEven(v).id;
    if (op == "tan") return g.tan(v).id;
    if (op == "atan") return g.atan(v).id;
    if (op == "asin") return g.asin(v).id;
    if (op == "acos") return g.acos(v).id;
    if (op == "tgamma") return g.tgamma(v).id;
    if (op == "lgamma") return g.lgamma(v).id;
    if (op == "qnorm") return g.normalQuantile(v).id;
    if (op == "digamma") return g.digammaFunction(v).id;
    if (op == "trigamma") return g.trigammaFunction(v).id;
    if (op == "not") return g.logicalNot(v).id;
    fail("rfuse_error", "unknown unary op '" + op + "'");
  });
}

namespace {
// The builder's binary op of R's name for it (.rf_b_binary's and .rf_b_pointwise_fast's).
TracedValue binaryOp(GraphBuilder &g, const std::string &op, TracedValue x, TracedValue y) {
  if (op == "add") return g.add(x, y);
  if (op == "sub") return g.sub(x, y);
  if (op == "mul") return g.mul(x, y);
  if (op == "div") return g.div(x, y);
  if (op == "pow") return g.pow(x, y);
  if (op == "atan2") return g.atan2(x, y);
  if (op == "max") return g.maximum(x, y);
  if (op == "min") return g.minimum(x, y);
  if (op == "and") return g.logicalAnd(x, y);
  if (op == "or") return g.logicalOr(x, y);
  using P = rfuse::ComparePredicate;
  if (op == "eq") return g.compare(P::Eq, x, y);
  if (op == "ne") return g.compare(P::Ne, x, y);
  if (op == "lt") return g.compare(P::Lt, x, y);
  if (op == "le") return g.compare(P::Le, x, y);
  if (op == "gt") return g.compare(P::Gt, x, y);
  if (op == "ge") return g.compare(P::Ge, x, y);
  fail("rfuse_error", "unknown binary op '" + op + "'");
}
} // namespace

// [[Rcpp::export(.rf_b_binary, rng = false)]]
int rf_b_binary(SEXP b, std::string op, int x, int y) {
  return guarded([&] { return binaryOp(builder(b), op, tv(x), tv(y)).id; });
}

// [[Rcpp::export(.rf_b_select, rng = false)]]
int rf_b_select(SEXP b, int cond, int x, int y) {
  return guarded([&] { return builder(b).select(tv(cond), tv(x), tv(y)).id; });
}

// [[Rcpp::export(.rf_b_cast, rng = false)]]
int rf_b_cast(SEXP b, int x, std::string dtype) {
  return guarded([&] { return builder(b).cast(tv(x), dtypeOf(dtype)).id; });
}

namespace {
// A traced value (R/sym.R's new_sym: a list of id, rdim, len, dtype, ib and maybe attrs, class
// rf_sym) with no integer bound and no attributes, in `dtype`: what rf_b_pointwise_fast takes.
struct PlainSym {
  int id;
  SEXP rdim, len;
  std::vector<int64_t> shape; // tshape(rdim, len)
};
bool plainSym(SEXP x, const char *dtype, PlainSym &s) {
  if (TYPEOF(x) != VECSXP || !Rf_inherits(x, "rf_sym"))
    return false;
  SEXP names = Rf_getAttrib(x, R_NamesSymbol), id = R_NilValue, dt = R_NilValue;
  if (TYPEOF(names) != STRSXP || XLENGTH(names) != XLENGTH(x))
    return false;
  s.rdim = s.len = R_NilValue;
  for (R_xlen_t i = 0; i < XLENGTH(x); ++i) {
    const char *n = CHAR(STRING_ELT(names, i));
    SEXP v = VECTOR_ELT(x, i);
    if (!std::strcmp(n, "id")) id = v;
    else if (!std::strcmp(n, "rdim")) s.rdim = v;
    else if (!std::strcmp(n, "len")) s.len = v;
    else if (!std::strcmp(n, "dtype")) dt = v;
    else if (v != R_NilValue) return false; // an integer bound (ib), attributes, anything else
  }
  if (TYPEOF(id) != INTSXP || XLENGTH(id) != 1 || TYPEOF(dt) != STRSXP || XLENGTH(dt) != 1 ||
      std::strcmp(CHAR(STRING_ELT(dt, 0)), dtype) || (TYPEOF(s.len) != INTSXP && TYPEOF(s.len) != REALSXP) ||
      XLENGTH(s.len) != 1 || (s.rdim != R_NilValue && TYPEOF(s.rdim) != INTSXP && TYPEOF(s.rdim) != REALSXP))
    return false;
  auto number = [](SEXP v, R_xlen_t i) { return TYPEOF(v) == INTSXP ? (INTEGER(v)[i] == NA_INTEGER ? -1.0 : INTEGER(v)[i]) : REAL(v)[i]; };
  s.id = INTEGER(id)[0];
  double len = number(s.len, 0);
  if (!(len >= 1))
    return false;
  s.shape.clear();
  if (s.rdim == R_NilValue)
    s.shape.push_back((int64_t)len);
  for (R_xlen_t i = s.rdim == R_NilValue ? -1 : XLENGTH(s.rdim) - 1; i >= 0; --i) {
    double d = number(s.rdim, i);
    if (!(d >= 1))
      return false;
    s.shape.push_back((int64_t)d);
  }
  return true;
}
// A plain double scalar (no attributes, not NA or NaN).
bool plainScalar(SEXP x, double &v) {
  if (TYPEOF(x) != REALSXP || XLENGTH(x) != 1 || ATTRIB(x) != R_NilValue || ISNAN(REAL(x)[0]))
    return false;
  v = REAL(x)[0];
  return true;
}
} // namespace

// The common case of R's arithmetic and pmax/pmin on traced values in one call: two traced
// values of one structure, or one and a double scalar, all in the trace's float dtype without
// integer bounds or attributes. Records what ops_sym and pminmax record for it (the scalar as a
// [1] constant, broadcast into the last dim or reshaped to one element's shape, then the op) and
// returns the result as new_sym makes it; NULL (nothing recorded) for every other case, which
// R's own rules then handle.
// [[Rcpp::export(.rf_b_pointwise_fast, rng = false)]]
SEXP rf_b_pointwise_fast(SEXP b, std::string op, SEXP e1, SEXP e2, std::string dtype) {
  return guarded([&]() -> SEXP {
    PlainSym x, y;
    double v = 0;
    bool sym1 = plainSym(e1, dtype.c_str(), x), sym2 = plainSym(e2, dtype.c_str(), y);
    const PlainSym *s = nullptr;
    if (sym1 && sym2) {
      // One structure: both vectors of one length, or both arrays of one dim (R's rules differ
      // from there on), with lengths of one type, as R's max() of them would give.
      bool same = (x.rdim == R_NilValue) == (y.rdim == R_NilValue) && x.shape == y.shape &&
                  TYPEOF(x.len) == TYPEOF(y.len);
      if (!same)
        return R_NilValue;
      s = &x;
    } else if (sym1 && plainScalar(e2, v)) {
      s = &x;
    } else if (sym2 && plainScalar(e1, v)) {
      s = &y;
    } else {
      return R_NilValue;
    }
    GraphBuilder &g = builder(b);
    rfuse::DType dt = dtypeOf(dtype);
    auto operand = [&](bool isSym, const PlainSym &p) -> TracedValue {
      if (isSym)
        return tv(p.id);
      // (as expand_to: equal shapes as they are, one element reshaped, more broadcast)
      TracedValue c = g.constant({v}, {1}, dt);
      if (s->shape == std::vector<int64_t>{1})
        return c;
      if (Rf_asReal(s->len) == 1)
        return g.reshape(c, s->shape);
      return g.broadcastInDim(c, s->shape, {(int64_t)s->shape.size() - 1});
    };
    // (ops whose result is in the operands' float dtype, as the result claims)
    if (op != "add" && op != "sub" && op != "mul" && op != "div" && op != "max" && op != "min")
      fail("rfuse_error", "the one-call path takes add, sub, mul, div, max or min, not '" + op + "'");
    TracedValue a = operand(sym1, x), c = operand(sym2, y);
    TracedValue r = binaryOp(g, op, a, c);
    SEXP out = PROTECT(Rf_allocVector(VECSXP, 5));
    SET_VECTOR_ELT(out, 0, Rf_ScalarInteger(r.id));
    SET_VECTOR_ELT(out, 1, s->rdim);
    SET_VECTOR_ELT(out, 2, s->len);
    SET_VECTOR_ELT(out, 3, Rf_mkString(dtype.c_str()));
    SEXP names = PROTECT(Rf_allocVector(STRSXP, 5));
    const char *fields[] = {"id", "rdim", "len", "dtype", "ib"};
    for (int i = 0; i < 5; ++i)
      SET_STRING_ELT(names, i, Rf_mkChar(fields[i]));
    Rf_setAttrib(out, R_NamesSymbol, names);
    Rf_setAttrib(out, R_ClassSymbol, Rf_mkString("rf_sym"));
    UNPROTECT(2);
    return out;
  });
}

// [[Rcpp::export(.rf_b_broadcast, rng = false)]]
int rf_b_broadcast(SEXP b, int x, IntegerVector shape, IntegerVector dims) {
  return guarded([&] { return builder(b).broadcastInDim(tv(x), toShape(shape), toShape(dims)).id; });
}

// [[Rcpp::export(.rf_b_transpose, rng = false)]]
int rf_b_transpose(SEXP b, int x, IntegerVector perm) {
  return guarded([&] { return builder(b).transpose(tv(x), toShape(perm)).id; });
}

// [[Rcpp::export(.rf_b_reshape, rng = false)]]
int rf_b_reshape(SEXP b, int x, IntegerVector shape) {
  return guarded([&] { return builder(b).reshape(tv(x), toShape(shape)).id; });
}

// [[Rcpp::export(.rf_b_slice, rng = false)]]
int rf_b_slice(SEXP b, int x, IntegerVector start, IntegerVector limit, IntegerVector strides) {
  return guarded([&] { return builder(b).slice(tv(x), toShape(start), toShape(limit), toShape(strides)).id; });
}

// [[Rcpp::export(.rf_b_reverse, rng = false)]]
int rf_b_reverse(SEXP b, int x, IntegerVector dims) {
  return guarded([&] { return builder(b).reverse(tv(x), toShape(dims)).id; });
}

// [[Rcpp::export(.rf_b_pad, rng = false)]]
int rf_b_pad(SEXP b, int x, IntegerVector low, IntegerVector high, IntegerVector interior, double value) {
  return guarded([&] { return builder(b).pad(tv(x), toShape(low), toShape(high), toShape(interior), value).id; });
}

// [[Rcpp::export(.rf_b_concat, rng = false)]]
int rf_b_concat(SEXP b, IntegerVector xs, int dim) {
  return guarded([&] {
    std::vector<TracedValue> vs;
    for (int x : xs)
      vs.push_back(tv(x));
    return builder(b).concat(vs, dim).id;
  });
}

// [[Rcpp::export(.rf_b_random_uniform, rng = false)]]
int rf_b_random_uniform(SEXP b, int seed, IntegerVector shape) {
  return guarded([&] { return builder(b).randomUniform(tv(seed), toShape(shape)).id; });
}

// [[Rcpp::export(.rf_b_scan, rng = false)]]
int rf_b_scan(SEXP b, int x, int dim, std::string kind) {
  return guarded([&] { return builder(b).scan(tv(x), dim, kind).id; });
}

// The sorted values' and the positions' ids.
// [[Rcpp::export(.rf_b_sort, rng = false)]]
IntegerVector rf_b_sort(SEXP b, int x, int dim, bool descending, bool nan_largest) {
  return guarded([&] {
    auto [values, indices] = builder(b).sort(tv(x), dim, descending, nan_largest);
    return IntegerVector::create(values.id, indices.id);
  });
}

// [[Rcpp::export(.rf_b_recurrent, rng = false)]]
IntegerVector rf_b_recurrent(SEXP b, std::string mode, int x, int h0, int c0, int w_ih, int w_hh, int b_ih, int b_hh) {
  return guarded([&] {
    std::vector<rfuse::TracedValue> r = builder(b).recurrent(mode, tv(x), tv(h0), c0 >= 0 ? tv(c0) : rfuse::TracedValue{},
                                                              tv(w_ih), tv(w_hh), tv(b_ih), tv(b_hh));
    IntegerVector ids(r.size());
    for (size_t k = 0; k < r.size(); ++k)
      ids[k] = r[k].id;
    return ids;
  });
}

// [[Rcpp::export(.rf_b_scatter_add, rng = false)]]
int rf_b_scatter_add(SEXP b, int x, int indices, int dim, int size) {
  return guarded([&] { return builder(b).scatterAdd(tv(x), tv(indices), dim, size).id; });
}

// [[Rcpp::export(.rf_b_take_along, rng = false)]]
int rf_b_take_along(SEXP b, int x, int indices, int dim) {
  return guarded([&] { return builder(b).takeAlong(tv(x), tv(indices), dim).id; });
}

// [[Rcpp::export(.rf_b_solve, rng = false)]]
int rf_b_solve(SEXP b, int a, int rhs, double tolerance) {
  return guarded([&] { return builder(b).solve(tv(a), tv(rhs), tolerance).id; });
}

// [[Rcpp::export(.rf_b_cholesky, rng = false)]]
int rf_b_cholesky(SEXP b, int a) {
  return guarded([&] { return builder(b).cholesky(tv(a)).id; });
}

// [[Rcpp::export(.rf_b_log_determinant, rng = false)]]
int rf_b_log_determinant(SEXP b, int a) {
  return guarded([&] { return builder(b).logDeterminant(tv(a)).id; });
}

// [[Rcpp::export(.rf_b_gather_at, rng = false)]]
int rf_b_gather_at(SEXP b, int x, int indices, int dim) {
  return guarded([&] { return builder(b).gatherAt(tv(x), tv(indices), dim).id; });
}

// [[Rcpp::export(.rf_b_gather, rng = false)]]
int rf_b_gather(SEXP b, int x, IntegerVector indices, int dim) {
  return guarded([&] { return builder(b).gather(tv(x), toShape(indices), dim).id; });
}

// [[Rcpp::export(.rf_b_reduce, rng = false)]]
int rf_b_reduce(SEXP b, std::string kind, int x, IntegerVector dims, bool keep) {
  return guarded([&] {
    GraphBuilder &g = builder(b);
    auto d = toShape(dims);
    if (kind == "sum") return g.reduceSum(tv(x), d, keep).id;
    if (kind == "mean") return g.reduceMean(tv(x), d, keep).id;
    if (kind == "max") return g.reduceMax(tv(x), d, keep).id;
    if (kind == "min") return g.reduceMin(tv(x), d, keep).id;
    fail("rfuse_error", "unknown reduction '" + kind + "'");
  });
}

// [[Rcpp::export(.rf_b_matmul, rng = false)]]
int rf_b_matmul(SEXP b, int x, int y, bool ta, bool tb) {
  return guarded([&] { return builder(b).matmul(tv(x), tv(y), ta, tb).id; });
}

// [[Rcpp::export(.rf_b_conv2d, rng = false)]]
int rf_b_conv2d(SEXP b, int x, int w, int bias, IntegerVector strides, IntegerVector padding,
                IntegerVector dilation, int groups) {
  return guarded([&] {
    rfuse::Conv2dParams p;
    p.strides = toShape(strides);
    p.padding = toShape(padding);
    p.dilation = toShape(dilation);
    p.groups = groups;
    return builder(b).conv2d(tv(x), tv(w), bias >= 0 ? tv(bias) : TracedValue{}, p).id;
  });
}

// [[Rcpp::export(.rf_b_pool2d, rng = false)]]
int rf_b_pool2d(SEXP b, std::string kind, int x, IntegerVector kernel, IntegerVector strides,
                IntegerVector padding) {
  return guarded([&] {
    rfuse::Pool2dParams p;
    p.kernel = toShape(kernel);
    p.strides = toShape(strides);
    p.padding = toShape(padding);
    GraphBuilder &g = builder(b);
    return kind == "max" ? g.maxPool2d(tv(x), p).id : g.avgPool2d(tv(x), p).id;
  });
}

// [[Rcpp::export(.rf_b_begin_function, rng = false)]]
void rf_b_begin_function(SEXP b, std::string name) {
  guarded([&] { builder(b).beginFunction(name); });
}

// [[Rcpp::export(.rf_b_end_function, rng = false)]]
int rf_b_end_function(SEXP b, IntegerVector results) {
  return guarded([&] {
    std::vector<TracedValue> r;
    for (int id : results)
      r.push_back(tv(id));
    return builder(b).endFunction(r).id;
  });
}

// [[Rcpp::export(.rf_b_call, rng = false)]]
IntegerVector rf_b_call(SEXP b, int fn, IntegerVector args) {
  return guarded([&] {
    std::vector<TracedValue> a;
    for (int id : args)
      a.push_back(tv(id));
    IntegerVector out;
    for (TracedValue v : builder(b).call(rfuse::TracedFunction{fn}, a))
      out.push_back(v.id);
    return out;
  });
}

// [[Rcpp::export(.rf_b_custom_vjp, rng = false)]]
IntegerVector rf_b_custom_vjp(SEXP b, int forward, int backward, IntegerVector args, int numOutputs) {
  return guarded([&] {
    std::vector<TracedValue> a;
    for (int id : args)
      a.push_back(tv(id));
    IntegerVector out;
    for (TracedValue v : builder(b).customVjp(rfuse::TracedFunction{forward}, rfuse::TracedFunction{backward}, a, numOutputs))
      out.push_back(v.id);
    return out;
  });
}

// [[Rcpp::export(.rf_b_set_location, rng = false)]]
void rf_b_set_location(SEXP b, std::string description) {
  guarded([&] { builder(b).setSourceLocation(description); });
}

// [[Rcpp::export(.rf_b_set_autocast, rng = false)]]
void rf_b_set_autocast(SEXP b, std::string dtype) {
  guarded([&] { builder(b).setAutocast(dtype); });
}

// [[Rcpp::export(.rf_b_shape, rng = false)]]
IntegerVector rf_b_shape(SEXP b, int x) {
  return guarded([&] {
    auto s = builder(b).shape(tv(x));
    return IntegerVector(s.begin(), s.end());
  });
}

// [[Rcpp::export(.rf_b_finish, rng = false)]]
List rf_b_finish(SEXP b, IntegerVector results) {
  return guarded([&] {
    GraphBuilder &g = builder(b);
    std::vector<TracedValue> r;
    for (int id : results)
      r.push_back(tv(id));
    g.finish(r);
    std::string text = g.moduleText();
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", (unsigned long long)GraphBuilder::signatureHashOf(text));
    return List::create(_["text"] = text, _["hash"] = std::string(hash), _["located"] = g.moduleText(true));
  });
}

// [[Rcpp::export(.rf_compile, rng = false)]]
SEXP rf_compile(std::string text, std::string pipeline, bool recordPasses = false) {
  return guarded([&] {
    rfuse::CompileOptions options;
    options.recordPasses = recordPasses;
    auto program = rfuse::r::interruptible([text, pipeline, options] {
      return rfuse::compileProgram(text, pipeline, "main", options);
    });
    return XPtr<std::shared_ptr<rfuse::Program>>(new std::shared_ptr<rfuse::Program>(program), true);
  });
}

// The gradient (or, with optimizer "sgd", a training step) of a traced scalar function with
// respect to its traced arguments `wrt` (0-based). Failures to differentiate are
// rfuse_autodiff_error conditions naming the op.
// [[Rcpp::export(.rf_compile_grad, rng = false)]]
SEXP rf_compile_grad(std::string text, std::string pipeline, IntegerVector wrt, bool recompute,
                     std::string optimizer, double lr, double momentum, double weightDecay,
                     double beta1, double beta2, double eps, bool lrInput = false,
                     std::string tf32 = "options", std::string allReduce = "none",
                     std::string autocast = "none", bool lossScale = false, double growthInterval = 2000) {
  return guarded([&] {
    rfuse::CompileOptions options;
    if (tf32 == "allowed")
      options.tf32 = rfuse::Tf32::Allowed;
    else if (tf32 == "exact")
      options.tf32 = rfuse::Tf32::Exact;
    else if (tf32 != "options")
      fail("rfuse_error", "internal: tf32 is 'options', 'allowed' or 'exact'");
    rfuse::GradientRequest r;
    r.wrt.assign(wrt.begin(), wrt.end());
    r.recomputePointwise = recompute;
    r.optimizer = optimizer;
    r.learningRate = lr;
    r.learningRateInput = lrInput;
    r.momentum = momentum;
    r.weightDecay = weightDecay;
    r.beta1 = beta1;
    r.beta2 = beta2;
    r.epsilon = eps;
    r.gradientAllReduce = allReduce;
    r.autocast = autocast;
    r.lossScale = lossScale;
    r.lossScaleGrowthInterval = (int64_t)growthInterval;
    std::shared_ptr<rfuse::Program> program;
    try {
      program = rfuse::r::interruptible(
          [text, pipeline, r, options] { return rfuse::compileGradientProgram(text, pipeline, r, options); });
    } catch (const rfuse::CompileError &e) {
      std::string msg = e.what();
      if (msg.rfind("cannot differentiate", 0) == 0)
        fail("rfuse_autodiff_error", msg);
      throw;
    }
    return XPtr<std::shared_ptr<rfuse::Program>>(new std::shared_ptr<rfuse::Program>(program), true);
  });
}

using rfuse::r::program;

// [[Rcpp::export(.rf_program_info, rng = false)]]
List rf_program_info(SEXP p) {
  return guarded([&] {
    const rfuse::CompileInfo &i = program(p).info();
    std::vector<std::string> cpuSteps = program(p).cpuSteps();
    CharacterVector kernels(i.kernels.begin(), i.kernels.end());
    CharacterVector kinds(i.kernelKinds.begin(), i.kernelKinds.end());
    kernels.names() = kinds;
    CharacterVector cuda;
    CharacterVector cudaNames;
    for (auto &[name, source] : i.cudaSources) {
      cuda.push_back(source);
      cudaNames.push_back(name);
    }
    cuda.names() = cudaNames;
    CharacterVector passes, passNames;
    for (size_t k = 0; k < i.passes.size(); ++k) {
      passes.push_back(i.passes[k].second);
      std::string n = std::to_string(k + 1);
      passNames.push_back((n.size() < 2 ? "0" + n : n) + " " + i.passes[k].first);
    }
    passes.names() = passNames;
    return List::create(_["pipeline"] = i.pipeline, _["traced"] = i.tracedText,
                        _["cuda"] = cuda,
                        _["gpu_fallbacks"] = CharacterVector(i.gpuFallbacks.begin(), i.gpuFallbacks.end()),
                        _["gpu_plan"] = CharacterVector(i.gpuPlan.begin(), i.gpuPlan.end()),
                        _["passes"] = passes,
                        _["cpu_steps"] = CharacterVector(cpuSteps.begin(), cpuSteps.end()),
                        _["fused"] = i.fusedText, _["kernels"] = kernels,
                        _["library_calls"] = CharacterVector(i.libraryCalls.begin(), i.libraryCalls.end()),
                        _["kernel_count"] = (double)i.kernelCount,
                        _["bytes_moved"] = (double)i.bytesMoved,
                        _["compile_seconds"] = i.compileSeconds);
  });
}

// [[Rcpp::export(.rf_device, rng = false)]]
std::string rf_device() {
  return guarded([&] { return rfuse::defaultDevice() == rfuse::Device::Cuda ? std::string("cuda") : std::string("cpu"); });
}

// [[Rcpp::export(.rf_device_description, rng = false)]]
std::string rf_device_description() {
  return guarded([&] {
    const rfuse::cuda::DeviceInfo &d = rfuse::cuda::deviceInfo();
    return d.available ? d.name + " (" + d.arch() + ")" : "no GPU: " + d.reason;
  });
}

// The cache key of an rf_jit call (see R/jit.R: call_key and rfuse/Frontend/CallKey.h): which
// arguments are static (named in `staticNames`, or logical scalars) is returned for R to add
// their values. In C++ because it runs on every call.
// [[Rcpp::export(.rf_call_key, rng = false)]]
List rf_call_key(List args, CharacterVector names, CharacterVector staticNames,
                 Rcpp::Nullable<LogicalVector> batchArgs = R_NilValue) {
  std::vector<rfuse::ArgSignature> sigs(args.size());
  // The arguments whose first dimension is a dynamic batch size: written as -1 (a family's key).
  LogicalVector batch = batchArgs.isNull() ? LogicalVector(args.size(), false) : LogicalVector(batchArgs.get());
  auto batched = [&](R_xlen_t i) { return i < batch.size() && batch[i] == TRUE; };
  LogicalVector isStatic(args.size());
  auto dimsOf = [](SEXP dim, rfuse::ArgSignature &s) {
    s.hasDims = true;
    for (R_xlen_t d = 0; d < Rf_xlength(dim); ++d)
      s.dims.push_back(INTEGER(dim)[d]);
  };
  for (R_xlen_t i = 0; i < args.size(); ++i) {
    SEXP a = args[i];
    rfuse::ArgSignature &s = sigs[i];
    s.name = as<std::string>(names[i]);
    if (IS_S4_OBJECT(a) && R_has_slot(a, Rf_install("env"))) { // an rf_tensor: dtype, device, dims
      SEXP env = R_do_slot(a, Rf_install("env"));
      auto field = [&](const char *n) { return Rf_findVarInFrame(env, Rf_install(n)); };
      SEXP dt = field("dtype"), dev = field("device"), rdim = field("rdim"), len = field("len");
      s.kind = rfuse::ArgSignature::Kind::Tensor;
      s.type = std::string(TYPEOF(dt) == STRSXP ? CHAR(STRING_ELT(dt, 0)) : "?") + "@" +
               (TYPEOF(dev) == STRSXP ? CHAR(STRING_ELT(dev, 0)) : "?");
      if (TYPEOF(rdim) == INTSXP)
        dimsOf(rdim, s);
      else if (TYPEOF(len) == REALSXP || TYPEOF(len) == INTSXP)
        s.length = batched(i) ? -1 : (int64_t)Rf_asReal(len);
      if (batched(i) && !s.dims.empty())
        s.dims[0] = -1;
      continue;
    }
    SEXP dim = Rf_getAttrib(a, R_DimSymbol);
    bool st = std::find(staticNames.begin(), staticNames.end(), s.name) != staticNames.end() ||
              (TYPEOF(a) == LGLSXP && Rf_xlength(a) == 1 && Rf_isNull(dim));
    isStatic[i] = st;
    if (st) {
      s.kind = rfuse::ArgSignature::Kind::Static;
      continue;
    }
    s.type = Rf_type2char(TYPEOF(a));
    if (Rf_isNull(dim))
      s.length = batched(i) ? -1 : (int64_t)Rf_xlength(a);
    else
      dimsOf(dim, s);
    if (batched(i) && !s.dims.empty())
      s.dims[0] = -1;
  }
  return List::create(_["key"] = rfuse::callKey(sigs), _["static"] = isStatic);
}

// [[Rcpp::export(.rf_check_pipeline, rng = false)]]
void rf_check_pipeline(std::string pipeline) {
  guarded([&] { rfuse::checkPipeline(pipeline); });
}

// [[Rcpp::export(.rf_load_plugin, rng = false)]]
void rf_load_plugin(std::string path) {
  try {
    rfuse::loadPassPlugin(path);
  } catch (const std::exception &e) {
    fail("rfuse_plugin_error", e.what());
  }
}

// [[Rcpp::export(.rf_available_pipelines, rng = false)]]
CharacterVector rf_available_pipelines() {
  auto names = rfuse::availablePipelines();
  return CharacterVector(names.begin(), names.end());
}

// Runs a compiled program. `args` are R numeric/integer/logical vectors or arrays (already
// validated in R); each is viewed as the row-major tensor of its reversed dims, which needs no
// transposition: R's column-major order is exactly that. `dtypes` gives each argument's tensor
// dtype, `outDims` each output's R dim attribute (NULL for a plain vector).
List runProgram(SEXP p, List args, CharacterVector dtypes, List outDims, const std::string &device);

// Runs a compiled program. The hot path of every rf_jit call, so failures come back as a value
// (class "rfuse_failure": condition class, message) that R turns into a classed condition,
// saving a tryCatch per call.
// Names the op where the first NaN/Inf appears when the program runs on `args` (anomaly
// detection; the interpreter, op by op).
// [[Rcpp::export(.rf_first_nonfinite, rng = false)]]
std::string rf_first_nonfinite(SEXP p, List args, CharacterVector dtypes) {
  return guarded([&] {
    std::vector<rfuse::HostTensor> inputs;
    for (R_xlen_t k = 0; k < args.size(); ++k) {
      NumericVector a(args[k]);
      std::vector<int64_t> shape;
      SEXP dim = Rf_getAttrib(args[k], R_DimSymbol);
      if (Rf_isNull(dim)) {
        shape.push_back(a.size());
      } else {
        IntegerVector d(dim);
        for (R_xlen_t i = d.size() - 1; i >= 0; --i)
          shape.push_back(d[i]);
      }
      inputs.push_back(rfuse::HostTensor::fromDoubles(dtypeOf(as<std::string>(dtypes[k])), shape,
                                                      std::vector<double>(a.begin(), a.end())));
    }
    return program(p).firstNonFinite(inputs);
  });
}

// [[Rcpp::export(.rf_run, rng = false)]]
SEXP rf_run(SEXP p, List args, CharacterVector dtypes, List outDims, std::string device) {
  try {
    return runProgram(p, args, dtypes, outDims, device);
  } catch (const Rcpp::exception &e) {
    return rfuse::r::failureValue(e);
  }
}

List runProgram(SEXP p, List args, CharacterVector dtypes, List outDims, const std::string &device) {
  return guarded([&] {
    const rfuse::Program &prog = program(p);
    rfuse::Device dev = device == "cuda" ? rfuse::Device::Cuda : rfuse::Device::Cpu;
    const auto &types = prog.resultTypes();
    // Results become R vectors (at most 8 bytes an element): one the host cannot hold is an
    // rfuse_oom naming its size, before anything computes (R's own allocation would longjmp).
    size_t resultBytes = 0;
    for (const auto &[dt, shape] : types) {
      size_t n = 8;
      for (int64_t d : shape)
        n *= (size_t)d;
      resultBytes += n;
    }
    if (resultBytes >= ((size_t)1 << 30))
      rfuse::ensureHostMemory(resultBytes);
    List out(types.size());
    auto rdim = [&](size_t k) -> SEXP { return k < (size_t)outDims.size() ? (SEXP)outDims[k] : R_NilValue; };
    if (dev == rfuse::Device::Cpu) {
      // R's doubles are f64 tensors as they are: the CPU backend reads them, and writes f64
      // results, in place. Other dtypes convert (threaded) into tensors and back.
      std::vector<rfuse::Tensor> converted;
      std::vector<rfuse::TensorRef> inputs, outputs;
      for (R_xlen_t k = 0; k < args.size(); ++k) {
        SEXP a = args[k];
        rfuse::DType dt = dtypeOf(as<std::string>(dtypes[k]));
        if (TYPEOF(a) == REALSXP && dt == rfuse::DType::F64) {
          inputs.push_back({dt, rfuse::r::rShape(a), (void *)REAL(a)});
          continue;
        }
        converted.push_back(rfuse::r::tensorFromR(a, dt, dev));
        inputs.push_back(converted.back().ref());
      }
      std::vector<rfuse::Tensor> results(types.size());
      for (size_t k = 0; k < types.size(); ++k) {
        auto [dt, shape] = types[k];
        if (dt == rfuse::DType::F64) {
          int64_t n = 1;
          for (int64_t d : shape)
            n *= d;
          SEXP v = Rf_allocVector(REALSXP, n);
          out[k] = v; // protected by `out` from here on
          if (!Rf_isNull(rdim(k)))
            Rf_setAttrib(v, R_DimSymbol, rdim(k));
          outputs.push_back({dt, shape, (void *)REAL(v)});
        } else {
          results[k] = rfuse::emptyTensor(dev, dt, shape);
          outputs.push_back(results[k].ref());
        }
      }
      prog.run(inputs, outputs, dev);
      // The converted inputs go before the results become R vectors: a float32 call holds at
      // most its input, its output and one float32 copy (the result) at a time.
      inputs.clear();
      converted.clear();
      for (size_t k = 0; k < types.size(); ++k)
        if (types[k].first != rfuse::DType::F64)
          out[k] = rfuse::r::tensorToR(results[k], rdim(k));
      return out;
    }
    // The GPU: inputs upload through pinned staging (converted chunk by chunk while the previous
    // chunk copies), results download the same way straight into new R vectors.
    std::vector<rfuse::Tensor> inputs;
    for (R_xlen_t k = 0; k < args.size(); ++k)
      inputs.push_back(rfuse::r::tensorFromR(args[k], dtypeOf(as<std::string>(dtypes[k])), dev));
    std::vector<rfuse::Tensor> results = prog.run(inputs, dev);
    for (size_t k = 0; k < results.size(); ++k)
      out[k] = rfuse::r::tensorToR(results[k], rdim(k));
    return out;
  });
}

// [[Rcpp::export(.rf_option_table, rng = false)]]
DataFrame rf_option_table() {
  return guarded([&] {
    std::vector<std::string> name, env, accepted, def, value, description;
    for (const rfuse::OptionDoc &d : rfuse::optionDocs()) {
      name.push_back(d.name);
      env.push_back(d.environment);
      accepted.push_back(d.accepted);
      def.push_back(d.defaultValue);
      value.push_back(rfuse::getOption(d.name));
      description.push_back(d.description);
    }
    return DataFrame::create(_["name"] = name, _["environment"] = env, _["accepted"] = accepted,
                             _["default"] = def, _["value"] = value, _["description"] = description,
                             _["stringsAsFactors"] = false);
  });
}

// [[Rcpp::export(.rf_option_get, rng = false)]]
std::string rf_option_get(std::string name) {
  return guarded([&] { return rfuse::getOption(name); });
}

// [[Rcpp::export(.rf_option_set, rng = false)]]
void rf_option_set(std::string name, std::string value) {
  guarded([&] { rfuse::setOption(name, value); });
}

// The rfuse build this package was installed against (its lib/ holds the example pass plugin).
// [[Rcpp::export(.rf_build_dir, rng = false)]]
std::string rf_build_dir() { return RFUSE_BUILD_DIR; }

// This process's compile work: pass-pipeline runs, programs read from the disk cache, NVRTC and
// LLVM compiles (rf_cache_info()).
// A program for every batch size from programs `a` and `b` of one traced function at batch sizes
// `ba` and `bb` (rfuse::BatchTemplate): an external pointer, or a string saying why not.
// [[Rcpp::export(.rf_batch_template, rng = false)]]
SEXP rf_batch_template(SEXP a, double ba, SEXP b, double bb) {
  return guarded([&]() -> SEXP {
    std::string why;
    auto t = rfuse::BatchTemplate::make(rfuse::r::program(a), (int64_t)ba, rfuse::r::program(b), (int64_t)bb, why);
    if (!t)
      return Rcpp::wrap(why);
    return XPtr<std::shared_ptr<rfuse::BatchTemplate>>(new std::shared_ptr<rfuse::BatchTemplate>(t), true);
  });
}

// The template's program at `batch` for the module `text` traced at that size (a program handle
// as .rf_compile's), or a string saying why it needs a compile of its own.
// [[Rcpp::export(.rf_specialize, rng = false)]]
SEXP rf_specialize(SEXP templ, std::string text, double batch) {
  return guarded([&]() -> SEXP {
    XPtr<std::shared_ptr<rfuse::BatchTemplate>> t(templ);
    if (!t.get() || !*t)
      fail("rfuse_error", "the batch template is gone (an rf_jit function restored from a saved session)");
    std::string why;
    auto program = (*t)->specialize(text, (int64_t)batch, why);
    if (!program)
      return Rcpp::wrap(why);
    return XPtr<std::shared_ptr<rfuse::Program>>(new std::shared_ptr<rfuse::Program>(program), true);
  });
}

// Starts the graph builder's first-use costs on a thread of its own (the package's load calls it,
// so that they overlap what R does before the first trace).
// [[Rcpp::export(.rf_warm_builder, rng = false)]]
void rf_warm_builder() {
  guarded([&] { rfuse::warmGraphBuilderInBackground(); });
}

// Starts cuBLASLt's and cuDNN's initialization on threads of their own (a training loop calls it
// before tracing its step, so that the libraries' start overlaps R's work).
// [[Rcpp::export(.rf_warm_libraries, rng = false)]]
void rf_warm_libraries() {
  guarded([&] {
    if (rfuse::cuda::gpuPresence().present)
      rfuse::cuda::warmLibraries(true, true);
  });
}

// [[Rcpp::export(.rf_compile_counts, rng = false)]]
Rcpp::NumericVector rf_compile_counts() {
  return guarded([&] {
    rfuse::ProgramCacheStats p = rfuse::programCacheStats();
    rfuse::cuda::KernelCacheStats k = rfuse::cuda::kernelCacheStats();
    rfuse::cuda::LibraryCallStats lib = rfuse::cuda::libraryCallStats();
    return Rcpp::NumericVector::create(
        Rcpp::Named("pass_runs") = (double)p.passRuns, Rcpp::Named("disk_hits") = (double)p.diskHits,
        Rcpp::Named("specializations") = (double)p.specializations,
        Rcpp::Named("nvrtc_compiles") = (double)k.compiles,
        Rcpp::Named("llvm_compiles") = (double)rfuse::cpuJitStats().compiled,
        Rcpp::Named("llvm_disk_hits") = (double)rfuse::cpuJitStats().diskHits,
        Rcpp::Named("program_seconds") = p.programSeconds, Rcpp::Named("plan_seconds") = p.planSeconds,
        Rcpp::Named("load_seconds") = p.loadSeconds,
        Rcpp::Named("library_seconds") = lib.firstCallSeconds, Rcpp::Named("library_plan_seconds") = lib.planSeconds,
        Rcpp::Named("library_longest_plan_seconds") = lib.longestPlanSeconds,
        Rcpp::Named("library_first_calls") = (double)lib.firstCalls,
        Rcpp::Named("library_plans_recalled") = (double)(lib.plansRecalledInMemory + lib.plansRecalledFromDisk),
        Rcpp::Named("library_plans_from_disk") = (double)lib.plansRecalledFromDisk,
        Rcpp::Named("library_plans_chosen") = (double)lib.plansChosen);
  });
}

// [[Rcpp::export(.rf_clear_compiled_caches, rng = false)]]
void rf_clear_compiled_caches() {
  guarded([&] { rfuse::clearCompiledCaches(); });
}

// After a collection has run the finalizers of dropped programs and tensors.
// [[Rcpp::export(.rf_release_cached_memory, rng = false)]]
void rf_release_cached_memory() {
  guarded([&] { rfuse::releaseCachedMemory(); });
}
