#include "rfuse/Frontend/GraphBuilder.h"

#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/IR/ShapeFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <mutex>
#include <thread>

using namespace mlir;

namespace rfuse {

struct GraphBuilder::Impl {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  OpBuilder b;
  Location loc;
  std::vector<Value> values;
  std::vector<int> valueFrame;    // which function frame each value belongs to
  std::vector<func::FuncOp> functions; // TracedFunction ids
  struct Frame {
    func::FuncOp fn;
    int id;
  };
  std::vector<Frame> frames;
  int nextFrameId = 0;
  bool finished = false;
  std::string autocast; // "bf16" / "f16": the mark float32 products get (setAutocast)

  // Marks a float32 product or convolution for rfuse-autocast while autocast is on.
  Value markAutocast(Value v) {
    if (!autocast.empty() && typeOf(v).getElementType().isF32())
      v.getDefiningOp()->setAttr("rfuse.autocast", b.getStringAttr(autocast));
    return v;
  }

  Impl() : b(&ctx), loc(UnknownLoc::get(&ctx)) {
    ctx.getOrLoadDialect<RfuseDialect>();
    ctx.getOrLoadDialect<func::FuncDialect>();
    module = ModuleOp::create(loc);
  }

  void checkOpen() {
    if (finished)
      throw TraceError("the graph is finished; no more ops can be recorded");
  }

  /// The function a TracedFunction names; `what` names the operation in the error.
  func::FuncOp traced(TracedFunction fn, const char *what) const;

  void pushFunction(const std::string &name, bool isPrivate) {
    checkOpen();
    if (module->lookupSymbol(name))
      throw TraceError("a function named '" + name + "' is already traced");
    b.setInsertionPointToEnd(module->getBody());
    auto fn = b.create<func::FuncOp>(loc, name, b.getFunctionType({}, {}));
    if (isPrivate)
      fn.setPrivate();
    fn.addEntryBlock();
    frames.push_back({fn, nextFrameId++});
    b.setInsertionPointToEnd(&fn.getBody().front());
  }

  // Ends the innermost function with `results` returned; restores the builder to the enclosing one.
  func::FuncOp popFunction(const std::vector<TracedValue> &results) {
    checkOpen();
    if (frames.empty())
      throw TraceError("no function is being traced");
    std::vector<Value> vals;
    for (TracedValue r : results)
      vals.push_back(get(r, "return"));
    func::FuncOp fn = frames.back().fn;
    Block &body = fn.getBody().front();
    b.setInsertionPointToEnd(&body);
    b.create<func::ReturnOp>(loc, vals);
    SmallVector<Type> resultTypes;
    for (Value v : vals)
      resultTypes.push_back(v.getType());
    fn.setFunctionType(b.getFunctionType(body.getArgumentTypes(), resultTypes));
    frames.pop_back();
    if (!frames.empty())
      b.setInsertionPointToEnd(&frames.back().fn.getBody().front());
    return fn;
  }

  Value get(TracedValue v, const char *what) {
    if (v.id < 0 || v.id >= (int)values.size())
      throw TraceError(std::string(what) + ": invalid traced value");
    if (frames.empty() || valueFrame[v.id] != frames.back().id)
      throw TraceError(std::string(what) + ": value belongs to another traced function; pass it "
                       "as an argument instead");
    return values[v.id];
  }

  // Like get(), but for introspection: any value of this builder, in any function.
  Value peek(TracedValue v, const char *what) const {
    if (v.id < 0 || v.id >= (int)values.size())
      throw TraceError(std::string(what) + ": invalid traced value");
    return values[v.id];
  }

  TracedValue wrap(Value v) {
    values.push_back(v);
    valueFrame.push_back(frames.back().id);
    return TracedValue{(int)values.size() - 1};
  }

  static RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

  // Creates an op, verifies it, and turns any diagnostic into a ShapeError naming `what`.
  template <class OpT, class... Args> Value create(const char *what, Args &&...args) {
    return createOp<OpT>(what, std::forward<Args>(args)...)->getResult(0);
  }
  // The same, returning the op (for its several results).
  template <class OpT, class... Args> OpT createOp(const char *what, Args &&...args) {
    checkOpen();
    std::string diag;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      if (diag.empty())
        diag = d.str();
      return success();
    });
    auto op = b.create<OpT>(loc, std::forward<Args>(args)...);
    if (failed(verify(op.getOperation()))) {
      op.erase();
      throw ShapeError(std::string(what) + ": " + stripOpPrefix(diag));
    }
    return op;
  }

  // "'rfuse.add' op operand ..." -> "operand ..." (the caller prefixes its own name).
  static std::string stripOpPrefix(const std::string &msg) {
    size_t p = msg.find("' op ");
    return p == std::string::npos ? msg : msg.substr(p + 5);
  }

  [[noreturn]] static void shapeFail(const char *what, const std::string &err) {
    throw ShapeError(std::string(what) + ": " + err);
  }

  Value broadcastTo(Value x, ArrayRef<int64_t> shape, const char *what) {
    auto t = typeOf(x);
    if (t.getShape() == shape)
      return x;
    std::string err;
    Shape out;
    if (!broadcastShapes(t.getShape(), shape, out, err) || ArrayRef<int64_t>(out) != shape)
      shapeFail(what, err.empty() ? "cannot broadcast " + shapeToString(t.getShape()) + " to " +
                                        shapeToString(shape)
                                  : err);
    SmallVector<int64_t> dims;
    int64_t offset = (int64_t)shape.size() - t.getRank();
    for (int64_t i = 0; i < t.getRank(); ++i)
      dims.push_back(i + offset);
    return create<BroadcastInDimOp>(what, RankedTensorType::get(shape, t.getElementType()), x,
                                    b.getDenseI64ArrayAttr(dims));
  }

  // Broadcasts operands to a common shape; all must share one dtype unless `mixedOk`.
  SmallVector<Value> broadcastAll(ArrayRef<Value> vs, const char *what, bool sameDtype = true) {
    Shape shape(typeOf(vs[0]).getShape());
    for (Value v : vs.drop_front()) {
      if (sameDtype && typeOf(v).getElementType() != typeOf(vs[0]).getElementType())
        shapeFail(what, std::string("operand dtypes differ (") + dtypeName(dtypeOf(vs[0])) +
                            " vs " + dtypeName(dtypeOf(v)) + "); cast one of them first");
      std::string err;
      Shape out;
      if (!broadcastShapes(shape, typeOf(v).getShape(), out, err))
        shapeFail(what, err);
      shape = out;
    }
    SmallVector<Value> out;
    for (Value v : vs)
      out.push_back(broadcastTo(v, shape, what));
    return out;
  }

  template <class OpT> TracedValue unary(TracedValue x, const char *what) {
    Value v = get(x, what);
    return wrap(create<OpT>(what, v.getType(), v));
  }

  template <class OpT> TracedValue binary(TracedValue a, TracedValue c, const char *what) {
    auto ops = broadcastAll({get(a, what), get(c, what)}, what);
    return wrap(create<OpT>(what, ops[0].getType(), ops[0], ops[1]));
  }

  template <class OpT>
  TracedValue reduce(TracedValue x, const std::vector<int64_t> &dims, bool keep, const char *what) {
    Value v = get(x, what);
    Shape out;
    std::string err;
    if (!inferReduceShape(typeOf(v).getShape(), dims, keep, out, err))
      shapeFail(what, err);
    return wrap(create<OpT>(what, RankedTensorType::get(out, typeOf(v).getElementType()), v,
                            b.getDenseI64ArrayAttr(dims), b.getBoolAttr(keep)));
  }

  Attribute element(Type elemType, double v) {
    if (llvm::isa<FloatType>(elemType))
      return b.getFloatAttr(elemType, v);
    return b.getIntegerAttr(elemType, (int64_t)v);
  }

  template <class PoolOpT>
  TracedValue pool(TracedValue x, const Pool2dParams &p, const char *what, bool isAvg) {
    Value v = get(x, what);
    bool nhwc = p.layout == ImageLayout::NHWC;
    Shape out;
    std::string err;
    if (!inferPool2dShape(typeOf(v).getShape(), p.kernel, p.strides, p.padding, nhwc, out, err))
      shapeFail(what, err);
    auto type = RankedTensorType::get(out, typeOf(v).getElementType());
    auto layout = LayoutAttr::get(&ctx, nhwc ? Layout::NHWC : Layout::NCHW);
    if constexpr (std::is_same_v<PoolOpT, AvgPool2dOp>)
      return wrap(create<PoolOpT>(what, type, v, b.getDenseI64ArrayAttr(p.kernel),
                                  b.getDenseI64ArrayAttr(p.strides),
                                  b.getDenseI64ArrayAttr(p.padding), layout,
                                  b.getBoolAttr(p.countIncludePad)));
    else
      return wrap(create<PoolOpT>(what, type, v, b.getDenseI64ArrayAttr(p.kernel),
                                  b.getDenseI64ArrayAttr(p.strides),
                                  b.getDenseI64ArrayAttr(p.padding), layout));
  }
};

GraphBuilder::GraphBuilder(const std::string &entryName) : impl(std::make_unique<Impl>()) {
  impl->pushFunction(entryName, /*isPrivate=*/false);
}
GraphBuilder::~GraphBuilder() = default;

TracedValue GraphBuilder::input(const std::vector<int64_t> &shape, DType dtype,
                                const std::string &name) {
  impl->checkOpen();
  for (int64_t d : shape)
    if (d < 0)
      throw ShapeError("input" + (name.empty() ? std::string() : " '" + name + "'") +
                       ": dimensions must be non-negative, got " + shapeToString(shape));
  auto type = RankedTensorType::get(shape, toMlirType(&impl->ctx, dtype));
  func::FuncOp fn = impl->frames.back().fn;
  Location argLoc = name.empty() ? impl->loc : NameLoc::get(impl->b.getStringAttr(name));
  BlockArgument arg = fn.getBody().front().addArgument(type, argLoc);
  fn.setFunctionType(impl->b.getFunctionType(fn.getBody().front().getArgumentTypes(),
                                             fn.getFunctionType().getResults()));
  return impl->wrap(arg);
}

TracedValue GraphBuilder::scalar(double value, DType dtype) { return constant({value}, {}, dtype); }

TracedValue GraphBuilder::constant(const std::vector<double> &values,
                                   const std::vector<int64_t> &shape, DType dtype) {
  impl->checkOpen();
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  if ((int64_t)values.size() != n)
    throw ShapeError("constant: " + std::to_string(values.size()) + " values given for shape " +
                     shapeToString(shape) + " (" + std::to_string(n) + " elements)");
  Type elem = toMlirType(&impl->ctx, dtype);
  auto type = RankedTensorType::get(shape, elem);
  SmallVector<Attribute> attrs;
  for (double v : values)
    attrs.push_back(impl->element(elem, v));
  ElementsAttr value = DenseElementsAttr::get(type, attrs);
  return impl->wrap(impl->create<ConstantOp>("constant", type, value));
}

#define RFUSE_UNARY_METHOD(METHOD, OP, NAME)                                                      \
  TracedValue GraphBuilder::METHOD(TracedValue x) { return impl->unary<OP>(x, NAME); }
RFUSE_UNARY_METHOD(neg, NegOp, "neg")
RFUSE_UNARY_METHOD(abs, AbsOp, "abs")
RFUSE_UNARY_METHOD(exp, ExpOp, "exp")
RFUSE_UNARY_METHOD(log, LogOp, "log")
RFUSE_UNARY_METHOD(sqrt, SqrtOp, "sqrt")
RFUSE_UNARY_METHOD(rsqrt, RsqrtOp, "rsqrt")
RFUSE_UNARY_METHOD(tanh, TanhOp, "tanh")
RFUSE_UNARY_METHOD(sigmoid, SigmoidOp, "sigmoid")
RFUSE_UNARY_METHOD(relu, ReluOp, "relu")
RFUSE_UNARY_METHOD(sin, SinOp, "sin")
RFUSE_UNARY_METHOD(cos, CosOp, "cos")
RFUSE_UNARY_METHOD(floor, FloorOp, "floor")
RFUSE_UNARY_METHOD(erfc, ErfcOp, "erfc")
RFUSE_UNARY_METHOD(roundEven, RoundEvenOp, "round_even")
RFUSE_UNARY_METHOD(tan, TanOp, "tan")
RFUSE_UNARY_METHOD(atan, AtanOp, "atan")
RFUSE_UNARY_METHOD(asin, AsinOp, "asin")
RFUSE_UNARY_METHOD(acos, AcosOp, "acos")
RFUSE_UNARY_METHOD(tgamma, TgammaOp, "tgamma")
RFUSE_UNARY_METHOD(lgamma, LgammaOp, "lgamma")
RFUSE_UNARY_METHOD(normalQuantile, QnormOp, "qnorm")
RFUSE_UNARY_METHOD(digammaFunction, DigammaOp, "digamma")
RFUSE_UNARY_METHOD(trigammaFunction, TrigammaOp, "trigamma")
RFUSE_UNARY_METHOD(logicalNot, NotOp, "not")
#undef RFUSE_UNARY_METHOD

TracedValue GraphBuilder::gelu(TracedValue x, bool tanhApproximation) {
  Value v = impl->get(x, "gelu");
  auto approx = GeluApproximationAttr::get(
      &impl->ctx, tanhApproximation ? GeluApproximation::tanh : GeluApproximation::none);
  return impl->wrap(impl->create<GeluOp>("gelu", v.getType(), v, approx));
}

#define RFUSE_BINARY_METHOD(METHOD, OP, NAME)                                                     \
  TracedValue GraphBuilder::METHOD(TracedValue a, TracedValue b) {                                \
    return impl->binary<OP>(a, b, NAME);                                                          \
  }
RFUSE_BINARY_METHOD(add, AddOp, "add")
RFUSE_BINARY_METHOD(sub, SubOp, "sub")
RFUSE_BINARY_METHOD(mul, MulOp, "mul")
RFUSE_BINARY_METHOD(div, DivOp, "div")
RFUSE_BINARY_METHOD(pow, PowOp, "pow")
RFUSE_BINARY_METHOD(atan2, Atan2Op, "atan2")
RFUSE_BINARY_METHOD(maximum, MaxOp, "max")
RFUSE_BINARY_METHOD(minimum, MinOp, "min")
RFUSE_BINARY_METHOD(logicalAnd, AndOp, "and")
RFUSE_BINARY_METHOD(logicalOr, OrOp, "or")
#undef RFUSE_BINARY_METHOD

TracedValue GraphBuilder::compare(ComparePredicate p, TracedValue a, TracedValue c) {
  auto ops = impl->broadcastAll({impl->get(a, "compare"), impl->get(c, "compare")}, "compare");
  auto pred = CmpPredicateAttr::get(&impl->ctx, static_cast<CmpPredicate>(p));
  auto type = RankedTensorType::get(Impl::typeOf(ops[0]).getShape(), impl->b.getI1Type());
  return impl->wrap(impl->create<CompareOp>("compare", type, pred, ops[0], ops[1]));
}

TracedValue GraphBuilder::select(TracedValue cond, TracedValue onTrue, TracedValue onFalse) {
  Value c = impl->get(cond, "select"), t = impl->get(onTrue, "select"),
        f = impl->get(onFalse, "select");
  if (!Impl::typeOf(c).getElementType().isInteger(1))
    Impl::shapeFail("select", std::string("condition must be a boolean (i1) tensor, got ") +
                                  dtypeName(dtypeOf(c)));
  auto ops = impl->broadcastAll({c, t, f}, "select", /*sameDtype=*/false);
  if (Impl::typeOf(ops[1]) != Impl::typeOf(ops[2]))
    Impl::shapeFail("select", std::string("branch dtypes differ (") + dtypeName(dtypeOf(t)) +
                                  " vs " + dtypeName(dtypeOf(f)) + ")");
  return impl->wrap(impl->create<SelectOp>("select", ops[1].getType(), ops[0], ops[1], ops[2]));
}

TracedValue GraphBuilder::cast(TracedValue x, DType to) {
  Value v = impl->get(x, "cast");
  auto type = RankedTensorType::get(Impl::typeOf(v).getShape(), toMlirType(&impl->ctx, to));
  if (type == v.getType())
    return x;
  return impl->wrap(impl->create<CastOp>("cast", type, v));
}

TracedValue GraphBuilder::stopGradient(TracedValue x) {
  Value v = impl->get(x, "stop_gradient");
  return impl->wrap(impl->create<StopGradientOp>("stop_gradient", v.getType(), v));
}

TracedValue GraphBuilder::broadcastInDim(TracedValue x, const std::vector<int64_t> &shape,
                                         const std::vector<int64_t> &dims) {
  Value v = impl->get(x, "broadcast_in_dim");
  std::string err;
  if (!checkBroadcastInDim(Impl::typeOf(v).getShape(), dims, shape, err))
    Impl::shapeFail("broadcast_in_dim", err);
  auto type = RankedTensorType::get(shape, Impl::typeOf(v).getElementType());
  return impl->wrap(impl->create<BroadcastInDimOp>("broadcast_in_dim", type, v,
                                                   impl->b.getDenseI64ArrayAttr(dims)));
}

TracedValue GraphBuilder::broadcastTo(TracedValue x, const std::vector<int64_t> &shape) {
  return impl->wrap(impl->broadcastTo(impl->get(x, "broadcast"), shape, "broadcast"));
}

TracedValue GraphBuilder::transpose(TracedValue x, const std::vector<int64_t> &perm) {
  Value v = impl->get(x, "transpose");
  Shape out;
  std::string err;
  if (!inferTransposeShape(Impl::typeOf(v).getShape(), perm, out, err))
    Impl::shapeFail("transpose", err);
  auto type = RankedTensorType::get(out, Impl::typeOf(v).getElementType());
  return impl->wrap(
      impl->create<TransposeOp>("transpose", type, v, impl->b.getDenseI64ArrayAttr(perm)));
}

TracedValue GraphBuilder::reshape(TracedValue x, const std::vector<int64_t> &shape) {
  Value v = impl->get(x, "reshape");
  std::string err;
  if (!checkReshape(Impl::typeOf(v).getShape(), shape, err))
    Impl::shapeFail("reshape", err);
  auto type = RankedTensorType::get(shape, Impl::typeOf(v).getElementType());
  return impl->wrap(impl->create<ReshapeOp>("reshape", type, v));
}

TracedValue GraphBuilder::slice(TracedValue x, const std::vector<int64_t> &start,
                                const std::vector<int64_t> &limit, const std::vector<int64_t> &strides) {
  Value v = impl->get(x, "slice");
  Shape out;
  std::string err;
  if (!inferSliceShape(Impl::typeOf(v).getShape(), start, limit, strides, out, err))
    Impl::shapeFail("slice", err);
  auto type = RankedTensorType::get(out, Impl::typeOf(v).getElementType());
  auto &b = impl->b;
  return impl->wrap(impl->create<SliceOp>("slice", type, v, b.getDenseI64ArrayAttr(start),
                                          b.getDenseI64ArrayAttr(limit), b.getDenseI64ArrayAttr(strides)));
}

TracedValue GraphBuilder::reverse(TracedValue x, const std::vector<int64_t> &dims) {
  Value v = impl->get(x, "reverse");
  std::string err;
  if (!checkReverseDims(Impl::typeOf(v).getShape(), dims, err))
    Impl::shapeFail("reverse", err);
  return impl->wrap(impl->create<ReverseOp>("reverse", v.getType(), v, impl->b.getDenseI64ArrayAttr(dims)));
}

TracedValue GraphBuilder::pad(TracedValue x, const std::vector<int64_t> &low, const std::vector<int64_t> &high,
                              const std::vector<int64_t> &interior, double value) {
  Value v = impl->get(x, "pad");
  Shape out;
  std::string err;
  if (!inferPadShape(Impl::typeOf(v).getShape(), low, high, interior, out, err))
    Impl::shapeFail("pad", err);
  auto type = RankedTensorType::get(out, Impl::typeOf(v).getElementType());
  auto &b = impl->b;
  return impl->wrap(impl->create<PadOp>("pad", type, v, b.getDenseI64ArrayAttr(low), b.getDenseI64ArrayAttr(high),
                                        b.getDenseI64ArrayAttr(interior), b.getF64FloatAttr(value)));
}

TracedValue GraphBuilder::concat(const std::vector<TracedValue> &xs, int64_t dim) {
  SmallVector<Value> vs;
  SmallVector<SmallVector<int64_t, 4>> shapes;
  for (TracedValue x : xs) {
    vs.push_back(impl->get(x, "concat"));
    shapes.emplace_back(Impl::typeOf(vs.back()).getShape());
  }
  Shape out;
  std::string err;
  if (!inferConcatShape(shapes, dim, out, err))
    Impl::shapeFail("concat", err);
  for (Value v : vs)
    if (Impl::typeOf(v).getElementType() != Impl::typeOf(vs[0]).getElementType())
      Impl::shapeFail("concat", "operands have different element types");
  auto type = RankedTensorType::get(out, Impl::typeOf(vs[0]).getElementType());
  return impl->wrap(impl->create<ConcatOp>("concat", type, vs, impl->b.getI64IntegerAttr(dim)));
}

TracedValue GraphBuilder::randomUniform(TracedValue seed, const std::vector<int64_t> &shape) {
  Value k = impl->get(seed, "random_uniform");
  auto kt = llvm::cast<RankedTensorType>(k.getType());
  if (kt.getShape() != llvm::ArrayRef<int64_t>{2} || !kt.getElementType().isInteger(32))
    Impl::shapeFail("random_uniform", "the seed must be two i32 values");
  for (int64_t d : shape)
    if (d < 0)
      Impl::shapeFail("random_uniform", "dimensions must be non-negative, got " + shapeToString(shape));
  auto type = RankedTensorType::get(shape, impl->b.getF32Type());
  return impl->wrap(impl->create<RandomUniformOp>("random_uniform", type, k));
}

TracedValue GraphBuilder::scan(TracedValue x, int64_t dim, const std::string &kind) {
  Value v = impl->get(x, "scan");
  auto k = symbolizeScanKind(kind);
  if (!k)
    Impl::shapeFail("scan", "unknown kind '" + kind + "' (sum, prod, max or min)");
  if (dim < 0 || dim >= Impl::typeOf(v).getRank())
    Impl::shapeFail("scan", "dim " + std::to_string(dim) + " is out of range");
  if (Impl::typeOf(v).getElementType().isInteger(1))
    Impl::shapeFail("scan", "a mask has no cumulative " + kind + " (cast it first)");
  return impl->wrap(impl->create<ScanOp>("scan", v.getType(), v, impl->b.getI64IntegerAttr(dim),
                                         ScanKindAttr::get(&impl->ctx, *k)));
}

TracedValue GraphBuilder::gather(TracedValue x, const std::vector<int64_t> &indices, int64_t dim) {
  Value v = impl->get(x, "gather");
  auto shape = Impl::typeOf(v).getShape();
  Shape out;
  std::string err;
  if (!inferGatherShape(shape, {(int64_t)indices.size()}, dim, out, err))
    Impl::shapeFail("gather", err);
  for (int64_t i : indices)
    if (i < 0 || i >= shape[dim])
      Impl::shapeFail("gather", "index " + std::to_string(i) + " is out of range [0, " +
                                    std::to_string(shape[dim]) + ") of dim " + std::to_string(dim));
  auto idxType = RankedTensorType::get({(int64_t)indices.size()}, impl->b.getI64Type());
  Value idx = impl->create<ConstantOp>("constant", idxType,
                                       DenseElementsAttr::get(idxType, ArrayRef<int64_t>(indices)));
  auto type = RankedTensorType::get(out, Impl::typeOf(v).getElementType());
  return impl->wrap(impl->create<GatherOp>("gather", type, v, idx, impl->b.getI64IntegerAttr(dim)));
}

TracedValue GraphBuilder::solve(TracedValue a, TracedValue b, double tolerance) {
  Value va = impl->get(a, "solve"), vb = impl->get(b, "solve");
  auto ta = Impl::typeOf(va), tb = Impl::typeOf(vb);
  if (ta.getRank() != 2 || ta.getShape()[0] != ta.getShape()[1])
    Impl::shapeFail("solve", "'a' must be a square matrix");
  if (tb.getRank() != 2 || tb.getShape()[1] != ta.getShape()[0])
    Impl::shapeFail("solve", "'b' must be [k, " + std::to_string(ta.getShape()[0]) + "]");
  if (ta.getElementType() != tb.getElementType())
    Impl::shapeFail("solve", "'a' and 'b' must have one element type");
  return impl->wrap(impl->create<SolveOp>("solve", tb, va, vb, impl->b.getF64FloatAttr(tolerance)));
}

TracedValue GraphBuilder::cholesky(TracedValue a) {
  Value v = impl->get(a, "cholesky");
  auto t = Impl::typeOf(v);
  if (t.getRank() != 2 || t.getShape()[0] != t.getShape()[1])
    Impl::shapeFail("cholesky", "needs a square matrix");
  return impl->wrap(impl->create<CholeskyOp>("cholesky", t, v));
}

TracedValue GraphBuilder::logDeterminant(TracedValue a) {
  Value v = impl->get(a, "log_determinant");
  auto t = Impl::typeOf(v);
  if (t.getRank() != 2 || t.getShape()[0] != t.getShape()[1])
    Impl::shapeFail("log_determinant", "needs a square matrix");
  return impl->wrap(impl->create<LogDeterminantOp>("log_determinant", RankedTensorType::get({2}, t.getElementType()), v));
}

TracedValue GraphBuilder::gatherAt(TracedValue x, TracedValue indices, int64_t dim) {
  Value v = impl->get(x, "gather");
  Value i = impl->get(indices, "gather");
  auto shape = Impl::typeOf(v).getShape();
  auto idxShape = Impl::typeOf(i).getShape();
  if (idxShape.size() != 1)
    Impl::shapeFail("gather", "the index must be a vector (rank 1), not rank " + std::to_string(idxShape.size()));
  Shape out;
  std::string err;
  if (!inferGatherShape(shape, {idxShape[0]}, dim, out, err))
    Impl::shapeFail("gather", err);
  if (!Impl::typeOf(i).getElementType().isInteger(64))
    i = impl->get(cast(indices, DType::I64), "gather");
  auto type = RankedTensorType::get(out, Impl::typeOf(v).getElementType());
  return impl->wrap(impl->create<GatherOp>("gather", type, v, i, impl->b.getI64IntegerAttr(dim)));
}

std::vector<TracedValue> GraphBuilder::recurrent(const std::string &mode, TracedValue x, TracedValue h0, TracedValue c0,
                                                 TracedValue wIh, TracedValue wHh, TracedValue bIh, TracedValue bHh) {
  auto m = symbolizeRecurrentMode(mode);
  if (!m)
    Impl::shapeFail("recurrent", "mode must be lstm, gru, rnn_tanh or rnn_relu, not '" + mode + "'");
  bool lstm = *m == RecurrentMode::lstm;
  if (lstm != c0.valid())
    Impl::shapeFail("recurrent", lstm ? "an LSTM needs a cell state c0" : "only an LSTM has a cell state");
  Value xv = impl->get(x, "recurrent"), hv = impl->get(h0, "recurrent");
  Value cv = lstm ? impl->get(c0, "recurrent") : Value();
  auto xt = Impl::typeOf(xv), ht = Impl::typeOf(hv);
  if (xt.getRank() != 3 || ht.getRank() != 2)
    Impl::shapeFail("recurrent", "needs x [steps, batch, input] and h0 [batch, hidden]");
  auto y = RankedTensorType::get({xt.getShape()[0], xt.getShape()[1], ht.getShape()[1]}, xt.getElementType());
  SmallVector<Type> types = {y, ht};
  if (lstm)
    types.push_back(ht);
  auto op = impl->createOp<RecurrentOp>("recurrent", types, RecurrentModeAttr::get(&impl->ctx, *m), xv, hv, cv,
                                        impl->get(wIh, "recurrent"), impl->get(wHh, "recurrent"),
                                        impl->get(bIh, "recurrent"), impl->get(bHh, "recurrent"));
  std::vector<TracedValue> out;
  for (Value r : op->getResults())
    out.push_back(impl->wrap(r));
  return out;
}

std::pair<TracedValue, TracedValue> GraphBuilder::sort(TracedValue x, int64_t dim, bool descending, bool nanLargest) {
  Value v = impl->get(x, "sort");
  auto t = Impl::typeOf(v);
  if (dim < 0 || dim >= t.getRank())
    Impl::shapeFail("sort", "dim " + std::to_string(dim) + " is out of range");
  if (t.getElementType().isInteger(1))
    Impl::shapeFail("sort", "a mask has no order (cast it first)");
  auto op = impl->createOp<SortOp>("sort", v, (uint64_t)dim, descending, nanLargest);
  TracedValue values = impl->wrap(op.getValues());
  return {values, impl->wrap(op.getIndices())};
}

TracedValue GraphBuilder::takeAlong(TracedValue x, TracedValue indices, int64_t dim) {
  Value v = impl->get(x, "take_along");
  Value i = impl->get(indices, "take_along");
  auto t = Impl::typeOf(v), it = Impl::typeOf(i);
  if (dim < 0 || dim >= t.getRank())
    Impl::shapeFail("take_along", "dim " + std::to_string(dim) + " is out of range");
  if (!it.getElementType().isInteger(64))
    i = impl->get(cast(indices, DType::I64), "take_along");
  auto type = RankedTensorType::get(it.getShape(), t.getElementType());
  return impl->wrap(impl->create<TakeAlongOp>("take_along", type, v, i, impl->b.getI64IntegerAttr(dim)));
}

TracedValue GraphBuilder::scatterAdd(TracedValue x, TracedValue indices, int64_t dim, int64_t size) {
  Value v = impl->get(x, "scatter_add");
  Value i = impl->get(indices, "scatter_add");
  auto t = Impl::typeOf(v), it = Impl::typeOf(i);
  if (dim < 0 || dim >= t.getRank())
    Impl::shapeFail("scatter_add", "dim " + std::to_string(dim) + " is out of range");
  if (!llvm::isa<FloatType>(t.getElementType()))
    Impl::shapeFail("scatter_add", "adds float values (cast integers first)");
  if (it.getShape() != t.getShape())
    Impl::shapeFail("scatter_add", "the positions must have the values' shape");
  if (size < 0 || (size == 0 && t.getShape()[dim] != 0))
    Impl::shapeFail("scatter_add", "the result's length along dim " + std::to_string(dim) + " must hold the positions");
  if (!it.getElementType().isInteger(64))
    i = impl->get(cast(indices, DType::I64), "scatter_add");
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = size;
  auto type = RankedTensorType::get(shape, t.getElementType());
  return impl->wrap(impl->create<ScatterAddOp>("scatter_add", type, v, i, impl->b.getI64IntegerAttr(dim)));
}

TracedValue GraphBuilder::reduceSum(TracedValue x, const std::vector<int64_t> &d, bool k) {
  return impl->reduce<ReduceSumOp>(x, d, k, "reduce_sum");
}
TracedValue GraphBuilder::reduceMean(TracedValue x, const std::vector<int64_t> &d, bool k) {
  return impl->reduce<ReduceMeanOp>(x, d, k, "reduce_mean");
}
TracedValue GraphBuilder::reduceMax(TracedValue x, const std::vector<int64_t> &d, bool k) {
  return impl->reduce<ReduceMaxOp>(x, d, k, "reduce_max");
}
TracedValue GraphBuilder::reduceMin(TracedValue x, const std::vector<int64_t> &d, bool k) {
  return impl->reduce<ReduceMinOp>(x, d, k, "reduce_min");
}

TracedValue GraphBuilder::matmul(TracedValue a, TracedValue c, bool ta, bool tb) {
  Value l = impl->get(a, "matmul"), r = impl->get(c, "matmul");
  if (Impl::typeOf(l).getElementType() != Impl::typeOf(r).getElementType())
    Impl::shapeFail("matmul", std::string("operand dtypes differ (") + dtypeName(dtypeOf(l)) +
                                  " vs " + dtypeName(dtypeOf(r)) + "); cast one first");
  Shape out;
  std::string err;
  if (!inferMatmulShape(Impl::typeOf(l).getShape(), Impl::typeOf(r).getShape(), ta, tb, out, err))
    Impl::shapeFail("matmul", err);
  auto type = RankedTensorType::get(out, Impl::typeOf(l).getElementType());
  return impl->wrap(impl->markAutocast(
      impl->create<MatmulOp>("matmul", type, l, r, impl->b.getBoolAttr(ta), impl->b.getBoolAttr(tb))));
}

TracedValue GraphBuilder::conv2d(TracedValue input, TracedValue filter, TracedValue bias,
                                 const Conv2dParams &p) {
  Value x = impl->get(input, "conv2d"), w = impl->get(filter, "conv2d");
  Value bv = bias.valid() ? impl->get(bias, "conv2d") : Value();
  bool nhwc = p.layout == ImageLayout::NHWC;
  std::optional<ArrayRef<int64_t>> biasShape;
  if (bv)
    biasShape = Impl::typeOf(bv).getShape();
  Shape out;
  std::string err;
  if (!inferConv2dShape(Impl::typeOf(x).getShape(), Impl::typeOf(w).getShape(), biasShape,
                        p.strides, p.padding, p.dilation, p.groups, nhwc, out, err))
    Impl::shapeFail("conv2d", err);
  auto type = RankedTensorType::get(out, Impl::typeOf(x).getElementType());
  auto &b = impl->b;
  return impl->wrap(impl->markAutocast(impl->create<Conv2dOp>(
      "conv2d", type, x, w, bv, b.getDenseI64ArrayAttr(p.strides),
      b.getDenseI64ArrayAttr(p.padding), b.getDenseI64ArrayAttr(p.dilation),
      b.getI64IntegerAttr(p.groups), LayoutAttr::get(&impl->ctx, nhwc ? Layout::NHWC : Layout::NCHW))));
}

TracedValue GraphBuilder::maxPool2d(TracedValue x, const Pool2dParams &p) {
  return impl->pool<MaxPool2dOp>(x, p, "max_pool2d", false);
}
TracedValue GraphBuilder::avgPool2d(TracedValue x, const Pool2dParams &p) {
  return impl->pool<AvgPool2dOp>(x, p, "avg_pool2d", true);
}

void GraphBuilder::beginFunction(const std::string &name) {
  impl->pushFunction(name, /*isPrivate=*/true);
}

TracedFunction GraphBuilder::endFunction(const std::vector<TracedValue> &results) {
  if (impl->frames.size() < 2)
    throw TraceError("endFunction without a matching beginFunction");
  impl->functions.push_back(impl->popFunction(results));
  return TracedFunction{(int)impl->functions.size() - 1};
}

namespace {
// Checks the arguments of `what` ("call", "custom_vjp") of `fn` against the types the function was
// traced for.
void checkArguments(func::FuncOp fn, const SmallVector<Value> &operands, const char *what) {
  auto expected = fn.getFunctionType().getInputs();
  if (operands.size() != expected.size())
    throw ShapeError(std::string(what) + " @" + fn.getName().str() + ": takes " + std::to_string(expected.size()) +
                     " arguments, got " + std::to_string(operands.size()));
  for (size_t i = 0; i < operands.size(); ++i)
    if (operands[i].getType() != expected[i]) {
      std::string msg;
      llvm::raw_string_ostream os(msg);
      os << what << " @" << fn.getName() << ": argument #" << i << " has type " << operands[i].getType()
         << " but the function was traced for " << expected[i];
      throw ShapeError(os.str());
    }
}
} // namespace

func::FuncOp GraphBuilder::Impl::traced(TracedFunction fn, const char *what) const {
  if (fn.id < 0 || fn.id >= (int)functions.size())
    throw TraceError(std::string(what) + ": invalid traced function");
  return functions[fn.id];
}

std::vector<TracedValue> GraphBuilder::customVjp(TracedFunction forward, TracedFunction backward,
                                                 const std::vector<TracedValue> &args, int64_t numOutputs) {
  impl->checkOpen();
  func::FuncOp fwd = impl->traced(forward, "custom_vjp"), bwd = impl->traced(backward, "custom_vjp");
  SmallVector<Value> operands;
  for (TracedValue a : args)
    operands.push_back(impl->get(a, "custom_vjp"));
  checkArguments(fwd, operands, "custom_vjp");
  auto op = impl->b.create<CustomVjpOp>(impl->loc, fwd.getResultTypes(), fwd.getSymName(), bwd.getSymName(),
                                        numOutputs, operands);
  // The op's own checks (output dtypes, the backward's type), now rather than at finish().
  std::string diag;
  ScopedDiagnosticHandler handler(&impl->ctx, [&](Diagnostic &d) {
    diag += d.str() + "\n";
    return success();
  });
  SymbolTableCollection symbols;
  if (failed(op.verify()) || failed(op.verifySymbolUses(symbols))) {
    op.erase();
    throw ShapeError("custom_vjp: " + diag);
  }
  std::vector<TracedValue> out;
  for (Value r : op.getResults())
    out.push_back(impl->wrap(r));
  return out;
}

std::vector<TracedValue> GraphBuilder::call(TracedFunction fn, const std::vector<TracedValue> &args) {
  impl->checkOpen();
  func::FuncOp callee = impl->traced(fn, "call");
  SmallVector<Value> operands;
  for (TracedValue a : args)
    operands.push_back(impl->get(a, "call"));
  checkArguments(callee, operands, "call");
  auto op = impl->b.create<func::CallOp>(impl->loc, callee, operands);
  std::vector<TracedValue> out;
  for (Value r : op.getResults())
    out.push_back(impl->wrap(r));
  return out;
}

void GraphBuilder::finish(const std::vector<TracedValue> &results) {
  if (impl->frames.size() != 1)
    throw TraceError("finish: a helper function is still being traced (missing endFunction)");
  impl->popFunction(results);
  impl->finished = true;
  std::string diag;
  ScopedDiagnosticHandler handler(&impl->ctx, [&](Diagnostic &d) {
    diag += d.str() + "\n";
    return success();
  });
  if (failed(verify(*impl->module)))
    throw TraceError("the traced module does not verify: " + diag);
}

std::string GraphBuilder::moduleText(bool withLocations) const {
  std::string s;
  llvm::raw_string_ostream os(s);
  OpPrintingFlags flags;
  if (withLocations)
    flags.enableDebugInfo(true, /*prettyForm=*/false);
  impl->module->print(os, flags);
  return os.str();
}

uint64_t GraphBuilder::signatureHash() const { return signatureHashOf(moduleText(/*withLocations=*/false)); }

// The printed IR without locations captures ops, attributes, shapes, dtypes and structure.
uint64_t GraphBuilder::signatureHashOf(const std::string &moduleText) { return llvm::xxh3_64bits(moduleText); }

std::vector<int64_t> GraphBuilder::shape(TracedValue v) const {
  auto s = Impl::typeOf(impl->peek(v, "shape")).getShape();
  return {s.begin(), s.end()};
}

DType GraphBuilder::dtype(TracedValue v) const { return dtypeOf(impl->peek(v, "dtype")); }

void GraphBuilder::setAutocast(const std::string &dtype) {
  if (!dtype.empty() && dtype != "bf16" && dtype != "f16")
    throw TraceError("autocast: the low dtype is bf16 or f16, not '" + dtype + "'");
  impl->autocast = dtype;
}

void GraphBuilder::setSourceLocation(const std::string &description) {
  impl->loc = description.empty() ? Location(UnknownLoc::get(&impl->ctx))
                                  : Location(NameLoc::get(impl->b.getStringAttr(description)));
}

namespace {
struct BuilderWarmer {
  std::once_flag once;
  std::thread thread;
  ~BuilderWarmer() {
    if (thread.joinable())
      thread.join();
  }
} builderWarmer;
} // namespace

void warmGraphBuilderInBackground() {
  std::call_once(builderWarmer.once, [] {
    builderWarmer.thread = std::thread([] {
      try {
        GraphBuilder b("warm");
        TracedValue x = b.input({4}, DType::F32, "x");
        b.finish({b.add(b.mul(x, x), b.exp(x))});
        (void)b.moduleText(true);
        (void)b.signatureHash();
      } catch (...) {
      }
    });
  });
}

} // namespace rfuse
