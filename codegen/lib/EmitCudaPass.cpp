// rfuse-emit-cuda: the CUDA execution plan of every host function, recorded on the IR.
#include "rfuse/Codegen/CodegenPasses.h"
#include "rfuse/Codegen/ExecutionPlan.h"

#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace rfuse {
#define GEN_PASS_DEF_EMITCUDA
#include "rfuse/Codegen/CodegenPasses.h.inc"
} // namespace rfuse

using namespace mlir;

namespace rfuse {
namespace {

struct EmitCudaPass : impl::EmitCudaBase<EmitCudaPass> {
  using EmitCudaBase::EmitCudaBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    codegen::Target target;
    target.backend = codegen::Backend::Cuda;
    target.cuda.arch = arch;
    target.cuda.multiprocessors = multiprocessors;
    std::vector<std::string> hosts;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn->hasAttr("rfuse.kernel") && !fn.isDeclaration() && fn.isPublic())
        hosts.push_back(fn.getName().str());
    Builder b(module.getContext());
    for (const std::string &host : hosts) {
      codegen::ExecutionPlan plan = codegen::buildExecutionPlan(module, host, target, CodegenOptions{});
      for (const codegen::Step &s : plan.steps) {
        s.op->setAttr("rfuse.plan", b.getStringAttr(s.describe(codegen::Backend::Cuda)));
        auto call = dyn_cast<func::CallOp>(s.op);
        auto callee = call ? module.lookupSymbol<func::FuncOp>(call.getCallee()) : func::FuncOp();
        if (callee && s.cudaKernel)
          callee->setAttr("rfuse.cuda_source", b.getStringAttr(s.cudaKernel->source));
      }
    }
  }
};

} // namespace
} // namespace rfuse
