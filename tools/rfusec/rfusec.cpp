// rfusec: the ahead-of-time compiler for deployers. On a machine with no GPU it fuses a module
// and compiles every kernel with NVRTC for each requested architecture, writing
//   OUT/<kernel>.<arch>.cubin, OUT/<kernel>.cu, OUT/fused.mlir and OUT/manifest.txt
// and filling the kernel cache (RFUSE_CACHE_DIR) so that a later run on a GPU compiles nothing.
//
//   rfusec FILE.mlir -o OUT [--pipeline default] [--arch sm_86,sm_89,sm_90]
#include "rfuse/Codegen/CudaCodegen.h"
#include "rfuse/Passes/Passes.h"
#include "rfuse/Runtime/Cuda.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>

namespace cl = llvm::cl;
using namespace mlir;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"), cl::Required);
static cl::opt<std::string> outDir("o", cl::desc("Output directory"), cl::Required);
static cl::opt<std::string> pipeline("pipeline", cl::desc("Fusion pipeline"), cl::init("default"));
static cl::list<std::string> archs("arch", cl::desc("Target architectures"), cl::CommaSeparated);

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "rfuse ahead-of-time compiler\n");
  std::vector<std::string> targets(archs.begin(), archs.end());
  if (targets.empty())
    targets = {"sm_86", "sm_89", "sm_90"};
  DialectRegistry registry;
  rfuse::registerRfuseDialects(registry);
  MLIRContext ctx(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diag(sourceMgr, &ctx);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(inputFile, sourceMgr, &ctx);
  if (!module)
    return 1;
  if (failed(rfuse::compile(*module, pipeline)))
    return 1;
  if (std::error_code ec = llvm::sys::fs::create_directories(outDir.getValue())) {
    llvm::errs() << "rfusec: cannot create " << outDir << ": " << ec.message() << "\n";
    return 1;
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream fused(outDir + "/fused.mlir", ec);
    module->print(fused);
  }
  std::vector<std::string> names, sources;
  std::ofstream manifest(outDir + "/manifest.txt");
  int fallbacks = 0;
  module->walk([&](func::FuncOp fn) {
    if (!fn->hasAttr("rfuse.kernel"))
      return;
    rfuse::cuda::KernelPlan plan = rfuse::cuda::planKernel(fn);
    if (plan.kernel) { // the kernel, or a library call's epilogue
      names.push_back(plan.kernel->name);
      sources.push_back(plan.kernel->source);
    }
    if (plan.library) {
      manifest << fn.getName().str() << " "
               << (plan.library->kind == rfuse::codegen::LibraryCall::Kind::Matmul ? "cublaslt " : "cudnn ")
               << plan.library->describe() << (plan.kernel ? " + generated epilogue" : "") << "\n";
    }
    if (!plan.unsupported.empty()) {
      manifest << fn.getName().str() << " host-fallback: " << plan.unsupported << "\n";
      ++fallbacks;
    }
  });
  for (size_t i = 0; i < names.size(); ++i)
    std::ofstream(outDir + "/" + names[i] + ".cu") << sources[i];
  try {
    for (const std::string &arch : targets) {
      auto compiled = rfuse::cuda::compileKernels(names, sources, arch);
      for (size_t i = 0; i < names.size(); ++i) {
        std::ofstream(outDir + "/" + names[i] + "." + arch + ".cubin", std::ios::binary)
            .write(compiled[i].cubin.data(), compiled[i].cubin.size());
        manifest << names[i] << " " << arch << " cubin " << compiled[i].cubin.size() << " bytes"
                 << (compiled[i].cached ? " (cache)" : "") << "\n";
      }
    }
  } catch (const std::exception &e) {
    llvm::errs() << "rfusec: " << e.what() << "\n";
    return 1;
  }
  auto stats = rfuse::cuda::kernelCacheStats();
  llvm::outs() << "rfusec: " << names.size() << " kernels x " << targets.size()
               << " architectures; compiled " << stats.compiles << ", from cache "
               << stats.memoryHits + stats.diskHits << "; " << fallbacks
               << " kernels run on the host\n";
  return 0;
}
