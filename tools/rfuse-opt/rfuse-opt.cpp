// rfuse-opt: MLIR's opt driver with the rfuse dialect, the dialects rfuse IR meets (func, arith,
// math, tensor, linalg) and those its CPU lowering emits (memref, scf, llvm, ...), upstream's
// generic passes (canonicalize, cse, inline, ...), rfuse's own passes and its lowering stages
// (rfuse-emit-cuda, rfuse-lower-kernels-to-cpu).
#include "rfuse/Codegen/CodegenPasses.h"
#include "rfuse/Codegen/CpuLowering.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Transforms/Passes.h"

#include <cstring>
#include <string>
#include <vector>

static llvm::cl::opt<bool> costReport(
    "rfuse-cost-report",
    llvm::cl::desc("After every pass, print the cost model of each host function to stderr "
                   "(rfuse-cost: <pass> @<fn>: kernels=<k> bytes=<b>)"));

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  rfuse::registerRfuseDialects(registry);
  registry.insert<mlir::arith::ArithDialect, mlir::math::MathDialect, mlir::tensor::TensorDialect,
                  mlir::linalg::LinalgDialect>();
  rfuse::registerPassesForPipelines(); // upstream's generic passes and rfuse's
  rfuse::registerRfuseCodegenPasses();
  rfuse::cpu::registerCpuDialects(registry); // what the CPU lowering emits
  rfuse::registerRfusePipelines();
  // --rfuse-pipeline=NAME is spelled --rfuse-pipeline-NAME for MLIR's option parser.
  std::vector<std::string> args(argv, argv + argc);
  std::vector<char *> argvRewritten;
  for (std::string &a : args) {
    llvm::StringRef arg(a);
    // Pass plugins are loaded here, so that one that fails stops the tool with the reason
    // (MLIR's own option only warns and carries on).
    if (arg.consume_front("--load-pass-plugin=") || arg.consume_front("-load-pass-plugin=")) {
      std::string error;
      if (!rfuse::loadPassPlugin(arg.str(), error)) {
        llvm::errs() << "rfuse-opt: " << error << "\n";
        return 1;
      }
      continue;
    }
    if (arg.consume_front("--rfuse-pipeline=") || arg.consume_front("-rfuse-pipeline=")) {
      std::string name = arg.str();
      if (!llvm::is_contained(rfuse::pipelineNames(), name)) {
        llvm::errs() << "rfuse-opt: unknown pipeline '" << name << "'; available:";
        for (const std::string &p : rfuse::pipelineNames())
          llvm::errs() << " " << p;
        llvm::errs() << "\n";
        return 1;
      }
      a = "--rfuse-pipeline-" + name;
    }
    argvRewritten.push_back(a.data());
  }
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      (int)argvRewritten.size(), argvRewritten.data(), "rfuse optimizer driver\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (costReport)
    config.setPassPipelineSetupFn([cliConfig = config](mlir::PassManager &pm) {
      if (mlir::failed(cliConfig.setupPassPipeline(pm))) // the pipeline given on the command line
        return mlir::failure();
      pm.addInstrumentation(std::make_unique<rfuse::CostReportInstrumentation>(
          [](const rfuse::CostEntry &e) { llvm::errs() << e.str() << "\n"; }));
      return mlir::success();
    });
  std::string error;
  auto input = mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  auto output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
