// The reference interpreter. Deliberately simple: every op is computed with plain loops over
// row-major indices, in double (or long double) accumulation, and rounded to the result's dtype
// after each op. Pointwise ops dispatch through ScalarOps.def to the one definition of their
// scalar semantics in ScalarOps.h.
#include "rfuse/Runtime/Interpreter.h"

#include "rfuse/IR/Geometry.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/IR/ScalarOps.h"

#include "../Collectives.h"
#include "Recurrent.h"
#include "../cpu/Blas.h"
#include "rfuse/Runtime/Parallel.h"

#include <algorithm>
#include <numeric>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace rfuse {
namespace {

std::string describe(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << op->getName() << "' at " << op->getLoc();
  return os.str();
}

std::vector<int64_t> toVec(ArrayRef<int64_t> a) { return std::vector<int64_t>(a.begin(), a.end()); }

// Row-major strides of a shape.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

// Iterates over all multi-indices of `shape` in row-major order.
template <class F> void forEachIndex(const std::vector<int64_t> &shape, F &&body) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    body(k, idx);
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}

// Arithmetic results in T (exact for i64), comparisons as T(1) / T(0).
template <class T> T applyUnary(ScalarOpKind k, T x) {
  using namespace scalar;
  switch (k) {
#define RFUSE_UNARY(K, FN) case ScalarOpKind::K: return (T)FN<T>(x);
#include "rfuse/IR/ScalarOps.def"
  default: break;
  }
  llvm_unreachable("not a unary op");
}

template <class T> T applyBinary(ScalarOpKind k, T a, T b) {
  using namespace scalar;
  switch (k) {
#define RFUSE_BINARY(K, FN) case ScalarOpKind::K: return (T)FN<T>(a, b);
#define RFUSE_COMPARE(K, FN) case ScalarOpKind::K: return FN<T>(a, b) ? T(1) : T(0);
#include "rfuse/IR/ScalarOps.def"
  default: break;
  }
  llvm_unreachable("not a binary op");
}

bool applyLogic(ScalarOpKind k, bool a, bool b) {
  using namespace scalar;
  switch (k) {
#define RFUSE_LOGIC1(K, FN) case ScalarOpKind::K: return FN(a);
#define RFUSE_LOGIC2(K, FN) case ScalarOpKind::K: return FN(a, b);
#include "rfuse/IR/ScalarOps.def"
  default: break;
  }
  llvm_unreachable("not a logic op");
}

class Interpreter {
public:
  Interpreter(ModuleOp module, const InterpreterOptions &options)
      : module(module), symbols(module), options(options) {}

  std::vector<HostTensor> call(func::FuncOp fn, const std::vector<HostTensor> &inputs) {
    auto argTypes = fn.getArgumentTypes();
    if (inputs.size() != argTypes.size())
      throw InterpreterError("function '" + fn.getName().str() + "' takes " +
                             std::to_string(argTypes.size()) + " inputs, got " +
                             std::to_string(inputs.size()));
    if (fn.isExternal())
      throw InterpreterError("function '" + fn.getName().str() + "' has no body");
    llvm::DenseMap<Value, HostTensor> env;
    for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
      auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
      if (!type)
        throw InterpreterError("argument #" + std::to_string(i) + " of '" + fn.getName().str() +
                               "' is not a ranked tensor");
      DType dt = effective(type);
      if (toVec(type.getShape()) != inputs[i].shape)
        throw InterpreterError("input #" + std::to_string(i) + " of '" + fn.getName().str() +
                               "' has shape " + inputs[i].typeString() + ", expected " +
                               typeString(type));
      if (!isFloat(dt) && inputs[i].isFloat()) // integers may feed float arguments, not back
        throw InterpreterError("input #" + std::to_string(i) + " of '" + fn.getName().str() +
                               "' is " + inputs[i].typeString() + ", expected " +
                               typeString(type));
      env[arg] = inputs[i].dtype == dt ? inputs[i] : inputs[i].castTo(dt);
    }
    return runBlock(fn.getBody().front(), env);
  }

  std::vector<HostTensor> runOne(Operation *op, const std::vector<HostTensor> &operands) {
    llvm::DenseMap<Value, HostTensor> env;
    for (auto [v, t] : llvm::zip(op->getOperands(), operands))
      env[v] = t;
    return run(op, env);
  }

private:
  ModuleOp module;
  SymbolTable symbols;
  InterpreterOptions options;

  DType effective(Type t) {
    auto type = llvm::cast<RankedTensorType>(t);
    DType dt;
    if (!fromMlirType(type.getElementType(), dt))
      throw InterpreterError("unsupported element type in " + typeString(type));
    if (options.floatOverride && isFloat(dt))
      return *options.floatOverride;
    return dt;
  }

  static std::string typeString(Type t) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << t;
    return os.str();
  }

  HostTensor alloc(Value result) {
    auto type = llvm::cast<RankedTensorType>(result.getType());
    return HostTensor(effective(type), toVec(type.getShape()));
  }

  // Runs ops of `block` until its terminator; returns the terminator's operands' values.
  std::vector<HostTensor> runBlock(Block &block, llvm::DenseMap<Value, HostTensor> &env) {
    for (Operation &op : block) {
      if (op.hasTrait<OpTrait::IsTerminator>()) {
        if (!isa<func::ReturnOp, YieldOp>(op))
          throw InterpreterError("unsupported terminator " + describe(&op));
        std::vector<HostTensor> out;
        for (Value v : op.getOperands())
          out.push_back(lookup(env, v, &op));
        return out;
      }
      std::vector<HostTensor> results = run(&op, env);
      for (auto [r, t] : llvm::zip(op.getResults(), results))
        env[r] = std::move(t);
    }
    throw InterpreterError("block without terminator");
  }

  const HostTensor &lookup(llvm::DenseMap<Value, HostTensor> &env, Value v, Operation *user) {
    auto it = env.find(v);
    if (it == env.end())
      throw InterpreterError("operand of " + describe(user) + " has no value");
    return it->second;
  }

  std::vector<HostTensor> run(Operation *op, llvm::DenseMap<Value, HostTensor> &env) {
    std::vector<HostTensor> in;
    for (Value v : op->getOperands())
      in.push_back(lookup(env, v, op));

    if (auto pw = llvm::dyn_cast<PointwiseOpInterface>(op))
      return {pointwise(pw.getScalarOp(), in, op->getResult(0))};

    return llvm::TypeSwitch<Operation *, std::vector<HostTensor>>(op)
        .Case([&](ConstantOp c) { return std::vector<HostTensor>{constant(c)}; })
        .Case([&](CastOp c) { return std::vector<HostTensor>{in[0].castTo(effective(c.getType()))}; })
        .Case([&](BroadcastInDimOp b) { return std::vector<HostTensor>{broadcast(b, in[0])}; })
        .Case([&](TransposeOp t) { return std::vector<HostTensor>{transpose(t, in[0])}; })
        .Case([&](SliceOp s) { return std::vector<HostTensor>{slice(s, in[0])}; })
        .Case([&](ReverseOp r) { return std::vector<HostTensor>{reverse(r, in[0])}; })
        .Case([&](PadOp p) { return std::vector<HostTensor>{pad(p, in[0])}; })
        .Case([&](ConcatOp c) { return std::vector<HostTensor>{concat(c, in)}; })
        .Case([&](GatherOp g) { return std::vector<HostTensor>{gatherAlong(g, in[0], in[1])}; })
        .Case([&](ScanOp s) { return std::vector<HostTensor>{scan(s, in[0])}; })
        .Case([&](RandomUniformOp r) {
          HostTensor out = alloc(r.getResult());
          auto k0 = (unsigned)(uint32_t)in[0].i[0], k1 = (unsigned)(uint32_t)in[0].i[1];
          for (int64_t k = 0, n = out.numel(); k < n; ++k)
            out.set(k, scalar::rf_random_uniform((unsigned long long)k, k0, k1));
          return std::vector<HostTensor>{out};
        })
        .Case([&](SortOp s) { return sort(s, in[0]); })
        .Case([&](TakeAlongOp t) { return std::vector<HostTensor>{takeAlong(t, in[0], in[1])}; })
        .Case([&](ScatterAddOp s) { return std::vector<HostTensor>{scatterAdd(s, in[0], in[1])}; })
        .Case([&](AllReduceOp a) {
          // The oracle runs in one process: an all-reduce over one rank is the identity.
          if (int world = activeWorldSize(); world != 1)
            throw std::runtime_error("the interpreter cannot run an all-reduce over " + std::to_string(world) + " ranks");
          return std::vector<HostTensor>(in.begin(), in.end());
        })
        // A gradient mark: the value itself (rfuse-drop-stop-gradients removes it before fusion).
        .Case([&](StopGradientOp) { return std::vector<HostTensor>{in[0]}; })
        .Case([&](ReshapeOp r) {
          HostTensor out = in[0];
          out.shape = toVec(r.getType().getShape());
          return std::vector<HostTensor>{out};
        })
        .Case([&](ReduceSumOp r) { return std::vector<HostTensor>{reduce<scalar::RF_REDUCE_SUM>(r, in[0], false)}; })
        .Case([&](ReduceMeanOp r) { return std::vector<HostTensor>{reduce<scalar::RF_REDUCE_SUM>(r, in[0], true)}; })
        .Case([&](ReduceMaxOp r) { return std::vector<HostTensor>{reduce<scalar::RF_REDUCE_MAX>(r, in[0], false)}; })
        .Case([&](ReduceMinOp r) { return std::vector<HostTensor>{reduce<scalar::RF_REDUCE_MIN>(r, in[0], false)}; })
        .Case([&](MatmulOp m) { return std::vector<HostTensor>{matmul(m, in[0], in[1])}; })
        .Case([&](AttentionOp a) { return attention(a, in); })
        .Case([&](AttentionBackwardOp a) { return attentionBackward(a, in); })
        .Case([&](RecurrentOp r) { return interp::recurrentForward(r.getMode(), in); })
        .Case([&](RecurrentBackwardOp r) { return interp::recurrentBackward(r.getMode(), in); })
        .Case([&](SolveOp s) { return std::vector<HostTensor>{solve(s, in[0], in[1])}; })
        .Case([&](CholeskyOp c) {
          HostTensor out = alloc(c.getResult());
          int64_t n = in[0].shape[0];
          std::vector<double> u(n * n);
          std::string why;
          bool ok = cpu::lapackCholesky(n, in[0].f.data(), u.data(), why);
          for (int64_t i = 0; i < n * n; ++i)
            out.set(i, ok ? u[i] : std::numeric_limits<double>::quiet_NaN());
          return std::vector<HostTensor>{out};
        })
        .Case([&](LogDeterminantOp d) {
          HostTensor out = alloc(d.getResult());
          double modulus = 0, sign = 1;
          cpu::lapackLogDeterminant(in[0].shape[0], in[0].f.data(), modulus, sign);
          out.set(0, modulus);
          out.set(1, sign);
          return std::vector<HostTensor>{out};
        })
        .Case<Conv2dOp, Conv2dBackwardInputOp, Conv2dBackwardFilterOp>(
            [&](Operation *c) { return std::vector<HostTensor>{convolution(c, in)}; })
        .Case<MaxPool2dOp, AvgPool2dOp, MaxPool2dBackwardOp, AvgPool2dBackwardOp>(
            [&](Operation *p) { return std::vector<HostTensor>{pooling(p, in)}; })
        .Case([&](FusionOp f) {
          llvm::DenseMap<Value, HostTensor> inner;
          for (auto [arg, t] : llvm::zip(f.getBody().getArguments(), in))
            inner[arg] = t;
          return runBlock(f.getBody().front(), inner);
        })
        .Case([&](func::CallOp c) {
          auto callee = symbols.lookup<func::FuncOp>(c.getCallee());
          if (!callee)
            throw InterpreterError("call to unknown function '" + c.getCallee().str() + "' in " +
                                   describe(op));
          return call(callee, in);
        })
        .Default([&](Operation *) -> std::vector<HostTensor> {
          throw InterpreterError("the interpreter does not support " + describe(op));
        });
  }

  HostTensor constant(ConstantOp c) {
    auto attr = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr)
      throw InterpreterError("only dense constants are supported, in " + describe(c));
    HostTensor out = alloc(c.getResult());
    int64_t k = 0;
    if (llvm::isa<FloatType>(attr.getElementType())) {
      for (const APFloat &v : attr.getValues<APFloat>()) {
        APFloat d = v;
        bool lost;
        d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
        out.set(k++, d.convertToDouble());
      }
    } else {
      bool isBool = attr.getElementType().isInteger(1);
      for (const APInt &v : attr.getValues<APInt>())
        out.i[k++] = isBool ? (int64_t)v.getBoolValue() : v.getSExtValue();
    }
    return out;
  }

  HostTensor pointwise(ScalarOpKind kind, const std::vector<HostTensor> &in, Value result) {
    HostTensor out = alloc(result);
    int64_t n = out.numel();
    switch (scalarArity(kind)) {
    case ScalarArity::Unary:
    case ScalarArity::Binary:
    case ScalarArity::Compare: {
      const HostTensor &a = in[0];
      bool unary = scalarArity(kind) == ScalarArity::Unary;
      const HostTensor &b = unary ? in[0] : in[1];
      for (int64_t k = 0; k < n; ++k) {
        double v;
        if (!a.isFloat()) { // integer arithmetic wraps like the hardware's
          int64_t x = a.i[k], y = b.i[k];
          out.i[k] = wrapInteger(out.dtype, unary ? applyUnary<int64_t>(kind, x)
                                                  : applyBinary<int64_t>(kind, x, y));
          continue;
        } else if (a.dtype == DType::F64) {
          v = unary ? applyUnary<double>(kind, a.f[k]) : applyBinary<double>(kind, a.f[k], b.f[k]);
        } else { // f32, f16, bf16: f32 math
          float x = (float)a.f[k], y = (float)b.f[k];
          v = unary ? applyUnary<float>(kind, x) : applyBinary<float>(kind, x, y);
        }
        out.set(k, v);
      }
      break;
    }
    case ScalarArity::Logic1:
    case ScalarArity::Logic2:
      for (int64_t k = 0; k < n; ++k)
        out.i[k] = applyLogic(kind, in[0].i[k] != 0, in.size() > 1 && in[1].i[k] != 0);
      break;
    case ScalarArity::Select:
      for (int64_t k = 0; k < n; ++k) {
        bool c = in[0].i[k] != 0;
        if (out.isFloat())
          out.f[k] = scalar::rf_select(c, in[1].f[k], in[2].f[k]);
        else
          out.i[k] = scalar::rf_select(c, in[1].i[k], in[2].i[k]);
      }
      break;
    }
    return out;
  }

  // out[k] = in[source(index of k)]: broadcasts and transposes are gathers.
  template <class SourceFn>
  HostTensor gather(Value result, const HostTensor &in, SourceFn &&source) {
    HostTensor out = alloc(result);
    auto inStrides = stridesOf(in.shape);
    forEachIndex(out.shape, [&](int64_t k, const std::vector<int64_t> &idx) {
      int64_t src = source(idx, inStrides);
      if (out.isFloat())
        out.f[k] = in.f[src];
      else
        out.i[k] = in.i[src];
    });
    return out;
  }

  HostTensor broadcast(BroadcastInDimOp b, const HostTensor &in) {
    auto dims = b.getDims();
    return gather(b.getResult(), in, [&](const std::vector<int64_t> &idx, const std::vector<int64_t> &st) {
      int64_t src = 0;
      for (size_t d = 0; d < dims.size(); ++d)
        src += (in.shape[d] == 1 ? 0 : idx[dims[d]]) * st[d];
      return src;
    });
  }

  HostTensor slice(SliceOp s, const HostTensor &in) {
    auto start = s.getStart(), strides = s.getStrides();
    return gather(s.getResult(), in, [&](const std::vector<int64_t> &idx, const std::vector<int64_t> &st) {
      int64_t src = 0;
      for (size_t d = 0; d < idx.size(); ++d)
        src += (start[d] + idx[d] * strides[d]) * st[d];
      return src;
    });
  }

  HostTensor reverse(ReverseOp r, const HostTensor &in) {
    auto dims = r.getDims();
    return gather(r.getResult(), in, [&](const std::vector<int64_t> &idx, const std::vector<int64_t> &st) {
      int64_t src = 0;
      for (size_t d = 0; d < idx.size(); ++d)
        src += (llvm::is_contained(dims, (int64_t)d) ? in.shape[d] - 1 - idx[d] : idx[d]) * st[d];
      return src;
    });
  }

  // Copies `in` into `out` with input index idx landing at place(idx).
  template <class PlaceFn> void scatterInto(HostTensor &out, const HostTensor &in, PlaceFn &&place) {
    auto outStrides = stridesOf(out.shape);
    forEachIndex(in.shape, [&](int64_t k, const std::vector<int64_t> &idx) {
      int64_t dst = place(idx, outStrides);
      if (out.isFloat())
        out.f[dst] = in.f[k];
      else
        out.i[dst] = in.i[k];
    });
  }

  HostTensor pad(PadOp p, const HostTensor &in) {
    HostTensor out = alloc(p.getResult());
    double value = p.getValue().convertToDouble();
    for (int64_t k = 0; k < out.numel(); ++k)
      out.set(k, value);
    auto low = p.getLow(), interior = p.getInterior();
    scatterInto(out, in, [&](const std::vector<int64_t> &idx, const std::vector<int64_t> &st) {
      int64_t dst = 0;
      for (size_t d = 0; d < idx.size(); ++d)
        dst += (low[d] + idx[d] * (interior[d] + 1)) * st[d];
      return dst;
    });
    return out;
  }

  HostTensor concat(ConcatOp c, const std::vector<HostTensor> &in) {
    HostTensor out = alloc(c.getResult());
    int64_t dim = c.getDim(), offset = 0;
    for (const HostTensor &t : in) {
      scatterInto(out, t, [&](const std::vector<int64_t> &idx, const std::vector<int64_t> &st) {
        int64_t dst = 0;
        for (size_t d = 0; d < idx.size(); ++d)
          dst += (idx[d] + ((int64_t)d == dim ? offset : 0)) * st[d];
        return dst;
      });
      offset += t.shape[dim];
    }
    return out;
  }

  // Cumulative ops along a dim, line by line; float sums and products in double, max and min
  // NaN-propagating (ScalarOps.h's rf_max / rf_min), integers wrapping like the hardware.
  HostTensor scan(ScanOp s, const HostTensor &in) {
    HostTensor out = alloc(s.getResult());
    int64_t dim = s.getDim(), len = in.shape[dim], inner = 1, outer = 1;
    for (int64_t d = 0; d < in.rank(); ++d)
      (d < dim ? outer : inner) *= d == dim ? 1 : in.shape[d];
    ScanKind kind = s.getKind();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double fa = kind == ScanKind::prod ? 1.0 : 0.0;
        int64_t ia = kind == ScanKind::prod ? 1 : 0;
        for (int64_t j = 0; j < len; ++j) {
          int64_t k = (o * len + j) * inner + i;
          if (in.isFloat()) {
            double v = in.f[k];
            fa = j == 0 ? v : kind == ScanKind::sum ? fa + v : kind == ScanKind::prod ? fa * v
                                : kind == ScanKind::max ? scalar::rf_max(fa, v) : scalar::rf_min(fa, v);
            out.set(k, fa);
          } else {
            int64_t v = in.i[k];
            ia = j == 0 ? v : kind == ScanKind::sum ? (int64_t)((uint64_t)ia + (uint64_t)v)
                            : kind == ScanKind::prod ? (int64_t)((uint64_t)ia * (uint64_t)v)
                            : kind == ScanKind::max ? std::max(ia, v) : std::min(ia, v);
            out.i[k] = wrapInteger(out.dtype, ia);
          }
        }
      }
    return out;
  }

  // Each line along the dim sorted by a stable sort of its positions; NaN last (R) or above
  // +Inf (torch: nan_largest), -0 == +0.
  std::vector<HostTensor> sort(SortOp s, const HostTensor &in) {
    HostTensor values = alloc(s.getValues()), indices = alloc(s.getIndices());
    int64_t dim = s.getDim(), len = in.shape[dim], inner = 1, outer = 1;
    for (int64_t d = 0; d < in.rank(); ++d)
      (d < dim ? outer : inner) *= d == dim ? 1 : in.shape[d];
    bool descending = s.getDescending(), nanLargest = s.getNanLargest();
    std::vector<int64_t> order(len);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t j) { return (o * len + j) * inner + i; };
        std::iota(order.begin(), order.end(), 0);
        // before(a, b): a's element goes strictly before b's.
        auto before = [&](int64_t a, int64_t b) {
          if (!in.isFloat())
            return descending ? in.i[at(a)] > in.i[at(b)] : in.i[at(a)] < in.i[at(b)];
          double x = in.f[at(a)], y = in.f[at(b)];
          bool nx = std::isnan(x), ny = std::isnan(y);
          if (nx || ny) {
            if (nx && ny)
              return false;
            bool nanFirst = nanLargest && descending; // NaN is the largest: first when descending
            return nanFirst ? nx : ny;
          }
          return descending ? x > y : x < y;
        };
        std::stable_sort(order.begin(), order.end(), before);
        for (int64_t j = 0; j < len; ++j) {
          if (in.isFloat())
            values.f[at(j)] = in.f[at(order[j])];
          else
            values.i[at(j)] = in.i[at(order[j])];
          indices.i[at(j)] = order[j];
        }
      }
    return {values, indices};
  }

  // result[..., i, ...] = in[..., indices[..., i, ...], ...]; a computed position is clamped.
  HostTensor takeAlong(TakeAlongOp t, const HostTensor &in, const HostTensor &indices) {
    int64_t dim = t.getDim(), n = in.shape[dim];
    return gather(t.getResult(), in, [&](const std::vector<int64_t> &idx, const std::vector<int64_t> &st) {
      int64_t src = 0, k = 0, stride = 1;
      for (int64_t d = (int64_t)idx.size() - 1; d >= 0; --d) { // the position's own element
        k += idx[d] * stride;
        stride *= indices.shape[d];
      }
      for (size_t d = 0; d < idx.size(); ++d)
        src += ((int64_t)d == dim ? std::clamp<int64_t>(indices.i[k], 0, n - 1) : idx[d]) * st[d];
      return src;
    });
  }

  // result = zeros; result[..., indices[..., i, ...], ...] += src[..., i, ...], in source order;
  // a computed position is clamped.
  HostTensor scatterAdd(ScatterAddOp s, const HostTensor &src, const HostTensor &indices) {
    HostTensor out = alloc(s.getResult());
    std::vector<double> sum((size_t)out.numel(), 0.0); // in double, then rounded once
    int64_t dim = s.getDim(), n = out.shape[dim], len = src.shape[dim], inner = 1, outer = 1;
    for (int64_t d = 0; d < src.rank(); ++d)
      if (d != dim)
        (d < dim ? outer : inner) *= src.shape[d];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < len; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t from = (o * len + j) * inner + i;
          int64_t to = std::clamp<int64_t>(indices.i[from], 0, n - 1);
          sum[(o * n + to) * inner + i] += src.f[from];
        }
    for (size_t k = 0; k < sum.size(); ++k)
      out.set((int64_t)k, sum[k]);
    return out;
  }

  // A computed index outside [0, n) is clamped, as the generated kernels do.
  HostTensor gatherAlong(GatherOp g, const HostTensor &in, const HostTensor &indices) {
    int64_t dim = g.getDim(), n = in.shape[dim];
    return gather(g.getResult(), in, [&](const std::vector<int64_t> &idx, const std::vector<int64_t> &st) {
      int64_t src = 0;
      for (size_t d = 0; d < idx.size(); ++d) {
        int64_t c = idx[d];
        if ((int64_t)d == dim)
          c = std::clamp<int64_t>(indices.i[idx[d]], 0, n - 1);
        src += c * st[d];
      }
      return src;
    });
  }

  HostTensor transpose(TransposeOp t, const HostTensor &in) {
    auto perm = t.getPerm();
    return gather(t.getResult(), in, [&](const std::vector<int64_t> &idx, const std::vector<int64_t> &st) {
      int64_t src = 0;
      for (size_t d = 0; d < perm.size(); ++d)
        src += idx[d] * st[perm[d]];
      return src;
    });
  }

  // ScalarOps.h's reduction K (identity and combine) in long double; mean: the sum / count.
  template <int K, class ReduceOpT> HostTensor reduce(ReduceOpT r, const HostTensor &in, bool mean) {
    HostTensor out = alloc(r.getResult());
    auto dims = r.getDims();
    // Output index of each input element: drop (or zero) the reduced dims.
    std::vector<int64_t> keptShape;
    for (int64_t d = 0; d < in.rank(); ++d)
      keptShape.push_back(llvm::is_contained(dims, d) ? 1 : in.shape[d]);
    auto keptStrides = stridesOf(keptShape);
    int64_t n = out.numel();
    long double identity = in.isFloat() ? (long double)scalar::rf_reduce_identity_f<K>()
                                        : (long double)scalar::rf_reduce_identity_i<K>(in.dtype == DType::I32);
    std::vector<long double> acc(n, identity);
    forEachIndex(in.shape, [&](int64_t k, const std::vector<int64_t> &idx) {
      int64_t o = 0;
      for (int64_t d = 0; d < in.rank(); ++d)
        o += (keptShape[d] == 1 ? 0 : idx[d]) * keptStrides[d];
      acc[o] = scalar::rf_reduce_combine<K, long double>(acc[o], in.get(k));
    });
    int64_t count = in.numel() / std::max<int64_t>(n, 1);
    for (int64_t o = 0; o < n; ++o) {
      long double v = acc[o];
      if (mean)
        v = count ? v / count : std::numeric_limits<double>::quiet_NaN(); // a mean over nothing
      if (out.isFloat())
        out.set(o, (double)v);
      else
        out.i[o] = wrapInteger(out.dtype, (int64_t)v);
    }
    return out;
  }

  // x · a = b through LAPACK on the data as R's column-major matrices (see SolveOp); where R
  // would stop, NaN everywhere.
  HostTensor solve(SolveOp s, const HostTensor &a, const HostTensor &b) {
    HostTensor out = alloc(s.getResult());
    int64_t n = a.shape[0], k = b.shape[0];
    std::vector<double> x(n * k);
    std::string why;
    bool ok = cpu::lapackSolve(n, k, a.f.data(), b.f.data(), s.getTolerance().convertToDouble(), x.data(), why);
    for (int64_t i = 0; i < n * k; ++i)
      out.set(i, ok ? x[i] : std::numeric_limits<double>::quiet_NaN());
    return out;
  }

  HostTensor matmul(MatmulOp m, const HostTensor &a, const HostTensor &b) {
    HostTensor out = alloc(m.getResult());
    bool ta = m.getTransposeA(), tb = m.getTransposeB();
    int64_t ar = a.rank(), br = b.rank(), orank = out.rank();
    int64_t M = out.shape[orank - 2], N = out.shape[orank - 1];
    int64_t K = ta ? a.shape[ar - 2] : a.shape[ar - 1];
    int64_t batch = orank == 3 ? out.shape[0] : 1;
    int64_t aBatch = ar == 3 ? a.shape[ar - 2] * a.shape[ar - 1] : 0;
    int64_t bBatch = br == 3 ? b.shape[br - 2] * b.shape[br - 1] : 0;
    for (int64_t p = 0; p < batch; ++p)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          long double acc = 0;
          for (int64_t k = 0; k < K; ++k) {
            int64_t ai = p * aBatch + (ta ? k * M + i : i * K + k);
            int64_t bi = p * bBatch + (tb ? j * K + k : k * N + j);
            acc += (long double)a.get(ai) * (long double)b.get(bi);
          }
          int64_t o = (p * M + i) * N + j;
          if (out.isFloat())
            out.set(o, (double)acc);
          else
            out.i[o] = wrapInteger(out.dtype, (int64_t)acc);
        }
    return out;
  }

  // Attention as the unfused program computes it (the op's definition): scores and the softmax
  // in double, the probabilities rounded to q's type before the product with v. Rows are
  // independent: spread over the CPU threads.
  struct AttentionShape {
    int64_t B, L, S, D, Dv;
    double scale;
    DType dt;
    // The masks: score (l, s) is `fill` where causal and s > l, or where mask (its size-1 dims
    // spread: strides of 0) is true; its gradient is then 0.
    bool causal = false;
    const HostTensor *mask = nullptr;
    std::array<int64_t, 3> maskStride = {0, 0, 0};
    double fill = -std::numeric_limits<double>::infinity();
    bool masked(int64_t b, int64_t l, int64_t s) const {
      return (causal && s > l) || (mask && mask->i[b * maskStride[0] + l * maskStride[1] + s * maskStride[2]] != 0);
    }
    double score(int64_t b, int64_t l, int64_t s, double scaled) const { return masked(b, l, s) ? fill : scaled; }
    // Dropout: probability (b, l, s) is multiplied by this (0, or the scale where its draw is
    // kept), as the program written out multiplies it in f32.
    bool dropout = false;
    unsigned seed0 = 0, seed1 = 0;
    float dropThreshold = 0, dropScale = 1;
    std::array<int64_t, 3> dropStride = {0, 0, 0};
    float kept(int64_t b, int64_t l, int64_t s) const {
      if (!dropout)
        return 1;
      auto i = (unsigned long long)(b * dropStride[0] + l * dropStride[1] + s * dropStride[2]);
      return scalar::rf_random_uniform(i, seed0, seed1) >= dropThreshold ? dropScale : 0.f;
    }
    // A probability after dropout (`kept`: kept(b, l, s)), rounded to q's type (as the product
    // with v reads it).
    double dropped(double p, float kept) const {
      if (dropout)
        p = (float)((float)p * kept);
      return roundToDType(dt, p);
    }
  };
  // Both ops: q, k, v first; the mask (if any) at `maskOperand`, then the dropout seed (if any).
  template <class AttentionOpT>
  static AttentionShape attentionShape(AttentionOpT op, const std::vector<HostTensor> &in, unsigned maskOperand) {
    AttentionShape a{in[0].shape[0], in[0].shape[1], in[1].shape[1], in[0].shape[2],
                     in[2].shape[2], op.getScale().convertToDouble(), in[0].dtype};
    a.causal = op.getCausal();
    if (auto v = op.getMaskValue())
      a.fill = v->convertToDouble();
    if (op.getMask()) {
      a.mask = &in[maskOperand];
      a.maskStride = attentionMaskStrides(a.mask->shape);
    }
    if (op.getDropoutSeed()) {
      const HostTensor &seed = in[maskOperand + (op.getMask() ? 1 : 0)];
      a.dropout = true;
      a.seed0 = (unsigned)(uint32_t)seed.i[0];
      a.seed1 = (unsigned)(uint32_t)seed.i[1];
      a.dropThreshold = (float)op.getDropoutThreshold()->convertToDouble();
      a.dropScale = (float)op.getDropoutScale()->convertToDouble();
      ArrayRef<int64_t> d = *op.getDropoutStrides();
      a.dropStride = {d[0], d[1], d[2]};
    }
    return a;
  }
  static double dot(const double *x, const double *y, int64_t n) {
    double acc = 0;
    for (int64_t i = 0; i < n; ++i)
      acc += x[i] * y[i];
    return acc;
  }
  // Row (b, l)'s scores scale * q_l . k_s into `row` (S values); returns their maximum.
  static double attentionScores(const AttentionShape &a, const HostTensor &q, const HostTensor &k, int64_t b,
                                int64_t l, std::vector<double> &row) {
    double m = -std::numeric_limits<double>::infinity();
    const double *qr = &q.f[(b * a.L + l) * a.D];
    for (int64_t s = 0; s < a.S; ++s) {
      row[s] = a.score(b, l, s, a.scale * dot(qr, &k.f[(b * a.S + s) * a.D], a.D));
      m = std::max(m, row[s]);
    }
    return m;
  }

  std::vector<HostTensor> attention(AttentionOp op, const std::vector<HostTensor> &in) {
    AttentionShape a = attentionShape(op, in, 3);
    HostTensor out = alloc(op.getOut()), lse = alloc(op.getLse());
    cpu::parallelFor(a.B * a.L, 0, a.S * (a.D + a.Dv), [&](int64_t begin, int64_t end) {
      std::vector<double> row(a.S), acc(a.Dv);
      for (int64_t r = begin; r < end; ++r) {
        int64_t b = r / a.L, l = r % a.L;
        double m = attentionScores(a, in[0], in[1], b, l, row), sum = 0;
        for (double &x : row)
          sum += (x = std::exp(x - m));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t s = 0; s < a.S; ++s) {
          double p = a.dropped(row[s] / sum, a.kept(b, l, s));
          const double *vr = &in[2].f[(b * a.S + s) * a.Dv];
          for (int64_t d = 0; d < a.Dv; ++d)
            acc[d] += p * vr[d];
        }
        for (int64_t d = 0; d < a.Dv; ++d)
          out.set(r * a.Dv + d, acc[d]);
        lse.set(r, m + std::log(sum));
      }
    });
    return {out, lse};
  }

  // grad_q by rows of q, then grad_k and grad_v by rows of k (each thread owns what it writes).
  // With dropout, dP' = grad_out v^T is the kept probabilities' gradient: dP = dP' times what
  // dropout multiplied by.
  std::vector<HostTensor> attentionBackward(AttentionBackwardOp op, const std::vector<HostTensor> &in) {
    AttentionShape a = attentionShape(op, in, 6);
    const HostTensor &q = in[0], &k = in[1], &v = in[2], &g = in[3], &lse = in[4], &delta = in[5];
    HostTensor dq = alloc(op.getGradQ()), dk = alloc(op.getGradK()), dv = alloc(op.getGradV());
    // P from a score of row r, and dS of row (b, l) at key s (`kept`: a.kept(b, l, s)).
    auto probability = [&](double score, int64_t r) { return std::exp(score - lse.f[r]); };
    auto gradScore = [&](double p, int64_t b, int64_t l, int64_t s, float kept) {
      if (a.masked(b, l, s))
        return 0.0;
      double dp = dot(&g.f[(b * a.L + l) * a.Dv], &v.f[(b * a.S + s) * a.Dv], a.Dv) * kept;
      return roundToDType(a.dt, p * (dp - delta.f[b * a.L + l]));
    };
    cpu::parallelFor(a.B * a.L, 0, a.S * (a.D + a.Dv), [&](int64_t begin, int64_t end) {
      std::vector<double> row(a.S), acc(a.D);
      for (int64_t r = begin; r < end; ++r) {
        int64_t b = r / a.L, l = r % a.L;
        attentionScores(a, q, k, b, l, row);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t s = 0; s < a.S; ++s) {
          double ds = gradScore(probability(row[s], r), b, l, s, a.kept(b, l, s));
          const double *kr = &k.f[(b * a.S + s) * a.D];
          for (int64_t d = 0; d < a.D; ++d)
            acc[d] += ds * kr[d];
        }
        for (int64_t d = 0; d < a.D; ++d)
          dq.set(r * a.D + d, a.scale * acc[d]);
      }
    });
    cpu::parallelFor(a.B * a.S, 0, a.L * (a.D + a.Dv), [&](int64_t begin, int64_t end) {
      std::vector<double> accK(a.D), accV(a.Dv);
      for (int64_t c = begin; c < end; ++c) {
        int64_t b = c / a.S, s = c % a.S;
        std::fill(accK.begin(), accK.end(), 0.0);
        std::fill(accV.begin(), accV.end(), 0.0);
        for (int64_t l = 0; l < a.L; ++l) {
          int64_t r = b * a.L + l;
          const double *qr = &q.f[r * a.D], *kr = &k.f[c * a.D], *gr = &g.f[r * a.Dv];
          float kept = a.kept(b, l, s);
          double p = probability(a.score(b, l, s, a.scale * dot(qr, kr, a.D)), r), ds = gradScore(p, b, l, s, kept),
                 pr = a.dropped(p, kept);
          for (int64_t d = 0; d < a.D; ++d)
            accK[d] += ds * qr[d];
          for (int64_t d = 0; d < a.Dv; ++d)
            accV[d] += pr * gr[d];
        }
        for (int64_t d = 0; d < a.D; ++d)
          dk.set(c * a.D + d, a.scale * accK[d]);
        for (int64_t d = 0; d < a.Dv; ++d)
          dv.set(c * a.Dv + d, accV[d]);
      }
    });
    return {dq, dk, dv};
  }

  // The three convolution ops accumulate over the same taps (Geometry.h) into different
  // tensors: the output, the input's gradient or the filter's.
  HostTensor convolution(Operation *op, const std::vector<HostTensor> &in) {
    ConvGeometry g = convGeometry(op);
    HostTensor out = alloc(op->getResult(0));
    std::vector<long double> acc(out.numel(), 0.0L);
    switch (g.direction) {
    case ConvDirection::Forward: {
      const HostTensor &x = in[0], &w = in[1];
      g.forEachTap([&](int64_t xi, int64_t wi, int64_t yi) { acc[yi] += (long double)x.f[xi] * w.f[wi]; });
      if (in.size() > 2) // bias [O]
        for (int64_t i = 0; i < (int64_t)acc.size(); ++i)
          acc[i] += in[2].f[g.nhwc ? i % g.o : (i / (g.oh * g.ow)) % g.o];
      break;
    }
    case ConvDirection::BackwardInput: {
      const HostTensor &dy = in[0], &w = in[1];
      g.forEachTap([&](int64_t xi, int64_t wi, int64_t yi) { acc[xi] += (long double)dy.f[yi] * w.f[wi]; });
      break;
    }
    case ConvDirection::BackwardFilter: {
      const HostTensor &x = in[0], &dy = in[1];
      g.forEachTap([&](int64_t xi, int64_t wi, int64_t yi) { acc[wi] += (long double)x.f[xi] * dy.f[yi]; });
      break;
    }
    }
    for (int64_t i = 0; i < (int64_t)acc.size(); ++i)
      out.set(i, (double)acc[i]);
    return out;
  }

  // Pooling and its gradients (PoolGeometry::run, shared with the CPU backend).
  HostTensor pooling(Operation *op, const std::vector<HostTensor> &in) {
    HostTensor out = alloc(op->getResult(0));
    std::vector<long double> acc(out.numel());
    poolGeometry(op).run([&](int k, int64_t i) { return in[k].f[i]; }, acc);
    for (int64_t i = 0; i < (int64_t)acc.size(); ++i)
      out.set(i, (double)acc[i]);
    return out;
  }
};

} // namespace

std::vector<HostTensor> interpret(ModuleOp module, const std::string &entry,
                                  const std::vector<HostTensor> &inputs,
                                  const InterpreterOptions &options) {
  auto fn = module.lookupSymbol<func::FuncOp>(entry);
  if (!fn)
    throw InterpreterError("no function named '" + entry + "' in the module");
  Interpreter interp(module, options);
  return interp.call(fn, inputs);
}

std::vector<HostTensor> interpretOperation(Operation *op, const std::vector<HostTensor> &operands,
                                           const InterpreterOptions &options) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module)
    throw InterpreterError("the op is not inside a module");
  if (operands.size() != op->getNumOperands())
    throw InterpreterError("wrong number of operands for " + describe(op));
  Interpreter interp(module, options);
  return interp.runOne(op, operands);
}

std::vector<HostTensor> interpretText(const std::string &text, const std::string &entry,
                                      const std::vector<HostTensor> &inputs,
                                      const InterpreterOptions &options) {
  DialectRegistry registry;
  registry.insert<RfuseDialect, func::FuncDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d.getLocation() << ": " << d << "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
  if (!module || failed(verify(*module)))
    throw InterpreterError("invalid module:\n" + diagnostics);
  return interpret(*module, entry, inputs, options);
}

} // namespace rfuse
