#include "CudaExecutor.h"
#include "Device.h"
#include "Libraries.h"
#include "Nccl.h"

#include "../Collectives.h"

#include "../StepLoop.h"

#include "rfuse/Runtime/Options.h"
#include "rfuse/Runtime/Profile.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>

namespace rfuse::cuda {

using codegen::LibraryCall;
using codegen::Step;
using runtime::Buffer;
using runtime::StepLoop;

struct GpuProgram::Impl : runtime::StepBackend {
  codegen::ExecutionPlan plan;
  Device &dev = Device::get();
  StepLoop loop;
  // Per step: loaded kernels and the library state (descriptors, tuned algorithms).
  struct StepState {
    CUfunction fn = nullptr; // the kernel, or the epilogue after a library call
    unsigned grid = 0;       // the kernel's launch grid: its spec's, or fewer (residentGrid)
    std::unique_ptr<CublasLtMatmul> matmul;
    std::unique_ptr<CudnnConv> conv;
    std::unique_ptr<CudnnPool> pool;
    std::unique_ptr<CudnnRecurrent> recurrent;
  };
  std::vector<StepState> state;
  std::vector<std::string> fallbacks;
  std::optional<bool> tf32; // the program's own TF32 setting, over the option's
  RuntimeOptions options = currentOptions();

  RuntimeOptions currentOptions() const {
    RuntimeOptions o = runtimeOptions();
    if (tf32)
      o.tf32 = *tf32;
    return o;
  }

  Impl(codegen::ExecutionPlan p, const KernelLoader &kernels, runtime::HostStepRunner hostSteps, std::optional<bool> t)
      : plan(std::move(p)), loop(plan, std::move(hostSteps)), tf32(t) {
    state.resize(plan.steps.size());
    // cuBLASLt and cuDNN initialize on a thread of their own while the kernels load.
    bool wantLt = false, wantDnn = false;
    for (const Step &s : plan.steps)
      if (s.kind == Step::Kind::Library)
        (s.library->kind == LibraryCall::Kind::Matmul ? wantLt : wantDnn) = true;
    warmLibraries(wantLt, wantDnn);
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
        case LibraryCall::Kind::Recurrent: state[i].recurrent = std::make_unique<CudnnRecurrent>(); break;
        }
      }
    }
    // Every kernel of the program compiles in parallel (through the kernel cache).
    std::vector<CompiledKernel> compiled = kernels(names, sources, dev.arch);
    if (compiled.size() != names.size())
      throw CudaError("the program's kernel loader gave " + std::to_string(compiled.size()) + " kernels for " +
                      std::to_string(names.size()));
    for (size_t k = 0; k < owners.size(); ++k) {
      Device::KernelRef ref = dev.acquireFunction(names[k], compiled[k]);
      state[owners[k]].fn = ref.function;
      // Dynamic shared memory (a column reduction's cached tile) is allowed per function, once:
      // without it a launch may have 48 KiB in all, static and dynamic together, so a tile of
      // 48 KiB or less beside the kernel's static reduction slots fails to launch too.
      if (int smem = plan.steps[owners[k]].cudaKernel->dynamicSharedBytes; smem > 0)
        check(driver().cuFuncSetAttribute(ref.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
              "cuFuncSetAttribute", "kernel " + names[k] + " asks for " + std::to_string(smem) + " bytes of shared memory");
      state[owners[k]].grid = plan.steps[owners[k]].cudaKernel->grid;
      residentGrid(*plan.steps[owners[k]].cudaKernel, state[owners[k]]);
      kernelKeys.push_back(ref.key);
    }
    for (const Step &s : plan.steps)
      hasCollectives |= s.kind == Step::Kind::Collective;
    capturedGroup = processGroupGeneration();
    for (const std::string &f : fallbacks)
      std::fprintf(stderr, "rfuse: warning: %s\n", f.c_str());
    planResultBinding();
    chooseGraphMode();
  }

  ~Impl() override {
    dropGraphs();
    loop.releaseEverything(*this);
    for (const std::string &key : kernelKeys) // after the graphs that launch them are gone
      dev.releaseFunction(key);
    for (CUevent e : collectiveDone)
      if (e)
        driver().cuEventDestroy(e);
    if (forkEvent)
      driver().cuEventDestroy(forkEvent);
  }
  std::vector<std::string> kernelKeys; // the modules this program holds
  std::mutex mu; // one run at a time: the loop and the graphs are the program's

  // ---- StepBackend -------------------------------------------------------------------------

  Buffer allocate(size_t bytes) override { return dev.alloc(bytes); }
  void release(Buffer b, size_t bytes) override { dev.release(b, bytes); }

  // A kernel whose clusters loop over its tiles launches only the clusters that are resident at
  // once (KernelSpec::residentClusters); where the driver cannot say, its planned grid (one
  // cluster a tile) runs, correct but without the overlap.
  void residentGrid(const KernelSpec &k, StepState &st) {
    if (!k.residentClusters || !driver().cuOccupancyMaxActiveClusters)
      return;
    CUlaunchConfig config{};
    config.gridDimX = k.grid;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = (unsigned)k.blockSize;
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = (unsigned)k.dynamicSharedBytes;
    config.hStream = dev.stream;
    int clusters = 0;
    if (driver().cuOccupancyMaxActiveClusters(&clusters, st.fn, &config) == CUDA_SUCCESS && clusters > 0)
      st.grid = (unsigned)std::min<int64_t>(k.grid, (int64_t)clusters * k.clusterSize);
  }

  void launch(const KernelSpec &k, CUfunction fn, unsigned grid, const std::vector<Buffer> &ins,
              const std::vector<Buffer> &outs) {
    std::vector<CUdeviceptr> args(ins.begin(), ins.end());
    args.insert(args.end(), outs.begin(), outs.end());
    std::vector<void *> params;
    for (CUdeviceptr &p : args)
      params.push_back(&p);
    long long batch = k.batch;
    if (k.takesBatch)
      params.push_back(&batch);
    check(driver().cuLaunchKernel(fn, grid, 1, 1, k.blockSize, 1, 1, (unsigned)k.dynamicSharedBytes, dev.stream,
                                  params.data(), nullptr),
          "cuLaunchKernel", "launching kernel " + k.name + " (grid " + std::to_string(grid) + ", block " +
                                std::to_string(k.blockSize) + ")");
  }

  void runKernel(StepLoop &, size_t i, const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) override {
    launch(*plan.steps[i].cudaKernel, state[i].fn, state[i].grid, ins, outs);
  }


  void runLibrary(StepLoop &loop, size_t i, const std::vector<Buffer> &ins, const std::vector<Buffer> &products) override {
    const LibraryCall &call = *plan.steps[i].library;
    Buffer product = products[0];
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
    case LibraryCall::Kind::Recurrent: // (every output of the step; the plan refuses empty layers)
      state[i].recurrent->run(dev, call.recurrent, std::vector<CUdeviceptr>(ins.begin(), ins.end()),
                              std::vector<CUdeviceptr>(products.begin(), products.end()), options.tf32,
                              options.cudnnRnnAlgo);
      break;
    }
  }

  // ---- Collectives: NCCL on the communicator's own stream, forked from the compute stream
  // after the steps before it and joined back before the first step that reads a result (so the
  // all-reduce of one bucket overlaps the backward steps that follow it). The plan keeps a
  // collective's inputs live until then.
  std::vector<CUevent> collectiveDone; // per step
  CUevent forkEvent = nullptr;
  std::vector<size_t> pendingCollectives;

  void runCollective(StepLoop &, size_t i, const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) override {
    const Step &s = plan.steps[i];
    NcclCommunicator *c = activeCommunicator();
    if (!c) { // no group (or a CPU group, of one rank): the reduction over one rank
      if (int world = activeWorldSize(); world != 1)
        throw CudaError("an all-reduce over " + std::to_string(world) + " ranks needs the group's NCCL communicator");
      for (size_t k = 0; k < ins.size(); ++k)
        copyDevice(outs[k], ins[k], plan.slots[s.in[k]].bytes, "an all-reduce over one rank");
      return;
    }
    const DriverApi &api = driver();
    if (!forkEvent)
      check(api.cuEventCreate(&forkEvent, CU_EVENT_DISABLE_TIMING), "cuEventCreate", "an all-reduce");
    collectiveDone.resize(plan.steps.size(), nullptr);
    if (!collectiveDone[i])
      check(api.cuEventCreate(&collectiveDone[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate", "an all-reduce");
    check(api.cuEventRecord(forkEvent, dev.stream), "cuEventRecord", "forking an all-reduce");
    check(api.cuStreamWaitEvent(c->stream, forkEvent, 0), "cuStreamWaitEvent", "forking an all-reduce");
    std::vector<NcclCommunicator::Operand> operands;
    for (size_t k = 0; k < ins.size(); ++k) {
      const codegen::BufferSlot &slot = plan.slots[s.in[k]];
      size_t count = 1;
      for (int64_t d : slot.shape)
        count *= (size_t)d;
      operands.push_back({ins[k], outs[k], count, slot.dtype});
    }
    c->allReduce(operands, s.collectiveMean, c->stream);
    check(api.cuEventRecord(collectiveDone[i], c->stream), "cuEventRecord", "an all-reduce");
    pendingCollectives.push_back(i);
  }

  // The compute stream waits for the pending collectives `reader` reads a result of (all of
  // them with no reader: the end of the run).
  void joinCollectives(const Step *reader) {
    for (auto it = pendingCollectives.begin(); it != pendingCollectives.end();) {
      bool needed = !reader;
      for (int o : plan.steps[*it].out)
        for (int sl : reader ? reader->in : std::vector<int>())
          needed |= plan.root(sl) == plan.root(o);
      if (needed) {
        check(driver().cuStreamWaitEvent(dev.stream, collectiveDone[*it], 0), "cuStreamWaitEvent",
              "joining an all-reduce");
        it = pendingCollectives.erase(it);
      } else {
        ++it;
      }
    }
  }

  HostTensor read(Buffer b, const codegen::BufferSlot &slot) override {
    std::vector<char> bytes(slot.bytes);
    dev.download(b, bytes.size(), [&](size_t off, size_t n, const void *staging) {
      std::memcpy(bytes.data() + off, staging, n);
    });
    return HostTensor::fromBytes(slot.dtype, slot.shape, bytes.data());
  }

  void write(Buffer b, const HostTensor &t) override {
    std::vector<char> bytes = t.toBytes();
    dev.upload(b, bytes.size(), [&](size_t off, size_t n, void *staging) { std::memcpy(staging, bytes.data() + off, n); });
  }

  // ---- Profiling: profile_steps times each step with CUDA events (graphs off) ----------------
  CUevent e0 = nullptr, e1 = nullptr;
  std::vector<double> stepMs;
  int profiledRuns = 0;

  bool timing() const { return options.profileSteps || profiling(); }
  void beforeStep(size_t i) override {
    if (!pendingCollectives.empty())
      joinCollectives(&plan.steps[i]);
    if (timing())
      driver().cuEventRecord(e0, dev.stream);
  }
  void afterStep(size_t i) override {
    if (!timing())
      return;
    const DriverApi &api = driver();
    api.cuEventRecord(e1, dev.stream);
    api.cuEventSynchronize(e1);
    float ms = 0;
    api.cuEventElapsedTime(&ms, e0, e1);
    if (options.profileSteps)
      stepMs[i] += ms;
    const Step &s = plan.steps[i];
    if (profiling() && s.kind != Step::Kind::Alias)
      recordProfile({plan.entry, s.label, s.describe(codegen::Backend::Cuda), s.source, "cuda", ms, s.bytes, s.flops});
  }

  void printProfile() const {
    if (!options.profileSteps || !profiledRuns)
      return;
    double total = 0;
    for (double t : stepMs)
      total += t;
    std::fprintf(stderr, "rfuse step profile (mean of %d runs, total %.4f ms):\n", (int)profiledRuns,
                 total / profiledRuns);
    for (size_t i = 0; i < plan.steps.size(); ++i)
      if (stepMs[i] > 0)
        std::fprintf(stderr, "  %2zu %9.4f ms  %s: %s\n", i, stepMs[i] / profiledRuns, plan.steps[i].label.c_str(),
                     plan.steps[i].describe(codegen::Backend::Cuda).c_str());
  }

  void execute() {
    if (timing() && !e0) {
      driver().cuEventCreate(&e0, 0);
      driver().cuEventCreate(&e1, 0);
    }
    if (options.profileSteps) {
      if (!e0) {
        driver().cuEventCreate(&e0, 0);
        driver().cuEventCreate(&e1, 0);
      }
      stepMs.resize(plan.steps.size(), 0.0);
      ++profiledRuns;
    }
    pendingCollectives.clear();
    loop.run(*this);
    joinCollectives(nullptr);
  }

  // ---- Running on the caller's device memory, and CUDA graphs -------------------------------
  // Arguments and results live in the caller's tensors (bound to their slots); the loop owns the
  // intermediates. From the second run a program whose steps are all device work is replayed as
  // a CUDA graph, which holds every address it uses, so its intermediates are then fixed for the
  // program's life (keepBuffers). Two ways to give a graph the caller's memory:
  //  - staged: when arguments and results are small (a forward pass, an inference), one graph
  //    over internal buffers, with the arguments copied in and the results copied out around
  //    each replay (device-to-device, microseconds);
  //  - by address: otherwise, one graph per set of caller addresses (a training loop alternates
  //    between two sets), at most maxGraphs; a program whose addresses keep changing runs its
  //    steps directly, which for one or two big kernels costs no more than a replay.
  struct Graph {
    std::vector<Buffer> key; // argument then result addresses (empty: the staged graph)
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
  };
  std::vector<Graph> graphs;
  bool graphFailed = false;
  int executions = 0;
  static constexpr size_t maxGraphs = 4;
  static constexpr size_t stagedBytesLimit = 8u << 20;

  bool graphable() const {
    if (graphFailed || options.profileSteps || profiling() || !options.cudaGraphs)
      return false;
    for (const Step &s : plan.steps)
      if (s.kind == Step::Kind::Host)
        return false;
    return true;
  }
  // How replays get the caller's memory, fixed by the plan (see above); chosen once.
  bool staged = false, keyed = false;
  void chooseGraphMode() {
    size_t deviceSteps = 0, externalBytes = 0;
    for (const Step &s : plan.steps)
      deviceSteps += s.kind == Step::Kind::Kernel || s.kind == Step::Kind::Library || s.kind == Step::Kind::Collective;
    for (int sl : plan.argSlots)
      externalBytes += plan.slots[sl].bytes;
    for (int sl : plan.resultSlots)
      externalBytes += plan.slots[sl].bytes;
    staged = deviceSteps >= 2 && externalBytes <= stagedBytesLimit;
    keyed = !staged && deviceSteps >= 4;
  }

  void dropGraphs() {
    for (Graph &g : graphs) {
      if (g.exec)
        driver().cuGraphExecDestroy(g.exec);
      if (g.graph)
        driver().cuGraphDestroy(g.graph);
    }
    graphs.clear();
    if (loop.keepBuffers)
      loop.unfix(*this);
  }

  void copyDevice(Buffer dst, Buffer src, size_t bytes, const char *what) {
    if (dst != src && bytes)
      check(driver().cuMemcpyDtoDAsync(dst, src, bytes, dev.stream), "cuMemcpyDtoDAsync", what);
  }

  // Result k is written into the caller's buffer by the steps, unless the value is an argument,
  // an alias, a constant or an earlier result: those are copied after the steps.
  std::vector<bool> resultBound;
  void planResultBinding() {
    resultBound.assign(plan.resultSlots.size(), false);
    std::vector<bool> seen(plan.slots.size());
    for (size_t k = 0; k < plan.resultSlots.size(); ++k) {
      int sl = plan.resultSlots[k];
      const codegen::BufferSlot &slot = plan.slots[sl];
      resultBound[k] = slot.argument < 0 && slot.aliasOf < 0 && !slot.constant && !seen[sl];
      seen[sl] = true;
    }
  }

  // The steps on the caller's memory, directly (or while capturing).
  void executeBound(const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) {
    for (size_t k = 0; k < ins.size(); ++k)
      loop.bind(plan.argSlots[k], ins[k]);
    for (size_t k = 0; k < outs.size(); ++k)
      if (resultBound[k])
        loop.bind(plan.resultSlots[k], outs[k]);
    struct Unbind {
      Impl &impl;
      ~Unbind() {
        for (int sl : impl.plan.argSlots)
          impl.loop.unbind(sl);
        for (int sl : impl.plan.resultSlots)
          impl.loop.unbind(sl);
        impl.loop.releaseAll(impl);
      }
    } unbind{*this};
    execute();
    for (size_t k = 0; k < outs.size(); ++k)
      if (!resultBound[k])
        copyDevice(outs[k], loop.buffer(*this, plan.resultSlots[k]), plan.slots[plan.resultSlots[k]].bytes,
                   "copying a result");
  }

  // Captures `body` (steps enqueued on the stream) into a new graph for `key`.
  bool capture(std::vector<Buffer> key, const std::function<void()> &body) {
    loop.keepBuffers = true;
    const DriverApi &api = driver();
    check(api.cuStreamBeginCapture(dev.stream, CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture",
          "capturing a CUDA graph");
    loop.capturing = true;
    try {
      body();
    } catch (...) {
      loop.capturing = false;
      CUgraph g = nullptr;
      api.cuStreamEndCapture(dev.stream, &g);
      if (g)
        api.cuGraphDestroy(g);
      graphFailed = true;
      dropGraphs();
      throw;
    }
    loop.capturing = false;
    Graph g;
    g.key = std::move(key);
    CUresult ended = api.cuStreamEndCapture(dev.stream, &g.graph);
    if (ended != CUDA_SUCCESS || api.cuGraphInstantiateWithFlags(&g.exec, g.graph, 0) != CUDA_SUCCESS) {
      if (g.graph)
        api.cuGraphDestroy(g.graph);
      std::fprintf(stderr, "rfuse: warning: CUDA graph capture failed; running the steps one by one\n");
      graphFailed = true;
      dropGraphs();
      return false;
    }
    graphs.push_back(std::move(g));
    return true;
  }

  void launch(const Graph &g) {
    check(driver().cuGraphLaunch(g.exec, dev.stream), "cuGraphLaunch", "replaying the program's CUDA graph");
  }

  // Every intermediate gets its buffer for the program's life (a graph holds the addresses).
  void fixIntermediates(bool withExternals) {
    for (size_t i = 0; i < plan.slots.size(); ++i)
      if (plan.slots[i].aliasOf < 0 && (withExternals || (plan.slots[i].argument < 0 && !isBoundResult((int)i))))
        loop.buffer(*this, (int)i);
  }
  bool isBoundResult(int slot) const {
    for (size_t k = 0; k < plan.resultSlots.size(); ++k)
      if (resultBound[k] && plan.resultSlots[k] == slot)
        return true;
    return false;
  }

  // Graphs captured under another process group (a communicator since destroyed, or none) would
  // replay its collectives: a program with collectives drops them when the group changes.
  bool hasCollectives = false;
  uint64_t capturedGroup = 0;

  void run(const std::vector<Buffer> &ins, const std::vector<Buffer> &outs) {
    options = currentOptions();
    if (hasCollectives && capturedGroup != processGroupGeneration()) {
      dropGraphs();
      executions = 0; // the first run under the new group runs the steps directly again
      capturedGroup = processGroupGeneration();
    }
    if (ins.size() != plan.argSlots.size() || outs.size() != plan.resultSlots.size())
      throw CudaError("the program takes " + std::to_string(plan.argSlots.size()) + " inputs and " +
                      std::to_string(plan.resultSlots.size()) + " outputs, got " + std::to_string(ins.size()) +
                      " and " + std::to_string(outs.size()));
    // Once a staged graph exists its argument and result slots are fixed buffers: a run without
    // the graph (profiling, graphs switched off) stages through them too, never rebinding them.
    bool stagedGraph = staged && !graphs.empty();
    if (!stagedGraph && (!graphable() || executions++ == 0 || !(staged || keyed))) { // the first run tunes
      executeBound(ins, outs);
      return;
    }
    if (staged) {
      if (graphs.empty()) {
        fixIntermediates(true);
        if (!capture({}, [&] { execute(); })) {
          executeBound(ins, outs);
          return;
        }
      }
      for (size_t k = 0; k < ins.size(); ++k)
        copyDevice(loop.buffer(*this, plan.argSlots[k]), ins[k], plan.slots[plan.argSlots[k]].bytes, "staging an argument");
      if (graphable())
        launch(graphs.front());
      else
        execute();
      for (size_t k = 0; k < outs.size(); ++k)
        copyDevice(outs[k], loop.buffer(*this, plan.resultSlots[k]), plan.slots[plan.resultSlots[k]].bytes,
                   "copying a result");
      return;
    }
    std::vector<Buffer> key(ins);
    key.insert(key.end(), outs.begin(), outs.end());
    for (const Graph &g : graphs)
      if (g.key == key) {
        launch(g);
        return;
      }
    if (graphs.size() >= maxGraphs) { // addresses that keep changing: no graph pays for itself
      executeBound(ins, outs);
      return;
    }
    if (!loop.keepBuffers) {
      loop.keepBuffers = true;
      fixIntermediates(false);
    }
    if (!capture(key, [&] { executeBound(ins, outs); }))
      executeBound(ins, outs);
    else
      launch(graphs.back());
  }
};

GpuProgram::GpuProgram(codegen::ExecutionPlan plan, const KernelLoader &kernels, runtime::HostStepRunner hostSteps,
                       std::optional<bool> tf32)
    : impl(std::make_unique<Impl>(std::move(plan), kernels, std::move(hostSteps), tf32)) {}
GpuProgram::~GpuProgram() = default;

const std::vector<std::string> &GpuProgram::hostFallbacks() const { return impl->fallbacks; }

void GpuProgram::run(const std::vector<Buffer> &inputs, const std::vector<Buffer> &outputs) {
  std::lock_guard<std::mutex> lock(impl->mu);
  impl->run(inputs, outputs);
}

namespace {
// Device tensors for the HostTensor API: inputs uploaded, outputs allocated for the results.
std::vector<Tensor> uploadAll(const std::vector<HostTensor> &inputs) {
  std::vector<Tensor> t;
  for (const HostTensor &h : inputs)
    t.push_back(fromHostTensor(h, rfuse::Device::Cuda));
  return t;
}
std::vector<Buffer> addresses(const std::vector<Tensor> &ts) {
  std::vector<Buffer> b;
  for (const Tensor &t : ts)
    b.push_back((Buffer)t.data());
  return b;
}
} // namespace

std::vector<Tensor> GpuProgram::allocateResults() const {
  std::vector<Tensor> out;
  for (int sl : impl->plan.resultSlots)
    out.push_back(emptyTensor(rfuse::Device::Cuda, impl->plan.slots[sl].dtype, impl->plan.slots[sl].shape));
  return out;
}

std::vector<HostTensor> GpuProgram::run(const std::vector<HostTensor> &inputs) {
  if (inputs.size() != impl->plan.argSlots.size())
    throw CudaError("the program takes " + std::to_string(impl->plan.argSlots.size()) + " inputs, got " +
                    std::to_string(inputs.size()));
  std::vector<Tensor> in = uploadAll(inputs), out = allocateResults();
  std::vector<Buffer> ins = addresses(in), outs = addresses(out);
  run(ins, outs);
  std::vector<HostTensor> results;
  for (const Tensor &t : out)
    results.push_back(toHostTensor(t));
  return results;
}

GpuTiming GpuProgram::benchmark(const std::vector<HostTensor> &inputs, int iterations) {
  std::vector<Tensor> in = uploadAll(inputs), out = allocateResults();
  std::vector<Buffer> ins = addresses(in), outs = addresses(out);
  const DriverApi &api = driver();
  CUevent start, stop;
  check(api.cuEventCreate(&start, 0), "cuEventCreate", "benchmark");
  check(api.cuEventCreate(&stop, 0), "cuEventCreate", "benchmark");
  std::vector<double> times;
  // Inputs and outputs stay on the device between runs.
  for (int w = 0; w < 3; ++w)
    run(ins, outs);
  impl->stepMs.assign(impl->stepMs.size(), 0.0); // the profile leaves out warm-up and tuning
  impl->profiledRuns = 0;
  for (int it = 0; it < iterations; ++it) {
    api.cuEventRecord(start, impl->dev.stream);
    run(ins, outs);
    api.cuEventRecord(stop, impl->dev.stream);
    check(api.cuEventSynchronize(stop), "cuEventSynchronize", "benchmark");
    float ms = 0;
    api.cuEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  api.cuEventDestroy(start);
  api.cuEventDestroy(stop);
  impl->printProfile();
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front(), iterations};
}

} // namespace rfuse::cuda
