// An example MLIR pass plugin for rfuse: `rfuse-example-fold-log-exp` rewrites log(exp(x)) to x
// (exact in real arithmetic; in floating point it also avoids exp's overflow for x > 709).
//
// Build: part of rfuse's CMake build (build/lib/libRfuseExamplePlugin.so). Use:
//   rfuse-opt --load-pass-plugin=build/lib/libRfuseExamplePlugin.so \
//     --pass-pipeline='builtin.module(func.func(rfuse-example-fold-log-exp))' in.mlir
// and from R:
//   rf_jit(f, plugins = "build/lib/libRfuseExamplePlugin.so",
//          pipeline = "builtin.module(inline, func.func(rfuse-example-fold-log-exp), ...)")
#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Config/llvm-config.h"

using namespace mlir;

namespace {

struct LogOfExp : OpRewritePattern<rfuse::LogOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(rfuse::LogOp log, PatternRewriter &rewriter) const override {
    auto exp = log.getOperand().getDefiningOp<rfuse::ExpOp>();
    if (!exp)
      return failure();
    rewriter.replaceOp(log, exp.getOperand());
    return success();
  }
};

struct FoldLogExpPass : PassWrapper<FoldLogExpPass, OperationPass<func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FoldLogExpPass)
  StringRef getArgument() const final { return "rfuse-example-fold-log-exp"; }
  StringRef getDescription() const final { return "Rewrite rfuse.log(rfuse.exp(x)) to x (an example plugin)"; }
  void getDependentDialects(DialectRegistry &registry) const override { registry.insert<rfuse::RfuseDialect>(); }
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LogOfExp>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "RfuseExamplePlugin", LLVM_VERSION_STRING,
          [] { PassRegistration<FoldLogExpPass>(); }};
}
