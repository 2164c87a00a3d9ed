#include "ScalarIR.h"

#include "rfuse/IR/ScalarOps.h"

namespace rfuse::cpu::ir {

namespace {
// A call of libm's `name` (f64) or `name` + "f" (f32), declared in the target module once.
IrVal libm(const std::string &name, IrVal x) {
  mlir::Type t = x.v.getType();
  std::string sym = t.isF64() ? name : name + "f";
  mlir::ModuleOp target = current->target;
  if (!target.lookupSymbol(sym)) {
    mlir::OpBuilder mb(target.getBodyRegion());
    auto decl = mb.create<mlir::func::FuncOp>(L(), sym, mb.getFunctionType({t}, {t}));
    decl.setPrivate();
  }
  return B().create<mlir::func::CallOp>(L(), sym, mlir::TypeRange{t}, mlir::ValueRange{x.v}).getResult(0);
}
} // namespace

IrVal tgamma(IrVal x) { return libm("tgamma", x); }
IrVal lgamma(IrVal x) { return libm("lgamma", x); }

IrVal erfc(IrVal x) {
  mlir::Type t = x.v.getType();
  if (t.isF32())
    return scalar::rf_erfc_rational<IrVal>(x);
  return libm("erfc", x);
}

} // namespace rfuse::cpu::ir
