#include "Libraries.h"
#include "PlanCache.h"

#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Options.h"
#include "rfuse/Runtime/Timeline.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>

namespace rfuse::cuda {

namespace {
std::mutex libraryStatsMutex;
LibraryCallStats libraryStats;

// Times a library object's first call (its plan made: descriptors, the heuristics' or timed
// choice of algorithm; and the library's own first work on the host, such as loading its
// kernels) into libraryStats, when `first`.
// Each first call is also marked on the start-up timeline, with `what` it is.
class FirstCallTimer {
public:
  FirstCallTimer(bool first, const char *what) : first(first), what(what), start(std::chrono::steady_clock::now()) {
    if (first)
      timelineMark(std::string(what) + " first call begin");
  }
  ~FirstCallTimer() {
    if (!first)
      return;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    timelineMark(std::string(what) + " first call end", "plan " + std::to_string(planSeconds * 1e3) + " ms");
    std::lock_guard<std::mutex> lock(libraryStatsMutex);
    ++libraryStats.firstCalls;
    libraryStats.firstCallSeconds += s;
    libraryStats.planSeconds += planSeconds;
    libraryStats.longestPlanSeconds = std::max(libraryStats.longestPlanSeconds, planSeconds);
  }
  /// Times the plan's making (descriptors, the algorithm's choice) within the first call.
  template <typename F> void plan(F &&make) {
    auto t = std::chrono::steady_clock::now();
    make();
    planSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

private:
  bool first;
  const char *what;
  std::chrono::steady_clock::time_point start;
  double planSeconds = 0;
};
} // namespace

LibraryCallStats libraryCallStats() {
  LibraryCallStats out;
  {
    std::lock_guard<std::mutex> lock(libraryStatsMutex);
    out = libraryStats;
  }
  PlanCacheStats plans = planCacheStats();
  out.plansRecalledInMemory = plans.memoryHits;
  out.plansRecalledFromDisk = plans.diskHits;
  out.plansRefused = plans.refused;
  out.plansChosen = plans.misses + plans.refused;
  return out;
}

using codegen::Activation;
using codegen::ConvCall;
using codegen::MatmulCall;
using codegen::PoolCall;

namespace {

cudaDataType_t cudaType(DType d) {
  switch (d) {
  case DType::F64: return CUDA_R_64F;
  case DType::F16: return CUDA_R_16F;
  case DType::BF16: return CUDA_R_16BF;
  default: return CUDA_R_32F;
  }
}

cudnnDataType_t cudnnType(DType d) {
  switch (d) {
  case DType::F64: return CUDNN_DATA_DOUBLE;
  case DType::F16: return CUDNN_DATA_HALF;
  case DType::BF16: return CUDNN_DATA_BFLOAT16;
  default: return CUDNN_DATA_FLOAT;
  }
}

void ok(cublasStatus_t st, const char *what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("cuBLASLt ") + what + " failed (status " + std::to_string(st) + ")");
}

void ok(cudnnStatus_t st, const char *what) {
  if (st != CUDNN_STATUS_SUCCESS)
    throw CudaError(std::string("cuDNN ") + what + " failed: " + cudnn().cudnnGetErrorString(st));
}

// A 4-D tensor descriptor from logical N, C, H, W in the given memory format.
cudnnTensorDescriptor_t tensorDesc(DType d, bool nhwc, int64_t n, int64_t c, int64_t h, int64_t w) {
  cudnnTensorDescriptor_t t;
  ok(cudnn().cudnnCreateTensorDescriptor(&t), "CreateTensorDescriptor");
  ok(cudnn().cudnnSetTensor4dDescriptor(t, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnnType(d), (int)n,
                                        (int)c, (int)h, (int)w),
     "SetTensor4dDescriptor");
  return t;
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

} // namespace

// ---- cuBLASLt ---------------------------------------------------------------------------------

CublasLtMatmul::~CublasLtMatmul() { destroy(); }

void CublasLtMatmul::destroy() {
  if (!desc && !la && !lb && !lc)
    return;
  const CublasLtApi &api = cublasLt();
  if (la) api.cublasLtMatrixLayoutDestroy(la);
  if (lb) api.cublasLtMatrixLayoutDestroy(lb);
  if (lc) api.cublasLtMatrixLayoutDestroy(lc);
  if (desc) api.cublasLtMatmulDescDestroy(desc);
  desc = nullptr;
  la = lb = lc = nullptr;
  ready = false;
}

void warmMatmulHeuristics() {
  const CublasLtApi &lt = cublasLt();
  if (!lt.loaded)
    return;
  cublasLtHandle_t h = nullptr;
  if (lt.cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS)
    return;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  if (lt.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
      lt.cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 64, 64, 64) == CUBLAS_STATUS_SUCCESS &&
      lt.cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulHeuristicResult_t heur{}, checked{};
    int found = 0;
    if (lt.cublasLtMatmulAlgoGetHeuristic(h, desc, layout, layout, layout, layout, pref, 1, &heur, &found) ==
            CUBLAS_STATUS_SUCCESS &&
        found > 0)
      lt.cublasLtMatmulAlgoCheck(h, desc, layout, layout, layout, layout, &heur.algo, &checked);
  }
  if (pref) lt.cublasLtMatmulPreferenceDestroy(pref);
  if (layout) lt.cublasLtMatrixLayoutDestroy(layout);
  if (desc) lt.cublasLtMatmulDescDestroy(desc);
  lt.cublasLtDestroy(h);
}

void CublasLtMatmul::prepare(Device &dev, const MatmulCall &m, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c,
                             CUdeviceptr d, const void *alpha, const void *beta, bool tf32) {
  destroy();
  const CublasLtApi &lt = cublasLt();
  cublasComputeType_t compute = m.dtype == DType::F64            ? CUBLAS_COMPUTE_64F
                                : m.dtype == DType::F32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                 : CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = m.dtype == DType::F64 ? CUDA_R_64F : CUDA_R_32F, data = cudaType(m.dtype);
  ok(lt.cublasLtMatmulDescCreate(&desc, compute, scale), "MatmulDescCreate");
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLASLt's A is our B and vice versa.
  cublasOperation_t opA = m.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N, opB = m.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA);
  lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB);
  if (m.biasInput >= 0) {
    cublasLtEpilogue_t epi = m.activation == Activation::Relu       ? CUBLASLT_EPILOGUE_RELU_BIAS
                             : m.activation == Activation::GeluTanh ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                    : CUBLASLT_EPILOGUE_BIAS;
    lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  }
  uint64_t aRows = m.transposeB ? m.k : m.n, aCols = m.transposeB ? m.n : m.k;
  uint64_t bRows = m.transposeA ? m.m : m.k, bCols = m.transposeA ? m.k : m.m;
  ok(lt.cublasLtMatrixLayoutCreate(&la, data, aRows, aCols, aRows), "MatrixLayoutCreate");
  ok(lt.cublasLtMatrixLayoutCreate(&lb, data, bRows, bCols, bRows), "MatrixLayoutCreate");
  ok(lt.cublasLtMatrixLayoutCreate(&lc, cudaType(m.resultDtype()), m.n, m.m, m.n), "MatrixLayoutCreate");
  if (m.batch > 1) {
    int32_t count = (int32_t)m.batch;
    int64_t sa = m.batchedB ? (int64_t)(m.k * m.n) : 0, sb = m.batchedA ? (int64_t)(m.m * m.k) : 0,
            sc = (int64_t)(m.m * m.n);
    for (auto [l, st] : {std::pair{la, sa}, std::pair{lb, sb}, std::pair{lc, sc}}) {
      lt.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      lt.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st);
    }
  }
  // A choice remembered for this very problem (this session, or an earlier one through the disk:
  // the candidates' timing below is not repeated), if cuBLASLt still takes it within the workspace.
  std::string problem = "cublaslt " + std::to_string(lt.cublasLtGetVersion()) + " | " + planDeviceTag() + " |";
  for (int64_t v : {(int64_t)compute, (int64_t)scale, (int64_t)data, (int64_t)cudaType(m.resultDtype()), (int64_t)opA, (int64_t)opB,
                    (int64_t)(m.biasInput >= 0), (int64_t)m.activation, (int64_t)aRows, (int64_t)aCols,
                    (int64_t)bRows, (int64_t)bCols, m.m, m.n, m.k, m.batch, (int64_t)m.batchedA, (int64_t)m.batchedB,
                    (int64_t)dev.workspaceSize})
    problem += " " + std::to_string(v);
  std::vector<char> remembered;
  if (recallPlan(problem, remembered)) {
    cublasLtMatmulHeuristicResult_t checked{};
    if (planFromBytes(remembered, algo) &&
        lt.cublasLtMatmulAlgoCheck(dev.lt(), desc, la, lb, lc, lc, &algo, &checked) == CUBLAS_STATUS_SUCCESS &&
        checked.workspaceSize <= dev.workspaceSize) {
      ready = true;
      preparedTf32 = tf32;
      return;
    }
    refusePlan(problem);
  }
  cublasLtMatmulPreference_t pref;
  lt.cublasLtMatmulPreferenceCreate(&pref);
  size_t wsSize = dev.workspaceSize;
  lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsSize, sizeof wsSize);
  // Up to 32 candidates: with an epilogue (GELU) the heuristic's first few are often not the
  // fastest; timing more of them is a one-off cost of the first run.
  cublasLtMatmulHeuristicResult_t heur[32] = {};
  int found = 0;
  ok(lt.cublasLtMatmulAlgoGetHeuristic(dev.lt(), desc, la, lb, lc, lc, pref, 32, heur, &found), "AlgoGetHeuristic");
  lt.cublasLtMatmulPreferenceDestroy(pref);
  if (!found)
    throw CudaError("cuBLASLt found no algorithm for this matmul");
  algo = heur[0].algo;
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
        failed = lt.cublasLtMatmul(dev.lt(), desc, alpha, (void *)b, la, (void *)a, lb, beta, (void *)c, lc,
                                   (void *)d, lc, &heur[i].algo, (void *)dev.workspace(), dev.workspaceSize,
                                   (cudaStream_t)dev.stream) != CUBLAS_STATUS_SUCCESS;
        api.cuEventRecord(e1, dev.stream);
        api.cuEventSynchronize(e1);
        float ms = 0;
        api.cuEventElapsedTime(&ms, e0, e1);
        if (rep > 0)
          total += ms;
      }
      if (!failed && total < best) {
        best = total;
        algo = heur[i].algo;
      }
    }
    api.cuEventDestroy(e0);
    api.cuEventDestroy(e1);
  }
  rememberPlan(problem, planBytes(algo));
  ready = true;
  preparedTf32 = tf32;
}

void CublasLtMatmul::run(Device &dev, const MatmulCall &m, CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr bias,
                         CUdeviceptr residual, CUdeviceptr product, bool tf32) {
  const CublasLtApi &lt = cublasLt();
  double one64 = 1, zero64 = 0, alpha64 = m.alpha;
  float one32 = 1, zero32 = 0, alpha32 = (float)m.alpha;
  bool withResidual = m.residualInput >= 0;
  const void *alpha = m.dtype == DType::F64 ? (const void *)&alpha64 : (const void *)&alpha32;
  const void *beta = m.dtype == DType::F64 ? (const void *)(withResidual ? &one64 : &zero64)
                                           : (const void *)(withResidual ? &one32 : &zero32);
  CUdeviceptr c = withResidual ? residual : product;
  FirstCallTimer timer(!ready || preparedTf32 != tf32, "cuBLASLt matmul");
  if (!ready || preparedTf32 != tf32)
    timer.plan([&] { prepare(dev, m, lhs, rhs, c, product, alpha, beta, tf32); });
  if (m.biasInput >= 0)
    lt.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  cublasStatus_t st = lt.cublasLtMatmul(dev.lt(), desc, alpha, (void *)rhs, la, (void *)lhs, lb, beta, (void *)c, lc,
                                        (void *)product, lc, &algo, (void *)dev.workspace(), dev.workspaceSize,
                                        (cudaStream_t)dev.stream);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw CudaError("cuBLASLt matmul (" + std::to_string(m.m) + "x" + std::to_string(m.n) + "x" +
                    std::to_string(m.k) + ") failed (status " + std::to_string(st) + ")");
}

void transposeF32(Device &dev, CUdeviceptr src, int64_t rows, int64_t cols, CUdeviceptr dst) {
  const CublasLtApi &lt = cublasLt();
  cublasLtMatrixTransformDesc_t desc;
  cublasLtMatrixLayout_t a, c;
  lt.cublasLtMatrixTransformDescCreate(&desc, CUDA_R_32F);
  cublasOperation_t op = CUBLAS_OP_T;
  lt.cublasLtMatrixTransformDescSetAttribute(desc, CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSA, &op, sizeof op);
  // Column-major views: src is [cols, rows] (ld cols), dst is [rows, cols] (ld rows).
  lt.cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, cols, rows, cols);
  lt.cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, rows, cols, rows);
  float one = 1, zero = 0;
  cublasStatus_t st = lt.cublasLtMatrixTransform(dev.lt(), desc, &one, (const void *)src, a, &zero, nullptr, nullptr,
                                                 (void *)dst, c, (cudaStream_t)dev.stream);
  lt.cublasLtMatrixLayoutDestroy(a);
  lt.cublasLtMatrixLayoutDestroy(c);
  lt.cublasLtMatrixTransformDescDestroy(desc);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw CudaError("cuBLASLt matrix transform failed (status " + std::to_string(st) + ")");
}

// ---- cuDNN convolutions -----------------------------------------------------------------------

namespace {
// Everything cuDNN's choice depends on: its version, the device, the descriptors' every field,
// the math type and the workspace the choice must fit.
std::string convProblem(const ConvCall &spec, bool tf32, size_t workspace) {
  const ConvGeometry &c = spec.geometry;
  std::string s = "cudnn-conv " + std::to_string(cudnn().cudnnGetVersion()) + " | " + planDeviceTag() + " |";
  for (int64_t v : {(int64_t)c.direction, (int64_t)spec.dtype, (int64_t)c.nhwc, c.n, c.c, c.h, c.w, c.o, c.oh, c.ow,
                    c.kh, c.kw, c.padTop, c.padLeft, c.strideH, c.strideW, c.dilationH, c.dilationW, c.groups,
                    (int64_t)tf32, (int64_t)workspace})
    s += " " + std::to_string(v);
  return s;
}
} // namespace

CudnnConv::~CudnnConv() { destroy(); }

void CudnnConv::destroy() {
  if (!x && !y && !bias && !filter && !conv)
    return;
  const CudnnApi &api = cudnn();
  if (x) api.cudnnDestroyTensorDescriptor(x);
  if (y) api.cudnnDestroyTensorDescriptor(y);
  if (bias) api.cudnnDestroyTensorDescriptor(bias);
  if (filter) api.cudnnDestroyFilterDescriptor(filter);
  if (conv) api.cudnnDestroyConvolutionDescriptor(conv);
  x = y = bias = nullptr;
  filter = nullptr;
  conv = nullptr;
  ready = false;
}

namespace {
// A convolution's remembered choice: cuDNN's algorithm and the math type it was timed (or chosen)
// with.
struct ConvChoice {
  int32_t algo = 0;
  int32_t mathType = 0;
};

// The first of cuDNN's timed results (fastest first) that ran, fits the workspace and keeps the
// program's numerics: f32 without TF32 stays on FMA math, and no algorithm that converts f32
// inputs down to f16 is taken. -1: none.
template <typename Perf>
int firstUsable(const Perf *perf, int found, size_t workspace, bool fmaOnly) {
  for (int i = 0; i < found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > workspace)
      continue;
    if (perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
      continue;
    if (fmaOnly && perf[i].mathType != CUDNN_FMA_MATH && perf[i].mathType != CUDNN_DEFAULT_MATH)
      continue;
    return i;
  }
  return -1;
}
} // namespace

void CudnnConv::prepare(Device &dev, const ConvCall &spec, bool tf32, const std::vector<CUdeviceptr> &ins,
                        CUdeviceptr product) {
  destroy();
  const ConvGeometry &c = spec.geometry;
  const CudnnApi &api = cudnn();
  x = tensorDesc(spec.dtype, c.nhwc, c.n, c.c, c.h, c.w);
  y = tensorDesc(spec.dtype, c.nhwc, c.n, c.o, c.oh, c.ow);
  if (spec.biasIndex >= 0)
    bias = tensorDesc(spec.dtype, c.nhwc, 1, c.o, 1, 1);
  ok(api.cudnnCreateFilterDescriptor(&filter), "CreateFilterDescriptor");
  ok(api.cudnnSetFilter4dDescriptor(filter, cudnnType(spec.dtype), c.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                    (int)c.o, (int)(c.c / c.groups), (int)c.kh, (int)c.kw),
     "SetFilter4dDescriptor");
  ok(api.cudnnCreateConvolutionDescriptor(&conv), "CreateConvolutionDescriptor");
  ok(api.cudnnSetConvolution2dDescriptor(conv, (int)c.padTop, (int)c.padLeft, (int)c.strideH, (int)c.strideW,
                                         (int)c.dilationH, (int)c.dilationW, CUDNN_CROSS_CORRELATION,
                                         spec.dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
     "SetConvolution2dDescriptor");
  ok(api.cudnnSetConvolutionGroupCount(conv, (int)c.groups), "SetConvolutionGroupCount");
  // f16/bf16 have their algorithms on tensor cores only; f32 uses them (TF32) only when allowed.
  bool fmaOnly = spec.dtype == DType::F32 && !tf32;
  cudnnMathType_t math = spec.dtype == DType::F16 || spec.dtype == DType::BF16 ? CUDNN_TENSOR_OP_MATH
                         : fmaOnly                                            ? CUDNN_FMA_MATH
                                                                              : CUDNN_DEFAULT_MATH;
  api.cudnnSetConvolutionMathType(conv, math);
  // A timed choice (option conv_autotune) and the heuristics' are remembered apart, so turning
  // the option on times problems whose heuristic choice is on disk.
  bool timed = runtimeOptions().convAutotune;
  auto setChoice = [&](const ConvChoice &choice) {
    switch (c.direction) {
    case ConvDirection::Forward: algo = (cudnnConvolutionFwdAlgo_t)choice.algo; break;
    case ConvDirection::BackwardInput: dataAlgo = (cudnnConvolutionBwdDataAlgo_t)choice.algo; break;
    case ConvDirection::BackwardFilter: filterAlgo = (cudnnConvolutionBwdFilterAlgo_t)choice.algo; break;
    }
    // (FMA-only problems keep FMA math whatever cuDNN reported: DEFAULT would allow TF32)
    if (!fmaOnly)
      api.cudnnSetConvolutionMathType(conv, (cudnnMathType_t)choice.mathType);
  };
  // A choice remembered for this very problem (this session, or an earlier one through the
  // disk), if cuDNN still takes it within the workspace; else cuDNN's timed or heuristic ranking's
  // first usable algorithm.
  std::string problem = convProblem(spec, tf32, dev.workspaceSize) + (timed ? " timed" : " heuristic");
  std::vector<char> remembered;
  ConvChoice choice;
  if (recallPlan(problem, remembered)) {
    size_t need = 0;
    cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
    if (planFromBytes(remembered, choice)) {
      setChoice(choice);
      switch (c.direction) {
      case ConvDirection::Forward:
        st = api.cudnnGetConvolutionForwardWorkspaceSize(dev.dnn(), x, filter, conv, y, algo, &need);
        break;
      case ConvDirection::BackwardInput:
        st = api.cudnnGetConvolutionBackwardDataWorkspaceSize(dev.dnn(), filter, y, conv, x, dataAlgo, &need);
        break;
      case ConvDirection::BackwardFilter:
        st = api.cudnnGetConvolutionBackwardFilterWorkspaceSize(dev.dnn(), x, y, conv, filter, filterAlgo, &need);
        break;
      }
    }
    if (st == CUDNN_STATUS_SUCCESS && need <= dev.workspaceSize) {
      ready = true;
      preparedTf32 = tf32;
      return;
    }
    refusePlan(problem);
    api.cudnnSetConvolutionMathType(conv, math);
  }
  auto in = [&](int i) { return (void *)ins[i]; };
  void *ws = (void *)dev.workspace();
  // Timing runs every algorithm on the call's own buffers (the product is written over; the run
  // that follows writes it again), each under the math type it reports. A failed timing falls
  // back to the heuristics, whose first algorithm that fits runs under the descriptor's math type.
  auto chooseTimed = [&](auto *perf, int found) {
    int i = firstUsable(perf, found, dev.workspaceSize, fmaOnly);
    if (i >= 0)
      choice = ConvChoice{(int32_t)perf[i].algo, (int32_t)perf[i].mathType};
    return i >= 0;
  };
  auto choose = [&](auto *perf, int found) {
    for (int i = 0; i < found; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= dev.workspaceSize) {
        choice = ConvChoice{(int32_t)perf[i].algo, (int32_t)math};
        return true;
      }
    return false;
  };
  // One direction's choice: `find` (cuDNN's timing) when timed, else or when it fails `heuristics`.
  auto pick = [&](auto *perf, int count, auto find, auto heuristics, const char *what) {
    int found = 0;
    if (timed && find(count, &found, perf) == CUDNN_STATUS_SUCCESS && chooseTimed(perf, found))
      return true;
    ok(heuristics(count, &found, perf), what);
    return choose(perf, found);
  };
  bool chosen = false;
  switch (c.direction) {
  case ConvDirection::Forward: {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    chosen = pick(
        perf, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
        [&](int n, int *found, cudnnConvolutionFwdAlgoPerf_t *p) {
          return api.cudnnFindConvolutionForwardAlgorithmEx(dev.dnn(), x, in(spec.inputIndex), filter,
                                                            in(spec.filterIndex), conv, y, (void *)product, n, found, p,
                                                            ws, dev.workspaceSize);
        },
        [&](int n, int *found, cudnnConvolutionFwdAlgoPerf_t *p) {
          return api.cudnnGetConvolutionForwardAlgorithm_v7(dev.dnn(), x, filter, conv, y, n, found, p);
        },
        "GetConvolutionForwardAlgorithm_v7");
    break;
  }
  case ConvDirection::BackwardInput: {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    chosen = pick(
        perf, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        [&](int n, int *found, cudnnConvolutionBwdDataAlgoPerf_t *p) {
          return api.cudnnFindConvolutionBackwardDataAlgorithmEx(dev.dnn(), filter, in(spec.filterIndex), y,
                                                                 in(spec.gradOutputIndex), conv, x, (void *)product, n,
                                                                 found, p, ws, dev.workspaceSize);
        },
        [&](int n, int *found, cudnnConvolutionBwdDataAlgoPerf_t *p) {
          return api.cudnnGetConvolutionBackwardDataAlgorithm_v7(dev.dnn(), filter, y, conv, x, n, found, p);
        },
        "GetConvolutionBackwardDataAlgorithm_v7");
    break;
  }
  case ConvDirection::BackwardFilter: {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    chosen = pick(
        perf, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        [&](int n, int *found, cudnnConvolutionBwdFilterAlgoPerf_t *p) {
          return api.cudnnFindConvolutionBackwardFilterAlgorithmEx(dev.dnn(), x, in(spec.inputIndex), y,
                                                                   in(spec.gradOutputIndex), conv, filter,
                                                                   (void *)product, n, found, p, ws, dev.workspaceSize);
        },
        [&](int n, int *found, cudnnConvolutionBwdFilterAlgoPerf_t *p) {
          return api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(dev.dnn(), x, y, conv, filter, n, found, p);
        },
        "GetConvolutionBackwardFilterAlgorithm_v7");
    break;
  }
  }
  if (!chosen)
    throw CudaError("cuDNN found no convolution algorithm within the workspace");
  setChoice(choice);
  rememberPlan(problem, planBytes(choice));
  ready = true;
  preparedTf32 = tf32;
}

void CudnnConv::run(Device &dev, const ConvCall &spec, const std::vector<CUdeviceptr> &ins, CUdeviceptr product,
                    bool tf32) {
  const CudnnApi &api = cudnn();
  FirstCallTimer timer(!ready || preparedTf32 != tf32, "cuDNN convolution");
  if (!ready || preparedTf32 != tf32)
    timer.plan([&] { prepare(dev, spec, tf32, ins, product); });
  auto in = [&](int i) { return (void *)ins[i]; };
  Scale k(spec.dtype);
  void *ws = (void *)dev.workspace();
  switch (spec.geometry.direction) {
  case ConvDirection::Forward:
    ok(api.cudnnConvolutionForward(dev.dnn(), k.one(), x, in(spec.inputIndex), filter, in(spec.filterIndex), conv,
                                   algo, ws, dev.workspaceSize, k.zero(), y, (void *)product),
       "ConvolutionForward");
    if (spec.biasIndex >= 0)
      ok(api.cudnnAddTensor(dev.dnn(), k.one(), bias, in(spec.biasIndex), k.one(), y, (void *)product), "AddTensor");
    break;
  case ConvDirection::BackwardInput:
    ok(api.cudnnConvolutionBackwardData(dev.dnn(), k.one(), filter, in(spec.filterIndex), y, in(spec.gradOutputIndex),
                                        conv, dataAlgo, ws, dev.workspaceSize, k.zero(), x, (void *)product),
       "ConvolutionBackwardData");
    break;
  case ConvDirection::BackwardFilter:
    ok(api.cudnnConvolutionBackwardFilter(dev.dnn(), k.one(), x, in(spec.inputIndex), y, in(spec.gradOutputIndex),
                                          conv, filterAlgo, ws, dev.workspaceSize, k.zero(), filter, (void *)product),
       "ConvolutionBackwardFilter");
    break;
  }
}

void warmConvolutionEngines() {
  const CudnnApi &api = cudnn();
  if (!api.loaded)
    return;
  // (descriptors first: tensorDesc throws on failure, before the handle exists)
  cudnnTensorDescriptor_t x = tensorDesc(DType::F32, true, 8, 16, 8, 8), y = tensorDesc(DType::F32, true, 8, 16, 8, 8);
  cudnnHandle_t h = nullptr;
  if (api.cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
    api.cudnnDestroyTensorDescriptor(x);
    api.cudnnDestroyTensorDescriptor(y);
    return;
  }
  cudnnFilterDescriptor_t f = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  if (api.cudnnCreateFilterDescriptor(&f) == CUDNN_STATUS_SUCCESS &&
      api.cudnnSetFilter4dDescriptor(f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, 16, 16, 3, 3) == CUDNN_STATUS_SUCCESS &&
      api.cudnnCreateConvolutionDescriptor(&conv) == CUDNN_STATUS_SUCCESS &&
      api.cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
          CUDNN_STATUS_SUCCESS) {
    int found = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[8];
    cudnnConvolutionBwdDataAlgoPerf_t data[8];
    cudnnConvolutionBwdFilterAlgoPerf_t filter[8];
    api.cudnnGetConvolutionForwardAlgorithm_v7(h, x, f, conv, y, 8, &found, fwd);
    api.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, f, y, conv, x, 8, &found, data);
    api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv, f, 8, &found, filter);
  }
  if (conv) api.cudnnDestroyConvolutionDescriptor(conv);
  if (f) api.cudnnDestroyFilterDescriptor(f);
  api.cudnnDestroyTensorDescriptor(x);
  api.cudnnDestroyTensorDescriptor(y);
  api.cudnnDestroy(h);
}

// ---- cuDNN pooling ----------------------------------------------------------------------------

CudnnPool::~CudnnPool() {
  if (!x && !y && !pool)
    return;
  const CudnnApi &api = cudnn();
  if (x) api.cudnnDestroyTensorDescriptor(x);
  if (y) api.cudnnDestroyTensorDescriptor(y);
  if (pool) api.cudnnDestroyPoolingDescriptor(pool);
}

void CudnnPool::run(Device &dev, const PoolCall &spec, const std::vector<CUdeviceptr> &ins, CUdeviceptr out) {
  const PoolGeometry &p = spec.geometry;
  const CudnnApi &api = cudnn();
  if (!pool) {
    x = tensorDesc(spec.dtype, p.nhwc, p.n, p.c, p.h, p.w);
    y = tensorDesc(spec.dtype, p.nhwc, p.n, p.c, p.oh, p.ow);
    ok(api.cudnnCreatePoolingDescriptor(&pool), "CreatePoolingDescriptor");
    // The deterministic max mode routes a window's gradient to one maximum, as the
    // interpreter's first-maximum rule does when the maximum is unique.
    cudnnPoolingMode_t mode = p.isMax ? (p.backward ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX)
                              : p.countIncludePad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    // NaN propagates, as rf_max does on the interpreter.
    ok(api.cudnnSetPooling2dDescriptor(pool, mode, CUDNN_PROPAGATE_NAN, (int)p.kh, (int)p.kw, (int)p.padTop,
                                       (int)p.padLeft, (int)p.strideH, (int)p.strideW),
       "SetPooling2dDescriptor");
  }
  Scale k(spec.dtype);
  auto in = [&](int i) { return (void *)ins[i]; };
  if (!p.backward)
    ok(api.cudnnPoolingForward(dev.dnn(), pool, k.one(), x, in(0), k.zero(), y, (void *)out), "PoolingForward");
  else if (p.isMax) // operands: input, output, grad_output
    ok(api.cudnnPoolingBackward(dev.dnn(), pool, k.one(), y, in(1), y, in(2), x, in(0), k.zero(), x, (void *)out),
       "PoolingBackward");
  else // average pooling reads neither x nor y
    ok(api.cudnnPoolingBackward(dev.dnn(), pool, k.one(), y, in(0), y, in(0), x, (void *)out, k.zero(), x,
                                (void *)out),
       "PoolingBackward");
}

// ---- cuDNN RNN --------------------------------------------------------------------------------

namespace {
cudnnRNNAlgo_t rnnAlgorithm(const std::string &name, const codegen::RecurrentCall &c) {
  if (c.dtype == DType::F64) // (cuDNN's persistent kernels are for f32 and f16)
    return CUDNN_RNN_ALGO_STANDARD;
  if (name == "auto") { // PyTorch's choice (aten/src/ATen/native/cudnn/RNN.cpp, get_algo)
    bool gated = c.cell == codegen::RecurrentCall::Cell::Lstm || c.cell == codegen::RecurrentCall::Cell::Gru;
    int64_t limit = c.backward ? (gated ? 128 : 256) : (gated ? 192 : 384);
    return c.hidden <= limit ? CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H : CUDNN_RNN_ALGO_STANDARD;
  }
  if (name == "persist_static")
    return CUDNN_RNN_ALGO_PERSIST_STATIC;
  if (name == "persist_static_small_h")
    return CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H;
  if (name == "persist_dynamic")
    return CUDNN_RNN_ALGO_PERSIST_DYNAMIC;
  return CUDNN_RNN_ALGO_STANDARD;
}
} // namespace

CudnnRecurrent::~CudnnRecurrent() { destroy(); }

void CudnnRecurrent::destroy() {
  const CudnnApi &api = cudnn();
  if (rnn)
    api.cudnnDestroyRNNDescriptor(rnn);
  if (xDesc)
    api.cudnnDestroyRNNDataDescriptor(xDesc);
  if (yDesc)
    api.cudnnDestroyRNNDataDescriptor(yDesc);
  if (hDesc)
    api.cudnnDestroyTensorDescriptor(hDesc);
  if (dropout)
    api.cudnnDestroyDropoutDescriptor(dropout);
  rnn = nullptr;
  xDesc = yDesc = nullptr;
  hDesc = nullptr;
  dropout = nullptr;
  Device &dev = Device::get();
  for (auto [p, n] : {std::pair{&weights, weightBytes}, {&weightGrads, weightBytes}, {&seqLengths, hostSeqLengths.size() * 4},
                      {&work, workBytes}, {&reserve, reserveBytes}, {&yScratch, yBytes}})
    if (*p) {
      dev.release(*p, n);
      *p = 0;
    }
  parts.clear();
  ready = false;
}

// Descriptors, the weight space (zeroed: its padding stays 0) and where each weight lives in it,
// the sequence lengths on the device, the workspace and (for the gradient) the reserve space and
// the forward's output it is recomputed into. A status other than success (an algorithm cuDNN
// does not take for this layer) is returned before anything runs.
cudnnStatus_t CudnnRecurrent::prepare(Device &dev, const codegen::RecurrentCall &c, bool tf32,
                                      cudnnRNNAlgo_t algorithm) {
  destroy();
  const CudnnApi &api = cudnn();
  algo = algorithm;
  cudnnDataType_t dt = cudnnType(c.dtype), prec = c.dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  // As PyTorch: tensor cores for f16, TF32 allowed for f32 unless switched off.
  cudnnMathType_t math = c.dtype == DType::F16               ? CUDNN_TENSOR_OP_MATH
                         : c.dtype == DType::F32 && !tf32 ? CUDNN_FMA_MATH
                                                           : CUDNN_DEFAULT_MATH;
  cudnnRNNMode_t mode = c.cell == codegen::RecurrentCall::Cell::Lstm  ? CUDNN_LSTM
                        : c.cell == codegen::RecurrentCall::Cell::Gru ? CUDNN_GRU
                        : c.cell == codegen::RecurrentCall::Cell::RnnTanh ? CUDNN_RNN_TANH
                                                                           : CUDNN_RNN_RELU;
  ok(api.cudnnCreateDropoutDescriptor(&dropout), "CreateDropoutDescriptor");
  ok(api.cudnnSetDropoutDescriptor(dropout, dev.dnn(), 0.0f, nullptr, 0, 0), "SetDropoutDescriptor");
  ok(api.cudnnCreateRNNDescriptor(&rnn), "CreateRNNDescriptor");
  if (cudnnStatus_t st = api.cudnnSetRNNDescriptor_v8(rnn, algo, mode, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
                                                      CUDNN_LINEAR_INPUT, dt, prec, math, (int32_t)c.inputSize,
                                                      (int32_t)c.hidden, (int32_t)c.hidden, 1, dropout,
                                                      CUDNN_RNN_PADDED_IO_ENABLED);
      st != CUDNN_STATUS_SUCCESS)
    return st;
  // The dynamic persistent algorithm's kernels are compiled for the batch size first (without
  // this cuDNN runs them unbuilt and returns wrong values, not an error).
  if (algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC)
    if (cudnnStatus_t st = api.cudnnBuildRNNDynamic(dev.dnn(), rnn, (int)c.batch); st != CUDNN_STATUS_SUCCESS)
      return st;
  hostSeqLengths.assign((size_t)c.batch, (int32_t)c.steps);
  ok(api.cudnnCreateRNNDataDescriptor(&xDesc), "CreateRNNDataDescriptor");
  ok(api.cudnnCreateRNNDataDescriptor(&yDesc), "CreateRNNDataDescriptor");
  ok(api.cudnnSetRNNDataDescriptor(xDesc, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, (int)c.steps, (int)c.batch,
                                   (int)c.inputSize, hostSeqLengths.data(), nullptr),
     "SetRNNDataDescriptor");
  ok(api.cudnnSetRNNDataDescriptor(yDesc, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, (int)c.steps, (int)c.batch,
                                   (int)c.hidden, hostSeqLengths.data(), nullptr),
     "SetRNNDataDescriptor");
  ok(api.cudnnCreateTensorDescriptor(&hDesc), "CreateTensorDescriptor");
  int dims[3] = {1, (int)c.batch, (int)c.hidden}, strides[3] = {(int)(c.batch * c.hidden), (int)c.hidden, 1};
  ok(api.cudnnSetTensorNdDescriptor(hDesc, dt, 3, dims, strides), "SetTensorNdDescriptor");
  ok(api.cudnnGetRNNWeightSpaceSize(dev.dnn(), rnn, &weightBytes), "GetRNNWeightSpaceSize");
  if (cudnnStatus_t st = api.cudnnGetRNNTempSpaceSizes(dev.dnn(), rnn,
                                                       c.backward ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                                       xDesc, &workBytes, &reserveBytes);
      st != CUDNN_STATUS_SUCCESS)
    return st;
  weights = dev.alloc(weightBytes);
  check(driver().cuMemsetD8Async(weights, 0, weightBytes, dev.stream), "cuMemsetD8Async", "zeroing cuDNN's weight space");
  if (c.backward) {
    weightGrads = dev.alloc(weightBytes);
    yBytes = (size_t)(c.batch * c.steps * c.hidden) * dtypeSize(c.dtype);
    yScratch = dev.alloc(yBytes);
  }
  seqLengths = dev.alloc(hostSeqLengths.size() * 4);
  check(driver().cuMemcpyHtoDAsync(seqLengths, hostSeqLengths.data(), hostSeqLengths.size() * 4, dev.stream),
        "cuMemcpyHtoDAsync", "the recurrent layer's sequence lengths");
  if (workBytes)
    work = dev.alloc(workBytes);
  if (reserveBytes)
    reserve = dev.alloc(reserveBytes);
  // Each gate's matrix and bias: linear layers 0..G-1 act on the input (w_ih's rows g H ..),
  // G..2G-1 on the state (w_hh's); torch's gate order is cuDNN's.
  cudnnTensorDescriptor_t mDesc, bDesc;
  ok(api.cudnnCreateTensorDescriptor(&mDesc), "CreateTensorDescriptor");
  ok(api.cudnnCreateTensorDescriptor(&bDesc), "CreateTensorDescriptor");
  size_t es = dtypeSize(c.dtype), H = (size_t)c.hidden;
  int G = c.gates();
  for (int layer = 0; layer < 2 * G; ++layer) {
    void *m = nullptr, *b = nullptr;
    cudnnStatus_t st = api.cudnnGetRNNWeightParams(dev.dnn(), rnn, 0, weightBytes, (const void *)weights, layer, mDesc,
                                                   &m, bDesc, &b);
    if (st != CUDNN_STATUS_SUCCESS) {
      api.cudnnDestroyTensorDescriptor(mDesc);
      api.cudnnDestroyTensorDescriptor(bDesc);
      ok(st, "GetRNNWeightParams");
    }
    bool input = layer < G;
    size_t gate = (size_t)(input ? layer : layer - G), k = input ? (size_t)c.inputSize : H;
    auto add = [&](int operand, size_t operandOffset, void *at, size_t bytes) {
      parts.push_back({operand, operandOffset, (size_t)((CUdeviceptr)at - weights), bytes});
    };
    add(input ? 0 : 1, gate * H * k * es, m, H * k * es);
    add(input ? 2 : 3, gate * H * es, b, H * es);
  }
  api.cudnnDestroyTensorDescriptor(mDesc);
  api.cudnnDestroyTensorDescriptor(bDesc);
  // Adjacent parts of one operand merged (cuDNN may lay matrices and biases out alternately):
  // ordered by operand first.
  std::stable_sort(parts.begin(), parts.end(), [](const Part &a, const Part &b) {
    return a.operand != b.operand ? a.operand < b.operand : a.operandOffset < b.operandOffset;
  });
  std::vector<Part> merged;
  for (const Part &p : parts) {
    if (!merged.empty() && merged.back().operand == p.operand &&
        merged.back().operandOffset + merged.back().bytes == p.operandOffset &&
        merged.back().spaceOffset + merged.back().bytes == p.spaceOffset)
      merged.back().bytes += p.bytes;
    else
      merged.push_back(p);
  }
  parts = merged;
  preparedTf32 = tf32;
  ready = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CudnnRecurrent::execute(Device &dev, const codegen::RecurrentCall &c, const std::vector<CUdeviceptr> &ins,
                                      const std::vector<CUdeviceptr> &outs) {
  const CudnnApi &api = cudnn();
  bool lstm = c.cell == codegen::RecurrentCall::Cell::Lstm;
  size_t w0 = lstm ? 3 : 2; // the first weight operand (and, in the gradient, the first weight gradient)
  CUdeviceptr x = ins[0], h0 = ins[1], c0 = lstm ? ins[2] : 0;
  for (const Part &p : parts)
    check(driver().cuMemcpyDtoDAsync(weights + p.spaceOffset, ins[w0 + p.operand] + p.operandOffset, p.bytes, dev.stream),
          "cuMemcpyDtoDAsync", "a recurrent layer's weights into cuDNN's weight space");
  auto ptr = [](CUdeviceptr p) { return (void *)p; };
  if (!c.backward)
    return api.cudnnRNNForward(dev.dnn(), rnn, CUDNN_FWD_MODE_INFERENCE, (const int32_t *)seqLengths, xDesc, ptr(x),
                               yDesc, ptr(outs[0]), hDesc, ptr(h0), ptr(outs[1]), hDesc, ptr(c0),
                               lstm ? ptr(outs[2]) : nullptr, weightBytes, ptr(weights), workBytes, ptr(work), 0, nullptr);
  CUdeviceptr gy = ins[w0 + 4], ghn = ins[w0 + 5], gcn = lstm ? ins[w0 + 6] : 0;
  if (cudnnStatus_t st = api.cudnnRNNForward(dev.dnn(), rnn, CUDNN_FWD_MODE_TRAINING, (const int32_t *)seqLengths, xDesc,
                                             ptr(x), yDesc, ptr(yScratch), hDesc, ptr(h0), nullptr, hDesc, ptr(c0),
                                             nullptr, weightBytes, ptr(weights), workBytes, ptr(work), reserveBytes,
                                             ptr(reserve));
      st != CUDNN_STATUS_SUCCESS)
    return st;
  if (cudnnStatus_t st = api.cudnnRNNBackwardData_v8(dev.dnn(), rnn, (const int32_t *)seqLengths, yDesc, ptr(yScratch),
                                                     ptr(gy), xDesc, ptr(outs[0]), hDesc, ptr(h0), ptr(ghn),
                                                     ptr(outs[1]), hDesc, ptr(c0), ptr(gcn),
                                                     lstm ? ptr(outs[2]) : nullptr, weightBytes, ptr(weights),
                                                     workBytes, ptr(work), reserveBytes, ptr(reserve));
      st != CUDNN_STATUS_SUCCESS)
    return st;
  // (cuDNN adds the weight gradients to what the space holds)
  check(driver().cuMemsetD8Async(weightGrads, 0, weightBytes, dev.stream), "cuMemsetD8Async",
        "zeroing cuDNN's weight gradients");
  if (cudnnStatus_t st = api.cudnnRNNBackwardWeights_v8(dev.dnn(), rnn, CUDNN_WGRAD_MODE_ADD, (const int32_t *)seqLengths,
                                                        xDesc, ptr(x), hDesc, ptr(h0), yDesc, ptr(yScratch), weightBytes,
                                                        ptr(weightGrads), workBytes, ptr(work), reserveBytes,
                                                        ptr(reserve));
      st != CUDNN_STATUS_SUCCESS)
    return st;
  for (const Part &p : parts)
    check(driver().cuMemcpyDtoDAsync(outs[w0 + p.operand] + p.operandOffset, weightGrads + p.spaceOffset, p.bytes,
                                     dev.stream),
          "cuMemcpyDtoDAsync", "a recurrent layer's weight gradients out of cuDNN's weight space");
  return CUDNN_STATUS_SUCCESS;
}

void CudnnRecurrent::run(Device &dev, const codegen::RecurrentCall &c, const std::vector<CUdeviceptr> &ins,
                         const std::vector<CUdeviceptr> &outs, bool tf32, const std::string &algorithm) {
  bool first = !ready || preparedTf32 != tf32;
  FirstCallTimer timer(first, c.backward ? "cuDNN RNN gradient" : "cuDNN RNN");
  if (first) {
    cudnnRNNAlgo_t wanted = rnnAlgorithm(algorithm, c);
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    timer.plan([&] { st = prepare(dev, c, tf32, wanted); });
    // An algorithm cuDNN does not take for this layer (a persistent kernel's limits on the batch,
    // the hidden size, the layout): the standard one, which takes every layer.
    if (st != CUDNN_STATUS_SUCCESS && wanted != CUDNN_RNN_ALGO_STANDARD)
      timer.plan([&] { st = prepare(dev, c, tf32, CUDNN_RNN_ALGO_STANDARD); });
    ok(st, "RNN set-up");
    st = execute(dev, c, ins, outs);
    if (st == CUDNN_STATUS_SUCCESS || algo == CUDNN_RNN_ALGO_STANDARD) {
      ok(st, c.backward ? "RNN backward" : "RNN forward");
      return;
    }
    // Refused at the call itself: again with the standard algorithm (this run's outputs are
    // written again in full).
    timer.plan([&] { st = prepare(dev, c, tf32, CUDNN_RNN_ALGO_STANDARD); });
    ok(st, "RNN set-up");
  }
  ok(execute(dev, c, ins, outs), c.backward ? "RNN backward" : "RNN forward");
}

} // namespace rfuse::cuda
