#include "CpuJit.h"

#include "rfuse/Codegen/CpuLowering.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Runtime/Interpreter.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ThreadPool.h"
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

unsigned cpuThreads() {
  if (const char *e = std::getenv("RFUSE_CPU_THREADS"); e && std::atoi(e) > 0)
    return (unsigned)std::atoi(e);
  return std::max(1u, llvm::heavyweight_hardware_concurrency().compute_thread_count());
}

namespace {

// ---- The JIT: host target, -O3 with glibc's vector math, one engine per lowered function -----

struct HostJit {
  std::unique_ptr<llvm::TargetMachine> tm;
  bool haveMvec = false, haveAvx2 = false;
  std::mutex mutex; // compiles are serialized; the compiled code runs concurrently
  std::unique_ptr<MLIRContext> ctx;
  struct Compiled {
    std::unique_ptr<ExecutionEngine> engine;
    void (*fn)(void **) = nullptr;
  };
  std::map<uint64_t, std::shared_ptr<Compiled>> cache; // key: hash of the lowered function
  size_t reused = 0;

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
  // presets LLVM 19 knows (exp, log, sin, cos, pow) plus what glibc ≥ 2.35 adds (tanh, erfc...).
  void addVectorMath(llvm::TargetLibraryInfoImpl &tlii, const llvm::Triple &triple) {
    if (!haveMvec || triple.getArch() != llvm::Triple::x86_64)
      return;
    tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86, triple);
    tlii.addVectorizableFunctions(extraVectorMath());
  }

  // Built once (compiles hold the JIT's mutex): VecDesc keeps StringRefs into vectorMathNames.
  const std::vector<llvm::VecDesc> &extraVectorMath() {
    static const char *extra[] = {"tanh", "erfc", "expm1", "log1p", "atan", "sinh", "cosh"};
    if (!vectorMath.empty())
      return vectorMath;
    for (const char *f : extra) {
      auto add = [&](std::string scalar, std::string vec, unsigned vf) {
        vectorMathNames.push_back(scalar);
        llvm::StringRef s = vectorMathNames.back();
        vectorMathNames.push_back(vec);
        llvm::StringRef v = vectorMathNames.back();
        vectorMathNames.push_back("_ZGV_LLVM_N" + std::to_string(vf) + "v");
        vectorMath.emplace_back(s, v, llvm::ElementCount::getFixed(vf), false, vectorMathNames.back());
      };
      add(f, std::string("_ZGVbN2v_") + f, 2);
      add(std::string(f) + "f", std::string("_ZGVbN4v_") + f + "f", 4);
      if (haveAvx2) {
        add(f, std::string("_ZGVdN4v_") + f, 4);
        add(std::string(f) + "f", std::string("_ZGVdN8v_") + f + "f", 8);
      }
    }
    return vectorMath;
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
      }
    }
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*m, mam);
    return llvm::Error::success();
  }

  // Compiles `text` (one lowered function named `name`), or returns the process's earlier copy.
  std::shared_ptr<Compiled> compile(const std::string &text, const std::string &name) {
    std::lock_guard<std::mutex> lock(mutex);
    uint64_t key = llvm::xxh3_64bits(llvm::StringRef(text));
    if (auto it = cache.find(key); it != cache.end()) {
      ++reused;
      return it->second;
    }
    std::string diags;
    ScopedDiagnosticHandler handler(ctx.get(), [&](Diagnostic &d) {
      diags += d.str() + "\n";
      return success();
    });
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, ctx.get());
    PassManager pm(ctx.get());
    pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
    pm.addPass(memref::createExpandStridedMetadataPass());
    pm.addPass(createLowerAffinePass());
    pm.addPass(createConvertSCFToCFPass());
    // libm for what LLVM has no intrinsic for (tanh, erfc...): the functions the interpreter's
    // std:: calls reach too, and whose vector variants glibc provides.
    pm.addPass(createConvertMathToLibmPass());
    pm.addPass(createConvertMathToLLVMPass());
    pm.addPass(createFinalizeMemRefToLLVMConversionPass());
    pm.addPass(createArithToLLVMConversionPass());
    pm.addPass(createConvertIndexToLLVMPass());
    pm.addPass(createConvertControlFlowToLLVMPass());
    pm.addPass(createConvertFuncToLLVMPass());
    pm.addPass(createReconcileUnrealizedCastsPass());
    if (!module || failed(pm.run(*module)))
      throw InterpreterError("the CPU lowering of " + name + " failed:\n" + diags + text);
    ExecutionEngineOptions options;
    auto transformer = [this](llvm::Module *m) { return optimize(m); };
    options.transformer = transformer;
    options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
    auto created = ExecutionEngine::create(*module, options);
    if (!created) {
      std::string msg;
      llvm::raw_string_ostream ms(msg);
      ms << created.takeError() << "\n" << diags;
      throw InterpreterError("the CPU JIT failed for " + name + ": " + ms.str());
    }
    auto compiled = std::make_shared<Compiled>();
    compiled->engine = std::move(*created);
    auto fn = compiled->engine->lookupPacked("_mlir_ciface_" + name);
    if (!fn) {
      llvm::consumeError(fn.takeError());
      throw InterpreterError("the CPU JIT lost function " + name);
    }
    compiled->fn = *fn;
    cache[key] = compiled;
    return compiled;
  }
};

} // namespace

std::pair<size_t, size_t> jitCacheCounts() {
  HostJit &jit = HostJit::get();
  std::lock_guard<std::mutex> lock(jit.mutex);
  return {jit.cache.size(), jit.reused};
}

namespace {

llvm::ThreadPoolInterface &threadPool() {
  static llvm::DefaultThreadPool pool(llvm::heavyweight_hardware_concurrency());
  return pool;
}

// Calls body(begin, end) over [0, extent): in chunks of at most maxChunk, spread over the pool
// when there is enough work to pay for it.
template <class Body>
void parallelFor(int64_t extent, int64_t maxChunk, int64_t workPerUnit, Body body) {
  unsigned threads = cpuThreads();
  int64_t chunk = maxChunk > 0 ? maxChunk : extent;
  bool parallel = threads > 1 && extent > 1 && extent * workPerUnit >= (1 << 15);
  if (parallel) {
    // Chunks start at multiples of 64: the vectorized loops then split every chunk into vector
    // body and scalar tail at the same elements whatever the thread count (vector and scalar
    // libm may differ in the last bit), so threads never change results.
    int64_t perThread = (extent + (int64_t)threads * 4 - 1) / ((int64_t)threads * 4);
    perThread = (perThread + 63) / 64 * 64;
    chunk = std::max<int64_t>(1, std::min(chunk, perThread));
  }
  if (!parallel || chunk >= extent) {
    for (int64_t b = 0; b < extent; b += chunk)
      body(b, std::min(extent, b + chunk));
    return;
  }
  llvm::ThreadPoolTaskGroup group(threadPool());
  for (int64_t b = 0; b < extent; b += chunk)
    group.async([=] { body(b, std::min(extent, b + chunk)); });
  group.wait();
}

// ---- BLAS: whatever dgemm the process has (R's), else Debian's libblas / OpenBLAS ---------------

using DgemmFn = void (*)(const char *, const char *, const int *, const int *, const int *,
                         const double *, const double *, const int *, const double *, const int *,
                         const double *, double *, const int *, size_t, size_t);
DgemmFn blasDgemm() {
  static DgemmFn fn = [] {
    if (void *f = dlsym(RTLD_DEFAULT, "dgemm_"))
      return (DgemmFn)f;
    for (const char *lib : {"libblas.so.3", "libopenblas.so.0", "libblas.so"})
      if (void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL))
        if (void *f = dlsym(h, "dgemm_"))
          return (DgemmFn)f;
    return (DgemmFn) nullptr;
  }();
  return fn;
}

// Row-major C[m, n] (leading dim ldc) = op(A) op(B) + beta C through column-major BLAS:
// C^T = op(B)^T op(A)^T.
void dgemmRowMajor(bool ta, bool tb, int m, int n, int k, const double *a, int lda, const double *b,
                   int ldb, double beta, double *c, int ldc) {
  double one = 1;
  blasDgemm()(tb ? "T" : "N", ta ? "T" : "N", &n, &m, &k, &one, b, &ldb, a, &lda, &beta, c, &ldc, 1, 1);
}

void gemm(const GemmCall &g, const double *a, const double *b, double *c) {
  int m = (int)g.m, n = (int)g.n, k = (int)g.k;
  for (int64_t p = 0; p < g.batch; ++p)
    dgemmRowMajor(g.transposeA, g.transposeB, m, n, k, a + (g.batchedA ? p * g.m * g.k : 0),
                  g.transposeA ? m : k, b + (g.batchedB ? p * g.k * g.n : 0), g.transposeB ? k : n, 0,
                  c + p * g.m * g.n, n);
}

// The convolution ops as im2col / col2im + dgemm per image and group. The column matrix of image
// n and group g is, NCHW: col[K][P] with K in (ci, kh, kw) order; NHWC: col[P][K] with K in
// (kh, kw, ci) order — each the filter's own layout, so the filter is a plain row-major [Og, K]
// matrix. `scatter` adds col back into x (col2im) instead of gathering from it.
template <bool scatter>
void columns(const ConvGeometry &c, int64_t n, int64_t g, const double *xIn, double *xOut, double *col) {
  int64_t Cg = c.c / c.groups, P = c.oh * c.ow, K = Cg * c.kh * c.kw;
  for (int64_t oh = 0; oh < c.oh; ++oh)
    for (int64_t ow = 0; ow < c.ow; ++ow)
      for (int64_t kh = 0; kh < c.kh; ++kh)
        for (int64_t kw = 0; kw < c.kw; ++kw) {
          int64_t h = oh * c.strideH - c.padTop + kh * c.dilationH;
          int64_t ww = ow * c.strideW - c.padLeft + kw * c.dilationW;
          bool inside = h >= 0 && h < c.h && ww >= 0 && ww < c.w;
          int64_t p = oh * c.ow + ow;
          for (int64_t ci = 0; ci < Cg; ++ci) {
            double &v = c.nhwc ? col[p * K + (kh * c.kw + kw) * Cg + ci] : col[((ci * c.kh + kh) * c.kw + kw) * P + p];
            if (scatter) {
              if (inside)
                xOut[c.inputAt(n, g * Cg + ci, h, ww)] += v;
            } else {
              v = inside ? xIn[c.inputAt(n, g * Cg + ci, h, ww)] : 0.0;
            }
          }
        }
}

// rfuse.conv2d: y = W col (+ bias); images split over threads.
void convolveForward(const ConvGeometry &c, const double *x, const double *w, const double *bias, double *y) {
  int64_t G = c.groups, Og = c.o / G, P = c.oh * c.ow, K = c.c / G * c.kh * c.kw;
  parallelFor(c.n, 0, P * K * Og, [&](int64_t begin, int64_t end) {
    std::vector<double> col((size_t)(P * K));
    for (int64_t n = begin; n < end; ++n)
      for (int64_t g = 0; g < G; ++g) {
        columns<false>(c, n, g, x, nullptr, col.data());
        const double *wg = w + g * Og * K;
        if (c.nhwc)
          dgemmRowMajor(false, true, (int)P, (int)Og, (int)K, col.data(), (int)K, wg, (int)K, 0,
                        y + n * P * c.o + g * Og, (int)c.o);
        else
          dgemmRowMajor(false, false, (int)Og, (int)P, (int)K, wg, (int)K, col.data(), (int)P, 0,
                        y + (n * c.o + g * Og) * P, (int)P);
      }
    if (bias)
      for (int64_t n = begin; n < end; ++n)
        for (int64_t o = 0; o < c.o; ++o)
          for (int64_t p = 0; p < P; ++p)
            y[c.nhwc ? (n * P + p) * c.o + o : (n * c.o + o) * P + p] += bias[o];
  });
}

// rfuse.conv2d_backward_input: col = W^T dy, scattered back (col2im); images split over threads.
void convolveBackwardInput(const ConvGeometry &c, const double *dy, const double *w, double *dx) {
  int64_t G = c.groups, Og = c.o / G, P = c.oh * c.ow, K = c.c / G * c.kh * c.kw;
  parallelFor(c.n, 0, P * K * Og, [&](int64_t begin, int64_t end) {
    std::vector<double> col((size_t)(P * K));
    std::fill(dx + begin * c.c * c.h * c.w, dx + end * c.c * c.h * c.w, 0.0);
    for (int64_t n = begin; n < end; ++n)
      for (int64_t g = 0; g < G; ++g) {
        const double *wg = w + g * Og * K;
        if (c.nhwc)
          dgemmRowMajor(false, false, (int)P, (int)K, (int)Og, dy + n * P * c.o + g * Og, (int)c.o, wg, (int)K, 0,
                        col.data(), (int)K);
        else
          dgemmRowMajor(true, false, (int)K, (int)P, (int)Og, wg, (int)K, dy + (n * c.o + g * Og) * P, (int)P, 0,
                        col.data(), (int)P);
        columns<true>(c, n, g, nullptr, dx, col.data());
      }
  });
}

// rfuse.conv2d_backward_filter: dW += dy col^T over the images, in image order (one thread:
// the sum's order does not depend on the thread count).
void convolveBackwardFilter(const ConvGeometry &c, const double *x, const double *dy, double *dw) {
  int64_t G = c.groups, Og = c.o / G, P = c.oh * c.ow, K = c.c / G * c.kh * c.kw;
  std::vector<double> col((size_t)(P * K));
  std::fill(dw, dw + c.o * K, 0.0);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t g = 0; g < G; ++g) {
      columns<false>(c, n, g, x, nullptr, col.data());
      double *dwg = dw + g * Og * K;
      if (c.nhwc)
        dgemmRowMajor(true, false, (int)Og, (int)K, (int)P, dy + n * P * c.o + g * Og, (int)c.o, col.data(), (int)K,
                      1, dwg, (int)K);
      else
        dgemmRowMajor(false, true, (int)Og, (int)K, (int)P, dy + (n * c.o + g * Og) * P, (int)P, col.data(), (int)P,
                      1, dwg, (int)K);
    }
}

// ---- Values -------------------------------------------------------------------------------------

// A value of the running function: its dtype, shape and memory (the caller's, or owned).
struct Val {
  DType dtype = DType::F64;
  std::vector<int64_t> shape;
  void *data = nullptr;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return (size_t)numel() * dtypeSize(dtype); }
  HostTensor tensor() const { return HostTensor::fromBytes(dtype, shape, (const char *)data); }
};

// Owned buffers, left uninitialized (every byte is written before it is read).
struct Arena {
  std::deque<std::unique_ptr<char[]>> blocks;
  void *allocate(size_t bytes) {
    blocks.emplace_back(new char[std::max<size_t>(bytes, 1)]);
    return blocks.back().get();
  }
};

// f32 values as doubles: BLAS steps compute f32 in f64 (as the interpreter accumulates in long
// double), then round once.
std::vector<double> widen(const void *p, size_t count) {
  const float *f = (const float *)p;
  return std::vector<double>(f, f + count);
}
void narrow(const std::vector<double> &from, void *to) {
  float *t = (float *)to;
  for (size_t i = 0; i < from.size(); ++i)
    t[i] = (float)from[i];
}

// MLIR's memref descriptor of a contiguous buffer: {allocated, aligned, offset, sizes, strides}.
std::vector<int64_t> descriptor(void *data, const std::vector<int64_t> &shape) {
  std::vector<int64_t> d = {(int64_t)(intptr_t)data, (int64_t)(intptr_t)data, 0};
  d.insert(d.end(), shape.begin(), shape.end());
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  d.insert(d.end(), strides.begin(), strides.end());
  return d;
}

std::vector<int64_t> shapeOfValue(Value v) {
  auto s = llvm::cast<RankedTensorType>(v.getType()).getShape();
  return {s.begin(), s.end()};
}

// Runs a compiled function over its range with the given argument buffers.
void invoke(const CpuFunction &f, HostJit::Compiled &c, const std::vector<void *> &data) {
  std::vector<std::vector<int64_t>> descs;
  for (size_t i = 0; i < data.size(); ++i)
    descs.push_back(descriptor(data[i], f.argShapes[i]));
  parallelFor(f.extent, f.maxChunk, f.workPerUnit, [&](int64_t begin, int64_t end) {
    std::vector<void *> descPtrs;
    for (auto &d : descs)
      descPtrs.push_back(d.data());
    std::vector<void *> args = {&begin, &end};
    for (void *&p : descPtrs)
      args.push_back(&p);
    c.fn(args.data());
  });
}

} // namespace

struct CpuProgram::Impl {
  ModuleOp module;
  std::string entry;
  struct Step {
    CpuKernel kernel;
    std::shared_ptr<HostJit::Compiled> compiled; // kernel.function's code
  };
  llvm::DenseMap<Operation *, Step> steps;
  std::vector<std::string> jitted, interpreted;

  void build() {
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    DialectRegistry cpuDialects;
    registerCpuDialects(cpuDialects);
    module.getContext()->appendDialectRegistry(cpuDialects);
    module.getContext()->loadAllAvailableDialects();
    HostJit &jit = HostJit::get();
    for (Operation &op : fn.getBody().front().without_terminator()) {
      std::string label, why;
      // Each step is lowered alone into a module of its own under a fixed name, so that equal
      // kernels of different programs share one compiled function.
      OwningOpRef<ModuleOp> staging = ModuleOp::create(module.getLoc());
      std::optional<CpuKernel> k;
      if (auto call = dyn_cast<func::CallOp>(op)) {
        auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
        label = call.getCallee().str();
        if (callee && callee->hasAttr("rfuse.kernel"))
          k = lowerKernel(callee, *staging, "rfuse_cpu_kernel", why);
        else
          why = "a call of a non-kernel function";
      } else if (isa<ConstantOp, ReshapeOp>(op)) {
        continue; // constants: materialized by the interpreter; reshapes: aliases
      } else {
        label = op.getName().stripDialect().str();
        k = lowerOperation(&op, *staging, "rfuse_cpu_kernel", why);
      }
      if (k && (k->kind == CpuKernel::Kind::Matmul || k->kind == CpuKernel::Kind::Conv) && !blasDgemm()) {
        k.reset();
        why = "no BLAS found (dgemm_)";
      }
      if (!k) {
        interpreted.push_back(label + ": " + why);
        continue;
      }
      Step step{*k, nullptr};
      if (k->function) {
        std::string text;
        llvm::raw_string_ostream os(text);
        staging->print(os);
        step.compiled = jit.compile(os.str(), k->function->name);
      }
      const char *how = k->kind == CpuKernel::Kind::Pool ? "pooling loops (f64)"
                        : k->kind == CpuKernel::Kind::Conv ? (k->function ? "im2col + BLAS + compiled epilogue" : "im2col + BLAS")
                        : k->kind == CpuKernel::Kind::Matmul ? (k->function ? "BLAS + compiled epilogue" : "BLAS")
                        : k->kind == CpuKernel::Kind::Reduction ? "compiled reduction"
                                                                : "compiled pointwise";
      jitted.push_back(label + ": " + how);
      steps[&op] = std::move(step);
    }
  }

  void runConv(Step &s, const std::vector<void *> &ins, const std::vector<Val> &results) {
    const CpuKernel &k = s.kernel;
    const ConvCall &call = k.conv;
    const ConvGeometry &c = call.geometry;
    size_t inputSize = (size_t)(c.n * c.c * c.h * c.w), filterSize = (size_t)(c.o * (c.c / c.groups) * c.kh * c.kw),
           outputSize = (size_t)(c.n * c.o * c.oh * c.ow);
    size_t n = c.direction == ConvDirection::Forward         ? outputSize
               : c.direction == ConvDirection::BackwardInput ? inputSize
                                                             : filterSize;
    std::vector<char> productBytes;
    void *y = k.productIsOutput ? results[0].data
                                : (productBytes.resize(n * dtypeSize(call.dtype)), productBytes.data());
    // f32 runs in f64, as matmuls do.
    bool f64 = call.dtype == DType::F64;
    std::vector<std::vector<double>> wide;
    auto operand = [&](int index, size_t count) -> const double * {
      if (index < 0)
        return nullptr;
      if (f64)
        return (const double *)ins[index];
      wide.push_back(widen(ins[index], count));
      return wide.back().data();
    };
    std::vector<double> p(f64 ? 0 : n);
    double *result = f64 ? (double *)y : p.data();
    switch (c.direction) {
    case ConvDirection::Forward:
      convolveForward(c, operand(call.inputIndex, inputSize), operand(call.filterIndex, filterSize),
                      operand(call.biasIndex, (size_t)c.o), result);
      break;
    case ConvDirection::BackwardInput:
      convolveBackwardInput(c, operand(call.gradOutputIndex, outputSize), operand(call.filterIndex, filterSize), result);
      break;
    case ConvDirection::BackwardFilter:
      convolveBackwardFilter(c, operand(call.inputIndex, inputSize), operand(call.gradOutputIndex, outputSize), result);
      break;
    }
    if (!f64)
      narrow(p, y);
    runEpilogue(s, y, ins, results);
  }

  // The compiled function after a library call (BLAS matmul, convolution): reads the library's
  // result and the step's inputs, writes the outputs other than the result itself.
  void runEpilogue(Step &s, void *product, const std::vector<void *> &ins, const std::vector<Val> &results) {
    const CpuKernel &k = s.kernel;
    if (!k.function)
      return;
    std::vector<void *> data = {product};
    for (int i : k.epilogueInputs)
      data.push_back(ins[i]);
    for (size_t i = k.productIsOutput ? 1 : 0; i < results.size(); ++i)
      data.push_back(results[i].data);
    invoke(*k.function, *s.compiled, data);
  }

  // Pooling and its gradients: the interpreter's loops (PoolGeometry::run), accumulated in f64.
  void runPool(const PoolCall &p, const std::vector<Val> &operands, const Val &result) {
    std::vector<double> acc((size_t)result.numel());
    bool f64 = p.dtype == DType::F64;
    p.geometry.run([&](int k, int64_t i) -> double {
      return f64 ? ((const double *)operands[k].data)[i] : (double)((const float *)operands[k].data)[i];
    }, acc);
    if (f64)
      std::copy(acc.begin(), acc.end(), (double *)result.data);
    else
      narrow(acc, result.data);
  }

  void runStep(Operation *op, Step &s, const std::vector<Val> &operands, const std::vector<Val> &results) {
    if (s.kernel.kind == CpuKernel::Kind::Pool) { // operands by position: they may repeat
      runPool(s.kernel.pool, operands, results[0]);
      return;
    }
    // A lone host op's function takes its distinct operands (a kernel call's, all of them).
    std::vector<void *> ins;
    llvm::SmallVector<Value> seen;
    for (auto [v, t] : llvm::zip(op->getOperands(), operands)) {
      if (!isa<func::CallOp>(op) && llvm::is_contained(seen, v))
        continue;
      seen.push_back(v);
      ins.push_back(t.data);
    }
    const CpuKernel &k = s.kernel;
    if (k.kind == CpuKernel::Kind::Conv) {
      runConv(s, ins, results);
      return;
    }
    if (k.kind != CpuKernel::Kind::Matmul) {
      std::vector<void *> data = ins;
      for (const Val &r : results)
        data.push_back(r.data);
      invoke(*k.function, *s.compiled, data);
      return;
    }
    const GemmCall &g = k.gemm;
    size_t n = (size_t)(g.batch * g.m * g.n);
    std::vector<char> productBytes;
    void *c = k.productIsOutput ? results[0].data
                                : (productBytes.resize(n * dtypeSize(g.dtype)), productBytes.data());
    if (g.dtype == DType::F64) {
      gemm(g, (const double *)ins[g.lhsInput], (const double *)ins[g.rhsInput], (double *)c);
    } else {
      // f32 products accumulate in f64 (dgemm of the widened operands), as the interpreter's
      // do: the result is then the f32 rounding of a nearly exact product, whatever k is.
      std::vector<double> a = widen(ins[g.lhsInput], (size_t)((g.batchedA ? g.batch : 1) * g.m * g.k)),
                          b = widen(ins[g.rhsInput], (size_t)((g.batchedB ? g.batch : 1) * g.k * g.n)), p(n);
      gemm(g, a.data(), b.data(), p.data());
      narrow(p, c);
    }
    runEpilogue(s, c, ins, results);
  }
};

CpuProgram::CpuProgram(ModuleOp module, const std::string &entry) : impl(std::make_unique<Impl>()) {
  impl->module = module;
  impl->entry = entry;
  impl->build();
}
CpuProgram::~CpuProgram() = default;

const std::vector<std::string> &CpuProgram::jitted() const { return impl->jitted; }
const std::vector<std::string> &CpuProgram::interpreted() const { return impl->interpreted; }

std::vector<HostTensor> CpuProgram::run(const std::vector<HostTensor> &inputs) {
  // HostTensors as caller memory: f64 and i64 tensors in place, others through their bytes.
  std::deque<std::vector<char>> staging;
  std::vector<TensorRef> in, out;
  for (const HostTensor &t : inputs) {
    void *data = t.dtype == DType::F64 ? (void *)t.f.data() : t.dtype == DType::I64 ? (void *)t.i.data()
                                                            : staging.emplace_back(t.toBytes()).data();
    in.push_back({t.dtype, t.shape, data});
  }
  auto fn = impl->module.lookupSymbol<func::FuncOp>(impl->entry);
  std::vector<HostTensor> results;
  for (Type t : fn.getResultTypes()) {
    auto rt = llvm::cast<RankedTensorType>(t);
    DType dt = DType::F32;
    fromMlirType(rt.getElementType(), dt);
    results.emplace_back(dt, std::vector<int64_t>(rt.getShape().begin(), rt.getShape().end()));
  }
  for (HostTensor &t : results) {
    void *data = t.dtype == DType::F64 ? (void *)t.f.data() : t.dtype == DType::I64 ? (void *)t.i.data()
                                                            : staging.emplace_back(t.toBytes()).data();
    out.push_back({t.dtype, t.shape, data});
  }
  run(in, out);
  for (size_t k = 0; k < results.size(); ++k)
    if (results[k].dtype != DType::F64 && results[k].dtype != DType::I64)
      results[k] = HostTensor::fromBytes(results[k].dtype, results[k].shape, (const char *)out[k].data);
  return results;
}

void CpuProgram::run(const std::vector<TensorRef> &inputs, const std::vector<TensorRef> &outputs) {
  auto fn = impl->module.lookupSymbol<func::FuncOp>(impl->entry);
  if (inputs.size() != fn.getNumArguments())
    throw InterpreterError("the program takes " + std::to_string(fn.getNumArguments()) +
                           " inputs, got " + std::to_string(inputs.size()));
  Arena arena;
  llvm::DenseMap<Value, Val> env;
  auto valueOf = [](Value v) {
    Val x;
    fromMlirType(llvm::cast<RankedTensorType>(v.getType()).getElementType(), x.dtype);
    auto s = llvm::cast<RankedTensorType>(v.getType()).getShape();
    x.shape.assign(s.begin(), s.end());
    return x;
  };
  for (auto [arg, ref] : llvm::zip(fn.getArguments(), inputs)) {
    Val x = valueOf(arg);
    if (ref.dtype == x.dtype) {
      x.data = ref.data;
    } else { // the rules of rfuse.cast, through a HostTensor
      HostTensor t = HostTensor::fromBytes(ref.dtype, ref.shape, (const char *)ref.data).castTo(x.dtype);
      x.data = arena.allocate(x.bytes());
      t.writeBytes(x.data);
    }
    env[arg] = x;
  }
  // Results the function returns are written where the caller wants them (the first time each
  // is returned), unless the value is an argument.
  Operation *ret = fn.getBody().front().getTerminator();
  llvm::DenseMap<Value, void *> destination;
  for (auto [v, ref] : llvm::zip(ret->getOperands(), outputs))
    if (!llvm::isa<BlockArgument>(v) && !destination.count(v))
      destination[v] = ref.data;
  for (Operation &op : fn.getBody().front().without_terminator()) {
    if (isa<ReshapeOp>(op)) { // the same row-major data under another shape: no copy
      Val x = valueOf(op.getResult(0));
      x.data = env.lookup(op.getOperand(0)).data;
      env[op.getResult(0)] = x;
      continue;
    }
    std::vector<Val> operands, results;
    for (Value v : op.getOperands())
      operands.push_back(env.lookup(v));
    for (Value r : op.getResults()) {
      Val x = valueOf(r);
      x.data = destination.count(r) ? destination[r] : arena.allocate(x.bytes());
      results.push_back(x);
    }
    auto it = impl->steps.find(&op);
    if (it != impl->steps.end()) {
      impl->runStep(&op, it->second, operands, results);
    } else {
      std::vector<HostTensor> in;
      for (const Val &x : operands)
        in.push_back(x.tensor());
      std::vector<HostTensor> out = interpretOperation(&op, in);
      for (auto [t, x] : llvm::zip(out, results))
        t.writeBytes(x.data);
    }
    for (auto [r, x] : llvm::zip(op.getResults(), results))
      env[r] = x;
  }
  for (auto [v, ref] : llvm::zip(ret->getOperands(), outputs)) {
    const Val &x = env.lookup(v);
    if (x.data != ref.data)
      std::memcpy(ref.data, x.data, x.bytes());
  }
}

} // namespace rfuse::cpu
