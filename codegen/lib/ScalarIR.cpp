#include "ScalarIR.h"

#include "rfuse/IR/ScalarOps.h"

namespace rfuse::cpu::ir {

IrVal erfc(IrVal x) {
  mlir::Type t = x.v.getType();
  if (t.isF32())
    return scalar::rf_erfc_rational<IrVal>(x);
  std::string sym = t.isF64() ? "erfc" : "erfcf";
  mlir::ModuleOp target = current->target;
  if (!target.lookupSymbol(sym)) {
    mlir::OpBuilder mb(target.getBodyRegion());
    auto decl = mb.create<mlir::func::FuncOp>(L(), sym, mb.getFunctionType({t}, {t}));
    decl.setPrivate();
  }
  return B().create<mlir::func::CallOp>(L(), sym, mlir::TypeRange{t}, mlir::ValueRange{x.v}).getResult(0);
}

} // namespace rfuse::cpu::ir
