// rfuse-outline-kernels: see Passes.td.
#include "rfuse/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace rfuse {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "rfuse/Passes/Passes.h.inc"

namespace {
struct OutlineKernelsPass : impl::OutlineKernelsBase<OutlineKernelsPass> {
  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::SymbolTable symbols(module);
    llvm::SmallVector<mlir::func::FuncOp> hosts(module.getOps<mlir::func::FuncOp>());
    for (mlir::func::FuncOp host : hosts) {
      if (host->hasAttr("rfuse.kernel"))
        continue;
      llvm::SmallVector<FusionOp> fusions;
      host.walk([&](FusionOp f) { fusions.push_back(f); });
      unsigned n = 0;
      for (FusionOp f : fusions) {
        mlir::OpBuilder b(module.getContext());
        b.setInsertionPointAfter(host);
        std::string name = (host.getName() + "_k" + llvm::Twine(n++) + "_" +
                            stringifyFusionKind(f.getKind()))
                               .str();
        auto kernel = b.create<mlir::func::FuncOp>(
            f.getLoc(), name, b.getFunctionType(f.getInputs().getTypes(), f.getResultTypes()));
        kernel.setPrivate();
        kernel->setAttr("rfuse.kernel", f.getKindAttr());
        symbols.insert(kernel); // renames on a clash
        kernel.getBody().takeBody(f.getBody());
        mlir::Block &body = kernel.getBody().front();
        auto yield = llvm::cast<YieldOp>(body.getTerminator());
        b.setInsertionPoint(yield);
        b.create<mlir::func::ReturnOp>(yield.getLoc(), yield.getValues());
        yield.erase();
        b.setInsertionPoint(f);
        auto call = b.create<mlir::func::CallOp>(f.getLoc(), kernel, f.getInputs());
        f.replaceAllUsesWith(call.getResults());
        f.erase();
        ++numOutlined;
      }
    }
  }
};
} // namespace
} // namespace rfuse
