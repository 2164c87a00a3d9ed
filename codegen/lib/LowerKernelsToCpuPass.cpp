// rfuse-lower-kernels-to-cpu: the CPU execution plan of every host function, recorded on the IR,
// with each step's lowered functions appended as a nested module.
#include "rfuse/Codegen/CodegenPasses.h"
#include "rfuse/Codegen/CpuLowering.h"
#include "rfuse/Codegen/ExecutionPlan.h"

#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Parser/Parser.h"

namespace rfuse {
#define GEN_PASS_DEF_LOWERKERNELSTOCPU
#include "rfuse/Codegen/CodegenPasses.h.inc"
} // namespace rfuse

using namespace mlir;

namespace rfuse {
namespace {

struct LowerKernelsToCpuPass : impl::LowerKernelsToCpuBase<LowerKernelsToCpuPass> {
  using LowerKernelsToCpuBase::LowerKernelsToCpuBase;
  void getDependentDialects(DialectRegistry &registry) const override { cpu::registerCpuDialects(registry); }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stage != "linalg" && stage != "llvm") {
      module.emitError() << "rfuse-lower-kernels-to-cpu: stage must be linalg or llvm, not '" << stage << "'";
      return signalPassFailure();
    }
    std::vector<std::string> hosts;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn->hasAttr("rfuse.kernel") && !fn.isDeclaration() && fn.isPublic())
        hosts.push_back(fn.getName().str());
    Builder b(module.getContext());
    std::vector<OwningOpRef<ModuleOp>> lowered;
    for (const std::string &host : hosts) {
      codegen::ExecutionPlan plan;
      try {
        plan = codegen::buildExecutionPlan(module, host, codegen::Target{}, CodegenOptions{});
      } catch (const std::exception &e) {
        module.emitError() << e.what();
        return signalPassFailure();
      }
      for (size_t i = 0; i < plan.steps.size(); ++i) {
        const codegen::Step &s = plan.steps[i];
        s.op->setAttr("rfuse.plan", b.getStringAttr(s.describe(codegen::Backend::Cpu)));
        if (!s.cpuFunction)
          continue;
        // A kernel's functions are named after it; a lone op's after its host and position.
        std::string name = (isa<func::CallOp>(s.op) ? s.label : host + "_" + std::to_string(i) + "_" + s.label) + "_cpu";
        // The step's module as the plan keeps it (linalg, scf, memref), then on to the LLVM dialect.
        OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(s.cpuModule, module.getContext());
        if (m && stage == "llvm" && failed(cpu::lowerToLLVMDialect(*m))) {
          module.emitError() << "the CPU lowering of " << s.label << " to the LLVM dialect failed";
          return signalPassFailure();
        }
        if (!m) {
          module.emitError() << "the lowered " << s.label << " does not parse";
          return signalPassFailure();
        }
        m->setSymNameAttr(b.getStringAttr(name));
        lowered.push_back(std::move(m));
      }
    }
    for (OwningOpRef<ModuleOp> &m : lowered)
      module.getBody()->push_back(m.release());
  }
};

} // namespace
} // namespace rfuse
