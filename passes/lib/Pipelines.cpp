// Named pipelines, built in one place for rfuse-opt (--rfuse-pipeline=NAME), C++ (compile()) and,
// through it, the R package.
#include "rfuse/Passes/Passes.h"
#include "FusionGrouping.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace rfuse {

std::vector<std::string> pipelineNames() { return {"default", "elementwise-only", "no-fusion"}; }

LogicalResult buildPipeline(OpPassManager &pm, llvm::StringRef name) {
  if (!llvm::is_contained(pipelineNames(), name.str()))
    return failure();
  // Every pipeline first inlines traced helper functions and cleans up.
  pm.addPass(createInlinerPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (name == "no-fusion")
    return success();
  OpPassManager &fn = pm.nest<func::FuncOp>();
  if (name == "default") {
    fn.addPass(createSplitReductions());
    fn.addPass(createFuseMatmulEpilogue());
    fn.addPass(createFuseReductions());
  }
  fn.addPass(createFuseElementwise());
  pm.addPass(createOutlineKernels());
  pm.addPass(createCanonicalizerPass()); // drops constants that moved into kernels
  return success();
}

LogicalResult compile(ModuleOp module, llvm::StringRef pipeline, std::vector<CostEntry> *costs) {
  PassManager pm(module.getContext());
  if (failed(buildPipeline(pm, pipeline)))
    return module.emitError("unknown rfuse pipeline '") << pipeline << "'";
  if (costs)
    pm.addInstrumentation(std::make_unique<CostReportInstrumentation>(
        [costs](const CostEntry &e) { costs->push_back(e); }));
  return pm.run(module);
}

namespace {
void reportFunction(func::FuncOp fn, llvm::StringRef pass,
                    const std::function<void(const CostEntry &)> &sink) {
  if (fn.isExternal() || fn->hasAttr("rfuse.kernel"))
    return;
  fusion::Cost cost = fusion::estimateCost(fn);
  sink(CostEntry{pass.str(), fn.getName().str(), cost.kernels, cost.bytes});
}
} // namespace

void CostReportInstrumentation::runAfterPass(Pass *pass, Operation *op) {
  // Only registered passes: this skips the pass manager's nesting adaptors.
  llvm::StringRef name = pass->getArgument();
  if (name.empty())
    return;
  if (auto fn = dyn_cast<func::FuncOp>(op))
    reportFunction(fn, name, sink);
  else if (auto module = dyn_cast<ModuleOp>(op))
    for (auto fn : module.getOps<func::FuncOp>())
      reportFunction(fn, name, sink);
}

std::string CostEntry::str() const {
  return "rfuse-cost: " + pass + " @" + function + ": kernels=" + std::to_string(kernels) +
         " bytes=" + std::to_string(bytes);
}

void registerRfusePipelines() {
  for (const std::string &name : pipelineNames())
    registerPassPipeline(
        "rfuse-pipeline-" + name, "rfuse's '" + name + "' pipeline",
        [name](OpPassManager &pm, llvm::StringRef, llvm::function_ref<LogicalResult(const llvm::Twine &)>) {
          return buildPipeline(pm, name);
        },
        [](llvm::function_ref<void(const mlir::detail::PassOptions &)>) {});
}

void registerRfuseDialects(DialectRegistry &registry) {
  registry.insert<RfuseDialect, func::FuncDialect>();
  func::registerInlinerExtension(registry);
}

} // namespace rfuse
