#include "CpuJit.h"

#include "rfuse/Codegen/CpuLowering.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Runtime/Interpreter.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

using namespace mlir;

namespace rfuse::cpu {
namespace {

void initNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

// A buffer in the element type the JIT code reads and writes, filled from / copied to a
// HostTensor (f64 needs no copy: HostTensor stores doubles).
struct TypedBuffer {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
  double *direct = nullptr; // f64: the HostTensor's own storage
  void *data() { return direct ? (void *)direct : (void *)bytes.data(); }
};

TypedBuffer bufferFor(DType dt, const std::vector<int64_t> &shape, const HostTensor *from) {
  TypedBuffer b{dt, shape, {}, nullptr};
  if (dt == DType::F64 && from) { // JIT kernels only read their inputs
    b.direct = const_cast<double *>(from->f.data());
    return b;
  }
  if (from) {
    b.bytes = from->toBytes();
  } else {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    b.bytes.resize((size_t)n * dtypeSize(dt));
  }
  return b;
}

HostTensor tensorFrom(TypedBuffer &b) {
  return HostTensor::fromBytes(b.dtype, b.shape, (const char *)b.data());
}

// MLIR's memref descriptor for a contiguous buffer: {allocated, aligned, offset, sizes, strides}.
std::vector<int64_t> descriptor(void *data, const std::vector<int64_t> &shape) {
  std::vector<int64_t> d = {(int64_t)(intptr_t)data, (int64_t)(intptr_t)data, 0};
  d.insert(d.end(), shape.begin(), shape.end());
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  d.insert(d.end(), strides.begin(), strides.end());
  return d;
}

} // namespace

struct CpuProgram::Impl {
  ModuleOp module;
  std::string entry;
  std::unique_ptr<MLIRContext> jitCtx;
  OwningOpRef<ModuleOp> jitModule;
  std::unique_ptr<ExecutionEngine> engine;
  llvm::DenseMap<Operation *, std::string> jitName; // call op -> JIT function
  std::vector<std::string> jitted, interpreted;

  void build() {
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    DialectRegistry registry;
    registry.insert<RfuseDialect, LLVM::LLVMDialect, scf::SCFDialect, cf::ControlFlowDialect>();
    registerCpuDialects(registry);
    registerBuiltinDialectTranslation(registry);
    registerLLVMDialectTranslation(registry);
    jitCtx = std::make_unique<MLIRContext>(registry);
    jitCtx->loadAllAvailableDialects();
    jitModule = ModuleOp::create(UnknownLoc::get(jitCtx.get()));
    // Kernels are lowered in the program's context (which gains the linalg/arith/math dialects),
    // then moved to the JIT's context as text.
    DialectRegistry cpuDialects;
    registerCpuDialects(cpuDialects);
    module.getContext()->appendDialectRegistry(cpuDialects);
    module.getContext()->loadAllAvailableDialects();
    OwningOpRef<ModuleOp> staging = ModuleOp::create(module.getLoc());
    unsigned n = 0;
    fn.walk([&](func::CallOp call) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!callee || !callee->hasAttr("rfuse.kernel"))
        return;
      std::string name = "rfuse_cpu_k" + std::to_string(n++), why;
      if (lowerPointwiseKernel(callee, *staging, name, why)) {
        jitName[call] = name;
        jitted.push_back(callee.getName().str());
      } else {
        interpreted.push_back(callee.getName().str() + ": " + why);
      }
    });
    if (jitName.empty())
      return;
    std::string text;
    llvm::raw_string_ostream os(text);
    staging->print(os);
    std::string diags;
    ScopedDiagnosticHandler handler(jitCtx.get(), [&](Diagnostic &d) {
      diags += d.str() + "\n";
      return success();
    });
    jitModule = parseSourceString<ModuleOp>(os.str(), jitCtx.get());
    PassManager pm(jitCtx.get());
    pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
    pm.addPass(createConvertSCFToCFPass());
    pm.addPass(memref::createExpandStridedMetadataPass());
    // libm for what LLVM has no intrinsic for (tanh, erf...): the functions the interpreter's
    // std:: calls reach too.
    pm.addPass(createConvertMathToLibmPass());
    pm.addPass(createConvertMathToLLVMPass());
    pm.addPass(createFinalizeMemRefToLLVMConversionPass());
    pm.addPass(createArithToLLVMConversionPass());
    pm.addPass(createConvertControlFlowToLLVMPass());
    pm.addPass(createConvertFuncToLLVMPass());
    pm.addPass(createReconcileUnrealizedCastsPass());
    if (!jitModule || failed(pm.run(*jitModule)))
      throw InterpreterError("the CPU lowering failed:\n" + diags);
    initNativeTarget();
    ExecutionEngineOptions options;
    options.transformer = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, nullptr);
    auto created = ExecutionEngine::create(*jitModule, options);
    if (!created) {
      std::string msg;
      llvm::raw_string_ostream ms(msg);
      ms << created.takeError() << "\n" << diags;
      if (std::getenv("RFUSE_CPU_JIT_DEBUG"))
        jitModule->print(ms);
      throw InterpreterError("the CPU JIT failed: " + ms.str());
    }
    engine = std::move(*created);
  }

  std::vector<HostTensor> runCall(Operation *call, const std::string &name,
                                  const std::vector<const HostTensor *> &operands) {
    std::vector<TypedBuffer> bufs;
    for (const HostTensor *t : operands)
      bufs.push_back(bufferFor(t->dtype, t->shape, t));
    for (Value r : call->getResults()) {
      auto shape = llvm::cast<RankedTensorType>(r.getType()).getShape();
      bufs.push_back(bufferFor(dtypeOf(r), {shape.begin(), shape.end()}, nullptr));
    }
    std::vector<std::vector<int64_t>> descs;
    for (TypedBuffer &b : bufs)
      descs.push_back(descriptor(b.data(), b.shape));
    std::vector<void *> descPtrs;
    for (auto &d : descs)
      descPtrs.push_back(d.data());
    std::vector<void *> args;
    for (void *&p : descPtrs)
      args.push_back(&p);
    if (llvm::Error e = engine->invokePacked("_mlir_ciface_" + name, args)) {
      std::string msg;
      llvm::raw_string_ostream ms(msg);
      ms << e;
      throw InterpreterError("running CPU kernel " + name + ": " + ms.str());
    }
    std::vector<HostTensor> out;
    for (size_t i = operands.size(); i < bufs.size(); ++i)
      out.push_back(tensorFrom(bufs[i]));
    return out;
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
  auto fn = impl->module.lookupSymbol<func::FuncOp>(impl->entry);
  if (inputs.size() != fn.getNumArguments())
    throw InterpreterError("the program takes " + std::to_string(fn.getNumArguments()) +
                           " inputs, got " + std::to_string(inputs.size()));
  // Values by pointer: the caller's inputs where their dtype fits, owned results otherwise (the
  // tensors are large; nothing is copied that need not be).
  llvm::DenseMap<Value, const HostTensor *> env;
  std::deque<HostTensor> owned;
  for (auto [arg, t] : llvm::zip(fn.getArguments(), inputs)) {
    DType dt;
    fromMlirType(llvm::cast<RankedTensorType>(arg.getType()).getElementType(), dt);
    env[arg] = t.dtype == dt ? &t : &owned.emplace_back(t.castTo(dt));
  }
  for (Operation &op : fn.getBody().front()) {
    std::vector<const HostTensor *> operands;
    for (Value v : op.getOperands())
      operands.push_back(env.lookup(v));
    if (isa<func::ReturnOp>(op)) {
      std::vector<HostTensor> out;
      for (const HostTensor *t : operands)
        out.push_back(*t);
      return out;
    }
    std::vector<HostTensor> results;
    auto it = impl->jitName.find(&op);
    if (it != impl->jitName.end()) {
      results = impl->runCall(&op, it->second, operands);
    } else {
      std::vector<HostTensor> copies;
      for (const HostTensor *t : operands)
        copies.push_back(*t);
      results = interpretOperation(&op, copies);
    }
    for (auto [r, t] : llvm::zip(op.getResults(), results))
      env[r] = &owned.emplace_back(std::move(t));
  }
  throw InterpreterError("function without return");
}

} // namespace rfuse::cpu
