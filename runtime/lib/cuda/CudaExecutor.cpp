#include "CudaExecutor.h"
#include "Device.h"
#include "Libraries.h"

#include "../StepLoop.h"

#include "rfuse/Runtime/Options.h"

#include "mlir/IR/Operation.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace rfuse::cuda {

using codegen::LibraryCall;
using codegen::Step;
using runtime::Buffer;
using runtime::StepLoop;

struct GpuProgram::Impl : runtime::StepBackend {
  codegen::ExecutionPlan plan;
  Device &dev = Device::get();
  StepLoop loop{plan};
  // Per step: loaded kernels and the library state (descriptors, tuned algorithms).
  struct StepState {
    CUfunction fn = nullptr; // the kernel, or the epilogue after a library call
    std::unique_ptr<CublasLtMatmul> matmul;
    std::unique_ptr<CudnnConv> conv;
    std::unique_ptr<CudnnPool> pool;
  };
  std::vector<StepState> state;
  std::vector<std::string> fallbacks;
  RuntimeOptions options = runtimeOptions();

  explicit Impl(codegen::ExecutionPlan p) : plan(std::move(p)) {
    state.resize(plan.steps.size());
    std::vector<std::string> names, sources;
    std::vector<size_t> owners;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      Step &s = plan.steps[i];
      if (s.kind == Step::Kind::Library && s.library->kind != LibraryCall::Kind::Matmul && !cudnn().loaded) {
        s.kind = Step::Kind::Host;
        s.why = "cuDNN is not available (" + cudnn().error + ")";
      }
      if (s.kind == Step::Kind::Host)
        fallbacks.push_back(s.label + ": " + s.why);
      if ((s.kind == Step::Kind::Kernel || s.kind == Step::Kind::Library) && s.cudaKernel) {
        names.push_back(s.cudaKernel->name);
        sources.push_back(s.cudaKernel->source);
        owners.push_back(i);
      }
      if (s.kind == Step::Kind::Library) {
        switch (s.library->kind) {
        case LibraryCall::Kind::Matmul: state[i].matmul = std::make_unique<CublasLtMatmul>(); break;
        case LibraryCall::Kind::Conv: state[i].conv = std::make_unique<CudnnConv>(); break;
        case LibraryCall::Kind::Pool: state[i].pool = std::make_unique<CudnnPool>(); break;
        }
      }
    }
    // Every kernel of the program compiles in parallel (through the kernel cache).
    std::vector<CompiledKernel> compiled = compileKernels(names, sources, dev.arch);
    for (size_t k = 0; k < owners.size(); ++k)
      state[owners[k]].fn = dev.function(names[k], compiled[k]);
    for (const std::string &f : fallbacks)
      llvm::errs() << "rfuse: warning: " << f << "\n";
  }

  ~Impl() override {
    dropGraph();
    loop.releaseEverything(*this);
  }

  // ---- StepBackend -------------------------------------------------------------------------

  Buffer allocate(size_t bytes) override { return dev.alloc(bytes); }
  void release(Buffer b, size_t bytes) override { dev.release(b, bytes); }

  void launch(const KernelSpec &k, CUfunction fn, const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) {
    std::vector<CUdeviceptr> args(ins.begin(), ins.end());
    args.insert(args.end(), outs.begin(), outs.end());
    std::vector<void *> params;
    for (CUdeviceptr &p : args)
      params.push_back(&p);
    check(driver().cuLaunchKernel(fn, k.grid, 1, 1, k.blockSize, 1, 1, 0, dev.stream, params.data(), nullptr),
          "cuLaunchKernel", "launching kernel " + k.name + " (grid " + std::to_string(k.grid) + ", block " +
                                std::to_string(k.blockSize) + ")");
  }

  void runKernel(StepLoop &, size_t i, const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) override {
    launch(*plan.steps[i].cudaKernel, state[i].fn, ins, outs);
  }


  void runLibrary(StepLoop &loop, size_t i, const std::vector<Buffer> &ins, Buffer product) override {
    const LibraryCall &call = *plan.steps[i].library;
    // Zero extents: an empty result, or (k = 0) zeros, without calling the library.
    if (call.productBytes() == 0)
      return;
    if (call.kind == LibraryCall::Kind::Matmul && call.matmul.k == 0) {
      size_t bytes = call.productBytes();
      check(driver().cuMemsetD8Async(product, 0, bytes, dev.stream), "cuMemsetD8Async", "zeroing an empty product");
      return;
    }
    switch (call.kind) {
    case LibraryCall::Kind::Matmul: {
      const codegen::MatmulCall &m = call.matmul;
      CUdeviceptr lhs = ins[m.lhsInput];
      size_t transposedBytes = (size_t)(m.m * m.k) * 4;
      if (m.transposeLhsFirst) {
        CUdeviceptr t = loop.temporary(*this, transposedBytes);
        transposeF32(dev, lhs, m.k, m.m, t);
        lhs = t;
      }
      state[i].matmul->run(dev, m, lhs, ins[m.rhsInput], m.biasInput >= 0 ? ins[m.biasInput] : 0,
                           m.residualInput >= 0 ? ins[m.residualInput] : 0, product, options.tf32);
      if (m.transposeLhsFirst)
        loop.done(*this, lhs, transposedBytes);
      break;
    }
    case LibraryCall::Kind::Conv:
      state[i].conv->run(dev, call.conv, std::vector<CUdeviceptr>(ins.begin(), ins.end()), product, options.tf32);
      break;
    case LibraryCall::Kind::Pool:
      state[i].pool->run(dev, call.pool, std::vector<CUdeviceptr>(ins.begin(), ins.end()), product);
      break;
    }
  }

  HostTensor read(Buffer b, const codegen::BufferSlot &slot) override {
    std::vector<char> bytes(slot.bytes);
    check(driver().cuMemcpyDtoHAsync(bytes.data(), b, bytes.size(), dev.stream), "cuMemcpyDtoH", "downloading a value");
    check(driver().cuStreamSynchronize(dev.stream), "cuStreamSynchronize", "downloading a value");
    return HostTensor::fromBytes(slot.dtype, slot.shape, bytes.data());
  }

  void write(Buffer b, const HostTensor &t) override {
    std::vector<char> bytes = t.toBytes();
    check(driver().cuMemcpyHtoDAsync(b, bytes.data(), bytes.size(), dev.stream), "cuMemcpyHtoD", "uploading a value");
    check(driver().cuStreamSynchronize(dev.stream), "cuStreamSynchronize", "uploading a value");
  }

  // ---- Profiling: profile_steps times each step with CUDA events (graphs off) ----------------
  CUevent e0 = nullptr, e1 = nullptr;
  std::vector<double> stepMs;
  int profiledRuns = 0;

  void beforeStep(size_t) override {
    if (options.profileSteps)
      driver().cuEventRecord(e0, dev.stream);
  }
  void afterStep(size_t i) override {
    if (!options.profileSteps)
      return;
    const DriverApi &api = driver();
    api.cuEventRecord(e1, dev.stream);
    api.cuEventSynchronize(e1);
    float ms = 0;
    api.cuEventElapsedTime(&ms, e0, e1);
    stepMs[i] += ms;
  }

  void printProfile() const {
    if (!options.profileSteps || !profiledRuns)
      return;
    double total = 0;
    for (double t : stepMs)
      total += t;
    llvm::errs() << "rfuse step profile (mean of " << profiledRuns << " runs, total "
                 << llvm::format("%.4f", total / profiledRuns) << " ms):\n";
    for (size_t i = 0; i < plan.steps.size(); ++i)
      if (stepMs[i] > 0)
        llvm::errs() << llvm::format("  %2zu %9.4f ms  ", i, stepMs[i] / profiledRuns) << plan.steps[i].label << ": "
                     << plan.steps[i].describe(codegen::Backend::Cuda) << "\n";
  }

  void execute() {
    if (options.profileSteps) {
      if (!e0) {
        driver().cuEventCreate(&e0, 0);
        driver().cuEventCreate(&e1, 0);
      }
      stepMs.resize(plan.steps.size(), 0.0);
      ++profiledRuns;
    }
    loop.run(*this);
  }

  // ---- CUDA graphs -------------------------------------------------------------------------
  // From the second run on, a program whose steps are all device work (no host step) is
  // captured once into a CUDA graph and replayed as one launch: no per-step host work, no
  // launch gaps. Its buffers are then fixed (the graph holds their addresses): every slot keeps
  // its buffer for the program's life instead of going back to the allocator after each run.
  CUgraph graph = nullptr;
  CUgraphExec graphExec = nullptr;
  bool graphFailed = false;
  int executions = 0;

  bool graphable() const {
    if (graphFailed || options.profileSteps || !options.cudaGraphs)
      return false;
    for (const Step &s : plan.steps)
      if (s.kind == Step::Kind::Host)
        return false;
    return true;
  }

  void dropGraph() {
    if (graphExec)
      driver().cuGraphExecDestroy(graphExec);
    if (graph)
      driver().cuGraphDestroy(graph);
    graphExec = nullptr;
    graph = nullptr;
    if (loop.keepBuffers)
      loop.unfix(*this);
  }

  // Runs the steps: directly, or by capturing (once) and replaying a CUDA graph.
  void run() {
    options = runtimeOptions();
    if (!graphable() || executions++ == 0) { // the first run picks algorithms, computes constants
      execute();
      return;
    }
    if (!graphExec) {
      loop.keepBuffers = true;
      for (size_t i = 0; i < plan.slots.size(); ++i)
        if (plan.slots[i].aliasOf < 0)
          loop.buffer(*this, (int)i);
      const DriverApi &api = driver();
      check(api.cuStreamBeginCapture(dev.stream, CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture",
            "capturing a CUDA graph");
      try {
        execute();
      } catch (...) {
        CUgraph g = nullptr;
        api.cuStreamEndCapture(dev.stream, &g);
        if (g)
          api.cuGraphDestroy(g);
        graphFailed = true;
        dropGraph();
        throw;
      }
      CUresult ended = api.cuStreamEndCapture(dev.stream, &graph);
      if (ended != CUDA_SUCCESS || api.cuGraphInstantiateWithFlags(&graphExec, graph, 0) != CUDA_SUCCESS) {
        llvm::errs() << "rfuse: warning: CUDA graph capture failed; running the steps one by one\n";
        graphFailed = true;
        dropGraph();
        execute();
        return;
      }
    }
    check(driver().cuGraphLaunch(graphExec, dev.stream), "cuGraphLaunch", "replaying the program's CUDA graph");
  }

  void upload(const std::vector<HostTensor> &inputs) {
    if (inputs.size() != plan.argSlots.size())
      throw CudaError("the program takes " + std::to_string(plan.argSlots.size()) + " inputs, got " +
                      std::to_string(inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i)
      write(loop.buffer(*this, plan.argSlots[i]), inputs[i]);
  }
};

GpuProgram::GpuProgram(codegen::ExecutionPlan plan) : impl(std::make_unique<Impl>(std::move(plan))) {}
GpuProgram::~GpuProgram() = default;

const std::vector<std::string> &GpuProgram::hostFallbacks() const { return impl->fallbacks; }

std::vector<HostTensor> GpuProgram::run(const std::vector<HostTensor> &inputs) {
  std::vector<HostTensor> out;
  try {
    impl->upload(inputs);
    impl->run();
    for (int sl : impl->plan.resultSlots)
      out.push_back(impl->read(impl->loop.buffer(*impl, sl), impl->plan.slots[sl]));
  } catch (...) {
    impl->loop.releaseAll(*impl);
    throw;
  }
  impl->loop.releaseAll(*impl);
  return out;
}

GpuTiming GpuProgram::benchmark(const std::vector<HostTensor> &inputs, int iterations) {
  impl->upload(inputs);
  const DriverApi &api = driver();
  CUevent start, stop;
  check(api.cuEventCreate(&start, 0), "cuEventCreate", "benchmark");
  check(api.cuEventCreate(&stop, 0), "cuEventCreate", "benchmark");
  std::vector<double> times;
  // Results stay on the device between runs; inputs stay uploaded.
  auto once = [&] {
    impl->run();
    for (int sl : impl->plan.resultSlots)
      impl->loop.releaseSlot(*impl, sl);
  };
  for (int w = 0; w < 3; ++w)
    once();
  impl->stepMs.assign(impl->stepMs.size(), 0.0); // the profile leaves out warm-up and tuning
  impl->profiledRuns = 0;
  for (int it = 0; it < iterations; ++it) {
    api.cuEventRecord(start, impl->dev.stream);
    once();
    api.cuEventRecord(stop, impl->dev.stream);
    check(api.cuEventSynchronize(stop), "cuEventSynchronize", "benchmark");
    float ms = 0;
    api.cuEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  api.cuEventDestroy(start);
  api.cuEventDestroy(stop);
  impl->loop.releaseAll(*impl);
  impl->printProfile();
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front(), iterations};
}

} // namespace rfuse::cuda
