#include "rfuse/Codegen/ExecutionPlan.h"

#include "KernelRegion.h"

#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

using namespace mlir;

namespace rfuse::codegen {

namespace {

// Lowers one step for the CPU into a module of its own, under a fixed name, so equal kernels of
// different programs share one compiled function (the JIT keys its cache by the text).
void planCpuStep(Step &s, Operation *op, ModuleOp module) {
  // (a kernel the lowering declines says why in `why`; its diagnostics are not printed)
  ScopedDiagnosticHandler handler(module.getContext(), [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> staging = ModuleOp::create(module.getLoc());
  std::optional<cpu::CpuKernel> k;
  std::string why;
  if (auto call = dyn_cast<func::CallOp>(op)) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    if (callee && callee->hasAttr("rfuse.kernel"))
      k = cpu::lowerKernel(callee, *staging, "rfuse_cpu_kernel", why);
    else
      why = "a call of a non-kernel function";
  } else {
    k = cpu::lowerOperation(op, *staging, "rfuse_cpu_kernel", why);
  }
  if (!k) {
    s.kind = Step::Kind::Host;
    s.why = why;
    return;
  }
  s.kind = k->library ? Step::Kind::Library : Step::Kind::Kernel;
  s.kernelKind = k->kind == cpu::CpuKernel::Kind::Reduction ? "reduction" : "pointwise";
  s.library = k->library;
  s.cpuFunction = k->function;
  if (k->function) { // (the JIT lowers it to the LLVM dialect when no cached object has it)
    llvm::raw_string_ostream os(s.cpuModule);
    staging->print(os);
  }
}

void planCudaStep(Step &s, Operation *op, ModuleOp module, size_t index, const cuda::CudaTarget &target,
                  const CodegenOptions &options) {
  cuda::KernelPlan p;
  if (auto call = dyn_cast<func::CallOp>(op)) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    if (!callee) {
      s.kind = Step::Kind::Host;
      s.why = "a call of an unknown function";
      return;
    }
    p = cuda::planKernel(callee, target, options);
  } else {
    p = cuda::planOperation(op, "op" + std::to_string(index) + "_" + op->getName().stripDialect().str(), target,
                            options);
  }
  if (!p.unsupported.empty()) {
    s.kind = Step::Kind::Host;
    s.why = p.unsupported;
    return;
  }
  s.kind = p.library ? Step::Kind::Library : Step::Kind::Kernel;
  s.kernelKind = p.kind;
  s.library = p.library;
  s.cudaKernel = p.kernel;
}

} // namespace

namespace {
// The names of the locations of `op` (and, for a kernel call, of its kernel's ops), in order,
// without repeats: the R expressions they were traced from.
std::string sourceOf(Operation *op, ModuleOp module) {
  std::vector<std::string> names;
  auto note = [&](Location loc) {
    loc->walk([&](Location l) {
      if (auto n = dyn_cast<NameLoc>(l)) {
        std::string s = n.getName().str();
        if (!s.empty() && std::find(names.begin(), names.end(), s) == names.end())
          names.push_back(s);
      }
      return WalkResult::advance();
    });
  };
  if (auto call = dyn_cast<func::CallOp>(op)) {
    if (auto fn = module.lookupSymbol<func::FuncOp>(call.getCallee()))
      fn.walk([&](Operation *inner) { note(inner->getLoc()); });
  } else {
    note(op->getLoc());
  }
  std::string out;
  for (size_t i = 0; i < names.size() && i < 4; ++i)
    out += (i ? "; " : "") + names[i];
  if (names.size() > 4)
    out += "; ...";
  return out;
}
} // namespace

ExecutionPlan buildExecutionPlan(ModuleOp module, const std::string &entry, const Target &target,
                                 const CodegenOptions &options) {
  auto fn = module.lookupSymbol<func::FuncOp>(entry);
  if (!fn)
    throw std::runtime_error("no function '" + entry + "'");
  if (target.backend == Backend::Cpu && !module.getContext()->getLoadedDialect("linalg"))
    cpu::loadKernelDialects(module.getContext());
  ExecutionPlan plan;
  plan.target = target;
  plan.entry = entry;
  llvm::DenseMap<Value, int> slotOf;
  auto slot = [&](Value v) {
    auto it = slotOf.find(v);
    if (it != slotOf.end())
      return it->second;
    BufferSlot b;
    b.dtype = dtypeOf(v);
    auto shape = shapeOf(v);
    b.shape.assign(shape.begin(), shape.end());
    b.bytes = (size_t)numElements(shape) * dtypeSize(b.dtype);
    plan.slots.push_back(b);
    return slotOf[v] = (int)plan.slots.size() - 1;
  };
  for (BlockArgument a : fn.getArguments()) {
    int sl = slot(a);
    plan.slots[sl].argument = (int)a.getArgNumber();
    plan.argSlots.push_back(sl);
  }
  for (Operation &op : fn.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        plan.resultSlots.push_back(slot(v));
      continue;
    }
    Step s;
    s.op = &op;
    s.scan = isa<ScanOp>(op);
    for (Value v : op.getOperands())
      s.in.push_back(slot(v));
    for (Value v : op.getResults())
      s.out.push_back(slot(v));
    auto call = dyn_cast<func::CallOp>(op);
    s.label = call ? call.getCallee().str() : op.getName().stripDialect().str();
    if (isa<ConstantOp>(op)) {
      s.kind = Step::Kind::Constant;
      plan.slots[s.out[0]].constant = true;
    } else if (isa<ReshapeOp>(op)) {
      s.kind = Step::Kind::Alias;
      plan.slots[s.out[0]].aliasOf = plan.root(s.in[0]);
    } else if (auto ar = dyn_cast<AllReduceOp>(op)) {
      s.kind = Step::Kind::Collective; // operand k into result k, by position
      s.collectiveMean = ar.getReduction() == CollectiveReduction::mean;
    } else {
      if (target.backend == Backend::Cpu)
        planCpuStep(s, &op, module);
      else
        planCudaStep(s, &op, module, plan.steps.size(), target.cuda, options);
      // A one-op kernel takes each distinct operand once (mul(x, x) has one input); a kernel
      // call, the interpreter, attention and pooling (operands by position) take them as they are.
      bool byPosition = call || s.kind == Step::Kind::Host || isa<AttentionOp, AttentionBackwardOp>(op) ||
                        (s.library && (s.library->kind == LibraryCall::Kind::Pool ||
                                       s.library->kind == LibraryCall::Kind::Recurrent));
      if (!byPosition) {
        std::vector<int> distinct;
        for (int sl : s.in)
          if (!llvm::is_contained(distinct, sl))
            distinct.push_back(sl);
        s.in = distinct;
      }
    }
    s.source = sourceOf(&op, module);
    for (int sl : s.in)
      s.bytes += plan.slots[sl].bytes;
    for (int sl : s.out)
      s.bytes += plan.slots[sl].bytes;
    if (s.library)
      s.flops = s.library->flops();
    if (isa<AttentionOp, AttentionBackwardOp>(op)) { // q k^T and P v; their backward is 2.5 times
      auto q = cast<RankedTensorType>(op.getOperand(0).getType()), k = cast<RankedTensorType>(op.getOperand(1).getType());
      double forward = 4.0 * q.getShape()[0] * q.getShape()[1] * k.getShape()[1] * q.getShape()[2];
      s.flops = isa<AttentionOp>(op) ? forward : 2.5 * forward;
    }
    plan.steps.push_back(std::move(s));
  }
  // A collective reduces in place (NCCL's sendbuff == recvbuff) when nothing else reads its
  // operand: the result shares the operand's buffer, so a bucket needs no second copy of its
  // gradients (and over one rank nothing moves at all).
  {
    std::vector<int> readers(plan.slots.size(), 0);
    for (const Step &st : plan.steps)
      for (int sl : st.in)
        ++readers[plan.root(sl)];
    std::vector<bool> isResult(plan.slots.size(), false);
    for (int sl : plan.resultSlots) {
      ++readers[plan.root(sl)];
      isResult[sl] = true;
    }
    for (Step &st : plan.steps) {
      if (st.kind != Step::Kind::Collective)
        continue;
      for (size_t k = 0; k < st.in.size(); ++k) {
        int root = plan.root(st.in[k]);
        const BufferSlot &operand = plan.slots[root];
        bool once = std::count(st.in.begin(), st.in.end(), st.in[k]) == 1;
        // (a result is left out of place: the collective writes it into the caller's buffer)
        if (readers[root] == 1 && once && operand.argument < 0 && !operand.constant && !isResult[st.out[k]] &&
            operand.bytes == plan.slots[st.out[k]].bytes)
          plan.slots[st.out[k]].aliasOf = root;
      }
    }
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (int sl : plan.steps[i].out)
      if (plan.slots[sl].firstUse < 0)
        plan.slots[sl].firstUse = (int)i;
    for (int sl : plan.steps[i].in) {
      BufferSlot &r = plan.slots[plan.root(sl)];
      r.lastUse = std::max(r.lastUse, (int)i);
    }
  }
  // A collective may read its inputs on a stream of its own until its results are needed: its
  // inputs live until the first step reading one of its outputs (or to the end).
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step &c = plan.steps[i];
    if (c.kind != Step::Kind::Collective)
      continue;
    int joined = BufferSlot::kLive;
    for (size_t j = i + 1; j < plan.steps.size() && joined == BufferSlot::kLive; ++j)
      for (int sl : plan.steps[j].in)
        for (int o : c.out)
          if (plan.root(sl) == plan.root(o))
            joined = (int)j;
    for (int sl : c.in) {
      BufferSlot &r = plan.slots[plan.root(sl)];
      r.lastUse = std::max(r.lastUse, joined);
    }
  }
  for (int sl : plan.resultSlots)
    plan.slots[plan.root(sl)].lastUse = BufferSlot::kLive;
  return plan;
}

} // namespace rfuse::codegen
