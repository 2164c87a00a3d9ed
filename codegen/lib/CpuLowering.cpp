#include "rfuse/Codegen/CpuLowering.h"

#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;

namespace rfuse::cpu {

void registerCpuDialects(DialectRegistry &registry) {
  registry.insert<linalg::LinalgDialect, memref::MemRefDialect, arith::ArithDialect,
                  math::MathDialect, func::FuncDialect>();
}

namespace {

Type elemOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getElementType(); }

class Lowering {
public:
  Lowering(func::FuncOp kernel, ModuleOp target) : kernel(kernel), target(target), b(kernel.getContext()) {}

  bool run(const std::string &name, std::string &why) {
    Block &body = kernel.getBody().front();
    SmallVector<Value> outputs(body.getTerminator()->getOperands());
    if (outputs.empty()) {
      why = "no outputs";
      return false;
    }
    auto space = llvm::cast<RankedTensorType>(outputs[0].getType()).getShape();
    rank = space.size();
    for (Value o : outputs)
      if (llvm::cast<RankedTensorType>(o.getType()).getShape() != space)
        return fail(why, "outputs of different shapes");
    for (Value v : body.getArguments())
      if (!supportedType(elemOf(v)))
        return fail(why, "f16/bf16 on the CPU JIT");
    for (Operation &op : body.without_terminator())
      if (op.getNumResults() != 1 || !supportedType(elemOf(op.getResult(0))))
        return fail(why, "f16/bf16 on the CPU JIT");

    // Function signature: the kernel's inputs, then its outputs, as memrefs.
    Location loc = kernel.getLoc();
    SmallVector<Type> argTypes;
    for (BlockArgument a : body.getArguments())
      argTypes.push_back(memrefOf(a.getType()));
    for (Value o : outputs)
      argTypes.push_back(memrefOf(o.getType()));
    b.setInsertionPointToEnd(target.getBody());
    auto fn = b.create<func::FuncOp>(loc, name, b.getFunctionType(argTypes, {}));
    fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);

    // linalg inputs: (kernel input, indexing map) pairs — direct reads and index maps.
    SmallVector<Value> ins;
    SmallVector<AffineMap> maps;
    auto addInput = [&](Value kernelArg, AffineMap map) {
      for (size_t i = 0; i < inputKeys.size(); ++i)
        if (inputKeys[i].first == kernelArg && inputKeys[i].second == map)
          return (int)i;
      inputKeys.push_back({kernelArg, map});
      ins.push_back(entry->getArgument(llvm::cast<BlockArgument>(kernelArg).getArgNumber()));
      maps.push_back(map);
      return (int)inputKeys.size() - 1;
    };
    AffineMap identity = b.getMultiDimIdentityMap(rank);
    for (Operation &op : body.without_terminator()) {
      if (isa<BroadcastInDimOp, TransposeOp>(op)) {
        Value src = op.getOperand(0);
        if (src.getDefiningOp<ConstantOp>())
          continue;
        if (!llvm::isa<BlockArgument>(src))
          return fail(why, "an index map over a computed value");
        slotOf[&op] = addInput(src, indexMap(&op));
        continue;
      }
      for (Value v : op.getOperands())
        if (llvm::isa<BlockArgument>(v))
          directSlot[v] = addInput(v, identity);
    }
    for (Value o : outputs)
      if (llvm::isa<BlockArgument>(o))
        directSlot[o] = addInput(o, identity);
    SmallVector<Value> outs;
    for (size_t i = 0; i < outputs.size(); ++i) {
      outs.push_back(entry->getArgument(body.getNumArguments() + i));
      maps.push_back(identity);
    }
    SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
    bool ok = true;
    b.create<linalg::GenericOp>(
        loc, TypeRange{}, ins, outs, maps, iters, [&](OpBuilder &nb, Location l, ValueRange args) {
          ok = emitBody(nb, l, args, outputs, why);
        });
    b.create<func::ReturnOp>(loc);
    if (!ok)
      fn.erase();
    return ok;
  }

private:
  func::FuncOp kernel;
  ModuleOp target;
  OpBuilder b;
  int64_t rank = 0;
  SmallVector<std::pair<Value, AffineMap>> inputKeys;
  llvm::DenseMap<Operation *, int> slotOf;  // index-map op -> linalg input
  llvm::DenseMap<Value, int> directSlot;    // kernel input read directly -> linalg input

  static bool fail(std::string &why, const char *w) {
    why = w;
    return false;
  }
  static bool supportedType(Type t) { return t.isF32() || t.isF64() || t.isInteger(1) || t.isInteger(32) || t.isInteger(64); }
  static MemRefType memrefOf(Type t) {
    auto rt = llvm::cast<RankedTensorType>(t);
    return MemRefType::get(rt.getShape(), rt.getElementType());
  }

  AffineMap indexMap(Operation *op) {
    SmallVector<AffineExpr> exprs;
    auto inShape = llvm::cast<RankedTensorType>(op->getOperand(0).getType()).getShape();
    if (auto bc = dyn_cast<BroadcastInDimOp>(op)) {
      for (auto [i, d] : llvm::enumerate(bc.getDims()))
        exprs.push_back(inShape[i] == 1 ? b.getAffineConstantExpr(0) : b.getAffineDimExpr(d));
    } else {
      auto perm = llvm::cast<TransposeOp>(op).getPerm();
      exprs.resize(perm.size());
      for (auto [d, p] : llvm::enumerate(perm))
        exprs[p] = b.getAffineDimExpr(d);
    }
    return AffineMap::get(rank, 0, exprs, b.getContext());
  }

  Value constantOf(OpBuilder &nb, Location l, ConstantOp c) {
    auto splat = llvm::cast<SplatElementsAttr>(c.getValue());
    return nb.create<arith::ConstantOp>(l, llvm::cast<TypedAttr>(splat.getSplatValue<Attribute>()));
  }

  Value erfc(OpBuilder &nb, Location l, Value x) {
    // libm's erfc (MLIR 19's math dialect has erf but no erfc): the same function the
    // interpreter's rf_gelu_erf calls.
    Type t = x.getType();
    std::string sym = t.isF32() ? "erfcf" : "erfc";
    if (!target.lookupSymbol(sym)) {
      OpBuilder mb(target.getBodyRegion());
      auto decl = mb.create<func::FuncOp>(l, sym, mb.getFunctionType({t}, {t}));
      decl.setPrivate();
    }
    return nb.create<func::CallOp>(l, sym, TypeRange{t}, ValueRange{x}).getResult(0);
  }

  Value scalar(OpBuilder &nb, Location l, ScalarOpKind k, ArrayRef<Value> a, std::string &why) {
    Type t = a[0].getType();
    bool isF = llvm::isa<FloatType>(t);
    auto fc = [&](double v) { return nb.create<arith::ConstantOp>(l, nb.getFloatAttr(t, v)).getResult(); };
    auto zeroI = [&]() { return nb.create<arith::ConstantOp>(l, nb.getIntegerAttr(t, 0)).getResult(); };
    switch (k) {
    case ScalarOpKind::Neg: return isF ? (Value)nb.create<arith::NegFOp>(l, a[0]) : nb.create<arith::SubIOp>(l, zeroI(), a[0]);
    case ScalarOpKind::Abs: return isF ? (Value)nb.create<math::AbsFOp>(l, a[0]) : nb.create<math::AbsIOp>(l, a[0]);
    case ScalarOpKind::Exp: return nb.create<math::ExpOp>(l, a[0]);
    case ScalarOpKind::Log: return nb.create<math::LogOp>(l, a[0]);
    case ScalarOpKind::Sqrt: return nb.create<math::SqrtOp>(l, a[0]);
    case ScalarOpKind::Rsqrt: return nb.create<arith::DivFOp>(l, fc(1), nb.create<math::SqrtOp>(l, a[0]));
    case ScalarOpKind::Tanh: return nb.create<math::TanhOp>(l, a[0]);
    case ScalarOpKind::Sigmoid:
      return nb.create<arith::DivFOp>(l, fc(1), nb.create<arith::AddFOp>(l, fc(1), nb.create<math::ExpOp>(l, nb.create<arith::NegFOp>(l, a[0]))));
    case ScalarOpKind::Relu: {
      Value neg = isF ? (Value)nb.create<arith::CmpFOp>(l, arith::CmpFPredicate::OLT, a[0], fc(0))
                      : nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, a[0], zeroI());
      return nb.create<arith::SelectOp>(l, neg, isF ? fc(0) : zeroI(), a[0]);
    }
    case ScalarOpKind::GeluErf: {
      Value arg = nb.create<arith::MulFOp>(l, nb.create<arith::NegFOp>(l, a[0]), fc(0.70710678118654752440));
      return nb.create<arith::MulFOp>(l, nb.create<arith::MulFOp>(l, fc(0.5), a[0]), erfc(nb, l, arg));
    }
    case ScalarOpKind::GeluTanh: {
      Value x3 = nb.create<arith::MulFOp>(l, nb.create<arith::MulFOp>(l, nb.create<arith::MulFOp>(l, fc(0.044715), a[0]), a[0]), a[0]);
      Value u = nb.create<arith::MulFOp>(l, fc(0.79788456080286535588), nb.create<arith::AddFOp>(l, a[0], x3));
      Value e = nb.create<math::ExpOp>(l, nb.create<arith::MulFOp>(l, fc(-2), u));
      return nb.create<arith::DivFOp>(l, a[0], nb.create<arith::AddFOp>(l, fc(1), e));
    }
    case ScalarOpKind::Sin: return nb.create<math::SinOp>(l, a[0]);
    case ScalarOpKind::Cos: return nb.create<math::CosOp>(l, a[0]);
    case ScalarOpKind::Add: return isF ? (Value)nb.create<arith::AddFOp>(l, a[0], a[1]) : nb.create<arith::AddIOp>(l, a[0], a[1]);
    case ScalarOpKind::Sub: return isF ? (Value)nb.create<arith::SubFOp>(l, a[0], a[1]) : nb.create<arith::SubIOp>(l, a[0], a[1]);
    case ScalarOpKind::Mul: return isF ? (Value)nb.create<arith::MulFOp>(l, a[0], a[1]) : nb.create<arith::MulIOp>(l, a[0], a[1]);
    case ScalarOpKind::Div: return nb.create<arith::DivFOp>(l, a[0], a[1]);
    case ScalarOpKind::Pow: return nb.create<math::PowFOp>(l, a[0], a[1]);
    // NaN-propagating, as rf_max / rf_min.
    case ScalarOpKind::Max: return isF ? (Value)nb.create<arith::MaximumFOp>(l, a[0], a[1]) : nb.create<arith::MaxSIOp>(l, a[0], a[1]);
    case ScalarOpKind::Min: return isF ? (Value)nb.create<arith::MinimumFOp>(l, a[0], a[1]) : nb.create<arith::MinSIOp>(l, a[0], a[1]);
#define RF_CMP(K, FP, IP)                                                                         \
  case ScalarOpKind::K:                                                                           \
    return isF ? (Value)nb.create<arith::CmpFOp>(l, arith::CmpFPredicate::FP, a[0], a[1])          \
               : nb.create<arith::CmpIOp>(l, arith::CmpIPredicate::IP, a[0], a[1]);
    RF_CMP(Eq, OEQ, eq)
    RF_CMP(Ne, UNE, ne)
    RF_CMP(Lt, OLT, slt)
    RF_CMP(Le, OLE, sle)
    RF_CMP(Gt, OGT, sgt)
    RF_CMP(Ge, OGE, sge)
#undef RF_CMP
    case ScalarOpKind::Not:
      return nb.create<arith::XOrIOp>(l, a[0], nb.create<arith::ConstantOp>(l, nb.getBoolAttr(true)));
    case ScalarOpKind::And: return nb.create<arith::AndIOp>(l, a[0], a[1]);
    case ScalarOpKind::Or: return nb.create<arith::OrIOp>(l, a[0], a[1]);
    case ScalarOpKind::Select: return nb.create<arith::SelectOp>(l, a[0], a[1], a[2]);
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
    why = "a float-to-integer cast (saturating semantics)";
    return {};
  }

  bool emitBody(OpBuilder &nb, Location l, ValueRange args, ArrayRef<Value> outputs, std::string &why) {
    llvm::DenseMap<Value, Value> scalarOf;
    for (auto [v, slot] : directSlot)
      scalarOf[v] = args[slot];
    Block &body = kernel.getBody().front();
    for (Operation &op : body.without_terminator()) {
      Value r;
      if (auto c = dyn_cast<ConstantOp>(op)) {
        if (!llvm::isa<SplatElementsAttr>(c.getValue()))
          return fail(why, "a dense constant in a kernel");
        r = constantOf(nb, l, c);
      } else if (isa<BroadcastInDimOp, TransposeOp>(op)) {
        if (auto c = op.getOperand(0).getDefiningOp<ConstantOp>())
          r = scalarOf.lookup(c.getResult());
        else
          r = args[slotOf.lookup(&op)];
      } else if (auto cst = dyn_cast<CastOp>(op)) {
        r = cast(nb, l, scalarOf.lookup(cst.getInput()), getElementTypeOrSelf(cst.getType()), why);
      } else if (auto pw = dyn_cast<PointwiseOpInterface>(op)) {
        SmallVector<Value> a;
        for (Value v : op.getOperands())
          a.push_back(scalarOf.lookup(v));
        r = scalar(nb, l, pw.getScalarOp(), a, why);
      } else {
        return fail(why, "a non-pointwise op");
      }
      if (!r)
        return false;
      scalarOf[op.getResult(0)] = r;
    }
    SmallVector<Value> yielded;
    for (Value o : outputs)
      yielded.push_back(scalarOf.lookup(o));
    nb.create<linalg::YieldOp>(l, yielded);
    return true;
  }
};

} // namespace

bool lowerPointwiseKernel(func::FuncOp kernel, ModuleOp target, const std::string &name,
                          std::string &why) {
  auto kind = kernel->getAttrOfType<FusionKindAttr>("rfuse.kernel");
  if (!kind || kind.getValue() != FusionKind::pointwise)
    return (why = "not a pointwise kernel", false);
  return Lowering(kernel, target).run(name, why);
}

} // namespace rfuse::cpu
