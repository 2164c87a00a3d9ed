// Named pipelines, built in one place for rfuse-opt (--rfuse-pipeline=NAME), C++ (compile()) and,
// through it, the R package.
#include "rfuse/Passes/Passes.h"
#include "FusionGrouping.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

using namespace mlir;

namespace rfuse {

std::vector<std::string> pipelineNames() { return {"default", "elementwise-only", "no-fusion"}; }

namespace {
bool isPipelineString(llvm::StringRef s) { return s.contains('(') || s.contains(','); }
} // namespace

void registerPassesForPipelines() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerTransformsPasses();
    registerRfusePasses();
  });
}

LogicalResult buildPipeline(OpPassManager &pm, llvm::StringRef name, std::string *error) {
  if (!llvm::is_contained(pipelineNames(), name.str())) {
    std::string names;
    for (const std::string &n : pipelineNames())
      names += (names.empty() ? "" : ", ") + n;
    if (!isPipelineString(name)) {
      if (error)
        *error = "unknown rfuse pipeline '" + name.str() + "'; the named pipelines are " + names +
                 ", and an MLIR pass pipeline string (builtin.module(...)) is accepted too";
      return failure();
    }
    registerPassesForPipelines();
    // parsePassPipeline(text, pm) wants the passes without the builtin.module anchor (with it,
    // it runs nothing).
    llvm::StringRef inner = name.trim();
    if (inner.consume_front("builtin.module(")) {
      if (!inner.consume_back(")")) {
        if (error)
          *error = "the pass pipeline '" + name.str() + "' does not close its builtin.module(";
        return failure();
      }
    }
    std::string diag;
    llvm::raw_string_ostream os(diag);
    if (failed(parsePassPipeline(inner, pm, os))) {
      if (error)
        *error = "the pass pipeline '" + name.str() + "' does not parse: " + os.str();
      return failure();
    }
    return success();
  }
  // Every pipeline first drops stop-gradient marks and expands custom VJPs into calls of their
  // forward functions (the gradient, if any, was built before), inlines traced helper functions
  // and cleans up.
  pm.addPass(createDropStopGradients());
  pm.addPass(createExpandCustomVjp());
  pm.addPass(createInlinerPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (name == "no-fusion")
    return success();
  OpPassManager &fn = pm.nest<func::FuncOp>();
  if (name == "default") {
    fn.addPass(createChannelsLast());
    fn.addPass(createMoveReshapes());
    fn.addPass(createSinkTransposes());
    fn.addPass(createCSEPass()); // the broadcasts and constants they made per use
    fn.addPass(createSinkSlices());
    fn.addPass(createSplitReductions());
    fn.addPass(createFuseMatmulEpilogue());
    fn.addPass(createFuseReductions());
  }
  fn.addPass(createFuseElementwise());
  pm.addPass(createOutlineKernels());
  pm.addPass(createCanonicalizerPass()); // drops constants that moved into kernels
  return success();
}

namespace {
// The module's text after every registered pass (nesting adaptors have no argument).
class RecordIR : public PassInstrumentation {
public:
  RecordIR(ModuleOp module, std::vector<std::pair<std::string, std::string>> *out) : module(module), out(out) {}
  void runAfterPass(Pass *pass, Operation *) override {
    if (pass->getArgument().empty())
      return;
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    out->push_back({pass->getArgument().str(), os.str()});
  }

private:
  ModuleOp module;
  std::vector<std::pair<std::string, std::string>> *out;
};
} // namespace

LogicalResult compile(ModuleOp module, llvm::StringRef pipeline, std::vector<CostEntry> *costs,
                      std::vector<std::pair<std::string, std::string>> *afterEachPass) {
  PassManager pm(module.getContext());
  std::string error;
  if (failed(buildPipeline(pm, pipeline, &error)))
    return module.emitError(error);
  if (costs)
    pm.addInstrumentation(std::make_unique<CostReportInstrumentation>(
        [costs](const CostEntry &e) { costs->push_back(e); }));
  if (afterEachPass) {
    // Passes run one at a time, so each record is the whole module at that point.
    module.getContext()->disableMultithreading();
    pm.addInstrumentation(std::make_unique<RecordIR>(module, afterEachPass));
  }
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
