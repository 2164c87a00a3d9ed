#include "CpuJit.h"

#ifndef RFUSE_VERSION
#define RFUSE_VERSION "0.1.0"
#endif
#include "CpuExecutor.h"
#include "rfuse/BuildId.h"
#include "rfuse/Runtime/DiskCache.h"
#include "rfuse/Runtime/Options.h"

#include "rfuse/Codegen/CpuLowering.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Runtime/Interpreter.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

using namespace mlir;

namespace rfuse::cpu {

namespace {

// ---- The JIT: host target, -O3 with glibc's vector math, one engine per lowered function -----

struct HostJit {
  std::unique_ptr<llvm::TargetMachine> tm;
  bool haveMvec = false, haveAvx2 = false, haveAvx512 = false;
  std::mutex mutex; // compiles are serialized; the compiled code runs concurrently
  std::unique_ptr<MLIRContext> ctx;
  using Compiled = CompiledFunction;
  std::map<uint64_t, std::shared_ptr<Compiled>> cache; // key: hash of the lowered function
  size_t reused = 0;
  size_t compiles = 0; // LLVM compiles in this process (the cache may be cleared meanwhile)
  size_t diskHits = 0; // functions loaded from the disk cache's objects instead
  std::unique_ptr<llvm::orc::LLJIT> objects; // where cached objects are linked
  size_t objectDylibs = 0;

  // Never destroyed: an ExecutionEngine's destructor runs the JIT's deinitializers, which at
  // process exit would compile and run code after LLVM's own statics are gone.
  static HostJit &get() {
    static HostJit *jit = new HostJit;
    return *jit;
  }

  HostJit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    if (auto tmb = llvm::orc::JITTargetMachineBuilder::detectHost()) {
      tmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
      if (auto created = tmb->createTargetMachine())
        tm = std::move(*created);
      else
        llvm::consumeError(created.takeError());
    } else {
      llvm::consumeError(tmb.takeError());
    }
    // glibc's libmvec: vector exp/log/tanh/erfc... (LLVM's loop vectorizer calls them).
    std::string err;
    haveMvec = !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1", &err);
    haveAvx2 = llvm::sys::getHostCPUFeatures().lookup("avx2");
    haveAvx512 = llvm::sys::getHostCPUFeatures().lookup("avx512f");
    DialectRegistry registry;
    registry.insert<RfuseDialect, LLVM::LLVMDialect, scf::SCFDialect, cf::ControlFlowDialect,
                    affine::AffineDialect>();
    registerCpuDialects(registry);
    registerBuiltinDialectTranslation(registry);
    registerLLVMDialectTranslation(registry);
    ctx = std::make_unique<MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
  }

  // Vector variants of the libm functions the lowering calls, for LLVM's loop vectorizer: the
  // preset LLVM 19 knows (exp, log, sin, cos, pow at SSE and AVX2 widths) plus what glibc >= 2.35
  // adds: more functions, and every function at AVX-512 width ('e': 16 floats, 8 doubles), which
  // halves the calls on a host that has it (the row softmax: 2.6 -> 1.9 ms on this 2-core Xeon).
  void addVectorMath(llvm::TargetLibraryInfoImpl &tlii, const llvm::Triple &triple) {
    if (!haveMvec || triple.getArch() != llvm::Triple::x86_64)
      return;
    tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
    tlii.addVectorizableFunctions(extraVectorMath());
  }

  // Built once (compiles hold the JIT's mutex): VecDesc keeps StringRefs into vectorMathNames.
  const std::vector<llvm::VecDesc> &extraVectorMath() {
    struct Function {
      const char *name;
      const char *params; // "v" per argument, as in the vector ABI's mangled names
      bool inPreset;      // LLVM's preset has its SSE and AVX2 variants
    };
    static const Function functions[] = {
        {"exp", "v", true},    {"log", "v", true},     {"sin", "v", true},   {"cos", "v", true},
        {"pow", "vv", true},   {"tanh", "v", false},   {"erfc", "v", false}, {"expm1", "v", false},
        {"log1p", "v", false}, {"atan", "v", false},   {"sinh", "v", false}, {"cosh", "v", false},
        {"exp2", "v", false},  {"atan2", "vv", false}};
    if (!vectorMath.empty())
      return vectorMath;
    for (const Function &f : functions) {
      // isa letter, lanes of double (floats: twice as many)
      auto add = [&](char isa, unsigned lanes) {
        std::string d = f.name, s = d + "f", p = f.params;
        addVariant(d, std::string("_ZGV") + isa + "N" + std::to_string(lanes) + p + "_" + d, lanes, p);
        addVariant(s, std::string("_ZGV") + isa + "N" + std::to_string(2 * lanes) + p + "_" + s, 2 * lanes, p);
      };
      if (!f.inPreset) {
        add('b', 2);
        if (haveAvx2)
          add('d', 4);
      }
      if (haveAvx512)
        add('e', 8);
    }
    return vectorMath;
  }
  void addVariant(const std::string &scalar, const std::string &vec, unsigned vf, const std::string &params) {
    vectorMathNames.push_back(scalar);
    llvm::StringRef s = vectorMathNames.back();
    vectorMathNames.push_back(vec);
    llvm::StringRef v = vectorMathNames.back();
    vectorMathNames.push_back("_ZGV_LLVM_N" + std::to_string(vf) + params);
    vectorMath.emplace_back(s, v, llvm::ElementCount::getFixed(vf), false, vectorMathNames.back());
  }
  std::deque<std::string> vectorMathNames;
  std::vector<llvm::VecDesc> vectorMath;



  llvm::Error optimize(llvm::Module *m) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(tm.get(), pto);
    llvm::Triple triple(m->getTargetTriple());
    llvm::TargetLibraryInfoImpl tlii(triple);
    addVectorMath(tlii, triple);
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    if (tm) {
      m->setDataLayout(tm->createDataLayout());
      m->setTargetTriple(tm->getTargetTriple().str());
      for (llvm::Function &f : *m) {
        f.addFnAttr("target-cpu", tm->getTargetCPU());
        f.addFnAttr("target-features", tm->getTargetFeatureString());
        if (haveAvx512)
          f.addFnAttr("prefer-vector-width", "512");
      }
    }
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*m, mam);
    return llvm::Error::success();
  }

  // An engine for `text` (one function named `name` as lowerKernel leaves it, lowered here to the
  // LLVM dialect); with `objectDump` it keeps the object code for dumpToObjectFile. Holds the
  // mutex (the caller's).
  std::unique_ptr<ExecutionEngine> build(const std::string &text, const std::string &name, bool objectDump) {
    std::string diags;
    ScopedDiagnosticHandler handler(ctx.get(), [&](Diagnostic &d) {
      diags += d.str() + "\n";
      return success();
    });
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, ctx.get());
    if (!module)
      throw InterpreterError("the CPU JIT cannot parse the lowered " + name + ":\n" + diags);
    if (failed(lowerToLLVMDialect(*module)))
      throw InterpreterError("the CPU lowering of " + name + " to the LLVM dialect failed:\n" + diags);
    ExecutionEngineOptions options;
    auto transformer = [this](llvm::Module *m) { return optimize(m); };
    options.transformer = transformer;
    options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
    options.enableObjectDump = objectDump;
    auto created = ExecutionEngine::create(*module, options);
    if (!created) {
      std::string msg;
      llvm::raw_string_ostream ms(msg);
      ms << created.takeError() << "\n" << diags;
      throw InterpreterError("the CPU JIT failed for " + name + ": " + ms.str());
    }
    ++compiles;
    return std::move(*created);
  }

  // The disk cache's key of a lowered function: its text, the CPU compiled for and the compiler
  // (rfuse's version and the hash of its sources: an edited lowering never reads stale code).
  std::string diskKey(const std::string &text) {
    std::string cpu = tm ? tm->getTargetCPU().str() + " " + tm->getTargetFeatureString().str() : "";
    return cacheKeyHex(llvm::xxh3_64bits(text + "\n//cpu " + cpu + "\n//rfuse " + RFUSE_VERSION + " " + RFUSE_BUILD_ID +
                                         "\n//cpu object 2"));
  }

  // A cached object linked into a JITDylib of its own (every lowered function has the same
  // name), resolving libm and libmvec from the process. Null when it does not link.
  PackedFunction loadObject(const std::vector<char> &bytes, const std::string &name, std::string &problem) {
    if (!objects) {
      auto j = llvm::orc::LLJITBuilder().create();
      if (!j) {
        problem = llvm::toString(j.takeError());
        return nullptr;
      }
      objects = std::move(*j);
    }
    auto jd = objects->createJITDylib("rfuse_cpu_object_" + std::to_string(objectDylibs++));
    if (!jd) {
      problem = llvm::toString(jd.takeError());
      return nullptr;
    }
    auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        objects->getDataLayout().getGlobalPrefix());
    if (!process) {
      problem = llvm::toString(process.takeError());
      return nullptr;
    }
    jd->addGenerator(std::move(*process));
    if (llvm::Error e = objects->addObjectFile(
            *jd, llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(bytes.data(), bytes.size()), name))) {
      problem = llvm::toString(std::move(e));
      return nullptr;
    }
    auto sym = objects->lookup(*jd, "_mlir__mlir_ciface_" + name);
    if (!sym) {
      problem = llvm::toString(sym.takeError());
      return nullptr;
    }
    return sym->toPtr<PackedFunction>();
  }

  // The object of `engine` (built with objectDump), as bytes.
  std::vector<char> objectOf(ExecutionEngine &engine) {
    llvm::SmallString<128> path;
    if (llvm::sys::fs::createTemporaryFile("rfuse-cpu", "o", path))
      return {};
    engine.dumpToObjectFile(path);
    auto buffer = llvm::MemoryBuffer::getFile(path);
    llvm::sys::fs::remove(path);
    if (!buffer)
      return {};
    return std::vector<char>((*buffer)->getBufferStart(), (*buffer)->getBufferEnd());
  }

  // Compiles `text` (one lowered function named `name`), or returns the process's earlier copy,
  // or loads the object an earlier process left in the disk cache (no LLVM codegen).
  std::shared_ptr<Compiled> compile(const std::string &text, const std::string &name) {
    std::lock_guard<std::mutex> lock(mutex);
    uint64_t key = llvm::xxh3_64bits(llvm::StringRef(text));
    if (auto it = cache.find(key); it != cache.end()) {
      ++reused;
      return it->second;
    }
    auto compiled = std::make_shared<Compiled>();
    std::string dir = runtimeOptions().cacheDir, path, diskKeyHex;
    bool useDisk = runtimeOptions().diskCache && !dir.empty() && trustedCacheDir(dir);
    if (useDisk) {
      diskKeyHex = diskKey(text);
      path = dir + "/" + diskKeyHex + ".cpuobj";
      std::vector<char> bytes;
      std::string problem;
      if (readCacheEntry(path, kObjectMagic, diskKeyHex, bytes, problem)) {
        if ((compiled->fn = loadObject(bytes, name, problem))) {
          ++diskHits;
          cache[key] = compiled;
          return compiled;
        }
      }
      if (!problem.empty())
        llvm::errs() << "rfuse: warning: ignoring CPU object cache entry " << path << " (" << problem
                     << "); compiling\n";
    }
    compiled->engine = build(text, name, useDisk);
    auto fn = compiled->engine->lookupPacked("_mlir_ciface_" + name);
    if (!fn) {
      llvm::consumeError(fn.takeError());
      throw InterpreterError("the CPU JIT lost function " + name);
    }
    compiled->fn = *fn;
    if (useDisk)
      if (std::vector<char> bytes = objectOf(*compiled->engine); !bytes.empty())
        writeCacheEntry(path, kObjectMagic, diskKeyHex, bytes);
    cache[key] = compiled;
    return compiled;
  }
  static constexpr char kObjectMagic[8] = {'R', 'F', 'C', 'P', 'U', 'O', 'B', '1'};

  std::string object(const std::string &text, const std::string &name) {
    std::lock_guard<std::mutex> lock(mutex);
    std::unique_ptr<ExecutionEngine> engine = build(text, name, true);
    // The object is made when the engine first looks a symbol up.
    auto fn = engine->lookupPacked("_mlir_ciface_" + name);
    if (!fn) {
      llvm::consumeError(fn.takeError());
      throw InterpreterError("the CPU JIT lost function " + name);
    }
    std::vector<char> bytes = objectOf(*engine);
    if (bytes.empty())
      throw InterpreterError("cannot write the object of " + name);
    return std::string(bytes.begin(), bytes.end());
  }
};

} // namespace

std::string compileObject(const std::string &kernelText, const std::string &name) {
  return HostJit::get().object(kernelText, name);
}

std::pair<std::string, std::string> jitTarget() {
  HostJit &jit = HostJit::get();
  if (!jit.tm)
    return {"", ""};
  return {jit.tm->getTargetCPU().str(), jit.tm->getTargetFeatureString().str()};
}

std::function<CpuFunctionRef(size_t, const codegen::Step &)> jitFunctionLoader() {
  return [](size_t, const codegen::Step &s) {
    std::shared_ptr<CompiledFunction> c = jitCompile(s.cpuModule, s.cpuFunction->name);
    return CpuFunctionRef{c->fn, c};
  };
}

void clearJitCache() {
  HostJit &jit = HostJit::get();
  std::lock_guard<std::mutex> lock(jit.mutex);
  jit.cache.clear(); // each engine goes when the last program using it does
}

JitCounts jitCacheCounts() {
  HostJit &jit = HostJit::get();
  std::lock_guard<std::mutex> lock(jit.mutex);
  return {jit.compiles, jit.reused, jit.diskHits};
}

std::shared_ptr<CompiledFunction> jitCompile(const std::string &kernelText, const std::string &name) {
  return HostJit::get().compile(kernelText, name);
}

} // namespace rfuse::cpu
