// CPU lowering (see CpuLowering.h and docs/codegen.md): pointwise kernels as one linalg.generic
// over subviews of [begin, end); reductions as scf loop nests (row-major: a row per outer index;
// column-major: a column tile per call, partial results in stack scratch); matmuls as a BLAS call
// plus a pointwise epilogue function; convolutions as im2col + BLAS likewise.
#include "rfuse/Codegen/CpuLowering.h"
#include "rfuse/IR/Geometry.h"

#include "KernelRegion.h"
#include "NarrowFloats.h"
#include "ScalarIR.h"

#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/IR/ScalarOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"

#include <limits>

using namespace mlir;

namespace rfuse::cpu {

using codegen::ConvCall;
using codegen::LibraryCall;
using codegen::MatmulCall;
using codegen::Region;
using codegen::ReductionLayout;

namespace {

Type elemOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getElementType(); }

bool fail(std::string &why, const std::string &w) {
  why = w;
  return false;
}

bool supportedType(Type t) {
  return t.isF32() || t.isF64() || t.isInteger(1) || t.isInteger(32) || t.isInteger(64);
}

// Scalar code for one op kind: the arith/math counterpart of each function in ScalarOps.h.
class ScalarBuilder {
public:
  explicit ScalarBuilder(ModuleOp target) : target(target) {}

  Value constant(OpBuilder &nb, Location l, ConstantOp c, std::string &why) {
    auto splat = llvm::dyn_cast<SplatElementsAttr>(c.getValue());
    if (!splat)
      return fail(why, "a dense constant in a kernel"), Value();
    return nb.create<arith::ConstantOp>(l, llvm::cast<TypedAttr>(splat.getSplatValue<Attribute>()));
  }

  /// A pointwise op or cast of scalar operands `a`.
  Value apply(OpBuilder &nb, Location l, Operation *op, ArrayRef<Value> a, std::string &why) {
    if (auto c = dyn_cast<CastOp>(op))
      return cast(nb, l, a[0], getElementTypeOrSelf(c.getType()), why);
    if (auto pw = dyn_cast<PointwiseOpInterface>(op))
      return scalar(nb, l, pw.getScalarOp(), a, why);
    fail(why, "no CPU code for '" + op->getName().getStringRef().str() + "'");
    return {};
  }

private:
  // Each kind's code comes from its ScalarOps.h template instantiated over ir::IrVal (the table
  // ScalarOps.def names the function): the interpreter's and the GPU's definition, op for op.
  Value scalar(OpBuilder &nb, Location l, ScalarOpKind k, ArrayRef<Value> a, std::string &why) {
    using ir::IrVal;
    ir::Context context{&nb, l, a[k == ScalarOpKind::Select ? 1 : 0].getType(), target};
    ir::Scope scope(context);
    switch (k) {
#define RFUSE_UNARY(K, FN) case ScalarOpKind::K: return scalar::FN<IrVal>(a[0]).v;
#define RFUSE_BINARY(K, FN) case ScalarOpKind::K: return scalar::FN<IrVal>(a[0], a[1]).v;
#define RFUSE_COMPARE(K, FN) case ScalarOpKind::K: return scalar::FN<IrVal>(a[0], a[1]).v;
#define RFUSE_LOGIC1(K, FN) case ScalarOpKind::K: return scalar::FN<IrVal>(a[0]).v;
#define RFUSE_LOGIC2(K, FN) case ScalarOpKind::K: return scalar::FN<IrVal>(a[0], a[1]).v;
#include "rfuse/IR/ScalarOps.def"
    case ScalarOpKind::Select: return scalar::rf_select<IrVal, IrVal>(a[0], a[1], a[2]).v;
    }
    why = "an unknown scalar op";
    return {};
  }

  Value cast(OpBuilder &nb, Location l, Value x, Type to, std::string &why) {
    Type from = x.getType();
    if (from == to)
      return x;
    if (to.isInteger(1)) {
      if (llvm::isa<FloatType>(from))
        return nb.create<arith::CmpFOp>(l, arith::CmpFPredicate::UNE, x,
                                        nb.create<arith::ConstantOp>(l, nb.getFloatAttr(from, 0)));
      return nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, x,
                                      nb.create<arith::ConstantOp>(l, nb.getIntegerAttr(from, 0)));
    }
    if (llvm::isa<FloatType>(from) && llvm::isa<FloatType>(to))
      return from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth()
                 ? (Value)nb.create<arith::ExtFOp>(l, to, x)
                 : nb.create<arith::TruncFOp>(l, to, x);
    if (llvm::isa<IntegerType>(from) && llvm::isa<FloatType>(to))
      return from.isInteger(1) ? (Value)nb.create<arith::UIToFPOp>(l, to, x) : nb.create<arith::SIToFPOp>(l, to, x);
    if (llvm::isa<IntegerType>(from) && llvm::isa<IntegerType>(to)) {
      if (from.isInteger(1))
        return nb.create<arith::ExtUIOp>(l, to, x);
      return from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth()
                 ? (Value)nb.create<arith::ExtSIOp>(l, to, x)
                 : nb.create<arith::TruncIOp>(l, to, x);
    }
    if (llvm::isa<FloatType>(from) && llvm::isa<IntegerType>(to)) {
      // rf_float_to_int: NaN -> 0, saturating at the bounds, else toward zero (in double).
      Type f64 = nb.getF64Type();
      Value d = from.isF64() ? x : nb.create<arith::ExtFOp>(l, f64, x).getResult();
      bool i32 = to.isInteger(32);
      double lo = i32 ? scalar::rf_int_range<int>::lo : scalar::rf_int_range<long long>::lo;
      double hi = i32 ? scalar::rf_int_range<int>::hi : scalar::rf_int_range<long long>::hi;
      ir::Context context{&nb, l, f64, target};
      ir::Scope scope(context);
      Value v = scalar::rf_saturate<ir::IrVal>(d, lo, hi).v;
      return nb.create<arith::FPToSIOp>(l, to, v);
    }
    why = "a cast from " + std::to_string(from.getIntOrFloatBitWidth()) + "-bit type to " +
          std::to_string(to.getIntOrFloatBitWidth()) + "-bit type";
    return {};
  }


private:
  ModuleOp target;
};

// The function shell every lowering starts from: `name(index begin, index end, memrefs...)`.
func::FuncOp createFunction(ModuleOp target, Location loc, const std::string &name,
                            ArrayRef<Type> memrefs) {
  OpBuilder b(target.getContext());
  b.setInsertionPointToEnd(target.getBody());
  SmallVector<Type> args = {b.getIndexType(), b.getIndexType()};
  args.append(memrefs.begin(), memrefs.end());
  auto fn = b.create<func::FuncOp>(loc, name, b.getFunctionType(args, {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  fn.addEntryBlock();
  return fn;
}

MemRefType memrefOf(ArrayRef<int64_t> shape, Type elem) { return MemRefType::get(shape, elem); }

// f16/bf16 only as memory (widenNarrowFloats made the region so): inputs, the index maps and
// casts that move them, outputs; every other value in a type the CPU computes in.
bool checkTypes(const Region &r, std::string &why) {
  for (Operation *op : r.ops)
    for (Value v : op->getResults())
      if (!supportedType(elemOf(v)) && !(isNarrowFloat(v.getType()) && (isa<CastOp>(op) || isIndexReadOp(op))))
        return fail(why, "arithmetic in f16/bf16 on the CPU backend");
  return true;
}

// ---- Pointwise: one linalg.generic over the [begin, end) slice of the split dim ----------------

class PointwiseLowering {
public:
  PointwiseLowering(const Region &r, ModuleOp target) : r(r), target(target), sb(target) {}

  std::optional<CpuFunction> run(const std::string &name, std::string &why) {
    if (r.outputs.empty())
      return fail(why, "no outputs"), std::nullopt;
    auto space = codegen::shapeOf(r.outputs[0]);
    int64_t rank = space.size();
    for (Value o : r.outputs)
      if (codegen::shapeOf(o) != space)
        return fail(why, "outputs of different shapes"), std::nullopt;
    if (!checkTypes(r, why))
      return std::nullopt;
    // The split dim: the first with more than one element (those before it are all 1).
    int64_t split = -1;
    for (int64_t d = 0; d < rank; ++d)
      if (space[d] > 1) {
        split = d;
        break;
      }
    CpuFunction f;
    f.name = name;
    f.extent = split < 0 ? 1 : space[split];
    f.workPerUnit = codegen::numElements(space) / f.extent;
    SmallVector<Type> memrefs;
    for (Value in : r.inputs) {
      memrefs.push_back(memrefOf(codegen::shapeOf(in), elemOf(in)));
      f.argShapes.emplace_back(codegen::shapeOf(in).begin(), codegen::shapeOf(in).end());
    }
    for (Value o : r.outputs) {
      memrefs.push_back(memrefOf(space, elemOf(o)));
      f.argShapes.emplace_back(space.begin(), space.end());
    }
    Location loc = r.loc;
    func::FuncOp fn = createFunction(target, loc, name, memrefs);
    Block *entry = &fn.getBody().front();
    OpBuilder b(fn.getContext());
    b.setInsertionPointToStart(entry);
    Value begin = entry->getArgument(0), end = entry->getArgument(1);
    Value size = b.create<arith::SubIOp>(loc, end, begin);

    // A slice [begin, end) along memref dim p (all of every other dim).
    auto slice = [&](Value m, int64_t p) -> Value {
      if (p < 0)
        return m;
      auto shape = llvm::cast<MemRefType>(m.getType()).getShape();
      SmallVector<OpFoldResult> offs(shape.size(), b.getIndexAttr(0)), sizes, strides(shape.size(), b.getIndexAttr(1));
      for (int64_t s : shape)
        sizes.push_back(b.getIndexAttr(s));
      offs[p] = begin;
      sizes[p] = size;
      return b.create<memref::SubViewOp>(loc, m, offs, sizes, strides);
    };

    // linalg inputs: (kernel input, indexing map) pairs — direct reads and index maps.
    SmallVector<Value> ins;
    SmallVector<AffineMap> maps;
    SmallVector<std::pair<Value, AffineMap>> keys;
    auto addInput = [&](Value v, AffineMap map) {
      for (size_t i = 0; i < keys.size(); ++i)
        if (keys[i].first == v && keys[i].second == map)
          return (int)i;
      keys.push_back({v, map});
      int64_t p = -1; // the input dim that runs along the split dim
      for (unsigned k = 0; k < map.getNumResults() && split >= 0; ++k)
        if (map.getResult(k) == b.getAffineDimExpr(split))
          p = k;
      ins.push_back(slice(entry->getArgument(2 + r.indexOf(v)), p));
      maps.push_back(map);
      return (int)keys.size() - 1;
    };
    AffineMap identity = b.getMultiDimIdentityMap(rank);
    beginIndex = begin;
    splitDim = split;
    arguments = entry->getArguments();
    for (Operation *op : r.ops) {
      if (hidden.contains(op))
        continue; // read element by element by the index-read ops over it
      if (isa<BroadcastInDimOp, TransposeOp>(op) && r.indexOf(op->getOperand(0)) >= 0) {
        slotOf[op] = addInput(op->getOperand(0), indexMap(op, rank));
        continue;
      }
      if (isIndexReadOp(op)) // a splat broadcast, or read element by element (readElement)
        continue;
      for (Value v : op->getOperands())
        if (r.indexOf(v) >= 0)
          directSlot[v] = addInput(v, identity);
    }
    for (Value o : r.outputs)
      if (r.indexOf(o) >= 0)
        directSlot[o] = addInput(o, identity);
    SmallVector<Value> outs;
    for (size_t i = 0; i < r.outputs.size(); ++i) {
      outs.push_back(slice(entry->getArgument(2 + r.inputs.size() + i), split));
      maps.push_back(identity);
    }
    SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
    bool ok = true;
    b.create<linalg::GenericOp>(loc, TypeRange{}, ins, outs, maps, iters,
                                [&](OpBuilder &nb, Location l, ValueRange args) {
                                  ok = emitBody(nb, l, args, why);
                                });
    b.create<func::ReturnOp>(loc);
    if (!ok) {
      fn.erase();
      return std::nullopt;
    }
    return f;
  }

private:
  const Region &r;
  ModuleOp target;
  ScalarBuilder sb;
  llvm::DenseMap<Operation *, int> slotOf; // index-map op -> linalg input
  llvm::DenseMap<Value, int> directSlot;   // kernel input read directly -> linalg input
  llvm::DenseSet<Operation *> hidden = codegen::readThroughIndexMaps(r); // computed only where read
  Value beginIndex;                        // the split dim's first index in this call
  int64_t splitDim = -1;
  ValueRange arguments;                    // (begin, end, inputs..., outputs...)

  // readElement's expressions as arith ops on index values; loads from the whole input memrefs.
  struct IndexExprs {
    using T = Value;
    OpBuilder &b;
    Location l;
    PointwiseLowering &p;
    std::string &why;
    T cst(int64_t c) { return b.create<arith::ConstantIndexOp>(l, c); }
    T add(T x, T y) { return b.create<arith::AddIOp>(l, x, y); }
    T sub(T x, T y) { return b.create<arith::SubIOp>(l, x, y); }
    T mulc(T x, int64_t c) { return c == 1 ? x : b.create<arith::MulIOp>(l, x, cst(c)).getResult(); }
    T divc(T x, int64_t c) { return c == 1 ? x : b.create<arith::DivSIOp>(l, x, cst(c)).getResult(); }
    T remc(T x, int64_t c) { return b.create<arith::RemSIOp>(l, x, cst(c)); }
    T clamp(T x, int64_t lo, int64_t hi) {
      return b.create<arith::MinSIOp>(l, b.create<arith::MaxSIOp>(l, x, cst(lo)), cst(hi));
    }
    T lt(T x, T y) { return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, x, y); }
    T ge(T x, T y) { return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, x, y); }
    T eq(T x, T y) { return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, x, y); }
    T both(T x, T y) { return b.create<arith::AndIOp>(l, x, y); }
    T select(T c, T x, T y) { return b.create<arith::SelectOp>(l, c, x, y); }
    T load(int i, ArrayRef<T> coords) {
      return b.create<memref::LoadOp>(l, p.arguments[2 + i], ValueRange(coords));
    }
    T index(int i, T position) {
      Value v = b.create<memref::LoadOp>(l, p.arguments[2 + i], ValueRange{position});
      return b.create<arith::IndexCastOp>(l, b.getIndexType(), v);
    }
    T splat(ConstantOp c) { return p.sb.constant(b, l, c, why); }
    T apply(Operation *op, ArrayRef<T> operands) { return p.sb.apply(b, l, op, operands, why); }
    T padValue(double v, Value like) {
      Type t = elemOf(like);
      if (llvm::isa<FloatType>(t))
        return b.create<arith::ConstantOp>(l, b.getFloatAttr(t, v));
      return b.create<arith::ConstantOp>(l, b.getIntegerAttr(t, (int64_t)v));
    }
  };

  AffineMap indexMap(Operation *op, int64_t rank) {
    MLIRContext *ctx = op->getContext();
    auto inShape = codegen::shapeOf(op->getOperand(0));
    SmallVector<AffineExpr> exprs(inShape.size());
    for (auto [d, in] : llvm::enumerate(codegen::indexMap(op)))
      if (in >= 0)
        exprs[in] = inShape[in] == 1 ? getAffineConstantExpr(0, ctx) : getAffineDimExpr(d, ctx);
    return AffineMap::get(rank, 0, exprs, ctx);
  }

  bool emitBody(OpBuilder &nb, Location l, ValueRange args, std::string &why) {
    llvm::DenseMap<Value, Value> scalarOf;
    for (auto [v, slot] : directSlot)
      scalarOf[v] = args[slot];
    for (Operation *op : r.ops) {
      Value res;
      if (auto c = dyn_cast<ConstantOp>(op)) {
        res = sb.constant(nb, l, c, why);
      } else if (isa<BroadcastInDimOp, TransposeOp>(op) && slotOf.count(op)) {
        res = args[slotOf.lookup(op)];
      } else if (isa<BroadcastInDimOp, TransposeOp>(op) && op->getOperand(0).getDefiningOp<ConstantOp>()) {
        res = scalarOf.lookup(op->getOperand(0));
      } else if (hidden.contains(op)) {
        continue; // read element by element by the index-read ops over it
      } else if (isIndexReadOp(op)) {
        auto shape = codegen::shapeOf(op->getResult(0));
        if (shape != codegen::shapeOf(r.outputs[0]))
          return fail(why, "an index map of another shape than the kernel's");
        SmallVector<Value> coords;
        for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
          Value c = nb.create<linalg::IndexOp>(l, d);
          coords.push_back(d == splitDim ? nb.create<arith::AddIOp>(l, c, beginIndex).getResult() : c);
        }
        IndexExprs e{nb, l, *this, why};
        res = codegen::readElement(e, r, op->getResult(0), coords, why);
        if (!why.empty())
          return false;
      } else {
        SmallVector<Value> a;
        for (Value v : op->getOperands())
          a.push_back(scalarOf.lookup(v));
        res = sb.apply(nb, l, op, a, why);
      }
      if (!res)
        return false;
      scalarOf[op->getResult(0)] = res;
    }
    SmallVector<Value> yielded;
    for (Value o : r.outputs)
      yielded.push_back(scalarOf.lookup(o));
    nb.create<linalg::YieldOp>(l, yielded);
    return true;
  }
};

// ---- Reductions: scf loop nests over (o, j) ---------------------------------------------------
//
// Row-major (the reduced dims trailing, or mixed): for o in [begin, end) { for each reduction:
// an scf.for over j carrying the accumulator; then one pass over j storing the outputs }. Per-row
// values are SSA values. The sum's add is marked reassoc so LLVM vectorizes it.
// Column-major (the reduced dims leading, as rowSums of an R matrix is): each reduction is a
// pass for j { for o in [begin, end) }, partial results in a stack array indexed by o - begin
// (calls take at most `columnTile` columns); the inner loop walks contiguous memory and every
// output is accumulated in the interpreter's order.

constexpr int64_t columnTile = 512;

class ReductionLowering {
public:
  ReductionLowering(const Region &r, ModuleOp target) : r(r), L(r), target(target), sb(target) {}

  std::optional<CpuFunction> run(const std::string &name, std::string &why) {
    if (!checkTypes(r, why))
      return std::nullopt;
    columnMode = L.prefix && !L.suffix;
    for (Value o : r.outputs) {
      auto s = L.spaceOf(o);
      if (r.indexOf(o) >= 0 ? L.classify(o) == ReductionLayout::Space::Other : s == ReductionLayout::Space::Other)
        return fail(why, "an output of a third shape"), std::nullopt;
    }
    CpuFunction f;
    f.name = name;
    f.extent = L.outerLen;
    f.workPerUnit = L.redLen;
    if (columnMode)
      f.maxChunk = std::min<int64_t>(L.outerLen, columnTile);
    SmallVector<Type> memrefs;
    for (Value v : r.inputs) {
      int64_t n = codegen::numElements(codegen::shapeOf(v));
      memrefs.push_back(memrefOf({n}, elemOf(v)));
      f.argShapes.push_back({n});
    }
    for (Value v : r.outputs) {
      int64_t n = codegen::numElements(codegen::shapeOf(v));
      memrefs.push_back(memrefOf({n}, elemOf(v)));
      f.argShapes.push_back({n});
    }
    loc = r.loc;
    fn = createFunction(target, loc, name, memrefs);
    Block *entry = &fn.getBody().front();
    OpBuilder b(fn.getContext());
    b.setInsertionPointToStart(entry);
    begin = entry->getArgument(0);
    end = entry->getArgument(1);
    bool ok = columnMode ? emitColumns(b, why) : emitRows(b, why);
    b.create<func::ReturnOp>(loc);
    if (!ok) {
      fn.erase();
      return std::nullopt;
    }
    return f;
  }

private:
  using Space = ReductionLayout::Space;
  using Memo = llvm::DenseMap<Value, Value>;
  const Region &r;
  ReductionLayout L;
  ModuleOp target;
  ScalarBuilder sb;
  Location loc = UnknownLoc::get(target.getContext());
  func::FuncOp fn;
  Value begin, end;
  bool columnMode = false;
  llvm::DenseMap<Value, Value> rowSSA;     // row mode: per-row values of this o
  llvm::DenseMap<Value, Value> rowScratch; // column mode: per-row values, by o - begin
  // Column mode: an expensive per-element value that a reduction and the outputs both read (the
  // softmax's exp(x)) is written to the output `stashOut` in the reduction's pass and read back
  // from there by the later passes, instead of being computed twice. Outputs never share memory
  // with the kernel's inputs (the plan releases inputs after the step), so the early writes
  // cannot clobber what later passes read.
  Value stash;
  int stashOut = -1;
  bool stashWritten = false;

  Value arg(int i) { return fn.getBody().front().getArgument(2 + i); }
  Value out(int i) { return arg(r.inputs.size() + i); }
  Value idx(OpBuilder &b, int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
  Value mul(OpBuilder &b, Value a, int64_t c) { return c == 1 ? a : b.create<arith::MulIOp>(loc, a, idx(b, c)).getResult(); }
  Value add(OpBuilder &b, Value a, Value c) { return b.create<arith::AddIOp>(loc, a, c); }

  Value coord(OpBuilder &b, int64_t d, Value o, Value j) {
    ReductionLayout::Coord c = L.coord(d);
    Value v = c.reduced ? j : o;
    if (c.divisor != 1)
      v = b.create<arith::DivUIOp>(loc, v, idx(b, c.divisor));
    if (c.modulo != 0)
      v = b.create<arith::RemUIOp>(loc, v, idx(b, c.modulo));
    return v;
  }
  // Flat index into F of (o, j).
  Value fullIndex(OpBuilder &b, Value o, Value j) {
    if (L.suffix)
      return add(b, mul(b, o, L.redLen), j);
    if (L.prefix)
      return add(b, mul(b, j, L.outerLen), o);
    auto strides = codegen::stridesOf(L.full);
    Value e = idx(b, 0);
    for (size_t d = 0; d < L.full.size(); ++d)
      e = add(b, e, mul(b, coord(b, d, o, j), strides[d]));
    return e;
  }
  // Offset into an input read through a broadcast / transpose over F at (o, j).
  Value mappedInputOffset(OpBuilder &b, Operation *op, Value o, Value j) {
    auto map = codegen::indexMap(op);
    auto inShape = codegen::shapeOf(op->getOperand(0));
    auto inStrides = codegen::stridesOf(inShape);
    Value e = idx(b, 0);
    for (size_t d = 0; d < L.full.size(); ++d)
      if (map[d] >= 0 && inShape[map[d]] != 1)
        e = add(b, e, mul(b, coord(b, d, o, j), inStrides[map[d]]));
    return e;
  }
  // Offset into an input read through an index map from flat index `i` over `space`.
  Value mappedOffset(OpBuilder &b, Value i, ArrayRef<int64_t> space, Operation *op) {
    auto map = codegen::indexMap(op);
    auto inShape = codegen::shapeOf(op->getOperand(0));
    auto inStrides = codegen::stridesOf(inShape), spaceStrides = codegen::stridesOf(space);
    Value e = idx(b, 0);
    for (size_t d = 0; d < space.size(); ++d) {
      if (map[d] < 0 || inShape[map[d]] == 1)
        continue;
      Value c = b.create<arith::DivUIOp>(loc, i, idx(b, spaceStrides[d]));
      if (d > 0)
        c = b.create<arith::RemUIOp>(loc, c, idx(b, space[d]));
      e = add(b, e, mul(b, c, inStrides[map[d]]));
    }
    return e;
  }
  Value load(OpBuilder &b, Value m, Value i) { return b.create<memref::LoadOp>(loc, m, ValueRange{i}); }

  // A per-row value at outer index o.
  Value rowValue(OpBuilder &b, Value v, Value o, std::string &why) {
    if (int i = r.indexOf(v); i >= 0)
      return load(b, arg(i), o);
    if (auto c = v.getDefiningOp<ConstantOp>())
      return sb.constant(b, loc, c, why);
    if (columnMode) {
      if (Value s = rowScratch.lookup(v))
        return load(b, s, b.create<arith::SubIOp>(loc, o, begin));
    } else if (Value s = rowSSA.lookup(v)) {
      return s;
    }
    fail(why, "a per-row value used before it is computed");
    return {};
  }

  // A per-element value at (o, j), computing what it depends on.
  Value fullValue(OpBuilder &b, Value v, Value o, Value j, Memo &memo, std::string &why) {
    if (Value m = memo.lookup(v))
      return m;
    if (L.spaceOf(v) == Space::Row)
      return rowValue(b, v, o, why);
    if (v == stash && stashWritten)
      return memo[v] = load(b, out(stashOut), fullIndex(b, o, j));
    Value res;
    Operation *op = v.getDefiningOp();
    if (int i = r.indexOf(v); i >= 0) {
      if (L.classify(v) != Space::Full)
        return fail(why, "an input of a third shape read per element"), Value();
      res = load(b, arg(i), fullIndex(b, o, j));
    } else if (auto c = dyn_cast<ConstantOp>(op)) {
      res = sb.constant(b, loc, c, why);
    } else if (isa<BroadcastInDimOp, TransposeOp>(op)) {
      Value in = op->getOperand(0);
      if (auto c = in.getDefiningOp<ConstantOp>())
        res = sb.constant(b, loc, c, why);
      else if (L.spaceOf(in) == Space::Row && isa<BroadcastInDimOp>(op) &&
               L.isReexpansion(cast<BroadcastInDimOp>(op)))
        res = rowValue(b, in, o, why);
      else if ((int64_t)codegen::indexMap(op).size() != (int64_t)L.full.size())
        return fail(why, "an index map whose result is not the reduction's shape"), Value();
      else if (int i = r.indexOf(in); i >= 0)
        res = load(b, arg(i), mappedInputOffset(b, op, o, j));
      else
        return fail(why, "an index map over a value computed in the kernel"), Value();
    } else if (isReductionOp(op)) {
      return fail(why, "a reduction of another shape"), Value();
    } else {
      SmallVector<Value> a;
      for (Value x : op->getOperands()) {
        Value s = fullValue(b, x, o, j, memo, why);
        if (!s)
          return {};
        a.push_back(s);
      }
      res = sb.apply(b, loc, op, a, why);
    }
    if (res)
      memo[v] = res;
    return res;
  }

  // Per-row pointwise op (e.g. rsqrt(var + eps)) at o.
  Value rowOp(OpBuilder &b, Operation *op, Value o, std::string &why) {
    if (auto c = dyn_cast<ConstantOp>(op))
      return sb.constant(b, loc, c, why);
    if (isa<BroadcastInDimOp, TransposeOp>(op)) {
      Value in = op->getOperand(0);
      if (int i = r.indexOf(in); i >= 0)
        return load(b, arg(i), mappedOffset(b, o, codegen::shapeOf(op->getResult(0)), op));
      if (isa<TransposeOp>(op))
        return fail(why, "a transpose of a per-row value"), Value();
      return rowValue(b, in, o, why); // between the two forms of the reduced shape: a renaming
    }
    SmallVector<Value> a;
    for (Value x : op->getOperands()) {
      Value s = rowValue(b, x, o, why);
      if (!s)
        return {};
      a.push_back(s);
    }
    return sb.apply(b, loc, op, a, why);
  }

  int kindOf(Operation *op) {
    return isa<ReduceMaxOp>(op) ? scalar::RF_REDUCE_MAX : isa<ReduceMinOp>(op) ? scalar::RF_REDUCE_MIN : scalar::RF_REDUCE_SUM;
  }
  // f32 sums accumulate in f64, as the interpreter's do (in long double): results then agree
  // to f32 rounding whatever the length.
  Type accType(Operation *op) {
    Type t = elemOf(op->getResult(0));
    return t.isF32() && kindOf(op) == scalar::RF_REDUCE_SUM ? Float64Type::get(t.getContext()) : t;
  }
  Value widen(OpBuilder &b, Operation *op, Value v) {
    return v.getType() == accType(op) ? v : b.create<arith::ExtFOp>(loc, accType(op), v).getResult();
  }
  // The identity and combining step of ScalarOps.h's reductions.
  Value init(OpBuilder &b, Operation *op) {
    Type t = accType(op);
    int k = kindOf(op);
    if (llvm::isa<FloatType>(t)) {
      double v = k == scalar::RF_REDUCE_SUM   ? scalar::rf_reduce_identity_f<scalar::RF_REDUCE_SUM>()
                 : k == scalar::RF_REDUCE_MAX ? scalar::rf_reduce_identity_f<scalar::RF_REDUCE_MAX>()
                                              : scalar::rf_reduce_identity_f<scalar::RF_REDUCE_MIN>();
      return b.create<arith::ConstantOp>(loc, b.getFloatAttr(t, v));
    }
    bool i32 = t.isInteger(32);
    int64_t v = k == scalar::RF_REDUCE_SUM   ? scalar::rf_reduce_identity_i<scalar::RF_REDUCE_SUM>(i32)
                : k == scalar::RF_REDUCE_MAX ? scalar::rf_reduce_identity_i<scalar::RF_REDUCE_MAX>(i32)
                                             : scalar::rf_reduce_identity_i<scalar::RF_REDUCE_MIN>(i32);
    return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(t, v));
  }
  Value combine(OpBuilder &b, Operation *op, Value acc, Value v, bool reassoc) {
    bool f = llvm::isa<FloatType>(v.getType());
    int k = kindOf(op);
    // A sum's a + b, with leave to reassociate (so LLVM vectorizes the row loop).
    if (k == scalar::RF_REDUCE_SUM && f)
      return b.create<arith::AddFOp>(loc, acc, v, reassoc ? arith::FastMathFlags::reassoc : arith::FastMathFlags::none);
    ir::Context context{&b, loc, v.getType(), ModuleOp()};
    ir::Scope scope(context);
    return k == scalar::RF_REDUCE_SUM   ? scalar::rf_reduce_combine<scalar::RF_REDUCE_SUM, ir::IrVal>(acc, v).v
           : k == scalar::RF_REDUCE_MAX ? scalar::rf_reduce_combine<scalar::RF_REDUCE_MAX, ir::IrVal>(acc, v).v
                                        : scalar::rf_reduce_combine<scalar::RF_REDUCE_MIN, ir::IrVal>(acc, v).v;
  }
  Value finish(OpBuilder &b, Operation *op, Value acc) {
    Type t = acc.getType();
    if (isa<ReduceMeanOp>(op))
      acc = llvm::isa<FloatType>(t)
                ? (Value)b.create<arith::DivFOp>(loc, acc, b.create<arith::ConstantOp>(loc, b.getFloatAttr(t, (double)L.redLen)))
                : b.create<arith::DivSIOp>(loc, acc, b.create<arith::ConstantOp>(loc, b.getIntegerAttr(t, L.redLen)));
    Type rt = elemOf(op->getResult(0));
    return rt == t ? acc : b.create<arith::TruncFOp>(loc, rt, acc).getResult();
  }

  bool emitRows(OpBuilder &b, std::string &why) {
    bool ok = true;
    b.create<scf::ForOp>(loc, begin, end, idx(b, 1), ValueRange{},
                         [&](OpBuilder &ob, Location, Value o, ValueRange) {
                           ok = emitRow(ob, o, why);
                           ob.create<scf::YieldOp>(loc);
                         });
    return ok;
  }

  bool emitRow(OpBuilder &b, Value o, std::string &why) {
    for (Operation *op : r.ops) {
      Value res = op->getResult(0);
      if (isReductionOp(op)) {
        bool ok = true;
        auto loop = b.create<scf::ForOp>(
            loc, idx(b, 0), idx(b, L.redLen), idx(b, 1), ValueRange{init(b, op)},
            [&](OpBuilder &jb, Location, Value j, ValueRange acc) {
              Memo memo;
              Value v = fullValue(jb, op->getOperand(0), o, j, memo, why);
              ok = (bool)v;
              jb.create<scf::YieldOp>(loc, ok ? combine(jb, op, acc[0], widen(jb, op, v), /*reassoc=*/true) : acc[0]);
            });
        if (!ok)
          return false;
        rowSSA[res] = finish(b, op, loop.getResult(0));
      } else if (L.spaceOf(res) == Space::Row) {
        Value v = rowOp(b, op, o, why);
        if (!v)
          return false;
        rowSSA[res] = v;
      }
    }
    return storeOutputs(b, o, why);
  }

  // The outputs: per-element ones in one pass over j, per-row ones once.
  bool storeOutputs(OpBuilder &b, Value o, std::string &why) {
    bool ok = true;
    for (auto [i, v] : llvm::enumerate(r.outputs)) {
      if (L.classify(v) != Space::Row && L.spaceOf(v) != Space::Row)
        continue;
      Value s = rowValue(b, v, o, why);
      if (!s)
        return false;
      b.create<memref::StoreOp>(loc, s, out(i), ValueRange{o});
    }
    bool anyFull = llvm::any_of(r.outputs, [&](Value v) { return L.spaceOf(v) == Space::Full || (r.indexOf(v) >= 0 && L.classify(v) == Space::Full); });
    if (!anyFull)
      return true;
    b.create<scf::ForOp>(loc, idx(b, 0), idx(b, L.redLen), idx(b, 1), ValueRange{},
                         [&](OpBuilder &jb, Location, Value j, ValueRange) {
                           ok = storeFull(jb, o, j, why);
                           jb.create<scf::YieldOp>(loc);
                         });
    return ok;
  }
  bool storeFull(OpBuilder &b, Value o, Value j, std::string &why) {
    Memo memo;
    Value at = fullIndex(b, o, j);
    for (auto [i, v] : llvm::enumerate(r.outputs)) {
      if (L.spaceOf(v) == Space::Row || (r.indexOf(v) >= 0 && L.classify(v) != Space::Full))
        continue;
      Value s = fullValue(b, v, o, j, memo, why);
      if (!s)
        return false;
      b.create<memref::StoreOp>(loc, s, out(i), ValueRange{at});
    }
    return true;
  }

  // for o in [begin, end)
  template <class Body> void forColumns(OpBuilder &b, Body body) {
    b.create<scf::ForOp>(loc, begin, end, idx(b, 1), ValueRange{},
                         [&](OpBuilder &ob, Location, Value o, ValueRange) {
                           body(ob, o);
                           ob.create<scf::YieldOp>(loc);
                         });
  }
  // for j in [0, redLen) { for o in [begin, end) }
  template <class Body> void forElements(OpBuilder &b, Body body) {
    b.create<scf::ForOp>(loc, idx(b, 0), idx(b, L.redLen), idx(b, 1), ValueRange{},
                         [&](OpBuilder &jb, Location, Value j, ValueRange) {
                           forColumns(jb, [&](OpBuilder &ob, Value o) { body(ob, o, j); });
                           jb.create<scf::YieldOp>(loc);
                         });
  }

  // Ops whose scalar code is a handful of instructions; anything else (exp, log, tanh, pow...) is
  // worth a store and a load to compute once.
  static bool cheap(Operation *op) {
    if (isa<ConstantOp, BroadcastInDimOp, TransposeOp, CastOp>(op))
      return true;
    auto pw = dyn_cast<PointwiseOpInterface>(op);
    if (!pw)
      return false;
    switch (pw.getScalarOp()) {
    case ScalarOpKind::Neg: case ScalarOpKind::Abs: case ScalarOpKind::Relu: case ScalarOpKind::Add:
    case ScalarOpKind::Sub: case ScalarOpKind::Mul: case ScalarOpKind::Div: case ScalarOpKind::Max:
    case ScalarOpKind::Min: case ScalarOpKind::Sqrt: case ScalarOpKind::Floor:
    case ScalarOpKind::Select: case ScalarOpKind::Eq: case ScalarOpKind::Ne: case ScalarOpKind::Lt:
    case ScalarOpKind::Le: case ScalarOpKind::Gt: case ScalarOpKind::Ge: case ScalarOpKind::Not:
    case ScalarOpKind::And: case ScalarOpKind::Or:
      return true;
    default:
      return false;
    }
  }
  // Whether `pred` holds for v or for a per-element value computed in the kernel on the way to
  // it (the walk stops at the kernel's inputs and at per-row values).
  bool anyOnTheWay(Value v, llvm::function_ref<bool(Value)> pred, llvm::DenseSet<Value> &seen) {
    if (!seen.insert(v).second)
      return false;
    if (pred(v))
      return true;
    Operation *op = v.getDefiningOp();
    if (!op || r.indexOf(v) >= 0 || L.spaceOf(v) != Space::Full)
      return false;
    return llvm::any_of(op->getOperands(), [&](Value x) { return anyOnTheWay(x, pred, seen); });
  }
  // Whether computing the per-element value v runs an op that is not cheap.
  bool expensive(Value v) {
    llvm::DenseSet<Value> seen;
    return anyOnTheWay(v, [&](Value x) {
      Operation *op = x.getDefiningOp();
      return op && r.indexOf(x) < 0 && L.spaceOf(x) == Space::Full && !cheap(op);
    }, seen);
  }
  // Whether the per-element value `target` reads v.
  bool reads(Value target, Value v) {
    llvm::DenseSet<Value> seen;
    return anyOnTheWay(target, [&](Value x) { return x == v; }, seen);
  }
  // The first reduction's operand that is expensive and that an output of the same element type
  // (written in full by the last pass) also reads.
  void chooseStash() {
    for (Operation *op : r.ops) {
      if (!isReductionOp(op))
        continue;
      Value v = op->getOperand(0);
      if (!expensive(v))
        continue;
      for (auto [i, o] : llvm::enumerate(r.outputs)) {
        if (L.spaceOf(o) == Space::Full && r.indexOf(o) < 0 && elemOf(o) == elemOf(v) && reads(o, v)) {
          stash = v;
          stashOut = (int)i;
          return;
        }
      }
      return;
    }
  }

  bool emitColumns(OpBuilder &b, std::string &why) {
    bool ok = true;
    chooseStash();
    auto scratch = [&](Type t) {
      auto m = b.create<memref::AllocaOp>(loc, MemRefType::get({std::min<int64_t>(L.outerLen, columnTile)}, t));
      m->setAttr("alignment", b.getI64IntegerAttr(64));
      return m.getResult();
    };
    auto scratchFor = [&](Value v) { return rowScratch[v] = scratch(elemOf(v)); };
    for (Operation *op : r.ops) {
      Value res = op->getResult(0);
      if (isReductionOp(op)) {
        // Accumulators (in accType), then the results (finished: mean, rounding).
        bool separate = accType(op) != elemOf(res) || isa<ReduceMeanOp>(op);
        Value s = separate ? scratch(accType(op)) : scratchFor(res);
        bool storedStash = false;
        forColumns(b, [&](OpBuilder &ob, Value o) {
          ob.create<memref::StoreOp>(loc, init(ob, op), s, ValueRange{ob.create<arith::SubIOp>(loc, o, begin)});
        });
        forElements(b, [&](OpBuilder &eb, Value o, Value j) {
          Memo memo;
          Value v = fullValue(eb, op->getOperand(0), o, j, memo, why);
          if (!v) {
            ok = false;
            return;
          }
          Value at = eb.create<arith::SubIOp>(loc, o, begin);
          Value acc = load(eb, s, at);
          eb.create<memref::StoreOp>(loc, combine(eb, op, acc, widen(eb, op, v), /*reassoc=*/false), s, ValueRange{at});
          if (stash && !stashWritten && memo.count(stash)) {
            eb.create<memref::StoreOp>(loc, memo.lookup(stash), out(stashOut), ValueRange{fullIndex(eb, o, j)});
            storedStash = true;
          }
        });
        if (!ok)
          return false;
        stashWritten = stashWritten || storedStash;
        if (separate) {
          Value result = scratchFor(res);
          forColumns(b, [&](OpBuilder &ob, Value o) {
            Value at = ob.create<arith::SubIOp>(loc, o, begin);
            ob.create<memref::StoreOp>(loc, finish(ob, op, load(ob, s, at)), result, ValueRange{at});
          });
        }
      } else if (L.spaceOf(res) == Space::Row && !isa<ConstantOp>(op)) {
        Value s = scratchFor(res);
        forColumns(b, [&](OpBuilder &ob, Value o) {
          Value v = rowOp(ob, op, o, why);
          if (!v) {
            ok = false;
            return;
          }
          ob.create<memref::StoreOp>(loc, v, s, ValueRange{ob.create<arith::SubIOp>(loc, o, begin)});
        });
        if (!ok)
          return false;
      }
    }
    forColumns(b, [&](OpBuilder &ob, Value o) {
      for (auto [i, v] : llvm::enumerate(r.outputs)) {
        if (L.classify(v) != Space::Row && L.spaceOf(v) != Space::Row)
          continue;
        Value s = rowValue(ob, v, o, why);
        if (!s) {
          ok = false;
          return;
        }
        ob.create<memref::StoreOp>(loc, s, out(i), ValueRange{o});
      }
    });
    bool anyFull = llvm::any_of(r.outputs, [&](Value v) { return L.spaceOf(v) == Space::Full || (r.indexOf(v) >= 0 && L.classify(v) == Space::Full); });
    if (ok && anyFull)
      forElements(b, [&](OpBuilder &eb, Value o, Value j) { ok = ok && storeFull(eb, o, j, why); });
    return ok;
  }
};

// ---- Matmul: BLAS for the product, a pointwise function for the rest -------------------------

// The ops after a library call (matmul, convolution) as one pointwise function over its result
// (the function's input 0, then the region inputs it reads).
bool lowerEpilogue(const Region &r, Operation *library, ModuleOp target, const std::string &name,
                   CpuKernel &k, std::string &why) {
  Value product = library->getResult(0);
  LibraryCall &call = *k.library;
  call.productIsOutput = llvm::is_contained(r.outputs, product);
  if (call.productIsOutput && r.outputs[0] != product)
    return fail(why, "a library kernel returning its result after other outputs");
  Region e = codegen::epilogueRegion(r, library, call.epilogueInputs);
  if (e.outputs.empty())
    return true;
  OwningOpRef<ModuleOp> scratch; // an f16/bf16 epilogue computes in f32 (NarrowFloats.h)
  if (hasNarrowFloats(e)) {
    scratch = ModuleOp::create(e.loc);
    e = widenNarrowFloats(e, *scratch);
  }
  k.function = PointwiseLowering(e, target).run(name, why);
  return k.function.has_value();
}

std::optional<CpuKernel> lowerMatmul(const Region &r, ModuleOp target, const std::string &name,
                                     std::string &why) {
  auto mm = codegen::findOp<MatmulOp>(r);
  if (!mm)
    return fail(why, "no matmul in a matmul_epilogue kernel"), std::nullopt;
  CpuKernel k;
  k.kind = CpuKernel::Kind::Library;
  k.library = LibraryCall{};
  k.library->kind = LibraryCall::Kind::Matmul;
  MatmulCall &g = k.library->matmul;
  g.lhsInput = r.indexOf(mm.getLhs());
  g.rhsInput = r.indexOf(mm.getRhs());
  if (g.lhsInput < 0 || g.rhsInput < 0)
    return fail(why, "a matmul of values computed in the kernel"), std::nullopt;
  // (f16 and bf16 products run as f64 BLAS on widened operands, rounded once, as f32 ones)
  Type et = elemOf(mm.getResult());
  if (!et.isF32() && !et.isF64() && !isNarrowFloat(et))
    return fail(why, std::string("a matmul in ") + dtypeName(dtypeOf(mm.getResult())) + " (BLAS has floats)"), std::nullopt;
  if (elemOf(mm.getLhs()) != et || elemOf(mm.getRhs()) != et)
    return fail(why, "a matmul of mixed dtypes"), std::nullopt;
  g.dtype = dtypeOf(mm.getResult());
  codegen::MatmulGeometry mg = codegen::matmulGeometry(mm);
  g.transposeA = mg.transposeA;
  g.transposeB = mg.transposeB;
  g.batchedA = mg.batchedA;
  g.batchedB = mg.batchedB;
  g.batch = mg.batch;
  g.m = mg.m;
  g.n = mg.n;
  g.k = mg.k;

  if (!lowerEpilogue(r, mm.getOperation(), target, name, k, why))
    return std::nullopt;
  return k;
}

// A convolution (or a gradient of one) through im2col + BLAS, the rest as a pointwise function
// over its result.
std::optional<CpuKernel> lowerConv(const Region &r, ModuleOp target, const std::string &name,
                                   std::string &why) {
  auto found = codegen::findConvolution(r, why);
  if (!found)
    return std::nullopt;
  auto [conv, operands] = *found;
  CpuKernel k;
  k.kind = CpuKernel::Kind::Library;
  k.library = LibraryCall{};
  k.library->kind = LibraryCall::Kind::Conv;
  ConvCall &c = k.library->conv;
  Type et = elemOf(conv->getResult(0));
  if (!et.isF32() && !et.isF64() && !isNarrowFloat(et))
    return fail(why, "a convolution of integers"), std::nullopt;
  c.dtype = dtypeOf(conv->getResult(0));
  c.geometry = convGeometry(conv);
  c.inputIndex = operands.input;
  c.filterIndex = operands.filter;
  c.gradOutputIndex = operands.gradOutput;
  c.biasIndex = operands.bias;
  if (!lowerEpilogue(r, conv, target, name, k, why))
    return std::nullopt;
  return k;
}

std::optional<CpuKernel> lowerRegion(const Region &region, FusionKind kind, ModuleOp target,
                                     const std::string &name, std::string &why) {
  // f16/bf16 pointwise and reduction kernels compute in f32 (see NarrowFloats.h).
  OwningOpRef<ModuleOp> scratch;
  std::optional<Region> widened;
  if ((kind == FusionKind::pointwise || kind == FusionKind::reduction) && hasNarrowFloats(region)) {
    scratch = ModuleOp::create(region.loc);
    widened = widenNarrowFloats(region, *scratch);
  }
  const Region &r = widened ? *widened : region;
  CpuKernel k;
  switch (kind) {
  case FusionKind::pointwise:
    k.kind = CpuKernel::Kind::Pointwise;
    k.function = PointwiseLowering(r, target).run(name, why);
    break;
  case FusionKind::reduction:
    k.kind = CpuKernel::Kind::Reduction;
    k.function = ReductionLowering(r, target).run(name, why);
    break;
  case FusionKind::matmul_epilogue:
    return lowerMatmul(r, target, name, why);
  case FusionKind::conv_epilogue:
    return lowerConv(r, target, name, why);
  default:
    why = "no CPU code for a " + stringifyFusionKind(kind).str() + " kernel";
    return std::nullopt;
  }
  if (!k.function)
    return std::nullopt;
  return k;
}

} // namespace

std::optional<CpuKernel> lowerKernel(func::FuncOp kernel, ModuleOp target, const std::string &name,
                                     std::string &why) {
  auto kind = kernel->getAttrOfType<FusionKindAttr>("rfuse.kernel");
  if (!kind)
    return fail(why, "not a kernel function"), std::nullopt;
  return lowerRegion(codegen::regionOf(kernel), kind.getValue(), target, name, why);
}

// A kernel of one hand-built loop function (a scan, uniform draws): run as a pointwise one.
static CpuKernel loopKernel(const CpuFunction &f) {
  CpuKernel k;
  k.kind = CpuKernel::Kind::Pointwise;
  k.function = f;
  return k;
}

// A cumulative op: scf loops, a line per index of [begin, end) (the lines of the [outer, len,
// inner] view), carrying the accumulator along the scanned dim; float sums and products in f64.
std::optional<CpuKernel> lowerScan(ScanOp s, ModuleOp target, const std::string &name, std::string &why) {
  Type et = elemOf(s.getInput());
  if (!supportedType(et))
    return fail(why, "f16/bf16 on the CPU backend"), std::nullopt;
  auto shape = codegen::shapeOf(s.getInput());
  int64_t dim = s.getDim(), len = shape[dim], inner = 1, outer = 1;
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
    if (d != dim)
      (d < dim ? outer : inner) *= shape[d];
  ScanKind kind = s.getKind();
  bool isF = llvm::isa<FloatType>(et);
  Type acc = isF && (kind == ScanKind::sum || kind == ScanKind::prod) ? Float64Type::get(et.getContext()) : et;
  CpuFunction f;
  f.name = name;
  f.extent = len == 0 ? 0 : outer * inner; // (an empty scan: nothing to do)
  f.workPerUnit = len;
  SmallVector<int64_t> view = {outer, len, inner};
  f.argShapes = {{outer, len, inner}, {outer, len, inner}};
  Location loc = s.getLoc();
  func::FuncOp fn = createFunction(target, loc, name, {memrefOf(view, et), memrefOf(view, et)});
  Block *entry = &fn.getBody().front();
  OpBuilder b(fn.getContext());
  b.setInsertionPointToStart(entry);
  Value in = entry->getArgument(2), out = entry->getArgument(3);
  auto cidx = [&](OpBuilder &ob, int64_t v) { return ob.create<arith::ConstantIndexOp>(loc, v).getResult(); };
  b.create<scf::ForOp>(loc, entry->getArgument(0), entry->getArgument(1), cidx(b, 1), ValueRange{},
    [&](OpBuilder &lb, Location, Value line, ValueRange) {
      Value o = lb.create<arith::DivUIOp>(loc, line, cidx(lb, inner));
      Value i = lb.create<arith::RemUIOp>(loc, line, cidx(lb, inner));
      Value first = lb.create<memref::LoadOp>(loc, in, ValueRange{o, cidx(lb, 0), i});
      Value a0 = acc == et ? first : lb.create<arith::ExtFOp>(loc, acc, first).getResult();
      lb.create<memref::StoreOp>(loc, first, out, ValueRange{o, cidx(lb, 0), i});
      lb.create<scf::ForOp>(loc, cidx(lb, 1), cidx(lb, len), cidx(lb, 1), ValueRange{a0},
        [&](OpBuilder &jb, Location, Value j, ValueRange carried) {
          Value v = jb.create<memref::LoadOp>(loc, in, ValueRange{o, j, i});
          if (acc != et)
            v = jb.create<arith::ExtFOp>(loc, acc, v);
          Value a = carried[0], r;
          switch (kind) {
          case ScanKind::sum: r = isF ? jb.create<arith::AddFOp>(loc, a, v).getResult() : jb.create<arith::AddIOp>(loc, a, v).getResult(); break;
          case ScanKind::prod: r = isF ? jb.create<arith::MulFOp>(loc, a, v).getResult() : jb.create<arith::MulIOp>(loc, a, v).getResult(); break;
          case ScanKind::max: r = isF ? jb.create<arith::MaximumFOp>(loc, a, v).getResult() : jb.create<arith::MaxSIOp>(loc, a, v).getResult(); break;
          case ScanKind::min: r = isF ? jb.create<arith::MinimumFOp>(loc, a, v).getResult() : jb.create<arith::MinSIOp>(loc, a, v).getResult(); break;
          }
          Value stored = acc == et ? r : jb.create<arith::TruncFOp>(loc, et, r).getResult();
          jb.create<memref::StoreOp>(loc, stored, out, ValueRange{o, j, i});
          jb.create<scf::YieldOp>(loc, r);
        });
      lb.create<scf::YieldOp>(loc);
    });
  b.create<func::ReturnOp>(loc);
  return loopKernel(f);
}

// Uniform draws (rfuse.random_uniform): an scf loop over the flat indices of [begin, end), each
// ScalarOps.h's Philox4x32-10 written out in arith ops (32-bit words, products in 64 bits), so the
// CPU computes what the interpreter and the GPU do (CpuJit.CorpusMatchesInterpreter's dropout graph
// and lit ops-random.mlir compare them).
std::optional<CpuKernel> lowerRandomUniform(RandomUniformOp r, ModuleOp target, const std::string &name) {
  int64_t n = codegen::numElements(codegen::shapeOf(r.getResult()));
  MLIRContext *ctx = target.getContext();
  Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64), f32 = Float32Type::get(ctx);
  CpuFunction f;
  f.name = name;
  f.extent = n;
  f.workPerUnit = 16; // ten rounds of two 64-bit products: worth threads sooner than a copy
  f.argShapes = {{2}, {n}};
  Location loc = r.getLoc();
  func::FuncOp fn = createFunction(target, loc, name, {memrefOf({2}, i32), memrefOf({n}, f32)});
  Block *entry = &fn.getBody().front();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(entry);
  Value seed = entry->getArgument(2), out = entry->getArgument(3);
  auto cidx = [&](OpBuilder &ob, int64_t v) { return ob.create<arith::ConstantIndexOp>(loc, v).getResult(); };
  auto c32 = [&](OpBuilder &ob, uint32_t v) {
    return ob.create<arith::ConstantOp>(loc, ob.getIntegerAttr(i32, (int64_t)(int32_t)v)).getResult();
  };
  auto c64 = [&](OpBuilder &ob, int64_t v) { return ob.create<arith::ConstantOp>(loc, ob.getIntegerAttr(i64, v)).getResult(); };
  Value key0 = b.create<memref::LoadOp>(loc, seed, ValueRange{cidx(b, 0)});
  Value key1 = b.create<memref::LoadOp>(loc, seed, ValueRange{cidx(b, 1)});
  b.create<scf::ForOp>(loc, entry->getArgument(0), entry->getArgument(1), cidx(b, 1), ValueRange{},
    [&](OpBuilder &lb, Location, Value i, ValueRange) {
      Value i64v = lb.create<arith::IndexCastUIOp>(loc, i64, i);
      Value c[4] = {lb.create<arith::TruncIOp>(loc, i32, i64v),
                    lb.create<arith::TruncIOp>(loc, i32, lb.create<arith::ShRUIOp>(loc, i64v, c64(lb, 32))),
                    c32(lb, 0), c32(lb, 0)};
      Value k0 = key0, k1 = key1;
      auto mulWide = [&](Value word, uint32_t m) {
        return lb.create<arith::MulIOp>(loc, lb.create<arith::ExtUIOp>(loc, i64, word), c64(lb, (int64_t)m)).getResult();
      };
      auto high = [&](Value p) { return lb.create<arith::TruncIOp>(loc, i32, lb.create<arith::ShRUIOp>(loc, p, c64(lb, 32))).getResult(); };
      auto low = [&](Value p) { return lb.create<arith::TruncIOp>(loc, i32, p).getResult(); };
      auto xor3 = [&](Value a, Value x, Value y) {
        return lb.create<arith::XOrIOp>(loc, lb.create<arith::XOrIOp>(loc, a, x), y).getResult();
      };
      for (int round = 0; round < 10; ++round) {
        Value p0 = mulWide(c[0], 0xD2511F53u), p1 = mulWide(c[2], 0xCD9E8D57u);
        Value n0 = xor3(high(p1), c[1], k0), n2 = xor3(high(p0), c[3], k1);
        c[1] = low(p1);
        c[3] = low(p0);
        c[0] = n0;
        c[2] = n2;
        k0 = lb.create<arith::AddIOp>(loc, k0, c32(lb, 0x9E3779B9u));
        k1 = lb.create<arith::AddIOp>(loc, k1, c32(lb, 0xBB67AE85u));
      }
      Value top = lb.create<arith::UIToFPOp>(loc, f32, lb.create<arith::ShRUIOp>(loc, c[0], c32(lb, 8)));
      Value u = lb.create<arith::MulFOp>(loc, top, lb.create<arith::ConstantOp>(loc, lb.getF32FloatAttr(5.9604644775390625e-8f)));
      lb.create<memref::StoreOp>(loc, u, out, ValueRange{i});
      lb.create<scf::YieldOp>(loc);
    });
  b.create<func::ReturnOp>(loc);
  return loopKernel(f);
}

std::optional<CpuKernel> lowerOperation(Operation *op, ModuleOp target, const std::string &name,
                                        std::string &why) {
  Region r = codegen::regionOfOperation(op);
  if (isa<MatmulOp>(op))
    return lowerRegion(r, FusionKind::matmul_epilogue, target, name, why);
  if (isConvolutionOp(op))
    return lowerRegion(r, FusionKind::conv_epilogue, target, name, why);
  if (isPoolingOp(op)) {
    Type et = elemOf(op->getResult(0));
    if (!et.isF32() && !et.isF64() && !isNarrowFloat(et))
      return fail(why, "pooling of integers"), std::nullopt;
    CpuKernel k;
    k.kind = CpuKernel::Kind::Library;
    k.library = LibraryCall{};
    k.library->kind = LibraryCall::Kind::Pool;
    k.library->pool.dtype = dtypeOf(op->getResult(0));
    k.library->pool.geometry = poolGeometry(op);
    return k;
  }
  if (isReductionOp(op))
    return lowerRegion(r, FusionKind::reduction, target, name, why);
  if (auto s = dyn_cast<ScanOp>(op))
    return lowerScan(s, target, name, why);
  if (auto u = dyn_cast<RandomUniformOp>(op))
    return lowerRandomUniform(u, target, name);
  if (isa<PointwiseOpInterface, CastOp>(op) || isIndexReadOp(op))
    return lowerRegion(r, FusionKind::pointwise, target, name, why);
  why = "no CPU code for '" + op->getName().getStringRef().str() + "'";
  return std::nullopt;
}

} // namespace rfuse::cpu
