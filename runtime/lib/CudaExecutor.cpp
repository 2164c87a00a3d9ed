#include "CudaExecutor.h"
#include "CudaApi.h"

#include "rfuse/Codegen/CudaCodegen.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

using namespace mlir;

namespace rfuse::cuda {
namespace {

std::vector<int64_t> shapeOf(Value v) {
  auto s = llvm::cast<RankedTensorType>(v.getType()).getShape();
  return {s.begin(), s.end()};
}
size_t bytesOf(Value v) {
  int64_t n = 1;
  for (int64_t d : shapeOf(v))
    n *= d;
  return (size_t)n * dtypeSize(dtypeOf(v));
}

bool rowGridWave() {
  const char *v = std::getenv("RFUSE_ROW_GRID");
  return v && std::strcmp(v, "wave") == 0;
}

bool allowTf32() {
  const char *v = std::getenv("RFUSE_ALLOW_TF32");
  return !v || std::strcmp(v, "0") != 0;
}

// The device, its context and stream, a caching allocator and the cuBLASLt handle, shared by every
// program in the process.
class Device {
public:
  static Device &get() {
    static Device d;
    return d;
  }
  CUstream stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  CUdeviceptr workspace = 0;
  size_t workspaceSize = 32u << 20;
  int sms = 0;
  std::string arch;

  CUdeviceptr alloc(size_t bytes) {
    bytes = std::max<size_t>(256, (bytes + 255) / 256 * 256);
    std::lock_guard<std::mutex> lock(mu);
    auto it = freeLists.find(bytes);
    if (it != freeLists.end() && !it->second.empty()) {
      CUdeviceptr p = it->second.back();
      it->second.pop_back();
      return p;
    }
    CUdeviceptr p = 0;
    CUresult r = driver().cuMemAlloc(&p, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) { // give cached blocks back and try once more
      releaseCached();
      r = driver().cuMemAlloc(&p, bytes);
    }
    check(r, "cuMemAlloc", "allocating " + std::to_string(bytes) + " bytes of device memory");
    return p;
  }
  void release(CUdeviceptr p, size_t bytes) {
    bytes = std::max<size_t>(256, (bytes + 255) / 256 * 256);
    std::lock_guard<std::mutex> lock(mu);
    freeLists[bytes].push_back(p);
  }

  CUfunction function(const std::string &name, const CompiledKernel &k) {
    std::lock_guard<std::mutex> lock(mu);
    std::string key = name + "@" + std::to_string(std::hash<std::string>()(std::string(k.cubin.begin(), k.cubin.end())));
    auto it = functions.find(key);
    if (it != functions.end())
      return it->second;
    CUmodule mod;
    check(driver().cuModuleLoadData(&mod, k.cubin.data()), "cuModuleLoadData", "loading kernel " + name);
    CUfunction fn;
    check(driver().cuModuleGetFunction(&fn, mod, name.c_str()), "cuModuleGetFunction", "kernel " + name);
    functions[key] = fn;
    return fn;
  }

private:
  std::mutex mu;
  std::map<size_t, std::vector<CUdeviceptr>> freeLists;
  std::map<std::string, CUfunction> functions;

  void releaseCached() {
    for (auto &[size, list] : freeLists)
      for (CUdeviceptr p : list)
        driver().cuMemFree(p);
    freeLists.clear();
  }

  Device() {
    const DeviceInfo &info = deviceInfo();
    if (!info.available)
      throw CudaError("no usable CUDA device: " + info.reason);
    const DriverApi &api = driver();
    CUdevice dev;
    check(api.cuDeviceGet(&dev, 0), "cuDeviceGet", "opening device 0");
    CUcontext ctx;
    check(api.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", "opening device 0");
    check(api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", "opening device 0");
    check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "creating a stream");
    sms = info.multiprocessors;
    arch = info.arch();
  }

public:
  void ensureCublasLt() {
    if (lt)
      return;
    const CublasLtApi &api = cublasLt();
    if (!api.loaded)
      throw CudaError("cuBLASLt is not available: " + api.error);
    if (api.cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
      throw CudaError("cublasLtCreate failed");
    workspace = alloc(workspaceSize);
  }
};

cudaDataType_t cudaType(DType d) {
  switch (d) {
  case DType::F64: return CUDA_R_64F;
  case DType::F16: return CUDA_R_16F;
  case DType::BF16: return CUDA_R_16BF;
  default: return CUDA_R_32F;
  }
}

} // namespace

struct GpuProgram::Impl {
  ModuleOp module;
  std::string entry;
  Device &dev = Device::get();

  enum class Kind { Kernel, Matmul, Conv, Pool, Alias, Host };
  struct Step {
    Kind kind;
    Operation *op = nullptr;               // the call / op in the entry function
    std::optional<KernelSpec> kernel;      // Kind::Kernel
    CUfunction fn = nullptr;
    std::optional<MatmulSpec> matmul;      // Kind::Matmul
    std::optional<ConvSpec> conv;          // Kind::Conv
    std::optional<PoolSpec> pool;          // Kind::Pool
    CUfunction epilogueFn = nullptr;
    struct Lt {                            // cuBLASLt descriptors and the tuned algorithm
      cublasLtMatmulDesc_t desc = nullptr;
      cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
      cublasLtMatmulAlgo_t algo{};
      bool ready = false;
      ~Lt() {
        const CublasLtApi &api = cublasLt();
        if (la) api.cublasLtMatrixLayoutDestroy(la);
        if (lb) api.cublasLtMatrixLayoutDestroy(lb);
        if (lc) api.cublasLtMatrixLayoutDestroy(lc);
        if (desc) api.cublasLtMatmulDescDestroy(desc);
      }
    };
    std::shared_ptr<Lt> lt;
    struct Dnn {                           // cuDNN descriptors and the chosen algorithm
      cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
      cudnnFilterDescriptor_t filter = nullptr;
      cudnnConvolutionDescriptor_t conv = nullptr;
      cudnnPoolingDescriptor_t pool = nullptr;
      cudnnConvolutionFwdAlgo_t algo{};
      cudnnConvolutionBwdDataAlgo_t dataAlgo{};
      cudnnConvolutionBwdFilterAlgo_t filterAlgo{};
      bool tf32 = false;
      ~Dnn() {
        const CudnnApi &api = cudnn();
        if (x) api.cudnnDestroyTensorDescriptor(x);
        if (y) api.cudnnDestroyTensorDescriptor(y);
        if (bias) api.cudnnDestroyTensorDescriptor(bias);
        if (filter) api.cudnnDestroyFilterDescriptor(filter);
        if (conv) api.cudnnDestroyConvolutionDescriptor(conv);
        if (pool) api.cudnnDestroyPoolingDescriptor(pool);
      }
    };
    std::shared_ptr<Dnn> dnn;
    bool ltTf32 = false;                   // the TF32 setting `lt` was prepared under
    // A large f32 A^T B: cuBLASLt's kernels for that layout run at ~65% of its best (4096^3:
    // 0.53 vs 0.34 ms on an H200), so A is transposed first (cublasLtMatrixTransform) and the
    // product runs as A' B.
    bool transposeLhsFirst = false;
    std::vector<int> in, out;              // slot ids
  };
  std::vector<Step> steps;
  llvm::DenseMap<Value, int> slotOf;
  struct Slot {
    Value value;
    size_t bytes;
    int lastUse = -1;         // step index
    bool persistent = false;  // constants
    int aliasOf = -1;         // a reshape's result shares its operand's (root) buffer
    CUdeviceptr ptr = 0;
  };
  std::vector<Slot> slots;
  std::vector<int> argSlots, resultSlots;
  std::vector<std::string> fallbacks;

  int slot(Value v) {
    auto it = slotOf.find(v);
    if (it != slotOf.end())
      return it->second;
    slots.push_back({v, bytesOf(v)});
    return slotOf[v] = slots.size() - 1;
  }

  // Kernels to compile, and which step (and whether its epilogue) each belongs to.
  std::vector<std::string> names, sources;
  std::vector<std::pair<size_t, bool>> kernelOf;

  // Makes step `s` (the next one) run `p`: a generated kernel, a cuBLASLt matmul (+ epilogue
  // kernel), or, when codegen has nothing, the host interpreter.
  void adopt(Step &s, const KernelPlan &p, const std::string &label) {
    auto addKernel = [&](const KernelSpec &k, bool epilogue) {
      kernelOf.push_back({steps.size(), epilogue});
      names.push_back(k.name);
      sources.push_back(k.source);
    };
    if (p.kernel) {
      s.kind = Kind::Kernel;
      s.kernel = p.kernel;
      addKernel(*p.kernel, false);
    } else if (p.matmul) {
      s.kind = Kind::Matmul;
      s.matmul = p.matmul;
      const char *e = std::getenv("RFUSE_LT_TRANSPOSE_A");
      MatmulSpec &m = *s.matmul;
      if (m.transposeA && !m.transposeB && m.dtype == DType::F32 && m.batch == 1 && !m.batchedA &&
          m.m * m.k >= ((int64_t)1 << 22) && !(e && std::string(e) == "0")) {
        s.transposeLhsFirst = true;
        m.transposeA = false;
      }
      if (p.matmul->epilogue)
        addKernel(*p.matmul->epilogue, true);
    } else if ((p.conv || p.pool) && !cudnn().loaded) {
      s.kind = Kind::Host;
      fallbacks.push_back(label + ": cuDNN is not available (" + cudnn().error + ")");
    } else if (p.conv) {
      s.kind = Kind::Conv;
      s.conv = p.conv;
      if (p.conv->epilogue)
        addKernel(*p.conv->epilogue, true);
    } else if (p.pool) {
      s.kind = Kind::Pool;
      s.pool = p.pool;
    } else {
      s.kind = Kind::Host;
      fallbacks.push_back(label + ": " + p.unsupported);
    }
  }

  void plan() {
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn)
      throw CudaError("no function '" + entry + "'");
    for (BlockArgument a : fn.getArguments())
      argSlots.push_back(slot(a));
    for (Operation &op : fn.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (Value v : ret.getOperands())
          resultSlots.push_back(slot(v));
        continue;
      }
      Step s;
      s.op = &op;
      for (Value v : op.getOperands())
        s.in.push_back(slot(v));
      for (Value v : op.getResults())
        s.out.push_back(slot(v));
      if (isa<ConstantOp>(op)) {
        s.kind = Kind::Host; // computed once on the host, kept on the device
        slots[s.out[0]].persistent = true;
      } else if (isa<ReshapeOp>(op)) {
        s.kind = Kind::Alias;
        int root = s.in[0];
        while (slots[root].aliasOf >= 0)
          root = slots[root].aliasOf;
        slots[s.out[0]].aliasOf = root;
      } else if (auto call = dyn_cast<func::CallOp>(op)) {
        adopt(s, planKernel(module.lookupSymbol<func::FuncOp>(call.getCallee())),
              call.getCallee().str());
      } else {
        adopt(s, planOperation(&op, "op" + std::to_string(steps.size()) + "_" +
                                        op.getName().stripDialect().str()),
              op.getName().getStringRef().str());
        // A one-op kernel takes each distinct operand once (mul(x, x) has one input); the host
        // interpreter and cuDNN's pooling calls (runPool reads operands by position) take the
        // op's operands as they are.
        if (s.kind != Kind::Host && s.kind != Kind::Pool) {
          std::vector<int> distinct;
          for (int sl : s.in)
            if (!llvm::is_contained(distinct, sl))
              distinct.push_back(sl);
          s.in = distinct;
        }
      }
      steps.push_back(std::move(s));
    }
    auto rootOf = [&](int sl) { return slots[sl].aliasOf >= 0 ? slots[sl].aliasOf : sl; };
    for (size_t i = 0; i < steps.size(); ++i)
      for (int sl : steps[i].in)
        slots[rootOf(sl)].lastUse = std::max(slots[rootOf(sl)].lastUse, (int)i);
    for (int sl : resultSlots)
      slots[rootOf(sl)].lastUse = INT32_MAX;
    // Compile every kernel of the program in parallel (through the kernel cache).
    std::vector<CompiledKernel> compiled = compileKernels(names, sources, dev.arch);
    for (size_t i = 0; i < kernelOf.size(); ++i) {
      Step &s = steps[kernelOf[i].first];
      (kernelOf[i].second ? s.epilogueFn : s.fn) = dev.function(names[i], compiled[i]);
    }
    if (!fallbacks.empty())
      for (const std::string &f : fallbacks)
        llvm::errs() << "rfuse: warning: " << f << "\n";
  }

  CUdeviceptr ptr(int sl) {
    Slot &s = slots[sl];
    if (!s.ptr)
      s.ptr = dev.alloc(s.bytes);
    return s.ptr;
  }

  void launch(const KernelSpec &k, CUfunction fn, std::vector<CUdeviceptr> args) {
    std::vector<void *> params;
    for (CUdeviceptr &p : args)
      params.push_back(&p);
    unsigned block = k.blockSize, grid = 1;
    auto cap = [&](int64_t g) { return (unsigned)std::max<int64_t>(1, std::min<int64_t>(g, 2147483647)); };
    switch (k.launch) {
    case LaunchKind::GridStride:
      grid = cap(std::min<int64_t>((k.elements / k.vectorWidth + block - 1) / block, (int64_t)dev.sms * 32));
      break;
    case LaunchKind::BlockPerRow: // a block per row (RFUSE_ROW_GRID=wave: one resident wave)
      grid = cap(rowGridWave() ? std::min<int64_t>(k.rows, (int64_t)dev.sms * std::max(1, 2048 / (int)block))
                               : k.rows);
      break;
    case LaunchKind::ThreadPerColumn:
      grid = cap((k.columns + block - 1) / block);
      break;
    }
    check(driver().cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, dev.stream, params.data(), nullptr),
          "cuLaunchKernel", "launching kernel " + k.name + " (grid " + std::to_string(grid) +
                                ", block " + std::to_string(block) + ")");
  }

  // Creates the cuBLASLt descriptors of a matmul step once, and picks the fastest of the
  // heuristic's top algorithms by timing each (the first run of the program pays for it).
  void prepareMatmul(Step &s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr d,
                     const void *alpha, const void *beta) {
    const MatmulSpec &m = *s.matmul;
    const CublasLtApi &lt = cublasLt();
    auto ok = [&](cublasStatus_t st, const char *what) {
      if (st != CUBLAS_STATUS_SUCCESS)
        throw CudaError(std::string("cuBLASLt ") + what + " failed (status " + std::to_string(st) + ")");
    };
    s.lt = std::make_shared<Step::Lt>();
    Step::Lt &L = *s.lt;
    cublasComputeType_t compute = m.dtype == DType::F64 ? CUBLAS_COMPUTE_64F
                                  : m.dtype == DType::F32 && allowTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                          : CUBLAS_COMPUTE_32F;
    cudaDataType_t scale = m.dtype == DType::F64 ? CUDA_R_64F : CUDA_R_32F, data = cudaType(m.dtype);
    ok(lt.cublasLtMatmulDescCreate(&L.desc, compute, scale), "MatmulDescCreate");
    // Row-major C = A B is column-major C^T = B^T A^T: cuBLASLt's A is our B and vice versa.
    cublasOperation_t opA = m.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N, opB = m.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt.cublasLtMatmulDescSetAttribute(L.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
    lt.cublasLtMatmulDescSetAttribute(L.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
    if (m.biasInput >= 0) {
      cublasLtEpilogue_t epi = m.activation == MatmulSpec::Activation::Relu ? CUBLASLT_EPILOGUE_RELU_BIAS
                               : m.activation == MatmulSpec::Activation::GeluTanh ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                                  : CUBLASLT_EPILOGUE_BIAS;
      lt.cublasLtMatmulDescSetAttribute(L.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    }
    uint64_t aRows = m.transposeB ? m.k : m.n, aCols = m.transposeB ? m.n : m.k;
    uint64_t bRows = m.transposeA ? m.m : m.k, bCols = m.transposeA ? m.k : m.m;
    ok(lt.cublasLtMatrixLayoutCreate(&L.la, data, aRows, aCols, aRows), "MatrixLayoutCreate");
    ok(lt.cublasLtMatrixLayoutCreate(&L.lb, data, bRows, bCols, bRows), "MatrixLayoutCreate");
    ok(lt.cublasLtMatrixLayoutCreate(&L.lc, data, m.n, m.m, m.n), "MatrixLayoutCreate");
    if (m.batch > 1) {
      int32_t count = (int32_t)m.batch;
      int64_t sa = m.batchedB ? (int64_t)(m.k * m.n) : 0, sb = m.batchedA ? (int64_t)(m.m * m.k) : 0,
              sc = (int64_t)(m.m * m.n);
      for (auto [l, st] : {std::pair{L.la, sa}, std::pair{L.lb, sb}, std::pair{L.lc, sc}}) {
        lt.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
        lt.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st);
      }
    }
    cublasLtMatmulPreference_t pref;
    lt.cublasLtMatmulPreferenceCreate(&pref);
    lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &dev.workspaceSize, sizeof dev.workspaceSize);
    // Up to 32 candidates: with an epilogue (GELU) the heuristic's first few are often not the
    // fastest; timing more of them is a one-off cost of the first run.
    cublasLtMatmulHeuristicResult_t heur[32] = {};
    int found = 0;
    ok(lt.cublasLtMatmulAlgoGetHeuristic(dev.lt, L.desc, L.la, L.lb, L.lc, L.lc, pref, 32, heur, &found),
       "AlgoGetHeuristic");
    lt.cublasLtMatmulPreferenceDestroy(pref);
    if (!found)
      throw CudaError("cuBLASLt found no algorithm for this matmul");
    L.algo = heur[0].algo;
    // Time the candidates on this very problem when it is big enough for it to matter.
    if (found > 1 && (double)m.batch * m.m * m.n * m.k >= 1e9) {
      const DriverApi &api = driver();
      CUevent e0, e1;
      api.cuEventCreate(&e0, 0);
      api.cuEventCreate(&e1, 0);
      float best = 1e30f;
      for (int i = 0; i < found; ++i) {
        float total = 0;
        bool failed = false;
        for (int rep = 0; rep < 3 && !failed; ++rep) {
          api.cuEventRecord(e0, dev.stream);
          failed = lt.cublasLtMatmul(dev.lt, L.desc, alpha, (void *)b, L.la, (void *)a, L.lb, beta,
                                     (void *)c, L.lc, (void *)d, L.lc, &heur[i].algo, (void *)dev.workspace,
                                     dev.workspaceSize, (cudaStream_t)dev.stream) != CUBLAS_STATUS_SUCCESS;
          api.cuEventRecord(e1, dev.stream);
          api.cuEventSynchronize(e1);
          float ms = 0;
          api.cuEventElapsedTime(&ms, e0, e1);
          if (rep > 0)
            total += ms;
        }
        if (!failed && total < best) {
          best = total;
          L.algo = heur[i].algo;
        }
      }
    }
    L.ready = true;
  }

  void runMatmul(Step &s) {
    const MatmulSpec &m = *s.matmul;
    dev.ensureCublasLt();
    const CublasLtApi &lt = cublasLt();
    auto in = [&](int i) { return ptr(s.in[i]); };
    CUdeviceptr lhs = in(m.lhsInput);
    if (s.transposeLhsFirst)
      lhs = transposed(in(m.lhsInput), m.k, m.m);
    CUdeviceptr out = ptr(s.out[0]);
    // The product goes to the output unless a generated epilogue follows.
    CUdeviceptr product = out;
    size_t productBytes = (size_t)m.batch * m.m * m.n * dtypeSize(m.dtype);
    bool tempProduct = m.epilogue && !m.outputIsProduct;
    if (tempProduct)
      product = dev.alloc(productBytes);
    double one64 = 1, zero64 = 0, alpha64 = m.alpha;
    float one32 = 1, zero32 = 0, alpha32 = (float)m.alpha;
    bool residual = m.residualInput >= 0;
    const void *alpha = m.dtype == DType::F64 ? (const void *)&alpha64 : (const void *)&alpha32;
    const void *beta = m.dtype == DType::F64 ? (const void *)(residual ? &one64 : &zero64)
                                             : (const void *)(residual ? &one32 : &zero32);
    CUdeviceptr c = residual ? in(m.residualInput) : product;
    if (!s.lt || s.ltTf32 != allowTf32()) {
      s.ltTf32 = allowTf32();
      prepareMatmul(s, lhs, in(m.rhsInput), c, product, alpha, beta);
    }
    Step::Lt &L = *s.lt;
    if (m.biasInput >= 0) {
      CUdeviceptr bias = in(m.biasInput);
      lt.cublasLtMatmulDescSetAttribute(L.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    }
    cublasStatus_t st = lt.cublasLtMatmul(dev.lt, L.desc, alpha, (void *)in(m.rhsInput), L.la,
                                          (void *)lhs, L.lb, beta, (void *)c, L.lc,
                                          (void *)product, L.lc, &L.algo, (void *)dev.workspace,
                                          dev.workspaceSize, (cudaStream_t)dev.stream);
    if (st != CUBLAS_STATUS_SUCCESS)
      throw CudaError("cuBLASLt matmul (" + std::to_string(m.m) + "x" + std::to_string(m.n) + "x" +
                      std::to_string(m.k) + ") failed (status " + std::to_string(st) + ")");
    if (m.epilogue)
      runEpilogue(s, *m.epilogue, m.epilogueInputs, m.outputIsProduct, product,
                  tempProduct ? productBytes : 0);
    if (s.transposeLhsFirst)
      releaseTemp(lhs, (size_t)m.m * m.k * 4);
  }

  // A temporary buffer back to the allocator (stream-ordered), or kept for the program's CUDA
  // graph, which holds its address.
  void releaseTemp(CUdeviceptr p, size_t bytes) {
    if (fixedBuffers)
      fixedTemps.push_back({p, bytes});
    else
      dev.release(p, bytes);
  }

  // The row-major [cols, rows] transpose of row-major f32 `src` [rows, cols], in a temporary.
  CUdeviceptr transposed(CUdeviceptr src, int64_t rows, int64_t cols) {
    const CublasLtApi &lt = cublasLt();
    CUdeviceptr dst = dev.alloc((size_t)rows * cols * 4);
    cublasLtMatrixTransformDesc_t desc;
    cublasLtMatrixLayout_t a, c;
    lt.cublasLtMatrixTransformDescCreate(&desc, CUDA_R_32F);
    cublasOperation_t op = CUBLAS_OP_T;
    lt.cublasLtMatrixTransformDescSetAttribute(desc, CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSA, &op, sizeof op);
    // Column-major views: src is [cols, rows] (ld cols), dst is [rows, cols] (ld rows).
    lt.cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, cols, rows, cols);
    lt.cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, rows, cols, rows);
    float one = 1, zero = 0;
    cublasStatus_t st = lt.cublasLtMatrixTransform(dev.lt, desc, &one, (const void *)src, a, &zero, nullptr,
                                                   nullptr, (void *)dst, c, (cudaStream_t)dev.stream);
    lt.cublasLtMatrixLayoutDestroy(a);
    lt.cublasLtMatrixLayoutDestroy(c);
    lt.cublasLtMatrixTransformDescDestroy(desc);
    if (st != CUBLAS_STATUS_SUCCESS)
      throw CudaError("cuBLASLt matrix transform failed (status " + std::to_string(st) + ")");
    return dst;
  }

  // The generated kernel after a library call: reads the library's result `product` and the
  // step's inputs, writes the step's outputs (all of them, or all but the first when that is the
  // product itself). A temporary product (tempBytes > 0) goes back to the allocator, stream-
  // ordered: later users of the memory run after the epilogue.
  void runEpilogue(const Step &s, const KernelSpec &epilogue, const std::vector<int> &inputs,
                   bool outputIsProduct, CUdeviceptr product, size_t tempBytes) {
    std::vector<CUdeviceptr> args = {product};
    for (int i : inputs)
      args.push_back(ptr(s.in[i]));
    for (size_t o = outputIsProduct ? 1 : 0; o < s.out.size(); ++o)
      args.push_back(ptr(s.out[o]));
    launch(epilogue, s.epilogueFn, args);
    if (tempBytes && fixedBuffers)
      fixedTemps.push_back({product, tempBytes});
    else if (tempBytes)
      dev.release(product, tempBytes);
  }

  // ---- cuDNN ----------------------------------------------------------------------------------

  static cudnnDataType_t cudnnType(DType d) {
    switch (d) {
    case DType::F64: return CUDNN_DATA_DOUBLE;
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
    }
  }
  static void ok(cudnnStatus_t st, const char *what) {
    if (st != CUDNN_STATUS_SUCCESS)
      throw CudaError(std::string("cuDNN ") + what + " failed: " + cudnn().cudnnGetErrorString(st));
  }
  cudnnHandle_t dnn() {
    static cudnnHandle_t h = nullptr;
    if (!h) {
      ok(cudnn().cudnnCreate(&h), "cudnnCreate");
      ok(cudnn().cudnnSetStream(h, (cudaStream_t)dev.stream), "cudnnSetStream");
    }
    return h;
  }
  // A 4-D tensor descriptor from logical N, C, H, W in the given memory format.
  cudnnTensorDescriptor_t tensorDesc(DType d, bool nhwc, int64_t n, int64_t c, int64_t h, int64_t w) {
    cudnnTensorDescriptor_t t;
    ok(cudnn().cudnnCreateTensorDescriptor(&t), "CreateTensorDescriptor");
    ok(cudnn().cudnnSetTensor4dDescriptor(t, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnnType(d),
                                          (int)n, (int)c, (int)h, (int)w),
       "SetTensor4dDescriptor");
    return t;
  }

  // Descriptors and the algorithm are made on a step's first run (and again if TF32 is
  // switched), then reused: per-run host work is the cuDNN calls themselves.
  void prepareConv(Step &s) {
    const ConvSpec &spec = *s.conv;
    const ConvGeometry &c = spec.geometry;
    const CudnnApi &api = cudnn();
    auto d = std::make_shared<Step::Dnn>();
    d->tf32 = allowTf32();
    d->x = tensorDesc(spec.dtype, c.nhwc, c.n, c.c, c.h, c.w);
    d->y = tensorDesc(spec.dtype, c.nhwc, c.n, c.o, c.oh, c.ow);
    if (spec.biasIndex >= 0)
      d->bias = tensorDesc(spec.dtype, c.nhwc, 1, c.o, 1, 1);
    ok(api.cudnnCreateFilterDescriptor(&d->filter), "CreateFilterDescriptor");
    ok(api.cudnnSetFilter4dDescriptor(d->filter, cudnnType(spec.dtype), c.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                      (int)c.o, (int)(c.c / c.groups), (int)c.kh, (int)c.kw),
       "SetFilter4dDescriptor");
    ok(api.cudnnCreateConvolutionDescriptor(&d->conv), "CreateConvolutionDescriptor");
    ok(api.cudnnSetConvolution2dDescriptor(d->conv, (int)c.padTop, (int)c.padLeft, (int)c.strideH, (int)c.strideW,
                                           (int)c.dilationH, (int)c.dilationW, CUDNN_CROSS_CORRELATION,
                                           spec.dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
       "SetConvolution2dDescriptor");
    ok(api.cudnnSetConvolutionGroupCount(d->conv, (int)c.groups), "SetConvolutionGroupCount");
    api.cudnnSetConvolutionMathType(d->conv, d->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
    dev.ensureCublasLt(); // for the shared workspace
    // The heuristics' first algorithm that succeeds within the shared workspace.
    auto pick = [&](auto *perf, int found) -> int {
      for (int i = 0; i < found; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= dev.workspaceSize)
          return i;
      throw CudaError("cuDNN found no convolution algorithm within the workspace");
    };
    int found = 0;
    switch (c.direction) {
    case ConvDirection::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[8];
      ok(api.cudnnGetConvolutionForwardAlgorithm_v7(dnn(), d->x, d->filter, d->conv, d->y, 8, &found, perf),
         "GetConvolutionForwardAlgorithm_v7");
      d->algo = perf[pick(perf, found)].algo;
      break;
    }
    case ConvDirection::BackwardInput: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[8];
      ok(api.cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn(), d->filter, d->y, d->conv, d->x, 8, &found, perf),
         "GetConvolutionBackwardDataAlgorithm_v7");
      d->dataAlgo = perf[pick(perf, found)].algo;
      break;
    }
    case ConvDirection::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
      ok(api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn(), d->x, d->y, d->conv, d->filter, 8, &found, perf),
         "GetConvolutionBackwardFilterAlgorithm_v7");
      d->filterAlgo = perf[pick(perf, found)].algo;
      break;
    }
    }
    s.dnn = d;
  }

  // alpha = 1 and beta = 0 in the dtype cuDNN scales by.
  struct Scale {
    double one64 = 1, zero64 = 0;
    float one32 = 1, zero32 = 0;
    bool f64;
    explicit Scale(DType d) : f64(d == DType::F64) {}
    const void *one() const { return f64 ? (const void *)&one64 : (const void *)&one32; }
    const void *zero() const { return f64 ? (const void *)&zero64 : (const void *)&zero32; }
  };

  void runConv(Step &s) {
    const ConvSpec &spec = *s.conv;
    const ConvGeometry &c = spec.geometry;
    const CudnnApi &api = cudnn();
    auto in = [&](int i) { return (void *)ptr(s.in[i]); };
    CUdeviceptr out = ptr(s.out[0]);
    size_t productBytes = (size_t)c.n * c.o * c.oh * c.ow * dtypeSize(spec.dtype);
    if (c.direction == ConvDirection::BackwardInput)
      productBytes = (size_t)c.n * c.c * c.h * c.w * dtypeSize(spec.dtype);
    else if (c.direction == ConvDirection::BackwardFilter)
      productBytes = (size_t)c.o * (c.c / c.groups) * c.kh * c.kw * dtypeSize(spec.dtype);
    bool tempProduct = spec.epilogue && !spec.outputIsProduct;
    CUdeviceptr product = tempProduct ? dev.alloc(productBytes) : out;
    if (!s.dnn || s.dnn->tf32 != allowTf32())
      prepareConv(s);
    Step::Dnn &d = *s.dnn;
    Scale k(spec.dtype);
    void *ws = (void *)dev.workspace;
    switch (c.direction) {
    case ConvDirection::Forward:
      ok(api.cudnnConvolutionForward(dnn(), k.one(), d.x, in(spec.inputIndex), d.filter, in(spec.filterIndex), d.conv,
                                     d.algo, ws, dev.workspaceSize, k.zero(), d.y, (void *)product),
         "ConvolutionForward");
      if (spec.biasIndex >= 0)
        ok(api.cudnnAddTensor(dnn(), k.one(), d.bias, in(spec.biasIndex), k.one(), d.y, (void *)product), "AddTensor");
      break;
    case ConvDirection::BackwardInput:
      ok(api.cudnnConvolutionBackwardData(dnn(), k.one(), d.filter, in(spec.filterIndex), d.y, in(spec.gradOutputIndex),
                                          d.conv, d.dataAlgo, ws, dev.workspaceSize, k.zero(), d.x, (void *)product),
         "ConvolutionBackwardData");
      break;
    case ConvDirection::BackwardFilter:
      ok(api.cudnnConvolutionBackwardFilter(dnn(), k.one(), d.x, in(spec.inputIndex), d.y, in(spec.gradOutputIndex),
                                            d.conv, d.filterAlgo, ws, dev.workspaceSize, k.zero(), d.filter,
                                            (void *)product),
         "ConvolutionBackwardFilter");
      break;
    }
    if (spec.epilogue)
      runEpilogue(s, *spec.epilogue, spec.epilogueInputs, spec.outputIsProduct, product,
                  tempProduct ? productBytes : 0);
  }

  void runPool(Step &s) {
    const PoolSpec &spec = *s.pool;
    const PoolGeometry &p = spec.geometry;
    const CudnnApi &api = cudnn();
    if (!s.dnn) {
      auto d = std::make_shared<Step::Dnn>();
      d->x = tensorDesc(spec.dtype, p.nhwc, p.n, p.c, p.h, p.w);
      d->y = tensorDesc(spec.dtype, p.nhwc, p.n, p.c, p.oh, p.ow);
      ok(api.cudnnCreatePoolingDescriptor(&d->pool), "CreatePoolingDescriptor");
      // The deterministic max mode routes a window's gradient to one maximum, as the
      // interpreter's first-maximum rule does when the maximum is unique.
      cudnnPoolingMode_t mode = p.isMax ? (p.backward ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX)
                                : p.countIncludePad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                    : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
      // NaN propagates, as rf_max does on the interpreter.
      ok(api.cudnnSetPooling2dDescriptor(d->pool, mode, CUDNN_PROPAGATE_NAN, (int)p.kh, (int)p.kw, (int)p.padTop,
                                         (int)p.padLeft, (int)p.strideH, (int)p.strideW),
         "SetPooling2dDescriptor");
      s.dnn = d;
    }
    Step::Dnn &d = *s.dnn;
    Scale k(spec.dtype);
    auto in = [&](int i) { return (void *)ptr(s.in[i]); };
    void *out = (void *)ptr(s.out[0]);
    if (!p.backward)
      ok(api.cudnnPoolingForward(dnn(), d.pool, k.one(), d.x, in(0), k.zero(), d.y, out), "PoolingForward");
    else if (p.isMax) // operands: input, output, grad_output
      ok(api.cudnnPoolingBackward(dnn(), d.pool, k.one(), d.y, in(1), d.y, in(2), d.x, in(0), k.zero(), d.x, out),
         "PoolingBackward");
    else // average pooling reads neither x nor y
      ok(api.cudnnPoolingBackward(dnn(), d.pool, k.one(), d.y, in(0), d.y, in(0), d.x, out, k.zero(), d.x, out),
         "PoolingBackward");
  }

  // ---- CUDA graphs -------------------------------------------------------------------------
  // From the second run on, a program whose steps are all device work (no host fallback) is
  // captured once into a CUDA graph and replayed as one launch: no per-step host work, no
  // launch gaps. Its buffers are then fixed (the graph holds their addresses): every slot keeps
  // its buffer for the program's life instead of going back to the allocator after each run.
  // RFUSE_CUDA_GRAPH=0 turns this off.
  CUgraph graph = nullptr;
  CUgraphExec graphExec = nullptr;
  bool graphFailed = false, fixedBuffers = false;
  int executions = 0;
  std::vector<std::pair<CUdeviceptr, size_t>> fixedTemps; // temporaries the graph reads/writes

  bool graphable() const {
    const char *e = std::getenv("RFUSE_CUDA_GRAPH");
    if (graphFailed || profiling || (e && std::string(e) == "0"))
      return false;
    for (const Step &s : steps)
      if (s.kind == Kind::Host && !(slots[s.out[0]].persistent))
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
    if (fixedBuffers) {
      for (Slot &sl : slots)
        if (sl.ptr && !sl.persistent && sl.aliasOf < 0) {
          dev.release(sl.ptr, sl.bytes);
          sl.ptr = 0;
        }
      for (auto [p, n] : fixedTemps)
        dev.release(p, n);
      fixedTemps.clear();
      fixedBuffers = false;
    }
  }

  // Runs the steps: directly, or by capturing (once) and replaying a CUDA graph.
  void run() {
    if (!graphable() || executions++ == 0) { // the first run picks algorithms, uploads constants
      execute();
      return;
    }
    if (!graphExec) {
      fixedBuffers = true;
      for (size_t i = 0; i < slots.size(); ++i)
        if (slots[i].aliasOf < 0)
          ptr((int)i);
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

  void upload(int sl, const HostTensor &t) {
    std::vector<char> b = t.toBytes();
    check(driver().cuMemcpyHtoDAsync(ptr(sl), b.data(), b.size(), dev.stream), "cuMemcpyHtoD",
          "uploading an input");
    check(driver().cuStreamSynchronize(dev.stream), "cuStreamSynchronize", "uploading an input");
  }
  HostTensor download(int sl) {
    std::vector<char> b(slots[sl].bytes);
    check(driver().cuMemcpyDtoHAsync(b.data(), ptr(sl), b.size(), dev.stream), "cuMemcpyDtoH",
          "downloading a result");
    check(driver().cuStreamSynchronize(dev.stream), "cuStreamSynchronize", "downloading a result");
    return HostTensor::fromBytes(dtypeOf(slots[sl].value), shapeOf(slots[sl].value), b.data());
  }

  // RFUSE_PROFILE_STEPS=1: each step timed with CUDA events (graphs off), a table printed to
  // stderr after a benchmark — where a program's time goes, without a profiler.
  bool profiling = [] {
    const char *e = std::getenv("RFUSE_PROFILE_STEPS");
    return e && std::string(e) == "1";
  }();
  std::vector<double> stepMs;
  int profiledRuns = 0;

  std::string describe(const Step &s) const {
    std::string d;
    llvm::raw_string_ostream os(d);
    if (s.matmul)
      os << "matmul " << s.matmul->batch << "x" << s.matmul->m << "x" << s.matmul->n << "x" << s.matmul->k
         << (s.matmul->transposeA ? " tA" : "") << (s.matmul->transposeB ? " tB" : "")
         << (s.matmul->epilogue ? " + generated epilogue" : s.matmul->biasInput >= 0 ? " + bias epilogue" : "");
    else if (s.conv) {
      const ConvGeometry &g = s.conv->geometry;
      os << (g.direction == ConvDirection::Forward         ? "cudnn conv forward "
             : g.direction == ConvDirection::BackwardInput ? "cudnn conv backward-input "
                                                           : "cudnn conv backward-filter ")
         << g.n << "x" << g.c << "x" << g.h << "x" << g.w << " -> " << g.o << " k" << g.kh << " s" << g.strideH
         << (s.conv->epilogue ? " + generated epilogue" : "");
    } else if (s.pool)
      os << (s.pool->geometry.backward ? "cudnn pool backward" : "cudnn pool forward");
    else if (s.kernel)
      os << s.kernel->name << (s.kernel->launch == LaunchKind::GridStride ? " (pointwise)"
                               : s.kernel->launch == LaunchKind::BlockPerRow ? " (block per row)"
                                                                             : " (thread per column)");
    else
      os << s.op->getName().getStringRef();
    return os.str();
  }

  void printProfile() const {
    if (!profiling || !profiledRuns)
      return;
    double total = 0;
    for (double t : stepMs)
      total += t;
    llvm::errs() << "rfuse step profile (mean of " << profiledRuns << " runs, total "
                 << llvm::format("%.4f", total / profiledRuns) << " ms):\n";
    for (size_t i = 0; i < steps.size(); ++i)
      if (stepMs[i] > 0)
        llvm::errs() << llvm::format("  %2zu %9.4f ms  ", i, stepMs[i] / profiledRuns) << describe(steps[i]) << "\n";
  }

  // Runs every step; inputs already uploaded into their slots.
  void execute() {
    const DriverApi &api = driver();
    CUevent e0 = nullptr, e1 = nullptr;
    if (profiling) {
      api.cuEventCreate(&e0, 0);
      api.cuEventCreate(&e1, 0);
      stepMs.resize(steps.size(), 0.0);
      ++profiledRuns;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      Step &s = steps[i];
      if (profiling)
        api.cuEventRecord(e0, dev.stream);
      switch (s.kind) {
      case Kind::Alias:
        slots[s.out[0]].ptr = ptr(slots[s.out[0]].aliasOf);
        break;
      case Kind::Kernel: {
        std::vector<CUdeviceptr> args;
        for (int sl : s.in)
          args.push_back(ptr(sl));
        for (int sl : s.out)
          args.push_back(ptr(sl));
        launch(*s.kernel, s.fn, args);
        break;
      }
      case Kind::Matmul:
        runMatmul(s);
        break;
      case Kind::Conv:
        runConv(s);
        break;
      case Kind::Pool:
        runPool(s);
        break;
      case Kind::Host: {
        if (slots[s.out[0]].persistent && slots[s.out[0]].ptr)
          break; // a constant, uploaded on the first run
        std::vector<HostTensor> operands;
        for (int sl : s.in)
          operands.push_back(download(sl));
        std::vector<HostTensor> results = interpretOperation(s.op, operands);
        for (size_t o = 0; o < s.out.size(); ++o)
          upload(s.out[o], results[o]);
        break;
      }
      }
      if (profiling) {
        api.cuEventRecord(e1, dev.stream);
        api.cuEventSynchronize(e1);
        float ms = 0;
        api.cuEventElapsedTime(&ms, e0, e1);
        stepMs[i] += ms;
      }
      // Buffers whose last reader has been enqueued go back to the allocator (same stream:
      // later kernels that reuse them are ordered after their readers).
      for (int sl : s.in)
        freeIfDead(sl, i);
    }
  }

  // Aliases never own a buffer; a root's lastUse covers its aliases' uses (see plan()).
  void freeIfDead(int sl, size_t step) {
    Slot &s = slots[sl];
    if (fixedBuffers || s.aliasOf >= 0 || s.persistent || s.lastUse > (int)step || !s.ptr ||
        llvm::is_contained(argSlots, sl))
      return;
    dev.release(s.ptr, s.bytes);
    s.ptr = 0;
  }

  void releaseAll() {
    if (fixedBuffers)
      return;
    for (Slot &s : slots) {
      if (s.ptr && !s.persistent && s.aliasOf < 0)
        dev.release(s.ptr, s.bytes);
      if (!s.persistent)
        s.ptr = 0;
    }
  }
};

GpuProgram::GpuProgram(ModuleOp module, const std::string &entry) : impl(std::make_unique<Impl>()) {
  impl->module = module;
  impl->entry = entry;
  impl->plan();
}

GpuProgram::~GpuProgram() {
  if (!impl)
    return;
  for (auto &s : impl->slots)
    if (s.ptr && s.persistent)
      impl->dev.release(s.ptr, s.bytes);
  impl->dropGraph();
}

const std::vector<std::string> &GpuProgram::hostFallbacks() const { return impl->fallbacks; }

std::vector<HostTensor> GpuProgram::run(const std::vector<HostTensor> &inputs) {
  if (inputs.size() != impl->argSlots.size())
    throw CudaError("the program takes " + std::to_string(impl->argSlots.size()) + " inputs, got " +
                    std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    impl->upload(impl->argSlots[i], inputs[i]);
  std::vector<HostTensor> out;
  try {
    impl->run();
    for (int sl : impl->resultSlots)
      out.push_back(impl->download(sl));
  } catch (...) {
    impl->releaseAll();
    throw;
  }
  impl->releaseAll();
  return out;
}

GpuTiming GpuProgram::benchmark(const std::vector<HostTensor> &inputs, int iterations) {
  for (size_t i = 0; i < inputs.size(); ++i)
    impl->upload(impl->argSlots[i], inputs[i]);
  const DriverApi &api = driver();
  CUevent start, stop;
  check(api.cuEventCreate(&start, 0), "cuEventCreate", "benchmark");
  check(api.cuEventCreate(&stop, 0), "cuEventCreate", "benchmark");
  std::vector<double> times;
  auto once = [&] {
    impl->run();
    if (impl->fixedBuffers)
      return;
    // Results stay on the device; keep inputs, return the rest to the allocator.
    for (int sl : impl->resultSlots) {
      auto &slot = impl->slots[sl];
      if (!llvm::is_contained(impl->argSlots, sl) && slot.aliasOf < 0 && !slot.persistent && slot.ptr) {
        impl->dev.release(slot.ptr, slot.bytes);
        slot.ptr = 0;
      }
    }
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
  impl->releaseAll();
  impl->printProfile();
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front(), iterations};
}

} // namespace rfuse::cuda
