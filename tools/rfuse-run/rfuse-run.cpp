// rfuse-run: parse, verify and run one function of a .mlir file on the reference interpreter.
//
//   rfuse-run FILE.mlir [--entry NAME] [--inputs a.npy,b.npy | --random --seed N]
//             [--output-dir DIR] [--dtype f32|f64] [--device cpu|cpu-jit|cuda [--pipeline P] [--check]]
//
// --device cuda fuses the module with --pipeline (default "default") and runs it on the GPU
// (cpu-jit: on the CPU backend's compiled kernels, as a --cpu artifact runs);
// --check also runs the unfused module on the interpreter and reports the relative error.
// Prints, per output, its type, a checksum (sum and sum of absolute values) and the first values;
// with --output-dir writes out0.npy, out1.npy, ... (and the random inputs as in0.npy, ...).
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Interpreter.h"
#include "rfuse/Runtime/Npy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <random>

namespace cl = llvm::cl;
using namespace mlir;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"), cl::Required);
static cl::opt<std::string> entry("entry", cl::desc("Function to run (default: main, else the "
                                                    "first public function)"));
static cl::list<std::string> inputs("inputs", cl::desc("Comma-separated .npy files, one per "
                                                        "argument"),
                                    cl::CommaSeparated);
static cl::opt<bool> randomInputs("random", cl::desc("Fill the arguments with random values "
                                               "(floats uniform in [-1, 1), never zeros)"));
static cl::opt<unsigned> seed("seed", cl::desc("Seed for --random"), cl::init(1));
static cl::opt<std::string> outputDir("output-dir", cl::desc("Write outputs as .npy here"));
static cl::opt<std::string> dtype("dtype", cl::desc("Compute all floats in f32 or f64 "
                                                    "(default: as declared)"));
static cl::opt<unsigned> printCount("print-count", cl::desc("How many first values to print"),
                                    cl::init(6));
static cl::opt<std::string> device("device", cl::desc("cpu (the interpreter, default), cpu-jit (fused, on the "
                                                    "CPU backend's compiled kernels) or cuda"),
                                   cl::init("cpu"));
static cl::opt<std::string> pipelineName("pipeline", cl::desc("Pipeline for --device cuda"),
                                         cl::init("default"));
static cl::opt<bool> checkResults("check", cl::desc("With --device cuda: compare with the "
                                                    "interpreter and report the relative error"));

static int fail(const std::string &msg) {
  llvm::errs() << "rfuse-run: error: " << msg << "\n";
  return 1;
}

static rfuse::HostTensor randomTensor(RankedTensorType type, std::mt19937_64 &rng) {
  rfuse::DType dt = rfuse::DType::F32;
  rfuse::fromMlirType(type.getElementType(), dt);
  return rfuse::randomHostTensor(dt, std::vector<int64_t>(type.getShape().begin(), type.getShape().end()), rng);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "rfuse reference interpreter\n");

  DialectRegistry registry;
  registry.insert<rfuse::RfuseDialect, func::FuncDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &ctx);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(inputFile, sourceMgr, &ctx);
  if (!module) // the parser also verifies
    return fail("cannot parse or verify '" + inputFile + "'");
  if (failed(verify(*module)))
    return fail("'" + inputFile + "' does not verify");

  std::string name = entry;
  if (name.empty()) {
    if (module->lookupSymbol<func::FuncOp>("main"))
      name = "main";
    for (auto fn : module->getOps<func::FuncOp>())
      if (name.empty() && fn.isPublic() && !fn.isExternal())
        name = fn.getName().str();
  }
  auto fn = module->lookupSymbol<func::FuncOp>(name);
  if (!fn)
    return fail("no function '" + name + "' in '" + inputFile + "'");

  rfuse::InterpreterOptions options;
  if (!dtype.empty()) {
    rfuse::DType dt;
    if (!rfuse::parseDType(dtype, dt) || (dt != rfuse::DType::F32 && dt != rfuse::DType::F64))
      return fail("--dtype must be f32 or f64, got '" + dtype + "'");
    options.floatOverride = dt;
  }

  std::vector<rfuse::HostTensor> args;
  auto argTypes = fn.getArgumentTypes();
  if (!inputs.empty()) {
    if (randomInputs)
      return fail("give either --inputs or --random, not both");
    if (inputs.size() != argTypes.size())
      return fail("@" + name + " takes " + std::to_string(argTypes.size()) + " arguments but " +
                  std::to_string(inputs.size()) + " .npy files were given");
    try {
      for (const std::string &path : inputs)
        args.push_back(rfuse::readNpy(path));
    } catch (const std::exception &e) {
      return fail(e.what());
    }
  } else if (randomInputs) {
    std::mt19937_64 rng(seed);
    for (Type t : argTypes) {
      auto rt = llvm::dyn_cast<RankedTensorType>(t);
      if (!rt)
        return fail("argument of @" + name + " is not a ranked tensor");
      args.push_back(randomTensor(rt, rng));
    }
  } else if (!argTypes.empty()) {
    return fail("@" + name + " takes " + std::to_string(argTypes.size()) +
                " arguments: give --inputs a.npy,... or --random");
  }

  if (!outputDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return fail("cannot create '" + outputDir + "': " + ec.message());
  }
  std::vector<rfuse::HostTensor> results;
  try {
    if (randomInputs && !outputDir.empty())
      for (size_t i = 0; i < args.size(); ++i)
        rfuse::writeNpy(outputDir + "/in" + std::to_string(i) + ".npy", args[i]);
    if (device == "cuda" || device == "cpu-jit") {
      bool gpu = device == "cuda";
      if (options.floatOverride)
        return fail("--dtype applies to the interpreter only");
      std::string text;
      llvm::raw_string_ostream os(text);
      module->print(os);
      auto program = rfuse::compileProgram(os.str(), pipelineName, name);
      results = program->run(args, gpu ? rfuse::Device::Cuda : rfuse::Device::Cpu);
      if (gpu)
        for (const std::string &f : program->info().gpuFallbacks)
          llvm::outs() << "host fallback: " << f << "\n";
      if (checkResults) {
        auto ref = rfuse::interpret(*module, name, args);
        for (size_t i = 0; i < ref.size(); ++i) {
          double num = 0, den = 0;
          for (int64_t k = 0; k < ref[i].numel(); ++k) {
            double d = results[i].get(k) - ref[i].get(k);
            num += d * d;
            den += ref[i].get(k) * ref[i].get(k);
          }
          llvm::outs() << "check output " << i << ": relative error vs interpreter "
                       << llvm::format("%.3g", std::sqrt(num / (den > 0 ? den : 1))) << "\n";
        }
      }
    } else if (device == "cpu") {
      results = rfuse::interpret(*module, name, args, options);
    } else {
      return fail("--device must be cpu, cpu-jit or cuda, got '" + device + "'");
    }
    for (size_t i = 0; i < results.size(); ++i) {
      const rfuse::HostTensor &r = results[i];
      llvm::outs() << rfuse::outputSummary(i, r, printCount);
      if (!outputDir.empty())
        rfuse::writeNpy(outputDir + "/out" + std::to_string(i) + ".npy", r);
    }
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  return 0;
}
