#include "rfuse/Runtime/Engine.h"
#include "rfuse/Runtime/Interpreter.h"
#include "rfuse/BuildId.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/DiskCache.h"
#include "rfuse/Runtime/Options.h"
#include "cpu/CpuExecutor.h"
#include "cpu/CpuJit.h"
#include "cuda/CudaExecutor.h"
#include "interpreter/HostSteps.h"
#include "artifact/Export.h"
#include "ProgramState.h"

#include "rfuse/Codegen/CodegenPasses.h"
#include "rfuse/Codegen/ExecutionPlan.h"

#include "rfuse/IR/Geometry.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <sstream>
#include <cmath>
#include <mutex>

using namespace mlir;

namespace rfuse {

Device defaultDevice() {
  std::string forced = runtimeOptions().device;
  if (forced == "cpu")
    return Device::Cpu;
  if (forced == "cuda")
    return Device::Cuda;
  return cuda::deviceInfo().available ? Device::Cuda : Device::Cpu;
}

std::string deviceName(Device d) {
  if (d == Device::Cpu)
    return "cpu";
  const cuda::DeviceInfo &i = cuda::deviceInfo();
  return "cuda (" + i.name + ", " + i.arch() + ")";
}

Program::~Program() = default;

std::vector<std::string> availablePipelines() { return pipelineNames(); }

namespace {
std::string printModule(ModuleOp m) { return printed(m); }

std::string describeLibraryCall(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto types = [&](Operation *o) {
    os << "(";
    llvm::interleaveComma(o->getOperandTypes(), os);
    os << ") -> ";
    llvm::interleaveComma(o->getResultTypes(), os);
  };
  os << op->getName().stripDialect() << " ";
  types(op);
  return os.str();
}
} // namespace

std::shared_ptr<Program> compileProgram(const std::string &moduleText, const std::string &pipeline,
                                        const std::string &entry, const CompileOptions &options) {
  return Program::build(moduleText, pipeline, entry, nullptr, options);
}

void checkPipeline(const std::string &pipeline) {
  DialectRegistry registry;
  registerRfuseDialects(registry);
  MLIRContext ctx(registry);
  PassManager pm(&ctx);
  std::string error;
  if (failed(buildPipeline(pm, pipeline, &error)))
    throw CompileError(error);
}

void loadPassPlugin(const std::string &path) {
  std::string error;
  if (!rfuse::loadPassPlugin(path, error))
    throw CompileError(error);
}

std::shared_ptr<Program> compileGradientProgram(const std::string &moduleText,
                                                const std::string &pipeline,
                                                const GradientRequest &request,
                                                const CompileOptions &options) {
  return Program::build(moduleText, pipeline, "main_grad", &request, options);
}

namespace {

// Compiled programs on disk: the module after the pass pipeline (and rfuse-autodiff), keyed by
// what produced it, so that a new process tracing the same function runs no passes.
constexpr char kProgramMagic[8] = {'R', 'F', 'P', 'R', 'O', 'G', '0', '1'};
std::mutex programCacheMutex;
ProgramCacheStats programCache;

std::string programCacheKey(const std::string &text, const std::string &pipeline, const std::string &entry,
                            const GradientRequest *g) {
  std::ostringstream os;
  os.precision(17);
  os << text << "\n//pipeline " << pipeline << "\n//entry " << entry << "\n//rfuse " << RFUSE_VERSION
     << " build " << RFUSE_BUILD_ID << "\n//program cache 2" // the entry format (2: printed with locations)
     << "\n//fuse-attention " << runtimeOptions().fuseAttention;
  if (g) {
    os << "\n//gradient wrt";
    for (int64_t w : g->wrt)
      os << " " << w;
    os << " recompute " << g->recomputePointwise << " optimizer " << g->optimizer << " lr " << g->learningRate
       << " lr-input " << g->learningRateInput << " momentum " << g->momentum << " decay " << g->weightDecay
       << " betas " << g->beta1 << " " << g->beta2 << " eps " << g->epsilon << " all-reduce "
       << g->gradientAllReduce << " bucket " << g->bucketBytes << " autocast " << g->autocast << " loss-scale " << g->lossScale << " "
       << g->lossScaleGrowthInterval;
  }
  return cacheKeyHex(llvm::xxh3_64bits(os.str()));
}

void countProgramCache(uint64_t ProgramCacheStats::*field) {
  std::lock_guard<std::mutex> lock(programCacheMutex);
  ++(programCache.*field);
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void addProgramCacheSeconds(double ProgramCacheStats::*field, double seconds) {
  std::lock_guard<std::mutex> lock(programCacheMutex);
  programCache.*field += seconds;
}
} // namespace

void countSpecialization() { countProgramCache(&ProgramCacheStats::specializations); }

namespace {

// Runs rfuse-autodiff (for a gradient) and the pass pipeline on `module`, filling `info`'s pass
// record and cost figures. Throws CompileError with the diagnostics.
void compileModule(ModuleOp module, const std::string &pipeline, const std::string &entry,
                   const GradientRequest *gradient, const CompileOptions &compileOptions, CompileInfo &info,
                   const std::string &diagnostics) {
  MLIRContext *ctx = module.getContext();
  // Mixed precision first, so that a gradient differentiates the low-precision products (the
  // ops with_autocast() marked; with a training step's autocast, all of them).
  AutocastOptions autocast;
  if (gradient && gradient->autocast != "none") {
    autocast.scope = "all";
    autocast.dtype = gradient->autocast;
  }
  // Attention fused after autocast (which makes its narrow products), before a gradient is built
  // (whose backward is then the fused op's); in the default pipeline only, unless the
  // fuse_attention option is off.
  bool fuseAttention = pipeline == "default" && runtimeOptions().fuseAttention;
  if (!gradient) {
    PassManager pm(ctx);
    pm.addNestedPass<func::FuncOp>(createAutocast(autocast));
    if (fuseAttention) {
      // (traced code may compute what it does not return: torch's attention weights)
      pm.addPass(createCanonicalizerPass());
      pm.addNestedPass<func::FuncOp>(createFuseAttention());
    }
    if (failed(pm.run(module)))
      throw CompileError("mixed precision (rfuse-autocast) failed: " + diagnostics);
  } else {
    // Inline, differentiate main into main_grad, then drop main: the pipeline compiles only
    // the gradient program.
    PassManager pm(ctx);
    pm.addPass(createInlinerPass());
    pm.addPass(createCanonicalizerPass());
    pm.addNestedPass<func::FuncOp>(createAutocast(autocast));
    if (fuseAttention)
      pm.addNestedPass<func::FuncOp>(createFuseAttention());
    pm.addPass(createSoftmaxVjp());
    AutodiffOptions options;
    options.wrt = gradient->wrt;
    options.recomputePointwise = gradient->recomputePointwise;
    options.optimizer = gradient->optimizer;
    options.learningRate = gradient->learningRate;
    options.learningRateInput = gradient->learningRateInput;
    options.momentum = gradient->momentum;
    options.weightDecay = gradient->weightDecay;
    options.beta1 = gradient->beta1;
    options.beta2 = gradient->beta2;
    options.epsilon = gradient->epsilon;
    options.gradientAllReduce = gradient->gradientAllReduce;
    options.lossScale = gradient->lossScale;
    options.lossScaleGrowthInterval = gradient->lossScaleGrowthInterval;
    pm.addPass(createAutodiff(options));
    if (gradient->gradientAllReduce != "none") {
      BucketAllReduceOptions buckets;
      buckets.bucketBytes = gradient->bucketBytes;
      pm.addNestedPass<func::FuncOp>(createBucketAllReduce(buckets));
    }
    if (failed(pm.run(module)))
      throw CompileError("cannot differentiate: " + diagnostics);
    if (auto main = module.lookupSymbol<func::FuncOp>("main"))
      main.erase();
  }
  if (!module.lookupSymbol<func::FuncOp>(entry))
    throw CompileError("the module has no function '" + entry + "'");
  std::vector<CostEntry> costs;
  if (failed(compile(module, pipeline, &costs, compileOptions.recordPasses ? &info.passes : nullptr)) ||
      failed(verify(module)))
    throw CompileError("pipeline '" + pipeline + "' failed:\n" + diagnostics);
  if (compileOptions.recordPasses) { // the lowering stages, each on a copy of the compiled module
    for (bool cuda : {true, false}) {
      OwningOpRef<ModuleOp> copy = module.clone();
      PassManager pm(ctx);
      pm.addPass(cuda ? createEmitCuda() : createLowerKernelsToCpu());
      if (succeeded(pm.run(*copy)))
        info.passes.push_back({cuda ? "rfuse-emit-cuda" : "rfuse-lower-kernels-to-cpu", printModule(*copy)});
      else
        info.passes.push_back({cuda ? "rfuse-emit-cuda" : "rfuse-lower-kernels-to-cpu", "failed:\n" + diagnostics});
    }
  }
  for (const CostEntry &c : costs)
    if (c.function == entry) {
      info.kernelCount = c.kernels;
      info.bytesMoved = c.bytes;
    }
}

} // namespace

ProgramCacheStats programCacheStats() {
  std::lock_guard<std::mutex> lock(programCacheMutex);
  return programCache;
}

std::shared_ptr<Program> Program::build(const std::string &moduleText, const std::string &pipeline,
                                        const std::string &entry, const GradientRequest *gradient,
                                        const CompileOptions &options) {
  auto start = std::chrono::steady_clock::now();
  DialectRegistry registry;
  registerRfuseDialects(registry);
  std::shared_ptr<Program> program(new Program());
  program->state_ = std::make_unique<Program::State>(registry);
  program->state_->tf32 = options.tf32;
  program->entry_ = entry;
  MLIRContext &ctx = program->state_->ctx;
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d.getLocation() << ": " << d << "\n";
    return success();
  });
  CompileInfo &info = program->info_;
  info.pipeline = pipeline;
  info.tracedText = moduleText;
  // The disk cache (skipped when every pass's IR is to be kept, or disk_cache is off).
  std::string dir = runtimeOptions().cacheDir, key, path;
  bool useDisk = runtimeOptions().diskCache && !options.recordPasses && trustedCacheDir(dir);
  bool fromDisk = false;
  if (useDisk) {
    key = programCacheKey(moduleText, pipeline, entry, gradient);
    path = dir + "/" + key + ".program";
    std::vector<char> payload;
    std::string problem;
    if (readCacheEntry(path, kProgramMagic, key, payload, problem)) {
      // "<kernels> <bytes>\n" then the compiled module's text.
      std::string text(payload.begin(), payload.end());
      size_t eol = text.find('\n');
      std::istringstream head(text.substr(0, eol));
      if (eol != std::string::npos && (head >> info.kernelCount >> info.bytesMoved)) {
        program->state_->module = parseSourceString<ModuleOp>(text.substr(eol + 1), &ctx);
        fromDisk = program->state_->module && succeeded(verify(*program->state_->module)) &&
                   program->state_->module->lookupSymbol<func::FuncOp>(entry);
      }
      if (!fromDisk)
        problem = "its module does not parse";
    }
    if (!fromDisk && !problem.empty()) {
      llvm::errs() << "rfuse: warning: ignoring program cache entry " << path << " (" << problem << "); compiling\n";
      countProgramCache(&ProgramCacheStats::rejected);
    }
  }
  if (fromDisk) {
    countProgramCache(&ProgramCacheStats::diskHits);
  } else {
    program->state_->module = parseSourceString<ModuleOp>(moduleText, &ctx);
    if (!program->state_->module)
      throw CompileError("the traced module does not parse or verify:\n" + diagnostics);
    compileModule(program->state_->module.get(), pipeline, entry, gradient, options, info, diagnostics);
    countProgramCache(&ProgramCacheStats::passRuns);
    if (useDisk) {
      // With locations: kernels quote the R calls they came from (rf_explain, rf_profile).
      std::string text = std::to_string(info.kernelCount) + " " + std::to_string(info.bytesMoved) + "\n";
      llvm::raw_string_ostream os(text);
      program->state_->module->print(os, OpPrintingFlags().enableDebugInfo(/*enable=*/true, /*prettyForm=*/false));
      if (writeCacheEntry(path, kProgramMagic, key, std::vector<char>(text.begin(), text.end())))
        countProgramCache(&ProgramCacheStats::diskWrites);
    }
  }
  double made = secondsSince(start);
  addProgramCacheSeconds(&ProgramCacheStats::programSeconds, made);
  program->planAndDescribe(made);
  return program;
}

void Program::planAndDescribe(double secondsSoFar) {
  auto start = std::chrono::steady_clock::now();
  CompileInfo &info = info_;
  ModuleOp module = state_->module.get();
  info.fusedText = printModule(module);
  for (Type t : module.lookupSymbol<func::FuncOp>(entry_).getResultTypes()) {
    auto rt = llvm::cast<RankedTensorType>(t);
    DType dt = DType::F32;
    fromMlirType(rt.getElementType(), dt);
    results_.push_back({dt, {rt.getShape().begin(), rt.getShape().end()}});
  }
  // The GPU plan, for the device at hand (or an H200-sized sm_90 without one): its kernels'
  // sources and host steps are part of what a compile reports.
  codegen::Target target;
  target.backend = codegen::Backend::Cuda;
  if (const cuda::DeviceInfo &d = cuda::deviceInfo(); d.available) {
    target.cuda.arch = d.arch();
    target.cuda.multiprocessors = d.multiprocessors;
  }
  try {
    state_->cudaPlan = codegen::buildExecutionPlan(module, entry_, target, runtimeOptions().codegen);
  } catch (const std::exception &e) {
    throw CompileError(std::string("planning the program failed: ") + e.what());
  }
  // What the compile reports, read off the plan's steps (in the order they run): the kernels
  // called, the library calls (inside kernels or alone), the generated CUDA sources.
  auto noteLibraryCall = [&](Operation *op) {
    if (isa<MatmulOp>(op) || isConvolutionOp(op) || isPoolingOp(op))
      info.libraryCalls.push_back(describeLibraryCall(op));
  };
  for (const codegen::Step &s : state_->cudaPlan->steps) {
    if (auto call = dyn_cast<func::CallOp>(s.op)) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (auto kind = callee ? callee->getAttrOfType<FusionKindAttr>("rfuse.kernel") : nullptr) {
        info.kernels.push_back(callee.getName().str());
        info.kernelKinds.push_back(stringifyFusionKind(kind.getValue()).str());
        for (Operation &op : callee.getBody().front())
          noteLibraryCall(&op);
      }
    } else {
      noteLibraryCall(s.op);
    }
    if (s.cudaKernel)
      info.cudaSources.push_back({s.label, s.cudaKernel->source});
  }
  info.gpuFallbacks = state_->cudaPlan->hostSteps();
  info.gpuPlan = state_->cudaPlan->describe();
  double planned = secondsSince(start);
  addProgramCacheSeconds(&ProgramCacheStats::planSeconds, planned);
  info.compileSeconds = secondsSoFar + planned;
}

namespace {
// The device-specific program, built (planned and compiled) by the first run that needs it.
cuda::GpuProgram &gpuProgram(Program::State &st) {
  std::lock_guard<std::mutex> lock(st.gpuMutex);
  if (!st.gpu) {
    auto start = std::chrono::steady_clock::now();
    st.gpu = std::make_unique<cuda::GpuProgram>(
        *st.cudaPlan, cuda::compileKernels, runtime::interpretedHostSteps(),
        st.tf32 == Tf32::FromOptions ? std::nullopt : std::optional<bool>(st.tf32 == Tf32::Allowed));
    addProgramCacheSeconds(&ProgramCacheStats::loadSeconds, secondsSince(start));
  }
  return *st.gpu;
}

cpu::CpuProgram &cpuProgram(Program::State &st, const std::string &entry) {
  std::lock_guard<std::mutex> lock(st.cpuMutex);
  if (!st.cpu) {
    auto start = std::chrono::steady_clock::now();
    codegen::Target target; // Backend::Cpu
    try {
      st.cpu = std::make_unique<cpu::CpuProgram>(
          codegen::buildExecutionPlan(st.module.get(), entry, target, runtimeOptions().codegen),
          cpu::jitFunctionLoader(), runtime::interpretedHostSteps());
    } catch (const InterpreterError &) {
      throw;
    } catch (const std::exception &e) {
      throw InterpreterError(e.what());
    }
    addProgramCacheSeconds(&ProgramCacheStats::loadSeconds, secondsSince(start));
  }
  return *st.cpu;
}
} // namespace

std::vector<HostTensor> Program::run(const std::vector<HostTensor> &inputs, Device device) const {
  ModuleOp module = state_->module.get();
  if (device == Device::Cuda)
    return gpuProgram(*state_).run(inputs);
  if (!runtimeOptions().cpuJit)
    return interpret(module, entry_, inputs);
  return cpuProgram(*state_, entry_).run(inputs);
}

void Program::run(const std::vector<TensorRef> &inputs, const std::vector<TensorRef> &outputs,
                  Device device) const {
  if (outputs.size() != results_.size())
    throw InterpreterError("the program has " + std::to_string(results_.size()) + " results, got " +
                           std::to_string(outputs.size()) + " output buffers");
  for (size_t k = 0; k < outputs.size(); ++k)
    if (outputs[k].dtype != results_[k].first || outputs[k].shape != results_[k].second)
      throw InterpreterError("output buffer " + std::to_string(k) + " does not match the result type");
  if (device == Device::Cpu && runtimeOptions().cpuJit) {
    cpuProgram(*state_, entry_).run(inputs, outputs);
    return;
  }
  std::vector<HostTensor> in;
  for (const TensorRef &r : inputs)
    in.push_back(HostTensor::fromBytes(r.dtype, r.shape, (const char *)r.data));
  std::vector<HostTensor> out = run(in, device);
  for (size_t k = 0; k < out.size(); ++k)
    out[k].writeBytes(outputs[k].data);
}

ExportSummary Program::exportArtifact(const std::string &path, const ExportOptions &options) const {
  return artifact::writeArtifact(state_->module.get(), entry_, state_->tf32, options, path);
}

std::vector<Tensor> Program::run(const std::vector<Tensor> &inputs, Device device) const {
  const char *where = device == Device::Cuda ? "cuda" : "cpu";
  if (inputs.size() != state_->cudaPlan->argSlots.size())
    throw InterpreterError("the program takes " + std::to_string(state_->cudaPlan->argSlots.size()) +
                           " inputs, got " + std::to_string(inputs.size()));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor &t = inputs[k];
    if (t.device() != device)
      throw DeviceMismatchError("input " + std::to_string(k + 1) + " is on " +
                                (t.device() == Device::Cuda ? "cuda" : "cpu") + " but the program runs on " +
                                where + " (move it with $to(device = \"" + where + "\"))");
    const codegen::BufferSlot &slot = state_->cudaPlan->slots[state_->cudaPlan->argSlots[k]];
    if (t.dtype != slot.dtype || t.shape != slot.shape)
      throw InterpreterError("input " + std::to_string(k + 1) + " does not match the program's argument type");
  }
  std::vector<Tensor> outputs;
  for (auto &[dt, shape] : results_)
    outputs.push_back(emptyTensor(device, dt, shape));
  run(inputs, outputs, device);
  return outputs;
}

void Program::run(const std::vector<Tensor> &inputs, const std::vector<Tensor> &outputs, Device device) const {
  if (outputs.size() != results_.size())
    throw InterpreterError("the program has " + std::to_string(results_.size()) + " results, got " +
                           std::to_string(outputs.size()) + " output tensors");
  for (size_t k = 0; k < outputs.size(); ++k)
    if (outputs[k].device() != device || outputs[k].dtype != results_[k].first || outputs[k].shape != results_[k].second)
      throw InterpreterError("output tensor " + std::to_string(k + 1) + " does not match the result type");
  if (device == Device::Cuda) {
    std::vector<uintptr_t> ins, outs;
    for (const Tensor &t : inputs)
      ins.push_back((uintptr_t)t.data());
    for (const Tensor &t : outputs)
      outs.push_back((uintptr_t)t.data());
    gpuProgram(*state_).run(ins, outs);
    return;
  }
  std::vector<TensorRef> ins, outs;
  for (const Tensor &t : inputs)
    ins.push_back(t.ref());
  for (const Tensor &t : outputs)
    outs.push_back(t.ref());
  run(ins, outs, Device::Cpu);
}

std::vector<TypedShape> Program::argumentTypes() const {
  std::vector<TypedShape> out;
  for (int slot : state_->cudaPlan->argSlots)
    out.push_back({state_->cudaPlan->slots[slot].dtype, state_->cudaPlan->slots[slot].shape});
  return out;
}

std::vector<std::string> Program::cpuSteps() const {
  cpu::CpuProgram &p = cpuProgram(*state_, entry_);
  std::vector<std::string> out = p.jitted();
  for (const std::string &s : p.interpreted())
    out.push_back(s.substr(0, s.find(": ")) + ": interpreted (" + s.substr(s.find(": ") + 2) + ")");
  return out;
}

namespace {
bool allFinite(const std::vector<HostTensor> &ts) {
  for (const HostTensor &t : ts)
    for (double v : t.f)
      if (!std::isfinite(v))
        return false;
  return true;
}

// The first op of `block` (entered with `env` bound) whose results are not finite while its
// operands are; descends into kernel calls.
std::string firstNonFiniteIn(Block &block, llvm::DenseMap<Value, HostTensor> &env, ModuleOp module) {
  for (Operation &op : block.without_terminator()) {
    std::vector<HostTensor> operands;
    for (Value v : op.getOperands())
      operands.push_back(env.lookup(v));
    std::vector<HostTensor> results = interpretOperation(&op, operands);
    if (!allFinite(results) && allFinite(operands)) {
      if (auto call = dyn_cast<func::CallOp>(op))
        if (auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee())) {
          llvm::DenseMap<Value, HostTensor> inner;
          for (auto [a, t] : llvm::zip(callee.getArguments(), operands))
            inner[a] = t;
          std::string where = firstNonFiniteIn(callee.getBody().front(), inner, module);
          if (!where.empty())
            return where;
        }
      std::string s;
      llvm::raw_string_ostream os(s);
      os << "'" << op.getName() << "' at ";
      op.getLoc().print(os);
      return os.str();
    }
    for (auto [r, t] : llvm::zip(op.getResults(), results))
      env[r] = std::move(t);
  }
  return "";
}
} // namespace

std::string Program::firstNonFinite(const std::vector<HostTensor> &inputs) const {
  ModuleOp module = state_->module.get();
  auto fn = module.lookupSymbol<func::FuncOp>(entry_);
  llvm::DenseMap<Value, HostTensor> env;
  for (auto [a, t] : llvm::zip(fn.getArguments(), inputs))
    env[a] = t;
  return firstNonFiniteIn(fn.getBody().front(), env, module);
}

void clearCompiledCaches() {
  cpu::clearJitCache();
  cuda::clearMemoryKernelCache();
}

CpuJitStats cpuJitStats() {
  cpu::JitCounts c = cpu::jitCacheCounts();
  return {c.compiled, c.reused, c.diskHits};
}

Timing Program::benchmarkCuda(const std::vector<HostTensor> &inputs, int iterations) const {
  cuda::GpuTiming t = gpuProgram(*state_).benchmark(inputs, iterations);
  return {t.medianMs, t.minMs, t.iterations};
}

} // namespace rfuse
