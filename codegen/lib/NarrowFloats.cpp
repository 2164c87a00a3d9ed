#include "NarrowFloats.h"

#include "rfuse/IR/Geometry.h"
#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace rfuse::cpu {

bool isNarrowFloat(Type t) {
  Type e = getElementTypeOrSelf(t);
  return e.isF16() || e.isBF16();
}

bool hasNarrowFloats(const codegen::Region &r) {
  for (Value v : r.inputs)
    if (isNarrowFloat(v.getType()))
      return true;
  for (Operation *op : r.ops)
    for (Value v : op->getResults())
      if (isNarrowFloat(v.getType()))
        return true;
  return false;
}

codegen::Region widenNarrowFloats(const codegen::Region &r, ModuleOp scratch) {
  OpBuilder b(scratch.getContext());
  b.setInsertionPointToEnd(scratch.getBody());
  SmallVector<Type> ins, outs;
  for (Value v : r.inputs)
    ins.push_back(v.getType());
  for (Value v : r.outputs)
    outs.push_back(v.getType());
  auto fn = b.create<func::FuncOp>(r.loc, "rfuse_widened", b.getFunctionType(ins, outs));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  IRMapping map;
  for (auto [i, v] : llvm::enumerate(r.inputs))
    map.map(v, body->getArgument(i));

  Type f32 = b.getF32Type();
  auto wide = [&](Type t) { return RankedTensorType::get(llvm::cast<RankedTensorType>(t).getShape(), f32); };
  llvm::DenseMap<Value, Value> extended; // a narrow value -> its f32 copy
  auto asF32 = [&](Value v, Location loc) -> Value {
    if (!isNarrowFloat(v.getType()))
      return v;
    if (Value e = extended.lookup(v))
      return e;
    return extended[v] = b.create<CastOp>(loc, wide(v.getType()), v);
  };
  // v rounded to the narrow `type` (from f32: extended, a narrow value itself first), with its
  // f32 copy at hand for the arithmetic that reads it.
  auto rounded = [&](Value v, Type type, Location loc) -> Value {
    Value from = getElementTypeOrSelf(v.getType()).isF32() ? v : asF32(v, loc);
    if (!getElementTypeOrSelf(from.getType()).isF32()) // f64, integers: through f32
      from = b.create<CastOp>(loc, wide(type), from);
    Value n = b.create<CastOp>(loc, type, from);
    extended[n] = b.create<CastOp>(loc, wide(type), n);
    return n;
  };

  for (Operation *op : r.ops) {
    Location loc = op->getLoc();
    if (auto c = dyn_cast<CastOp>(op)) {
      Value in = map.lookup(c.getInput());
      Type to = c.getType();
      if (isNarrowFloat(to)) {
        map.map(c.getResult(), rounded(in, to, loc));
      } else { // to f32, f64 or an integer: from the f32 copy of a narrow value
        Value from = asF32(in, loc);
        map.map(c.getResult(), from.getType() == to ? from : b.create<CastOp>(loc, to, from).getResult());
      }
      continue;
    }
    Operation *copy = b.clone(*op, map);
    if (isIndexReadOp(op)) {
      // Moves values as they are: narrow through narrow, unless its operands mix dtypes.
      bool narrowIn = llvm::any_of(copy->getOperands(), [](Value v) { return isNarrowFloat(v.getType()); });
      bool wideIn = llvm::any_of(copy->getOperands(), [](Value v) {
        return getElementTypeOrSelf(v.getType()).isF32();
      });
      if (narrowIn && wideIn)
        for (OpOperand &o : copy->getOpOperands()) {
          b.setInsertionPoint(copy);
          o.set(asF32(o.get(), loc));
        }
      b.setInsertionPointToEnd(body);
      for (Value res : copy->getResults())
        if (isNarrowFloat(res.getType()) && !llvm::any_of(copy->getOperands(), [](Value v) { return isNarrowFloat(v.getType()); }))
          res.setType(wide(res.getType()));
      continue;
    }
    // Arithmetic (pointwise ops, reductions) and constants: in f32.
    b.setInsertionPoint(copy);
    for (OpOperand &o : copy->getOpOperands())
      o.set(asF32(o.get(), loc));
    b.setInsertionPointAfter(copy);
    if (auto k = dyn_cast<ConstantOp>(copy)) {
      auto d = llvm::dyn_cast<DenseElementsAttr>(k.getValue());
      if (d && d.isSplat() && isNarrowFloat(d.getType())) {
        auto t = wide(d.getType());
        k.setValueAttr(DenseElementsAttr::get(t, FloatAttr::get(f32, d.getSplatValue<APFloat>().convertToDouble())));
        k.getResult().setType(t);
      }
      b.setInsertionPointToEnd(body);
      continue;
    }
    for (auto [orig, res] : llvm::zip(op->getResults(), copy->getResults()))
      if (isNarrowFloat(res.getType())) {
        res.setType(wide(res.getType()));
        map.map(orig, rounded(res, orig.getType(), loc));
      }
    b.setInsertionPointToEnd(body);
  }
  SmallVector<Value> results;
  for (Value o : r.outputs) {
    Value v = map.lookup(o);
    if (isNarrowFloat(o.getType()) && !isNarrowFloat(v.getType()))
      v = rounded(v, o.getType(), r.loc); // (a constant's f32 copy: exact)
    results.push_back(v);
  }
  b.create<func::ReturnOp>(r.loc, results);
  return codegen::regionOf(fn);
}

} // namespace rfuse::cpu
