#include "CpuExecutor.h"
#include "../HalfFloat.h"

#include "rfuse/Runtime/Profile.h"

#include <chrono>
#include "Blas.h"

#include "../Collectives.h"
#include "../StepLoop.h"

#include "rfuse/Runtime/Interpreter.h"

#include <cstdlib>
#include <cstring>
#include <deque>

namespace rfuse::cpu {

using codegen::LibraryCall;
using codegen::Step;
using runtime::Buffer;
using runtime::StepLoop;

namespace {

// f32, f16 and bf16 values as doubles: BLAS steps compute them in f64 (as the interpreter
// accumulates in long double), then round once to the dtype.
std::vector<double> widen(DType dt, const void *p, size_t count) {
  if (dt == DType::F16 || dt == DType::BF16) {
    const uint16_t *h = (const uint16_t *)p;
    std::vector<double> out(count);
    for (size_t i = 0; i < count; ++i)
      out[i] = runtime::halfBitsToDouble(h[i], dt == DType::BF16);
    return out;
  }
  const float *f = (const float *)p;
  return std::vector<double>(f, f + count);
}
void narrow(DType dt, const std::vector<double> &from, void *to) {
  if (dt == DType::F16 || dt == DType::BF16) {
    uint16_t *h = (uint16_t *)to;
    for (size_t i = 0; i < from.size(); ++i)
      h[i] = runtime::doubleToHalfBits(from[i], dt == DType::BF16);
    return;
  }
  float *t = (float *)to;
  for (size_t i = 0; i < from.size(); ++i)
    t[i] = (float)from[i];
}

} // namespace

struct CpuProgram::Impl : runtime::StepBackend {
  codegen::ExecutionPlan plan;

  // Profiling: host timers around each step (runs may overlap on several threads: per thread).
  static inline thread_local std::chrono::steady_clock::time_point stepStart;
  void beforeStep(size_t) override {
    if (profiling())
      stepStart = std::chrono::steady_clock::now();
  }
  void afterStep(size_t i) override {
    if (!profiling())
      return;
    const Step &s = plan.steps[i];
    if (s.kind == Step::Kind::Alias)
      return;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - stepStart).count();
    recordProfile({plan.entry, s.label, s.describe(codegen::Backend::Cpu), s.source, "cpu", ms, s.bytes, s.flops});
  }
  std::vector<CpuFunctionRef> compiled; // per step
  std::vector<std::string> jitted, interpreted;
  runtime::HostStepRunner hostSteps;

  Impl(codegen::ExecutionPlan p, const CpuFunctionLoader &functions, runtime::HostStepRunner h)
      : plan(std::move(p)), compiled(plan.steps.size()), hostSteps(std::move(h)) {
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      Step &s = plan.steps[i];
      if (s.kind == Step::Kind::Library && s.library->kind != LibraryCall::Kind::Pool && !blasAvailable()) {
        s.kind = Step::Kind::Host;
        s.why = "no BLAS found (dgemm_)";
      }
      if (s.kind == Step::Kind::Host)
        interpreted.push_back(s.label + ": " + s.why);
      if (s.kind == Step::Kind::Collective)
        jitted.push_back(s.label + ": " + s.describe(codegen::Backend::Cpu));
      if (s.kind != Step::Kind::Kernel && s.kind != Step::Kind::Library)
        continue;
      if (s.cpuFunction && !(compiled[i] = functions(i, s)).fn)
        throw InterpreterError("no compiled function for step " + s.label);
      jitted.push_back(s.label + ": " + s.describe(codegen::Backend::Cpu));
    }
  }

  Buffer allocate(size_t bytes) override {
    void *p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
    if (!p)
      throw InterpreterError("out of memory allocating " + std::to_string(bytes) + " bytes");
    return (Buffer)p;
  }
  void release(Buffer b, size_t) override { std::free((void *)b); }

  static std::vector<void *> pointers(const std::vector<Buffer> &a, const std::vector<Buffer> &b = {}) {
    std::vector<void *> p;
    for (Buffer x : a)
      p.push_back((void *)x);
    for (Buffer x : b)
      p.push_back((void *)x);
    return p;
  }

  void runKernel(StepLoop &, size_t i, const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) override {
    invoke(*plan.steps[i].cpuFunction, compiled[i].fn, pointers(ins, outs));
  }

  // A CPU process group has one rank (initProcessGroup refuses more): the reduction over the
  // ranks is the value itself.
  void runCollective(StepLoop &, size_t i, const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) override {
    if (int world = activeWorldSize(); world != 1)
      throw std::runtime_error("an all-reduce over " + std::to_string(world) +
                               " ranks cannot run on the CPU: rfuse's collectives run through NCCL on GPUs");
    const Step &s = plan.steps[i];
    for (size_t k = 0; k < ins.size(); ++k)
      if (ins[k] != outs[k])
        std::memcpy((void *)outs[k], (const void *)ins[k], plan.slots[s.in[k]].bytes);
  }

  void runLibrary(StepLoop &, size_t i, const std::vector<Buffer> &insB, const std::vector<Buffer> &products) override {
    const LibraryCall &call = *plan.steps[i].library;
    std::vector<void *> ins = pointers(insB);
    void *y = (void *)products[0];
    // Zero extents: an empty result, or (k = 0) a sum of nothing, without calling the library
    // (BLAS rejects a zero leading dimension).
    if (call.productBytes() == 0)
      return;
    if (call.kind == LibraryCall::Kind::Matmul && call.matmul.k == 0) {
      std::memset(y, 0, call.productBytes());
      return;
    }
    switch (call.kind) {
    case LibraryCall::Kind::Matmul: {
      const codegen::MatmulCall &g = call.matmul;
      if (g.dtype == DType::F64) {
        gemm(g, (const double *)ins[g.lhsInput], (const double *)ins[g.rhsInput], (double *)y);
      } else {
        // f32 (f16, bf16) products accumulate in f64 (dgemm of the widened operands), as the
        // interpreter's do: the result is then the rounding of a nearly exact product, whatever
        // k is.
        std::vector<double> a = widen(g.dtype, ins[g.lhsInput], (size_t)((g.batchedA ? g.batch : 1) * g.m * g.k)),
                            b = widen(g.dtype, ins[g.rhsInput], (size_t)((g.batchedB ? g.batch : 1) * g.k * g.n)),
                            c((size_t)(g.batch * g.m * g.n));
        gemm(g, a.data(), b.data(), c.data());
        narrow(g.resultDtype(), c, y);
      }
      break;
    }
    case LibraryCall::Kind::Conv:
      runConv(call.conv, ins, y);
      break;
    case LibraryCall::Kind::Pool: { // the interpreter's loops, accumulated in f64
      const codegen::PoolCall &p = call.pool;
      std::vector<double> acc(call.productBytes() / dtypeSize(p.dtype));
      bool f64 = p.dtype == DType::F64, half = p.dtype == DType::F16 || p.dtype == DType::BF16;
      p.geometry.run([&](int k, int64_t e) -> double {
        return f64    ? ((const double *)ins[k])[e]
               : half ? runtime::halfBitsToDouble(((const uint16_t *)ins[k])[e], p.dtype == DType::BF16)
                      : (double)((const float *)ins[k])[e];
      }, acc);
      if (f64)
        std::copy(acc.begin(), acc.end(), (double *)y);
      else
        narrow(p.dtype, acc, y);
      break;
    }
    case LibraryCall::Kind::Recurrent: // (the CPU's plan leaves recurrent layers to the interpreter)
      throw std::logic_error("a recurrent library call in a CPU plan");
    }
  }

  void runConv(const codegen::ConvCall &call, const std::vector<void *> &ins, void *y) {
    const ConvGeometry &c = call.geometry;
    size_t inputSize = (size_t)(c.n * c.c * c.h * c.w), filterSize = (size_t)(c.o * (c.c / c.groups) * c.kh * c.kw),
           outputSize = (size_t)(c.n * c.o * c.oh * c.ow);
    size_t n = c.direction == ConvDirection::Forward         ? outputSize
               : c.direction == ConvDirection::BackwardInput ? inputSize
                                                             : filterSize;
    // f32 runs in f64, as matmuls do.
    bool f64 = call.dtype == DType::F64;
    std::deque<std::vector<double>> wide;
    auto operand = [&](int index, size_t count) -> const double * {
      if (index < 0)
        return nullptr;
      if (f64)
        return (const double *)ins[index];
      wide.push_back(widen(call.dtype, ins[index], count));
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
      narrow(call.dtype, p, y);
  }

  HostTensor read(Buffer b, const codegen::BufferSlot &slot) override {
    return HostTensor::fromBytes(slot.dtype, slot.shape, (const char *)b);
  }
  void write(Buffer b, const HostTensor &t) override { t.writeBytes((void *)b); }
};

CpuProgram::CpuProgram(codegen::ExecutionPlan plan, const CpuFunctionLoader &functions,
                       runtime::HostStepRunner hostSteps)
    : impl(std::make_unique<Impl>(std::move(plan), functions, std::move(hostSteps))) {}
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
  std::vector<HostTensor> results;
  for (int sl : impl->plan.resultSlots)
    results.emplace_back(impl->plan.slots[sl].dtype, impl->plan.slots[sl].shape);
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
  const codegen::ExecutionPlan &plan = impl->plan;
  if (inputs.size() != plan.argSlots.size())
    throw InterpreterError("the program takes " + std::to_string(plan.argSlots.size()) + " inputs, got " +
                           std::to_string(inputs.size()));
  // A loop per run: runs may overlap (from several threads), and each binds its own memory.
  StepLoop loop(plan, impl->hostSteps);
  std::vector<std::pair<Buffer, size_t>> converted;
  struct Cleanup {
    Impl &impl;
    StepLoop &loop;
    std::vector<std::pair<Buffer, size_t>> &converted;
    ~Cleanup() {
      loop.releaseEverything(impl);
      for (auto [b, n] : converted)
        impl.release(b, n);
    }
  } cleanup{*impl, loop, converted};
  for (size_t k = 0; k < inputs.size(); ++k) {
    int sl = plan.argSlots[k];
    const codegen::BufferSlot &slot = plan.slots[sl];
    const TensorRef &ref = inputs[k];
    if (ref.dtype == slot.dtype) {
      loop.bind(sl, (Buffer)ref.data);
    } else { // the rules of rfuse.cast, through a HostTensor
      Buffer b = impl->allocate(slot.bytes);
      converted.push_back({b, slot.bytes});
      HostTensor::fromBytes(ref.dtype, ref.shape, (const char *)ref.data).castTo(slot.dtype).writeBytes((void *)b);
      loop.bind(sl, b);
    }
  }
  // Results the function returns are written where the caller wants them (the first time each
  // is returned), unless the value is an argument or an alias.
  std::vector<bool> bound(plan.slots.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    int sl = plan.resultSlots[k];
    const codegen::BufferSlot &slot = plan.slots[sl];
    if (slot.argument < 0 && slot.aliasOf < 0 && !bound[sl]) {
      loop.bind(sl, (Buffer)outputs[k].data);
      bound[sl] = true;
    }
  }
  loop.run(*impl);
  for (size_t k = 0; k < outputs.size(); ++k) {
    int sl = plan.resultSlots[k];
    Buffer b = loop.buffer(*impl, sl);
    if ((void *)b != outputs[k].data)
      std::memcpy(outputs[k].data, (const void *)b, plan.slots[sl].bytes);
  }
}

} // namespace rfuse::cpu
