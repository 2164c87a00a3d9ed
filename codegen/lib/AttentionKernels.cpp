// CUDA kernels of rfuse.attention and rfuse.attention_backward: flash attention (Dao et al.'s
// FlashAttention-2 scheme) on the tensor cores through mma.sync m16n8k16, bf16 / f16 operands and
// f32 accumulation. Tiles of 64 queries x 64 keys; a warp owns 16 rows of a tile. The scores and
// probabilities live in registers only: the forward keeps a running maximum and sum per row
// (online softmax) and writes each row's log-sum-exp; the backward recomputes the probabilities
// from it. The backward is one launch of two kinds of blocks: one kind per 64 keys accumulates
// grad_k and grad_v over every query tile, the other per 64 queries accumulates grad_q over every
// key tile (the scores computed twice instead of atomics on grad_q). Dropout draws each
// probability's Philox number where it is used (forward, and again in both backward kinds), so
// no mask is ever stored.
#include "AttentionKernels.h"

#include "rfuse/Codegen/CudaCodegen.h"
#include "rfuse/IR/RfuseDialect.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cmath>

using namespace mlir;

namespace rfuse::cuda {

namespace {

constexpr int kTile = 64;    // queries and keys a block takes at a time
constexpr int kThreads = 128; // four warps, 16 rows of the tile each

struct AttentionGeometry {
  int64_t batch, queries, keys, headDim;
  double scale;
  DType dtype;
  bool causal = false;
  std::optional<std::array<int64_t, 3>> maskDims; // the mask operand's [B or 1, L or 1, S or 1]
  double fill = -INFINITY;                        // a masked score
  // Dropout on the probabilities (the op's dropout_* attributes; its seed the last operand).
  bool dropout = false;
  double dropThreshold = 0, dropScale = 1;
  std::array<int64_t, 3> dropStrides = {0, 0, 0};
};

// Both ops: operands q, k, v first, a `scale`, and their masks.
template <class AttentionOpT>
std::optional<AttentionGeometry> geometryOf(AttentionOpT op, std::string &why) {
  Value q = op.getQ();
  auto qt = cast<RankedTensorType>(q.getType()), kt = cast<RankedTensorType>(op.getK().getType()),
       vt = cast<RankedTensorType>(op.getV().getType());
  AttentionGeometry g{qt.getShape()[0], qt.getShape()[1], kt.getShape()[1], qt.getShape()[2],
                      op.getScale().convertToDouble(), dtypeOf(q)};
  g.causal = op.getCausal();
  if (Value m = op.getMask()) {
    ArrayRef<int64_t> d = cast<RankedTensorType>(m.getType()).getShape();
    g.maskDims = {d[0], d[1], d[2]};
  }
  if (auto v = op.getMaskValue())
    g.fill = v->convertToDouble();
  if (op.getDropoutSeed()) {
    g.dropout = true;
    g.dropThreshold = op.getDropoutThreshold()->convertToDouble();
    g.dropScale = op.getDropoutScale()->convertToDouble();
    ArrayRef<int64_t> d = *op.getDropoutStrides();
    g.dropStrides = {d[0], d[1], d[2]};
  }
  if (g.dtype != DType::BF16 && g.dtype != DType::F16) {
    why = "attention on the GPU takes bfloat16 or float16 operands";
    return std::nullopt;
  }
  if (g.headDim % 16 != 0 || g.headDim > 128 || vt.getShape()[2] != g.headDim) {
    why = "attention on the GPU takes a head dim that is a multiple of 16 up to 128, the same for q and v";
    return std::nullopt;
  }
  if (g.batch * g.queries == 0 || g.keys == 0) {
    why = "attention over no queries or no keys";
    return std::nullopt;
  }
  return g;
}

std::string floatLiteral(double v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.9e", v) << "f";
  return os.str();
}

// What both kernels share: the types, the sizes, the mma and the tile loads.
std::string prelude(const AttentionGeometry &g) {
  bool bf16 = g.dtype == DType::BF16;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n";
  if (g.dropout) // (rf_random_uniform: the draws rfuse.random_uniform makes)
    os << scalarOpsSource() << "\n";
  os
     << "#define RF_INF __int_as_float(0x7f800000)\n"
     << "typedef " << (bf16 ? "__nv_bfloat16" : "__half") << " rf_t;\n"
     // (the batch is the grid's: one source for every batch size of a dynamic-batch program)
     << "constexpr int LQ = " << g.queries << ", LK = " << g.keys << ", HD = " << g.headDim << ";\n"
     << "constexpr int TILE = " << kTile << ", LDS = HD + 8; // shared rows padded: no bank conflicts\n"
     << "constexpr float SCALE = " << floatLiteral(g.scale) << ";\n"
     << "constexpr float SCALE_LOG2 = " << floatLiteral(g.scale * M_LOG2E) << "; // exp(x) = exp2(x log2 e)\n"
     << "constexpr float LOG2E = " << floatLiteral(M_LOG2E) << ", LN2 = " << floatLiteral(M_LN2) << ";\n";
  {
    // Score (l, s) masked: causal and s > l, or the mask (a size-1 dim spread: stride 0). (No
    // mask: all of it folds away.)
    std::array<int64_t, 3> strides = attentionMaskStrides(g.maskDims.value_or(std::array<int64_t, 3>{1, 1, 1}));
    bool skips = g.causal && std::isinf(g.fill);
    os << "constexpr bool CAUSAL = " << (g.causal ? "true" : "false") << ", HAS_MASK = " << (g.maskDims ? "true" : "false")
       << ";\n"
       << "// causal with -inf: the tiles above the diagonal add exactly nothing, and are skipped\n"
       << "constexpr bool SKIP_ABOVE_DIAGONAL = " << (skips ? "true" : "false") << ";\n"
       << "constexpr long long MASK_B = " << strides[0] << ", MASK_L = " << strides[1] << ", MASK_S = " << strides[2]
       << ";\n"
       << "#define RF_FILL_LOG2 " << (std::isinf(g.fill) ? std::string("(-RF_INF)") : floatLiteral(g.fill * M_LOG2E))
       << " // a masked score, log2 domain\n"
       << R"CUDA(// Whether the score of query r and key c is masked (mb: the batch's mask). A masked score is
// RF_FILL_LOG2, and its gradient 0 (it does not depend on q or k).
__device__ __forceinline__ bool rf_masked(const bool* mb, int r, int c) {
  bool m = CAUSAL && c > r;
  if (HAS_MASK && r < LQ && c < LK)
    m = m || mb[r * MASK_L + c * MASK_S];
  return m;
}
// The score q . k of query r and key c in the log2 domain, or the masked value.
__device__ __forceinline__ float rf_log2_score(float qk, bool masked) { return masked ? RF_FILL_LOG2 : qk * SCALE_LOG2; }
// The end of the keys a block of queries from q0 reads.
__device__ __forceinline__ int rf_keys_end(int q0) { return SKIP_ABOVE_DIAGONAL ? min(LK, q0 + TILE) : LK; }
// The first query a block of keys from k0 reads.
__device__ __forceinline__ int rf_queries_begin(int k0) { return SKIP_ABOVE_DIAGONAL ? k0 : 0; }
)CUDA";
  }
  // Dropout: probability (r, c) of batch b times DROP_SCALE where its draw (rfuse.random_uniform's
  // at the flat index the strides give, under the key (k0, k1)) is at least DROP_THRESHOLD, else
  // 0. (No dropout: 1, and all of it folds away.)
  os << "constexpr bool DROPOUT = " << (g.dropout ? "true" : "false") << ";\n"
     << "constexpr float DROP_THRESHOLD = " << floatLiteral(g.dropThreshold)
     << ", DROP_SCALE = " << floatLiteral(g.dropScale) << ";\n"
     << "constexpr long long DROP_B = " << g.dropStrides[0] << ", DROP_L = " << g.dropStrides[1]
     << ", DROP_S = " << g.dropStrides[2] << ";\n"
     << "__device__ __forceinline__ float rf_kept(unsigned k0, unsigned k1, int b, int r, int c) {\n";
  if (g.dropout)
    os << "  unsigned long long i = (unsigned long long)(b * DROP_B + r * DROP_L + c * DROP_S);\n"
       << "  return rfuse::scalar::rf_random_uniform(i, k0, k1) >= DROP_THRESHOLD ? DROP_SCALE : 0.f;\n";
  else
    os << "  return 1.f;\n";
  os << "}\n";
  os
     << "__device__ __forceinline__ void rf_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {\n"
     << "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32." << (bf16 ? "bf16.bf16" : "f16.f16")
     << ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
     << "      : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
     << "      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
     << "}\n"
     << "__device__ __forceinline__ unsigned rf_pack(float lo, float hi) {\n"
     << "  " << (bf16 ? "__nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);" : "__half2 h = __floats2half2_rn(lo, hi);")
     << "\n  return *reinterpret_cast<unsigned*>(&h);\n}\n";
  os << R"CUDA(
// Four 8 x 8 matrices of a shared tile into mma B fragments, one ldmatrix: lane i gives the
// address of row i % 8 of matrix i / 8; matrix m starts at row row0 + 8 (m % 2), column col0 + 8
// (m / 2). Without .trans the tile is stored [n][k] (rows of B^T); with it, [k][n].
template <bool TRANS>
__device__ __forceinline__ void rf_ldmatrix4(unsigned* r, const rf_t* sm, int row0, int col0) {
  const int lane = threadIdx.x & 31, m = lane >> 3;
  unsigned addr = (unsigned)__cvta_generic_to_shared(sm + (row0 + 8 * (m & 1) + (lane & 7)) * LDS + col0 + 8 * (m >> 1));
  if (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// Rows row0 .. row0 + TILE - 1 of a [rows, HD] matrix into shared memory (zeros past the end).
__device__ __forceinline__ void rf_load_tile(rf_t* sm, const rf_t* __restrict__ g, int row0, int rows) {
  constexpr int CHUNKS = HD / 8; // 16 bytes each
  for (int i = threadIdx.x; i < TILE * CHUNKS; i += blockDim.x) {
    int r = i / CHUNKS, c = (i % CHUNKS) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < rows)
      v = *reinterpret_cast<const uint4*>(g + (long long)(row0 + r) * HD + c);
    *reinterpret_cast<uint4*>(sm + r * LDS + c) = v;
  }
}
// The warp's mma A operands of rows row0 .. row0 + 15 of a [rows, HD] matrix, one per 16 of HD
// (zeros past the end).
__device__ __forceinline__ void rf_load_rows(unsigned (*a)[4], const rf_t* __restrict__ g, int row0, int rows) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
  for (int t = 0; t < HD / 16; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int r = row0 + gr + 8 * h;
      bool in = r < rows;
      const rf_t* p = g + (long long)r * HD + 16 * t + c2;
      a[t][h] = in ? *reinterpret_cast<const unsigned*>(p) : 0u;
      a[t][2 + h] = in ? *reinterpret_cast<const unsigned*>(p + 8) : 0u;
    }
}
// acc[j] (16 rows x 8 columns each, j < TILE / 8) = A (16 x HD, registers) times the transposed
// shared tile (TILE rows x HD): rows of A against rows of the tile.
__device__ __forceinline__ void rf_rows_times_tile(float (*acc)[4], const unsigned (*a)[4], const rf_t* sm) {
#pragma unroll
  for (int j = 0; j < TILE / 8; ++j)
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
  for (int j = 0; j < TILE / 8; j += 2)
#pragma unroll
    for (int t = 0; t < HD / 16; ++t) {
      // B^T rows 8j .. 8j + 15 (tile rows), k 16t .. 16t + 15: columns j and j + 1 of the product
      unsigned b[4];
      rf_ldmatrix4<false>(b, sm, 8 * j, 16 * t);
      // (matrix order: rows 8j k-lo, rows 8j + 8 k-lo, rows 8j k-hi, rows 8j + 8 k-hi)
      rf_mma(acc[j], a[t], b[0], b[2]);
      rf_mma(acc[j + 1], a[t], b[1], b[3]);
    }
}
// acc[j] (16 rows x 8 of HD each) += P (16 x TILE, the C fragments of rf_rows_times_tile, rounded
// to rf_t) times the shared tile (TILE rows x HD).
__device__ __forceinline__ void rf_scores_times_tile(float (*acc)[4], const float (*p)[4], const rf_t* sm) {
#pragma unroll
  for (int t = 0; t < TILE / 16; ++t) {
    unsigned a[4] = {rf_pack(p[2 * t][0], p[2 * t][1]), rf_pack(p[2 * t][2], p[2 * t][3]),
                     rf_pack(p[2 * t + 1][0], p[2 * t + 1][1]), rf_pack(p[2 * t + 1][2], p[2 * t + 1][3])};
#pragma unroll
    for (int j = 0; j < HD / 8; j += 2) {
      // tile rows (k) 16t .. 16t + 15, columns 8j .. 8j + 15 (n): columns j and j + 1 of acc
      unsigned b[4];
      rf_ldmatrix4<true>(b, sm, 16 * t, 8 * j);
      // (matrix order: k-lo column j, k-hi column j, k-lo column j + 1, k-hi column j + 1)
      rf_mma(acc[j], a, b[0], b[1]);
      rf_mma(acc[j + 1], a, b[2], b[3]);
    }
  }
}
// Stores the warp's 16 x HD accumulator times `scale` at rows row0 .. of a [rows, HD] matrix.
__device__ __forceinline__ void rf_store_rows(rf_t* __restrict__ g, const float (*acc)[4], int row0, int rows,
                                              float scale0, float scale1) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, c2 = (lane & 3) * 2;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int r = row0 + gr + 8 * h;
    if (r >= rows)
      continue;
    float s = h ? scale1 : scale0;
#pragma unroll
    for (int j = 0; j < HD / 8; ++j)
      *reinterpret_cast<unsigned*>(g + (long long)r * HD + 8 * j + c2) = rf_pack(acc[j][2 * h] * s, acc[j][2 * h + 1] * s);
  }
}
)CUDA";
  return os.str();
}

// A kernel's first lines: its comment, the prelude and its signature up to the body (at least
// `minBlocks` blocks resident per SM: the registers ptxas may use).
std::string opening(const AttentionGeometry &g, const std::string &name, const std::string &comment,
                    const std::string &parameters, int minBlocks) {
  return "// rfuse attention " + comment + "\n" + prelude(g) + "extern \"C\" __global__ void __launch_bounds__(" +
         std::to_string(kThreads) + ", " + std::to_string(minBlocks) + ") " + name + "(" + parameters + ") {\n";
}

KernelSpec spec(const std::string &name, std::string source, int64_t blocks, unsigned inputs, unsigned outputs) {
  KernelSpec k;
  k.name = name;
  k.source = std::move(source);
  k.launch = LaunchKind::Tiles;
  k.blockSize = kThreads;
  k.grid = (unsigned)blocks;
  k.elements = blocks * kThreads;
  k.numInputs = inputs;
  k.numOutputs = outputs;
  return k;
}

int64_t tiles(int64_t n) { return (n + kTile - 1) / kTile; }

std::string maskParameter(const AttentionGeometry &g) {
  return g.maskDims ? "const bool* __restrict__ mask, " : "";
}

std::string maskOfBatch(const AttentionGeometry &g) {
  return g.maskDims ? "  const bool* mb = mask + (long long)b * MASK_B;\n" : "  const bool* mb = nullptr;\n";
}

std::string dropoutParameter(const AttentionGeometry &g) {
  return g.dropout ? "const int* __restrict__ seed, " : "";
}

// The dropout key's two words (dk0, dk1).
std::string dropoutKey(const AttentionGeometry &g) {
  return g.dropout ? "  const unsigned dk0 = (unsigned)seed[0], dk1 = (unsigned)seed[1];\n"
                   : "  const unsigned dk0 = 0u, dk1 = 0u;\n";
}

// The kernel's inputs: the op's tensors before its mask, the mask and the seed.
unsigned kernelInputs(const AttentionGeometry &g, unsigned tensors) {
  return tensors + (g.maskDims ? 1 : 0) + (g.dropout ? 1 : 0);
}

} // namespace

std::optional<KernelSpec> emitAttention(AttentionOp op, const std::string &name, std::string &why) {
  auto g = geometryOf(op, why);
  if (!g)
    return std::nullopt;
  std::string src;
  llvm::raw_string_ostream os(src);
  os << opening(*g, name,
                "kernel " + name + ": softmax(" + std::to_string(g->queries) + " x " + std::to_string(g->keys) +
                    " scores) times v, head dim " + std::to_string(g->headDim) + ", a block per 64 queries of each batch",
                "const rf_t* __restrict__ q, const rf_t* __restrict__ k, const rf_t* __restrict__ v, " +
                    maskParameter(*g) + dropoutParameter(*g) + "rf_t* __restrict__ out, float* __restrict__ lse",
                g->headDim <= 64 ? 4 : 1) // (sm_90: ~120 registers at D = 64, no spill; 168 at 128)
     << (R"CUDA(  __shared__ __align__(16) rf_t ks[TILE * LDS];
  __shared__ __align__(16) rf_t vs[TILE * LDS];
  constexpr int QT = (LQ + TILE - 1) / TILE;
  const int b = blockIdx.x / QT, qBlock0 = (blockIdx.x % QT) * TILE, row0 = qBlock0 + (threadIdx.x >> 5) * 16;
  const int lane = threadIdx.x & 31, gr = lane >> 2, c2 = (lane & 3) * 2;
  const rf_t* qb = q + (long long)b * LQ * HD;
  const rf_t* kb = k + (long long)b * LK * HD;
  const rf_t* vb = v + (long long)b * LK * HD;
  unsigned qa[HD / 16][4];
  rf_load_rows(qa, qb, row0, LQ);
  float o[HD / 8][4];
#pragma unroll
  for (int j = 0; j < HD / 8; ++j)
    o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-RF_INF, -RF_INF}, l[2] = {0.f, 0.f}; // rows gr and gr + 8, log2 domain
)CUDA" + maskOfBatch(*g) + dropoutKey(*g) + R"CUDA(  for (int k0 = 0; k0 < rf_keys_end(qBlock0); k0 += TILE) {
    __syncthreads();
    rf_load_tile(ks, kb, k0, LK);
    rf_load_tile(vs, vb, k0, LK);
    __syncthreads();
    float s[TILE / 8][4];
    rf_rows_times_tile(s, qa, ks);
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int j = 0; j < TILE / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int col = k0 + 8 * j + c2 + (e & 1);
        float x = col < LK ? rf_log2_score(s[j][e], rf_masked(mb, row0 + gr + 8 * (e >> 1), col)) : -RF_INF;
        s[j][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    float corr[2], mu[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) { // the row's four lanes agree on its maximum
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      // (a row with every score so far masked at -inf: its terms are 0, subtract 0, not -inf)
      mu[h] = mx[h] == -RF_INF ? 0.f : mx[h];
      corr[h] = exp2f(m[h] - mu[h]);
      m[h] = mx[h];
      l[h] *= corr[h];
    }
#pragma unroll
    for (int j = 0; j < HD / 8; ++j) {
      o[j][0] *= corr[0]; o[j][1] *= corr[0];
      o[j][2] *= corr[1]; o[j][3] *= corr[1];
    }
#pragma unroll
    for (int j = 0; j < TILE / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2f(s[j][e] - mu[e >> 1]);
        l[e >> 1] += p; // (the softmax's sum: of every probability, dropped or not)
        s[j][e] = p * rf_kept(dk0, dk1, b, row0 + gr + 8 * (e >> 1), k0 + 8 * j + c2 + (e & 1));
      }
    rf_scores_times_tile(o, s, vs);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    int r = row0 + gr + 8 * h;
    if ((lane & 3) == 0 && r < LQ)
      lse[(long long)b * LQ + r] = (m[h] + log2f(l[h])) * LN2;
  }
  rf_store_rows(out + (long long)b * LQ * HD, o, row0, LQ, 1.f / l[0], 1.f / l[1]); // (every score masked: NaN)
}
)CUDA");
  return spec(name, os.str(), g->batch * tiles(g->queries), kernelInputs(*g, 3), 2);
}

std::optional<KernelSpec> emitAttentionBackward(AttentionBackwardOp op, const std::string &name, std::string &why) {
  auto g = geometryOf(op, why);
  if (!g)
    return std::nullopt;
  std::string src;
  llvm::raw_string_ostream os(src);
  os << opening(*g, name,
                "backward kernel " + name + ": " + std::to_string(g->queries) + " queries, " +
                    std::to_string(g->keys) + " keys, head dim " + std::to_string(g->headDim) +
                    "; per batch a block per 64 keys, then one per 64 queries",
                "const rf_t* __restrict__ q, const rf_t* __restrict__ k, const rf_t* __restrict__ v, "
                "const rf_t* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta, " +
                    maskParameter(*g) + dropoutParameter(*g) +
                    "rf_t* __restrict__ dq, rf_t* __restrict__ dk, rf_t* __restrict__ dv",
                // (sm_90, D = 64: 168 registers and three blocks per SM, or ~200 and two unbounded;
                // D = 128 needs every register: 255 and a few spills)
                g->headDim <= 64 ? 3 : 1)
     << (R"CUDA(  __shared__ __align__(16) rf_t ta[TILE * LDS];
  __shared__ __align__(16) rf_t tb[TILE * LDS];
  __shared__ float rowLse[TILE], rowDelta[TILE];
  constexpr int KT = (LK + TILE - 1) / TILE, QT = (LQ + TILE - 1) / TILE;
  const int b = blockIdx.x / (KT + QT), tile = blockIdx.x % (KT + QT);
  const int lane = threadIdx.x & 31, gr = lane >> 2, c2 = (lane & 3) * 2, warpRow = (threadIdx.x >> 5) * 16;
  const rf_t* qb = q + (long long)b * LQ * HD;
  const rf_t* kb = k + (long long)b * LK * HD;
  const rf_t* vb = v + (long long)b * LK * HD;
  const rf_t* gb = dout + (long long)b * LQ * HD;
  const float* lb = lse + (long long)b * LQ;
  const float* db = delta + (long long)b * LQ;
  float s[TILE / 8][4], dp[TILE / 8][4];
)CUDA" + maskOfBatch(*g) + dropoutKey(*g) + R"CUDA(  if (tile < KT) {
    // grad_k and grad_v of 64 keys: the transposed scores (keys x queries) of every query tile.
    const int kBlock0 = tile * TILE, key0 = kBlock0 + warpRow;
    unsigned ka[HD / 16][4], va[HD / 16][4];
    rf_load_rows(ka, kb, key0, LK);
    rf_load_rows(va, vb, key0, LK);
    float dkAcc[HD / 8][4], dvAcc[HD / 8][4];
#pragma unroll
    for (int j = 0; j < HD / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dkAcc[j][e] = dvAcc[j][e] = 0.f;
    for (int q0 = rf_queries_begin(kBlock0); q0 < LQ; q0 += TILE) {
      __syncthreads();
      rf_load_tile(ta, qb, q0, LQ); // q
      rf_load_tile(tb, gb, q0, LQ); // grad_out
      if (threadIdx.x < TILE) {
        int r = q0 + threadIdx.x;
        rowLse[threadIdx.x] = r < LQ ? lb[r] * LOG2E : RF_INF; // P = 0 past the last query
        rowDelta[threadIdx.x] = r < LQ ? db[r] : 0.f;
      }
      __syncthreads();
      rf_rows_times_tile(s, ka, ta);  // S^T = K Q^T
      rf_rows_times_tile(dp, va, tb); // dP^T = V dO^T
#pragma unroll
      for (int j = 0; j < TILE / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int col = 8 * j + c2 + (e & 1), key = key0 + gr + 8 * (e >> 1);
          bool masked = rf_masked(mb, q0 + col, key);
          float p = exp2f(rf_log2_score(s[j][e], masked) - rowLse[col]);
          // dropout: P' = P D for grad_v, and dP = dP' D (D: what dropout multiplied by)
          float kept = rf_kept(dk0, dk1, b, q0 + col, key);
          s[j][e] = p * kept;
          dp[j][e] = masked ? 0.f : p * (dp[j][e] * kept - rowDelta[col]);
        }
      rf_scores_times_tile(dvAcc, s, tb);  // dV += P^T dO
      rf_scores_times_tile(dkAcc, dp, ta); // dK += dS^T Q (scaled at the end)
    }
    rf_store_rows(dk + (long long)b * LK * HD, dkAcc, key0, LK, SCALE, SCALE);
    rf_store_rows(dv + (long long)b * LK * HD, dvAcc, key0, LK, 1.f, 1.f);
  } else {
    // grad_q of 64 queries: the scores of every key tile.
    const int qBlock0 = (tile - KT) * TILE, row0 = qBlock0 + warpRow;
    unsigned qa[HD / 16][4], ga[HD / 16][4];
    rf_load_rows(qa, qb, row0, LQ);
    rf_load_rows(ga, gb, row0, LQ);
    float rl[2], rd[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int r = row0 + gr + 8 * h;
      rl[h] = r < LQ ? lb[r] * LOG2E : RF_INF;
      rd[h] = r < LQ ? db[r] : 0.f;
    }
    float dqAcc[HD / 8][4];
#pragma unroll
    for (int j = 0; j < HD / 8; ++j)
      dqAcc[j][0] = dqAcc[j][1] = dqAcc[j][2] = dqAcc[j][3] = 0.f;
    for (int k0 = 0; k0 < rf_keys_end(qBlock0); k0 += TILE) {
      __syncthreads();
      rf_load_tile(ta, kb, k0, LK); // k
      rf_load_tile(tb, vb, k0, LK); // v
      __syncthreads();
      rf_rows_times_tile(s, qa, ta);  // S = Q K^T
      rf_rows_times_tile(dp, ga, tb); // dP = dO V^T
#pragma unroll
      for (int j = 0; j < TILE / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int col = k0 + 8 * j + c2 + (e & 1);
          bool masked = rf_masked(mb, row0 + gr + 8 * (e >> 1), col);
          float p = col < LK ? exp2f(rf_log2_score(s[j][e], masked) - rl[e >> 1]) : 0.f;
          float kept = rf_kept(dk0, dk1, b, row0 + gr + 8 * (e >> 1), col);
          dp[j][e] = masked ? 0.f : p * (dp[j][e] * kept - rd[e >> 1]);
        }
      rf_scores_times_tile(dqAcc, dp, ta); // dQ += dS K (scaled at the end)
    }
    rf_store_rows(dq + (long long)b * LQ * HD, dqAcc, row0, LQ, SCALE, SCALE);
  }
}
)CUDA");
  return spec(name, os.str(), g->batch * (tiles(g->keys) + tiles(g->queries)), kernelInputs(*g, 6), 3);
}

} // namespace rfuse::cuda
