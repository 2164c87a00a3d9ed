// rfusec: the ahead-of-time compiler for deployers. On a machine with or without a GPU it fuses a
// module, plans it for each requested architecture, compiles every kernel with NVRTC (cubins, and
// PTX of the newest architecture for newer GPUs) and writes one artifact that rfuse_rt
// (rfuse/rfuse_rt.h, rfuse-aot-run) loads and runs without MLIR, LLVM or NVRTC. The kernels also
// land in the kernel cache (RFUSE_CACHE_DIR), so a JIT run of the same module compiles nothing.
//
//   rfusec FILE.mlir -o model.rfuse [--entry main] [--pipeline default] [--arch sm_86,sm_89,sm_90]
//          [--no-ptx] [--cpu] [--no-gpu] [--sources DIR]
//
// --sources DIR also writes the fused module and each kernel's CUDA C++ there, to read.
#include "rfuse/Runtime/Artifact.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Engine.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>

namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"), cl::Required);
static cl::opt<std::string> outFile("o", cl::desc("The artifact to write (model.rfuse)"), cl::Required);
static cl::opt<std::string> entry("entry", cl::desc("The function to compile"), cl::init("main"));
static cl::opt<std::string> pipeline("pipeline", cl::desc("Fusion pipeline"), cl::init("default"));
static cl::list<std::string> archs("arch", cl::desc("Target architectures (default: sm_86,sm_89,sm_90)"),
                                   cl::CommaSeparated);
static cl::opt<bool> noPtx("no-ptx", cl::desc("No PTX for GPUs newer than the newest --arch"));
static cl::opt<bool> cpuProgram("cpu", cl::desc("Also a host-CPU program (kernels for this machine's CPU)"));
static cl::opt<bool> noGpu("no-gpu", cl::desc("No GPU programs (with --cpu: a CPU-only artifact)"));
static cl::opt<std::string> sourcesDir("sources", cl::desc("Also write the fused module and the kernels' CUDA C++ here"));

static int fail(const std::string &msg) {
  llvm::errs() << "rfusec: error: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "rfuse ahead-of-time compiler\n");
  auto text = llvm::MemoryBuffer::getFile(inputFile);
  if (!text)
    return fail("cannot read '" + inputFile + "': " + text.getError().message());
  try {
    auto program = rfuse::compileProgram((*text)->getBuffer().str(), pipeline, entry);
    rfuse::ExportOptions options;
    options.archs.assign(archs.begin(), archs.end());
    options.ptx = !noPtx;
    options.cpu = cpuProgram;
    options.cuda = !noGpu;
    rfuse::ExportSummary s = program->exportArtifact(outFile, options);
    if (!sourcesDir.empty()) {
      if (std::error_code ec = llvm::sys::fs::create_directories(sourcesDir.getValue()))
        return fail("cannot create " + sourcesDir + ": " + ec.message());
      std::ofstream(sourcesDir + "/fused.mlir") << program->info().fusedText;
      for (const auto &[name, source] : program->info().cudaSources)
        std::ofstream(sourcesDir + "/" + name + ".cu") << source;
    }
    auto stats = rfuse::cuda::kernelCacheStats();
    std::string archList;
    for (const std::string &a : s.archs)
      archList += (archList.empty() ? "" : ",") + a;
    llvm::outs() << "rfusec: " << s.kernels << " kernels x " << s.archs.size() << " architectures (" << archList
                 << (s.ptxArch.empty() ? "" : ", PTX for " + s.ptxArch) << ")"
                 << (s.cpu.empty() ? "" : " and the CPU (" + s.cpu + ")") << "; compiled " << stats.compiles
                 << ", from cache " << stats.memoryHits + stats.diskHits << "; " << s.steps << " steps; wrote "
                 << outFile << " (" << s.bytes << " bytes)\n";
  } catch (const rfuse::artifact::ArtifactError &e) {
    return fail(e.what());
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  return 0;
}
