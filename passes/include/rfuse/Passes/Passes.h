// rfuse's passes: declarations and registration, generated from Passes.td.
#ifndef RFUSE_PASSES_PASSES_H
#define RFUSE_PASSES_PASSES_H

#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"

#include <functional>

#include <string>
#include <vector>

namespace rfuse {
#define GEN_PASS_DECL
#include "rfuse/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "rfuse/Passes/Passes.h.inc"

/// Names of the pipelines: "default" (inline, canonicalize, CSE, matmul-epilogue, reduction and
/// elementwise fusion, outlining), "elementwise-only", "no-fusion" (inline and clean up only).
std::vector<std::string> pipelineNames();
/// Appends pipeline `name` to `pm` (anchored on builtin.module): a named pipeline, or an MLIR
/// pass pipeline string (`builtin.module(inline, func.func(rfuse-fuse-elementwise), ...)`, the
/// anchor optional) of registered passes, run exactly as written. Fails for an unknown name or
/// a string that does not parse, with the reason in `error`.
mlir::LogicalResult buildPipeline(mlir::OpPassManager &pm, llvm::StringRef name, std::string *error = nullptr);
/// Registers rfuse's passes and upstream's generic ones (canonicalize, cse, inline, ...) in
/// MLIR's pass registry, once per process: what pipeline strings can name.
void registerPassesForPipelines();
/// Loads an MLIR pass plugin (a shared library exporting mlirGetPassPluginInfo) and registers
/// its passes, once per path. False, with the reason in `error`, when the library does not load,
/// is not a plugin of this MLIR, or would register a pass name another pass already has.
bool loadPassPlugin(const std::string &path, std::string &error);
/// The cost model's view of one host function after one pass (see docs/passes.md): kernels =
/// fusion regions, outlined kernel calls and unfused compute ops; bytes = what they read and
/// write through device memory, each input and output once per kernel.
struct CostEntry {
  std::string pass;
  std::string function;
  uint64_t kernels = 0;
  uint64_t bytes = 0;
  /// "rfuse-cost: <pass> @<function>: kernels=<k> bytes=<b>"
  std::string str() const;
};

/// Reports the cost model of every host function after every pass. Debian's release build of
/// MLIR compiles pass statistics out (-mlir-pass-statistics prints nothing), so this is how
/// researchers compare fusion strategies by numbers: rfuse-opt --rfuse-cost-report.
class CostReportInstrumentation : public mlir::PassInstrumentation {
public:
  explicit CostReportInstrumentation(std::function<void(const CostEntry &)> sink)
      : sink(std::move(sink)) {}
  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override;

private:
  std::function<void(const CostEntry &)> sink;
};

/// Runs pipeline `name` on `module`; errors are reported through the context's diagnostics.
/// With `costs`, appends the cost model after each pass; with `afterEachPass`, the module's
/// text after each pass (named by the pass's argument).
mlir::LogicalResult compile(mlir::ModuleOp module, llvm::StringRef pipeline,
                            std::vector<CostEntry> *costs = nullptr,
                            std::vector<std::pair<std::string, std::string>> *afterEachPass = nullptr);
/// Registers each pipeline as a pass-pipeline option `rfuse-pipeline-<name>`.
void registerRfusePipelines();
/// Adds the dialects rfuse modules use (rfuse, func) and func's inliner extension.
void registerRfuseDialects(mlir::DialectRegistry &registry);
} // namespace rfuse

#endif
