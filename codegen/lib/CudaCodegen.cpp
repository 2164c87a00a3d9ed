// CUDA C++ generation for rfuse kernel functions. See CudaCodegen.h and docs/codegen.md.
#include "rfuse/Codegen/CudaCodegen.h"

#include "AttentionKernels.h"
#include "KernelRegion.h"

#include "rfuse/IR/Geometry.h"
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/IR/ScalarOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include "llvm/ADT/SmallSet.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace mlir;
using namespace rfuse::codegen;

namespace rfuse::cuda {

using codegen::Region;

const char *scalarOpsSource() {
  static const char *text =
#include "ScalarOpsSource.inc"
      ;
  return text;
}

namespace {

// C++ storage and compute types of each dtype: f16/bf16 are stored narrow and computed in float.
const char *storageType(DType d) {
  switch (d) {
  case DType::F32: return "float";
  case DType::F64: return "double";
  case DType::F16: return "__half";
  case DType::BF16: return "__nv_bfloat16";
  case DType::I1: return "bool";
  case DType::I32: return "int";
  case DType::I64: return "long long";
  }
  return "?";
}
const char *computeType(DType d) {
  switch (d) {
  case DType::F16: case DType::BF16: return "float";
  default: return storageType(d);
  }
}

// The elements of a vector variable `v` (a float4, a uint2 of four bfloat16s, ...) as an array
// of d's storage type, for loadExpr / storeStmt with the lane as the index.
std::string vectorElements(const std::string &v, DType d, bool isConst) {
  return std::string("reinterpret_cast<") + (isConst ? "const " : "") + storageType(d) + "*>(&" + v + ")";
}

std::string loadExpr(const std::string &ptr, const std::string &index, DType d) {
  std::string e = ptr + "[" + index + "]";
  if (d == DType::F16) return "__half2float(" + e + ")";
  if (d == DType::BF16) return "__bfloat162float(" + e + ")";
  return e;
}
std::string storeStmt(const std::string &ptr, const std::string &index, const std::string &v, DType d) {
  std::string rhs = v;
  if (d == DType::F16) rhs = "__float2half_rn(" + v + ")";
  if (d == DType::BF16) rhs = "__float2bfloat16_rn(" + v + ")";
  return ptr + "[" + index + "] = " + rhs + ";";
}

// An exact C++ literal of `v` in compute type `ct`.
std::string floatLiteral(double v, const char *ct) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (std::isnan(v))
    os << "(" << ct << ")__longlong_as_double(0x7ff8000000000000LL)";
  else if (std::isinf(v))
    os << "(" << ct << ")__longlong_as_double(" << (v > 0 ? "0x7ff0000000000000LL" : "(long long)0xfff0000000000000ULL") << ")";
  else
    os << "(" << ct << ")" << llvm::format("%a", v);
  return os.str();
}

std::string splatLiteral(ConstantOp c, std::string &why) {
  auto splat = llvm::dyn_cast<SplatElementsAttr>(c.getValue());
  if (!splat) {
    why = "a dense (non-splat) constant inside a kernel";
    return "";
  }
  DType d = dtypeOf(c.getResult());
  Attribute a = splat.getSplatValue<Attribute>();
  if (auto f = llvm::dyn_cast<FloatAttr>(a))
    return floatLiteral(f.getValueAsDouble(), computeType(d));
  auto i = llvm::cast<IntegerAttr>(a);
  if (d == DType::I1)
    return i.getValue().getBoolValue() ? "true" : "false";
  return "(" + std::string(computeType(d)) + ")" + std::to_string(i.getValue().getSExtValue()) + "LL";
}

// Offset into an input of `inShape` read through an index map from iteration index `idx` over
// `space`: result dim d of the space takes input dim `inDimOf[d]` (or none).
std::string mappedOffset(const std::string &idx, ArrayRef<int64_t> space,
                         ArrayRef<int64_t> inShape, ArrayRef<int64_t> inDimOf /* per space dim */) {
  auto spaceStrides = stridesOf(space);
  auto inStrides = stridesOf(inShape);
  std::string expr;
  for (size_t d = 0; d < space.size(); ++d) {
    int64_t in = inDimOf[d];
    if (in < 0 || inShape[in] == 1)
      continue;
    std::string coord = "((" + idx + ") / " + std::to_string(spaceStrides[d]) + "LL)";
    if (d > 0)
      coord = "(" + coord + " % " + std::to_string(space[d]) + "LL)";
    expr += (expr.empty() ? "" : " + ") + coord +
            (inStrides[in] == 1 ? "" : " * " + std::to_string(inStrides[in]) + "LL");
  }
  return expr.empty() ? "0" : expr;
}

// The C++ expression of a pointwise op or cast, given its operands' names.
std::string opExpr(Operation *op, ArrayRef<std::string> a, std::string &why) {
  if (auto pw = dyn_cast<PointwiseOpInterface>(op)) {
    ScalarOpKind k = pw.getScalarOp();
    std::string fn = std::string(scalarFunctionName(k));
    const char *ct = computeType(dtypeOf(op->getOperand(0)));
    switch (scalarArity(k)) {
    case ScalarArity::Unary: return fn + "<" + ct + ">(" + a[0] + ")";
    case ScalarArity::Binary:
    case ScalarArity::Compare: return fn + "<" + ct + ">(" + a[0] + ", " + a[1] + ")";
    case ScalarArity::Logic1: return fn + "(" + a[0] + ")";
    case ScalarArity::Logic2: return fn + "(" + a[0] + ", " + a[1] + ")";
    case ScalarArity::Select: return "rf_select(" + a[0] + ", " + a[1] + ", " + a[2] + ")";
    }
  }
  if (auto c = dyn_cast<CastOp>(op)) {
    DType from = dtypeOf(c.getInput()), to = dtypeOf(c.getResult());
    std::string ct = computeType(to);
    if (to == DType::I1)
      return "rf_to_bool((double)(" + a[0] + "))";
    if (isFloat(from) && to == DType::I32)
      return "rf_float_to_int<int>((double)(" + a[0] + "))";
    if (isFloat(from) && to == DType::I64)
      return "rf_float_to_int<long long>((double)(" + a[0] + "))";
    if (to == DType::F16)
      return "__half2float(__float2half_rn((float)(" + a[0] + ")))";
    if (to == DType::BF16)
      return "__bfloat162float(__float2bfloat16_rn((float)(" + a[0] + ")))";
    return "(" + ct + ")(" + a[0] + ")";
  }
  why = "no CUDA code for '" + op->getName().getStringRef().str() + "'";
  return "";
}

std::string describeOps(ArrayRef<Operation *> ops, Location loc) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "// ops:";
  for (Operation *op : ops)
    os << " " << op->getName().stripDialect();
  std::string where;
  llvm::raw_string_ostream ws(where);
  loc.print(ws);
  if (!ws.str().empty() && ws.str() != "loc(unknown)")
    os << "\n// from: " << ws.str();
  return os.str();
}

std::string prelude() {
  return std::string("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n") + scalarOpsSource() +
         "\nusing namespace rfuse::scalar;\n"
         "__device__ __forceinline__ long long rf_clampi(long long x, long long lo, long long hi) {\n"
         "  return x < lo ? lo : (x > hi ? hi : x);\n}\n";
}

// readElement's expressions as CUDA C++ text (KernelRegion.h): index arithmetic in long long.
struct CudaIndexExprs {
  using T = std::string;
  const Region &r;
  std::string &why; // set when an op has no CUDA code
  T cst(int64_t c) { return std::to_string(c) + "LL"; }
  T add(T a, T b) { return "(" + a + " + " + b + ")"; }
  T sub(T a, T b) { return "(" + a + " - " + b + ")"; }
  T mulc(T a, int64_t c) { return c == 1 ? a : "(" + a + " * " + cst(c) + ")"; }
  T divc(T a, int64_t c) { return c == 1 ? a : "(" + a + " / " + cst(c) + ")"; }
  T remc(T a, int64_t c) { return "(" + a + " % " + cst(c) + ")"; }
  T clamp(T a, int64_t lo, int64_t hi) { return "rf_clampi(" + a + ", " + cst(lo) + ", " + cst(hi) + ")"; }
  T lt(T a, T b) { return "(" + a + " < " + b + ")"; }
  T ge(T a, T b) { return "(" + a + " >= " + b + ")"; }
  T eq(T a, T b) { return "(" + a + " == " + b + ")"; }
  T both(T a, T b) { return "(" + a + " && " + b + ")"; }
  T select(T c, T a, T b) { return "(" + c + " ? " + a + " : " + b + ")"; }
  T load(int i, ArrayRef<T> coords) {
    Value in = r.inputs[i];
    auto shape = shapeOf(in);
    auto strides = stridesOf(shape);
    std::string off;
    for (size_t d = 0; d < coords.size(); ++d)
      if (shape[d] != 1)
        off += (off.empty() ? "" : " + ") + mulc(coords[d], strides[d]);
    return loadExpr("in" + std::to_string(i), off.empty() ? "0" : off, dtypeOf(in));
  }
  T index(int i, T position) { return "((long long)in" + std::to_string(i) + "[" + position + "])"; }
  T apply(Operation *op, ArrayRef<T> operands) { return opExpr(op, operands, why); }
  T splat(ConstantOp c) { return splatLiteral(c, why); }
  T padValue(double v, Value like) {
    DType d = dtypeOf(like);
    if (d == DType::I1)
      return v != 0 ? "true" : "false";
    if (!isFloat(d))
      return "(" + std::string(computeType(d)) + ")" + std::to_string((int64_t)v) + "LL";
    return floatLiteral(v, computeType(d));
  }
};

// The coordinates of flat index `idx` over `space`, row-major.
SmallVector<std::string> coordsOf(const std::string &idx, ArrayRef<int64_t> space) {
  auto strides = stridesOf(space);
  SmallVector<std::string> c;
  for (size_t d = 0; d < space.size(); ++d) {
    std::string e = strides[d] == 1 ? idx : "((" + idx + ") / " + std::to_string(strides[d]) + "LL)";
    if (d > 0)
      e = "(" + e + " % " + std::to_string(space[d]) + "LL)";
    c.push_back(e);
  }
  return c;
}

// Names the values of one emission site (a loop body or a row scope).
struct Scope {
  llvm::DenseMap<Value, std::string> names;
  std::string code;
  int counter = 0;
  std::string fresh() { return "v" + std::to_string(counter++); }
};

// ---- Pointwise -------------------------------------------------------------------------------

class PointwiseEmitter {
public:
  PointwiseEmitter(const Region &r, std::string name) : r(r), name(std::move(name)) {}

  std::optional<KernelSpec> emit(std::string &why) {
    if (r.outputs.empty()) {
      why = "a kernel without outputs";
      return std::nullopt;
    }
    space = SmallVector<int64_t>(shapeOf(r.outputs[0]));
    for (Value o : r.outputs)
      if (shapeOf(o) != ArrayRef<int64_t>(space)) {
        why = "outputs of different shapes in one pointwise kernel";
        return std::nullopt;
      }
    if (chooseTiledTransposes())
      return emitTiled(why);
    int64_t n = numElements(space);
    // Vector width: 4 when every direct access (inputs read at the iteration index, outputs)
    // has an element of 4 or 2 bytes (a float4, or 8 bytes of bfloat16: a matmul epilogue's
    // casts between the two), 2 when all have 8 bytes; otherwise 1. Scalar accesses of a
    // vectorizable kernel cost: its narrow loads and stores are several instructions a line.
    bool all4or2 = true, all8 = true;
    auto consider = [&](DType d) {
      int size = dtypeSize(d);
      all4or2 &= size == 4 || size == 2;
      all8 &= size == 8;
    };
    for (Value in : r.inputs)
      if (isDirect(in))
        consider(dtypeOf(in));
    for (Value o : r.outputs)
      consider(dtypeOf(o));
    // (whatever the size, so that one source serves every batch size of a dynamic program:
    // a tail loop takes what the vector loop leaves)
    int vw = all4or2 ? 4 : all8 ? 2 : 1;

    std::string body, tail;
    if (!emitBody(vw, body, why) || !emitBody(1, tail, why))
      return std::nullopt;
    std::string src;
    llvm::raw_string_ostream os(src);
    os << "// rfuse pointwise kernel " << name << ": " << n << " elements, vector width " << vw
       << "\n" << describeOps(r.ops, r.loc) << "\n" << prelude() << "\nextern \"C\" __global__ void "
       << name << "(";
    params(os);
    os << ") {\n  const long long n = " << n << "LL;\n"
       << "  const long long stride = (long long)gridDim.x * blockDim.x;\n"
       << "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
    if (vw > 1)
      os << "  for (long long vi = tid; vi < n / " << vw << "; vi += stride) {\n" << body << "  }\n"
         << "  for (long long idx = n / " << vw << " * " << vw << " + tid; idx < n; idx += stride) {\n"
         << tail << "  }\n";
    else
      os << "  for (long long idx = tid; idx < n; idx += stride) {\n" << tail << "  }\n";
    os << "}\n";
    KernelSpec k;
    k.name = name;
    k.source = os.str();
    k.launch = LaunchKind::GridStride;
    k.elements = n;
    k.vectorWidth = vw;
    k.numInputs = r.inputs.size();
    k.numOutputs = r.outputs.size();
    return k;
  }

private:
  const Region &r;
  std::string name;
  SmallVector<int64_t> space;
  llvm::DenseSet<Operation *> hidden = readThroughIndexMaps(r); // computed only where read
  // Tiled mode (chooseTiledTransposes): the transposes read through shared-memory tiles (tile k
  // is tiledOps[k]'s), each one's read at the thread's element in the second phase, and the
  // kernel dim along which those inputs' innermost dim runs.
  SmallVector<Operation *> tiledOps;
  llvm::DenseMap<Operation *, std::string> tileReads;
  int64_t tileDim = -1;
  static constexpr int64_t kTile = 32, kTileRows = 8; // 32 x 32 tiles, blocks of 32 x 8 threads

  // A transpose that moves its input's innermost dim reads, at consecutive iteration indices,
  // elements a stride apart: each lane of a warp a sector of its own (a transformer's attention
  // head splits and merges ran at ~420 GB/s so). When the kernel's innermost dim and the dim the
  // input's innermost dim becomes (tileDim; the largest such input's, when they differ) both
  // span at least 16, the kernel runs over 32 x 32 tiles of those two dims: a block reads each
  // such input's tile along the input's innermost dim into shared memory, then computes and
  // writes its elements along the kernel's innermost dim. Every transpose of an input with that
  // tileDim reads through a tile; other reads are as in the flat kernel. (Broadcasts keep their
  // dims in order, so only transposes move an innermost dim.)
  bool chooseTiledTransposes() {
    int64_t rank = space.size(), bestBytes = 0;
    if (rank < 2 || space[rank - 1] < 16)
      return false;
    SmallVector<std::pair<Operation *, int64_t>> candidates; // op, the dim it would tile
    for (Operation *op : r.ops) {
      if (!isa<TransposeOp>(op) || hidden.contains(op) || r.indexOf(op->getOperand(0)) < 0 ||
          shapeOf(op->getResult(0)) != ArrayRef<int64_t>(space))
        continue;
      auto map = indexMap(op);
      int64_t inRank = shapeOf(op->getOperand(0)).size();
      if (map[rank - 1] < 0 || map[rank - 1] == inRank - 1)
        continue; // the innermost dim broadcast (one element for a warp) or read in order
      const int64_t *q = llvm::find(map, inRank - 1);
      if (q == map.end() || space[q - map.begin()] < 16)
        continue;
      candidates.push_back({op, q - map.begin()});
      int64_t bytes = numElements(shapeOf(op->getOperand(0))) * dtypeSize(dtypeOf(op->getOperand(0)));
      if (bytes > bestBytes) {
        bestBytes = bytes;
        tileDim = q - map.begin();
      }
    }
    // The second phase reads a tile's column: thread (row, lane) the element that lane `row` of
    // the first phase loaded.
    for (auto [op, q] : candidates)
      if (q == tileDim) {
        tileReads[op] = tileName(tiledOps.size()) + "[threadIdx.x & 31][row]";
        tiledOps.push_back(op);
      }
    return !tiledOps.empty();
  }

  static std::string tileName(size_t k) { return "tile" + std::to_string(k); }

  std::optional<KernelSpec> emitTiled(std::string &why) {
    int64_t rank = space.size(), inner = rank - 1;
    auto strides = stridesOf(space);
    int64_t rowTiles = (space[tileDim] + kTile - 1) / kTile, colTiles = (space[inner] + kTile - 1) / kTile;
    int64_t tiles = numElements(space) / (space[tileDim] * space[inner]) * rowTiles * colTiles;
    std::string body;
    if (!emitBody(1, body, why))
      return std::nullopt;
    std::string src;
    llvm::raw_string_ostream os(src);
    os << "// rfuse pointwise kernel " << name << ": " << numElements(space) << " elements in " << tiles
       << " tiles of " << kTile << " x " << kTile << " (dims " << tileDim << " and " << inner
       << "), transposed reads through shared memory\n"
       << describeOps(r.ops, r.loc) << "\n" << prelude() << "\nextern \"C\" __global__ void " << name << "(";
    params(os);
    os << ") {\n";
    // Tiles hold the inputs' values in their compute type; rows of 33 keep the second phase's
    // column reads on 32 banks.
    for (auto [k, op] : llvm::enumerate(tiledOps))
      os << "  __shared__ " << computeType(dtypeOf(op->getOperand(0))) << " " << tileName(k) << "[" << kTile
         << "][" << kTile + 1 << "];\n";
    // Tile t: the dims other than tileDim and the innermost outermost, then tileDim's tiles (row
    // tiles), then the innermost dim's (column tiles); `base` is the flat index of its first
    // dims' coordinates.
    os << "  for (long long t = blockIdx.x; t < " << tiles << "LL; t += gridDim.x) {\n"
       << "    const long long r0 = (t / " << colTiles << "LL) % " << rowTiles << "LL * " << kTile
       << "LL, c0 = t % " << colTiles << "LL * " << kTile << "LL;\n"
       << "    long long rest = t / " << rowTiles * colTiles << "LL, base = 0;\n";
    for (int64_t d = rank - 1; d >= 0; --d)
      if (d != tileDim && d != inner)
        os << "    base += (rest % " << space[d] << "LL) * " << strides[d] << "LL; rest /= " << space[d] << "LL;\n";
    os << "    // Phase 1: the transposed inputs' tiles, read along their innermost dim (tileDim).\n"
       << "    for (int row = threadIdx.x >> 5; row < " << kTile << "; row += " << kTileRows << ") {\n"
       << "      const long long rr = r0 + (threadIdx.x & 31), cc = c0 + row;\n"
       << "      if (rr < " << space[tileDim] << "LL && cc < " << space[inner] << "LL) {\n"
       << "        const long long idx = base + rr * " << strides[tileDim] << "LL + cc;\n";
    for (auto [k, op] : llvm::enumerate(tiledOps)) {
      Value in = op->getOperand(0);
      os << "        " << tileName(k) << "[row][threadIdx.x & 31] = "
         << loadExpr("in" + std::to_string(r.indexOf(in)), mappedOffset("idx", space, shapeOf(in), indexMap(op)),
                     dtypeOf(in))
         << ";\n";
    }
    os << "      }\n    }\n    __syncthreads();\n"
       << "    // Phase 2: the kernel's elements, along its innermost dim.\n"
       << "    for (int row = threadIdx.x >> 5; row < " << kTile << "; row += " << kTileRows << ") {\n"
       << "      const long long rr = r0 + row, cc = c0 + (threadIdx.x & 31);\n"
       << "      if (rr < " << space[tileDim] << "LL && cc < " << space[inner] << "LL) {\n"
       << "        const long long idx = base + rr * " << strides[tileDim] << "LL + cc;\n"
       << body << "      }\n    }\n    __syncthreads(); // before the next tile's loads\n  }\n}\n";
    KernelSpec k;
    k.name = name;
    k.source = os.str();
    k.launch = LaunchKind::GridStride;
    k.blockSize = kTile * kTileRows;
    k.elements = tiles * k.blockSize; // a block per tile
    k.vectorWidth = 1;
    k.numInputs = r.inputs.size();
    k.numOutputs = r.outputs.size();
    return k;
  }

  // Whether an input is read at the iteration index (rather than only through index maps).
  bool isDirect(Value in) {
    if (llvm::is_contained(r.outputs, in))
      return true;
    return llvm::any_of(in.getUsers(), [&](Operation *u) {
      return !isIndexReadOp(u) && !hidden.contains(u) && llvm::is_contained(r.ops, u);
    });
  }

  void params(llvm::raw_ostream &os) {
    for (auto [i, in] : llvm::enumerate(r.inputs))
      os << (i ? ", " : "") << "const " << storageType(dtypeOf(in)) << "* __restrict__ in" << i;
    for (auto [i, o] : llvm::enumerate(r.outputs))
      os << (r.inputs.empty() && i == 0 ? "" : ", ") << storageType(dtypeOf(o))
         << "* __restrict__ out" << i;
  }

  // The type of vw elements of `d` loaded or stored at once (2-byte elements: 4 in a uint2).
  static std::string vecType(DType d, int vw) {
    if (dtypeSize(d) == 2)
      return "uint" + std::to_string(vw / 2);
    std::string base = d == DType::F32 ? "float" : d == DType::I32 ? "int" : d == DType::F64 ? "double" : "longlong";
    return base + std::to_string(vw);
  }

  bool emitBody(int vw, std::string &out, std::string &why) {
    llvm::raw_string_ostream os(out);
    std::string ind = vw > 1 ? "      " : "    ";
    if (vw > 1) {
      for (auto [i, in] : llvm::enumerate(r.inputs))
        if (isDirect(in))
          os << "    const " << vecType(dtypeOf(in), vw) << " vin" << i << " = reinterpret_cast<const "
             << vecType(dtypeOf(in), vw) << "*>(in" << i << ")[vi];\n";
      for (auto [i, o] : llvm::enumerate(r.outputs))
        os << "    " << vecType(dtypeOf(o), vw) << " vout" << i << ";\n";
      os << "    #pragma unroll\n    for (int lane = 0; lane < " << vw << "; ++lane) {\n"
         << ind << "const long long idx = vi * " << vw << " + lane;\n";
    }
    Scope s;
    auto operand = [&](Value v) -> std::string {
      auto it = s.names.find(v);
      if (it != s.names.end())
        return it->second;
      int i = r.indexOf(v);
      std::string nm = "x" + std::to_string(i);
      std::string e = vw > 1 ? loadExpr(vectorElements("vin" + std::to_string(i), dtypeOf(v), true), "lane", dtypeOf(v))
                             : loadExpr("in" + std::to_string(i), "idx", dtypeOf(v));
      os << ind << "const " << computeType(dtypeOf(v)) << " " << nm << " = " << e << ";\n";
      s.names[v] = nm;
      return nm;
    };
    for (Operation *op : r.ops) {
      Value res = op->getResult(0);
      std::string nm = s.fresh();
      const char *ct = computeType(dtypeOf(res));
      if (auto c = dyn_cast<ConstantOp>(op)) {
        std::string lit = splatLiteral(c, why);
        if (lit.empty())
          return false;
        os << ind << "const " << ct << " " << nm << " = " << lit << ";\n";
      } else if (hidden.contains(op)) {
        continue; // read element by element by the index-read ops over it
      } else if (isIndexingOp(op) || (isa<BroadcastInDimOp, TransposeOp>(op) && r.indexOf(op->getOperand(0)) < 0 &&
                                      !op->getOperand(0).getDefiningOp<ConstantOp>())) {
        if (shapeOf(res) != ArrayRef<int64_t>(space)) {
          why = "an index map of another shape than the kernel's";
          return false;
        }
        CudaIndexExprs e{r, why};
        std::string x = readElement(e, r, res, coordsOf("idx", space), why);
        if (x.empty() || !why.empty())
          return false;
        os << ind << "const " << ct << " " << nm << " = " << x << ";\n";
      } else if (isa<BroadcastInDimOp, TransposeOp>(op)) {
        Value in = op->getOperand(0);
        if (auto c = in.getDefiningOp<ConstantOp>()) { // a splat constant, broadcast
          std::string lit = splatLiteral(c, why);
          if (lit.empty())
            return false;
          os << ind << "const " << ct << " " << nm << " = " << lit << ";\n";
        } else {
          int i = r.indexOf(in);
          if (i < 0) {
            why = "a broadcast of a value computed in the kernel";
            return false;
          }
          auto tile = tileReads.find(op);
          os << ind << "const " << ct << " " << nm << " = "
             << (tile != tileReads.end()
                     ? tile->second
                     : loadExpr("in" + std::to_string(i), mappedOffset("idx", space, shapeOf(in), indexMap(op)),
                                dtypeOf(in)))
             << ";\n";
        }
      } else {
        SmallVector<std::string> a;
        for (Value v : op->getOperands())
          a.push_back(operand(v));
        std::string e = opExpr(op, a, why);
        if (e.empty())
          return false;
        os << ind << "const " << ct << " " << nm << " = " << e << ";\n";
      }
      s.names[res] = nm;
    }
    for (auto [i, o] : llvm::enumerate(r.outputs)) {
      std::string v = operand(o);
      if (vw > 1)
        os << ind << storeStmt(vectorElements("vout" + std::to_string(i), dtypeOf(o), false), "lane", v, dtypeOf(o))
           << "\n";
      else
        os << ind << storeStmt("out" + std::to_string(i), "idx", v, dtypeOf(o)) << "\n";
    }
    if (vw > 1) {
      os << "    }\n";
      for (auto [i, o] : llvm::enumerate(r.outputs))
        os << "    reinterpret_cast<" << vecType(dtypeOf(o), vw) << "*>(out" << i << ")[vi] = vout" << i << ";\n";
    }
    return true;
  }
};

// ---- Reductions ------------------------------------------------------------------------------

class ReductionEmitter {
public:
  ReductionEmitter(const Region &r, std::string name, const CodegenOptions &options, const CudaTarget &target)
      : r(r), name(std::move(name)), L(r), options(options), target(target) {}

  std::optional<KernelSpec> emit(std::string &why) {
    full = L.full;
    outerDims = L.outerDims;
    reducedDims = L.reducedDims;
    keepShape = L.keepShape;
    dropShape = L.dropShape;
    redLen = L.redLen;
    outerLen = L.outerLen;
    fullN = L.fullN;
    rowMode = L.suffix; // trailing dims: contiguous rows, a block each; otherwise a thread per output
    // Not a suffix, but the innermost dim is reduced (a channel's statistics over N, H and W in
    // R's layout): a block per output, its threads striding through the reduced elements, whose
    // consecutive indices are consecutive in memory. A thread per output would leave the GPU
    // idle (a few dozen threads each reading tens of thousands of elements in turn).
    blockPerOutput = !rowMode && !reducedDims.empty() && reducedDims.back() == (int64_t)full.size() - 1 &&
                     redLen >= 256;
    blockMode = rowMode || blockPerOutput;

    KernelSpec k;
    k.name = name;
    k.numInputs = r.inputs.size();
    k.numOutputs = r.outputs.size();
    if (rowMode) {
      k.launch = LaunchKind::BlockPerRow;
      k.rows = outerLen;
      k.rowLength = redLen;
      // Elements per thread: blocks of up to 1024 threads, short rows still spread over a warp
      // or more. Rows whose 4-byte inputs load as 128-bit register chunks take 16 per thread
      // with __launch_bounds__(block, 3) (the sweep: benchmarks/RESULTS.md, run 14); others 8.
      // CodegenOptions' rowElementsPerThread and rowMinBlocks override, for experiments.
      bool forced = options.rowElementsPerThread > 0;
      for (int perThread : {16, 8}) {
        if (forced)
          perThread = options.rowElementsPerThread;
        int bs = 32;
        while (bs < 1024 && bs * perThread < redLen)
          bs *= 2;
        k.blockSize = blockSize = bs;
        cached.clear();
        invariant.clear();
        vec = 1;
        chunks = 0;
        if (redLen > 0 && (redLen + bs - 1) / bs <= 16) { // (an empty row caches nothing)
          for (Value in : r.inputs)
            if (space.lookup(in) == Space::Full && !in.use_empty())
              cached.push_back(in);
          bool fourBytes = llvm::all_of(cached, [](Value v) { return dtypeSize(dtypeOf(v)) == 4; });
          vec = fourBytes && redLen % (4 * bs) == 0 ? 4 : 1;
          chunks = (redLen + (int64_t)bs * vec - 1) / ((int64_t)bs * vec);
          if (vec == 4)
            for (Operation *op : r.ops)
              if (isa<BroadcastInDimOp, TransposeOp>(op) && r.indexOf(op->getOperand(0)) >= 0 &&
                  dtypeOf(op->getOperand(0)) == DType::F32 &&
                  mappedInputOffset(op, shapeOf(op->getOperand(0))) == "j")
                invariant.push_back(op);
        }
        minBlocks = perThread == 16 && vec == 4 && !cached.empty() ? 3 : 0;
        if (forced || minBlocks)
          break;
      }
      if (options.rowMinBlocks >= 0)
        minBlocks = options.rowMinBlocks;
      // Enough rows that blocks of 8 still fill every SM several times over.
      warpRows = blockSize == 32 && !forced && outerLen >= 4096;
      if (warpRows) {
        k.blockSize = 32 * kWarpRowsPerBlock;
        k.rowsPerBlock = kWarpRowsPerBlock;
      }
    } else if (blockPerOutput) {
      k.launch = LaunchKind::BlockPerRow;
      k.rows = outerLen;
      k.rowLength = redLen;
      k.blockSize = blockSize = redLen >= (1 << 16) ? 512 : 256;
    } else {
      // The innermost dim kept (R's row sums, row means, row softmax): tiles of 32 outputs, a
      // warp's lanes on consecutive outputs (coalesced) and 8 warps splitting the reduced
      // elements between them, combined in shared memory; a thread per output alone would run
      // too few threads, each a long serial loop.
      k.launch = LaunchKind::ThreadPerColumn;
      k.rows = redLen;
      k.columns = outerLen;
      chooseColumnCache();
      if (!columnCache)
        chooseSplitTiles();
      k.blockSize = blockSize = columnCache ? cacheBlock : 32 * tileGroups;
      k.columnsPerBlock = columnCache ? cacheColumns : 32;
      k.dynamicSharedBytes = (int)cacheBytes;
      k.clusterSize = clusterSize;
      k.residentClusters = prefetch;
    }
    std::string body;
    if (!emitBody(body, why))
      return std::nullopt;
    std::string src;
    llvm::raw_string_ostream os(src);
    os << "// rfuse reduction kernel " << name << ": "
       << (rowMode ? "a block per row, " : blockPerOutput ? "a block per output, "
           : columnCache ? "tiles of " + std::to_string(cacheColumns) + (cached.empty() ? " outputs read again from L2, " : prefetch ? " outputs cached in shared memory, the next prefetched, " : " outputs cached in shared memory, ") +
                               (clusterSize > 1 ? "split over a cluster of " + std::to_string(clusterSize) + " blocks, " : "")
           : "tiles of 32 outputs, " + (clusterSize > 1 ? "split over a cluster of " + std::to_string(clusterSize) + " blocks, " : std::string()) +
                 (splitSteps == 0 ? std::string() : cached.empty() ? std::string("unrolled, ") : std::to_string(cached.size()) + " inputs in registers, "))
       << outerLen << " x " << redLen
       << "\n" << describeOps(r.ops, r.loc) << "\n" << prelude() << R"(
// Reduces v over the warp; every lane gets the result.
template <int OP, class T> __device__ T rf_warp_reduce(T v, T *) {
  for (int o = 16; o > 0; o >>= 1) v = rf_reduce_combine<OP, T>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Reduces v over the block; every thread gets the result.
template <int OP, class T> __device__ T rf_block_reduce(T v, T *smem) {
  for (int o = 16; o > 0; o >>= 1) v = rf_reduce_combine<OP, T>(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  __syncthreads(); // the previous reduction's readers are done with smem
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = smem[0];
  for (int w = 1; w < nw; ++w) v = rf_reduce_combine<OP, T>(v, smem[w]);
  return v;
}
// Combines v over the warps of a tile (lane = output, warp = a share of the reduced elements);
// every thread gets its output's result, combined in warp order.
template <int OP, class T> __device__ T rf_tile_reduce(T v, T *smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads(); // the previous reduction's readers are done with smem
  smem[warp * 32 + lane] = v;
  __syncthreads();
  v = smem[lane];
  for (int w = 1; w < nw; ++w) v = rf_reduce_combine<OP, T>(v, smem[w * 32 + lane]);
  return v;
}
// Combines v over the threads of one column of a tile of W (column = threadIdx.x % W: 32 / W
// lanes of each warp, then the warps in order); every thread gets its column's result.
template <int OP, int W, class T> __device__ T rf_tile_columns_reduce(T v, T *smem) {
  for (int o = W; o < 32; o <<= 1) v = rf_reduce_combine<OP, T>(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5, c = threadIdx.x & (W - 1);
  __syncthreads(); // the previous reduction's readers are done with smem
  if (lane < W) smem[warp * W + lane] = v;
  __syncthreads();
  v = smem[c];
  for (int w = 1; w < nw; ++w) v = rf_reduce_combine<OP, T>(v, smem[w * W + c]);
  return v;
}
)" << (clusterSize > 1 ? R"(// Thread block clusters (sm_90): the blocks of a cluster share one tile, each a part of the reduced
// elements; they combine their results through distributed shared memory.
__device__ __forceinline__ void rf_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The address of *p in the shared memory of the cluster's block `rank`.
template <class T> __device__ __forceinline__ const T *rf_cluster_map(const T *p, unsigned rank) {
  unsigned long long a;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(a) : "l"(reinterpret_cast<unsigned long long>(p)), "r"(rank));
  return reinterpret_cast<const T *>(a);
}
// Combines the blocks' results for the tile's 32 columns (v: this block's, for column
// threadIdx.x % 32) in block order; every thread gets its column's result. `slot` (32 values of
// this block's shared memory) is not written again until every block has passed a later
// cluster barrier.
template <int OP, int CS, class T> __device__ T rf_cluster_columns_reduce(T v, T *slot) {
  if (threadIdx.x < 32) slot[threadIdx.x] = v;
  rf_cluster_sync();
  const int c = threadIdx.x & 31;
  T r = rf_cluster_map(slot, 0)[c];
  for (unsigned q = 1; q < CS; ++q) r = rf_reduce_combine<OP, T>(r, rf_cluster_map(slot, q)[c]);
  return r;
}
)" : "") << "\nextern \"C\" __global__ void " << launchBounds() << name << "(";
    for (auto [i, in] : llvm::enumerate(r.inputs))
      os << (i ? ", " : "") << "const " << storageType(dtypeOf(in)) << "* __restrict__ in" << i;
    for (auto [i, o] : llvm::enumerate(r.outputs))
      os << (r.inputs.empty() && i == 0 ? "" : ", ") << storageType(dtypeOf(o)) << "* __restrict__ out" << i;
    os << ") {\n";
    if (blockMode) {
      os << "  __shared__ double smem_raw[32];\n"; // (rf_block_reduce's; rf_warp_reduce needs none)
      if (warpRows)
        os << "  const int rf_lane = threadIdx.x & 31;\n";
      llvm::SmallSet<int, 4> loaded; // (one register copy per input, however many broadcasts read it)
      for (Operation *op : invariant) {
        int i = r.indexOf(op->getOperand(0));
        if (!loaded.insert(i).second)
          continue;
        os << "  float4 xinv" << i << "[" << chunks << "];\n  #pragma unroll\n  for (int k = 0; k < "
           << chunks << "; ++k)\n    xinv" << i << "[k] = reinterpret_cast<const float4*>(in" << i
           << ")[" << tid() << " + k * " << blockSize << "];\n";
      }
      if (warpRows) // (a warp's rows are its own: no barrier in the loop)
        os << "  for (long long row = (long long)blockIdx.x * " << kWarpRowsPerBlock << "LL + (threadIdx.x >> 5); row < "
           << outerLen << "LL; row += (long long)gridDim.x * " << kWarpRowsPerBlock << "LL) {\n";
      else
        os << "  for (long long row = blockIdx.x; row < " << outerLen << "LL; row += gridDim.x) {\n";
    }
    else if (columnCache && clusterSize > 1)
      // The cluster's blocks take one tile (blockIdx.x / CS), block `rank` the reduced elements
      // rank * part .. (rank + 1) * part - 1; the slots of each reduction alternate between
      // tiles (see rf_cluster_columns_reduce).
      os << "  __shared__ double smem_raw[" << (cacheBlock / 32) * cacheColumns << "];\n"
         << "  __shared__ double rf_cluster_slots[" << 2 * reductionCount() * 32 << "];\n"
         << "  extern __shared__ double rf_cache_smem[];\n"
         << "  const int ty = threadIdx.x / " << cacheColumns << ";\n"
         << "  const unsigned rank = blockIdx.x % " << clusterSize << "u;\n"
         << "  const long long j0 = (long long)rank * " << redLen / clusterSize << "LL;\n"
         << "  int parity = 0;\n"
         << (prefetch ? tileCopier() : std::string())
         << "  for (long long base = (long long)(blockIdx.x / " << clusterSize << "u) * " << cacheColumns
         << "LL; base < " << outerLen << "LL; base += (long long)(gridDim.x / " << clusterSize << "u) * "
         << cacheColumns << "LL, parity ^= 1" << (prefetch ? ", rf_half ^= 1" : "") << ") {\n"
         << "    const bool live = true;\n"
         << "    const long long row = base + (threadIdx.x & " << cacheColumns - 1 << ");\n";
    else if (columnCache)
      os << "  __shared__ double smem_raw[" << (cacheBlock / 32) * cacheColumns << "];\n"
         << "  extern __shared__ double rf_cache_smem[];\n"
         << "  const int ty = threadIdx.x / " << cacheColumns << ";\n"
         << "  for (long long base = (long long)blockIdx.x * " << cacheColumns << "LL; base < " << outerLen
         << "LL; base += (long long)gridDim.x * " << cacheColumns << "LL) {\n"
         << "    const bool live = true;\n"
         << "    const long long row = base + (threadIdx.x & " << cacheColumns - 1 << ");\n";
    else if (clusterSize > 1)
      // As above: the cluster's blocks take one tile, block `rank` its part of the reduced elements.
      os << "  __shared__ double smem_raw[" << 32 * tileGroups << "];\n"
         << "  __shared__ double rf_cluster_slots[" << 2 * reductionCount() * 32 << "];\n"
         << "  const int ty = threadIdx.x >> 5;\n"
         << "  const unsigned rank = blockIdx.x % " << clusterSize << "u;\n"
         << "  const long long j0 = (long long)rank * " << redLen / clusterSize << "LL;\n"
         << "  int parity = 0;\n"
         << "  for (long long base = (long long)(blockIdx.x / " << clusterSize << "u) * 32LL; base < " << outerLen
         << "LL; base += (long long)(gridDim.x / " << clusterSize << "u) * 32LL, parity ^= 1) {\n"
         << "    const bool live = base + (threadIdx.x & 31) < " << outerLen << "LL;\n"
         << "    const long long row = live ? base + (threadIdx.x & 31) : " << outerLen - 1 << "LL;\n";
    else
      os << "  __shared__ double smem_raw[" << 32 * tileGroups << "];\n"
         << "  const int ty = threadIdx.x >> 5;\n"
         << "  for (long long base = (long long)blockIdx.x * 32LL; base < " << outerLen
         << "LL; base += (long long)gridDim.x * 32LL) {\n"
         << "    const bool live = base + (threadIdx.x & 31) < " << outerLen << "LL;\n"
         << "    const long long row = live ? base + (threadIdx.x & 31) : " << outerLen - 1 << "LL;\n";
    os << body << "  }\n";
    if (clusterSize > 1) // no block leaves while another may still read its shared memory
      os << "  rf_cluster_sync();\n";
    os << "}\n";
    k.source = os.str();
    return k;
  }

private:
  using Space = ReductionLayout::Space;
  const Region &r;
  std::string name;
  ReductionLayout L;
  const CodegenOptions &options;
  const CudaTarget &target;
  SmallVector<int64_t> full, outerDims, reducedDims, keepShape, dropShape;
  bool rowMode = true;
  bool blockPerOutput = false; // not a suffix, the innermost dim reduced: strided, a block each
  bool blockMode = true;       // rowMode || blockPerOutput: a block reduces each output
  static constexpr int tileGroups = 8; // otherwise: warps per tile of 32 outputs
  // Leading-dim reductions whose F-shaped inputs are read in more than one pass (a layer norm or
  // softmax over an R matrix's rows: mean, variance, then the outputs): a block of 1024 threads
  // takes a tile of 8 outputs (32-byte segments of each row: one DRAM sector) and keeps all of
  // the tile's input elements in shared memory, loaded once (thread: column threadIdx.x & 7,
  // rows threadIdx.x >> 3 + 128 k; a warp's 32 floats are consecutive there, no bank conflicts).
  // Every pass after the first reads shared memory: one read of the input and one write of the
  // output in all, where the 32-wide tiles read the input once per pass. (Registers would not
  // do: 4096 rows are 32 per thread, and with GELU's arithmetic ptxas spilled.)
  // The tile's width: CodegenOptions::columnCache (8: 1024 threads, one block of 128 KiB per SM
  // for 4096 rows; 4: 512 threads, 64 KiB, three blocks per SM whose loads and arithmetic
  // overlap, reading half sectors that the neighbouring tile's block reads too).
  //
  // On sm_90 and newer (CodegenOptions::columnClusters), tiles are 32 columns wide instead: a
  // warp's load is one whole 128-byte line of consecutive outputs, and the tile's reduced
  // elements are split over a cluster of CS blocks (1, 2, 4 or 8: the fewest whose parts fit 64
  // KiB), 512 threads each, three blocks per SM, so one block's loads overlap another's
  // arithmetic. Each block reduces its part; the cluster combines the parts in block order
  // through distributed shared memory (rf_cluster_columns_reduce).
  int cacheColumns = 8, cacheBlock = 1024, cacheRowsPerStep = 128;
  int clusterSize = 1; // blocks per tile (32-column tiles only)
  bool columnCache = false;
  // The cluster tiles with CodegenOptions::columnPrefetch: two tiles' shared memory a block, the
  // next tile copied in (cp.async) while the current one computes; the clusters loop over the
  // tiles, as many as are resident at once (KernelSpec::residentClusters).
  bool prefetch = false;
  int64_t cacheBytes = 0; // dynamic shared memory of the block

  int reductionCount() const {
    int n = 0;
    for (Operation *op : r.ops)
      n += isReductionOp(op);
    return n;
  }

  // The SM version of the target ("sm_90" -> 90; 0 when unknown).
  int smVersion() const {
    llvm::StringRef a(target.arch);
    int v = 0;
    return a.consume_front("sm_") && !a.getAsInteger(10, v) ? v : 0;
  }

  // The inputs a column-cache tile holds (F-shaped and read), or nothing when the reduction is
  // not one a tile helps (one pass, or inputs other than 4 bytes).
  SmallVector<Value> columnCacheInputs() const {
    SmallVector<Value> inputs;
    for (Value in : r.inputs)
      if (space.lookup(in) == Space::Full && !in.use_empty())
        inputs.push_back(in);
    int passes = reductionCount() +
                 llvm::any_of(r.outputs, [&](Value o) { return space.lookup(o) == Space::Full; });
    if (inputs.empty() || passes < 2 || !llvm::all_of(inputs, [](Value v) { return dtypeSize(dtypeOf(v)) == 4; }))
      return {};
    return inputs;
  }

  // 32-column tiles split over a cluster (see above), when the target has clusters and a split
  // of the reduced elements fits.
  bool chooseClusterTiles() {
    if (!options.columnClusters || options.columnTilesFromL2 || smVersion() < 90)
      return false;
    if (outerLen % 32 != 0 || outerLen < 1024)
      return false;
    SmallVector<Value> inputs = columnCacheInputs();
    if (inputs.empty())
      return false;
    for (int cs : {1, 2, 4, 8}) {
      int64_t part = redLen / cs;
      if (redLen % cs != 0 || part % 16 != 0)
        continue;
      if ((int64_t)inputs.size() * part * 32 * 4 > 64 * 1024)
        continue;
      cacheColumns = 32;
      cacheBlock = 512;
      cacheRowsPerStep = 16;
      clusterSize = cs;
      columnCache = true;
      // (prefetch copies whole rows of the tile: the reduced dims lead, the kept ones follow; a
      // tile of one block keeps its plain loop)
      prefetch = options.columnPrefetch && cs > 1 && L.prefix && !L.suffix && part % 32 == 0;
      if (prefetch) {
        cacheBlock = 1024;
        cacheRowsPerStep = 32;
      }
      chunks = part / cacheRowsPerStep;
      vec = 1;
      cacheBytes = (prefetch ? 2 : 1) * (int64_t)inputs.size() * part * 32 * 4;
      cached = inputs;
      return true;
    }
    return false;
  }

  void chooseColumnCache() {
    if (options.columnCache != 4 && options.columnCache != 8)
      return;
    if (chooseClusterTiles())
      return;
    cacheColumns = options.columnCache;
    cacheBlock = cacheColumns == 8 && !options.columnTilesFromL2 ? 1024 : 512;
    cacheRowsPerStep = cacheBlock / cacheColumns;
    if (outerLen % cacheColumns != 0 || outerLen < 4096 || redLen % cacheRowsPerStep != 0)
      return;
    SmallVector<Value> inputs = columnCacheInputs();
    // Shared memory a block may have: 227 KiB on sm_90, 99 KiB on sm_86 / sm_89, static and
    // dynamic together (the kernel's own reduction slots take up to 8 KiB of it).
    int64_t limit = (target.arch == "sm_86" || target.arch == "sm_89" ? 99 : 227) * 1024 - 8 * 1024;
    int64_t bytes = (int64_t)inputs.size() * redLen * cacheColumns * 4;
    if (inputs.empty() || bytes > limit)
      return;
    columnCache = true;
    chunks = redLen / cacheRowsPerStep;
    vec = 1;
    if (options.columnTilesFromL2)
      return; // every pass reads the input again, from L2 while the SMs' tiles fit there
    cacheBytes = bytes;
    cached = inputs;
  }

  // Plain 32-column tiles (read from global memory in every pass) when there are fewer tiles than
  // SMs (a batch norm's statistics or their gradient over 256 channels: 8 tiles, each block
  // walking 1,024 rows in 8 warps: ~0.05 ms for 4 MiB, ~70 GB/s): on sm_90, each tile's reduced
  // elements are split over a cluster of 2, 4 or 8 blocks (the fewest that give every SM a
  // block, at least 64 rows each), combined in block order through distributed shared memory as
  // the cached tiles' clusters are (rf_cluster_columns_reduce). Option `column_split`.
  void chooseSplitTiles() {
    if (!options.columnSplit || !options.columnClusters || smVersion() < 90)
      return;
    int64_t tiles = (outerLen + 31) / 32, sms = std::max(1, target.multiprocessors);
    if (tiles >= sms)
      return;
    int cs = 2;
    while (cs < 8 && tiles * cs < sms)
      cs *= 2;
    for (; cs >= 2; cs /= 2)
      if (redLen % cs == 0 && redLen / cs >= 64)
        break;
    if (cs < 2)
      return;
    clusterSize = cs;
    // Option column_split_registers: a loop of constant trip count (its loads issued back to back
    // once unrolled), and the inputs read in more than one pass loaded into registers once, before
    // the first: a batch norm's 3 passes then wait on memory once, not three times.
    int64_t part = redLen / cs;
    if (!options.columnSplitRegisters || part % tileGroups != 0 || part / tileGroups > 32)
      return;
    splitSteps = part / tileGroups;
    SmallVector<Value> inputs = columnCacheInputs();
    if ((int64_t)inputs.size() * splitSteps <= 64)
      cached = inputs;
  }
  // Steps of a split tile's constant-trip loop (0: the plain loop).
  int64_t splitSteps = 0;

  // Row mode with short rows: each thread keeps its elements of the F-shaped inputs in registers
  // (loaded once, 128-bit wide when possible), so every pass after the first reads registers.
  int blockSize = 256, vec = 1;
  int64_t chunks = 0; // per thread, of `vec` elements; 0: no register cache
  llvm::SmallVector<Value> cached;
  // Inputs read at element j whatever the row (a bias or gamma over the reduced dims): loaded
  // into registers once per block, before the row loop.
  llvm::SmallVector<Operation *> invariant;
  int64_t redLen = 0, outerLen = 0, fullN = 0;

  struct SpaceView {
    const ReductionLayout &L;
    Space lookup(Value v) const { return L.spaceOf(v); }
  } space{L};
  bool isReexpansion(BroadcastInDimOp b) const { return L.isReexpansion(b); }

  // The coordinate along F's dim d of element j of row `row`: outer dims come from `row`, reduced
  // dims from `j`; the outermost dim of each group needs no modulo.
  std::string coord(int64_t d) const {
    ReductionLayout::Coord c = L.coord(d);
    const char *var = c.reduced ? "j" : "row";
    std::string e = c.divisor == 1 ? std::string(var)
                                   : "(" + std::string(var) + " / " + std::to_string(c.divisor) + "LL)";
    return c.modulo == 0 ? e : "(" + e + " % " + std::to_string(c.modulo) + "LL)";
  }

  // Offset into an input read through a broadcast / transpose index map; "" when the map's
  // result is not the reduction's full shape (then it is no read over F's coordinates).
  std::string mappedInputOffset(Operation *op, ArrayRef<int64_t> inShape) const {
    auto map = indexMap(op);
    if (map.size() != full.size())
      return "";
    auto inStrides = stridesOf(inShape);
    std::string expr;
    for (size_t d = 0; d < full.size(); ++d) {
      int64_t in = map[d];
      if (in < 0 || inShape[in] == 1)
        continue;
      expr += (expr.empty() ? "" : " + ") + coord(d) +
              (inStrides[in] == 1 ? "" : " * " + std::to_string(inStrides[in]) + "LL");
    }
    return expr.empty() ? "0" : expr;
  }

  // Flat index into F of element `j` of row `row` (row: flat index over the outer dims in order,
  // j: flat index over the reduced dims in order).
  std::string fullIndex() const {
    if (rowMode)
      return "(row * " + std::to_string(redLen) + "LL + j)";
    if (L.prefix && !L.suffix) // reduced dims leading: j over them, row over the rest
      return "(j * " + std::to_string(outerLen) + "LL + row)";
    auto strides = stridesOf(full);
    std::string expr;
    auto add = [&](const SmallVector<int64_t> &dims, const char *var) {
      int64_t inner = 1;
      for (int64_t i = (int64_t)dims.size() - 1; i >= 0; --i) {
        int64_t d = dims[i];
        std::string coord = "((" + std::string(var) + " / " + std::to_string(inner) + "LL) % " +
                            std::to_string(full[d]) + "LL)";
        expr += (expr.empty() ? "" : " + ") + coord + " * " + std::to_string(strides[d]) + "LL";
        inner *= full[d];
      }
    };
    add(outerDims, "row");
    add(reducedDims, "j");
    return "(" + (expr.empty() ? std::string("0") : expr) + ")";
  }


  bool useCache() const { return chunks > 0; }
  // Rows of at most 32 threads' work (a softmax over attention's 256 keys): a warp per row and
  // kWarpRowsPerBlock rows per block, reduced with shuffles alone. A block of 32 threads per row
  // kept at most 32 blocks (1,024 threads) resident per SM, half of what an SM runs.
  static constexpr int kWarpRowsPerBlock = 8;
  bool warpRows = false;
  // The thread's index within its row's threads.
  std::string tid() const { return warpRows ? "rf_lane" : "threadIdx.x"; }
  // A column-cache tile's element at reduced index jl (of this block's part) and column
  // threadIdx.x % cacheColumns (the tile pointer's offset).
  std::string cacheIndex() const { return "jl * " + std::to_string(cacheColumns); }
  // A column-cache loop's indices at its step k: jl in this block's part of the tile, j among
  // the reduced elements (a cluster's block `rank` starts at j0).
  std::string tileIndices(const std::string &indent) const {
    return indent + "const long long jl = (long long)ty + (long long)k * " + std::to_string(cacheRowsPerStep) +
           "LL;\n" + indent + "const long long j = " + (clusterSize > 1 ? "j0 + jl" : "jl") + ";\n";
  }
  // The register chunks cover the row exactly: no element needs a bounds check.
  bool exactChunks() const { return chunks * blockSize * vec == redLen; }

  // __launch_bounds__(block, minBlocks) on row kernels: the compiler keeps registers low enough
  // for that many resident blocks per SM.
  int minBlocks = 0;
  std::string launchBounds() const {
    if (columnCache && cacheColumns == 32)
      return (clusterSize > 1 ? "__cluster_dims__(" + std::to_string(clusterSize) + ", 1, 1) " : std::string()) +
             "__launch_bounds__(" + std::to_string(cacheBlock) + (prefetch ? ", 1) " : ", 3) ");
    if (columnCache)
      return "__launch_bounds__(" + std::to_string(cacheBlock) + (options.columnTilesFromL2 ? ", 3) " : ", 1) ");
    if (!rowMode && !blockPerOutput && clusterSize > 1)
      return "__cluster_dims__(" + std::to_string(clusterSize) + ", 1, 1) ";
    if (!rowMode || minBlocks <= 0)
      return "";
    return "__launch_bounds__(" + std::to_string(warpRows ? 32 * kWarpRowsPerBlock : blockSize) + ", " +
           std::to_string(minBlocks) + ") ";
  }

  // Opens a loop over this thread's elements of the row (j), in register-cache order when the
  // row is cached; closeRowLoop() closes it.
  std::string openRowLoop() const {
    if (columnCache)
      return "    #pragma unroll 4\n    for (int k = 0; k < " + std::to_string(chunks) + "; ++k) {\n    {\n" +
             tileIndices("      ") + "      {\n";
    if (useCache())
      return "    #pragma unroll\n    for (int k = 0; k < " + std::to_string(chunks) +
             "; ++k) {\n    #pragma unroll\n    for (int lane = 0; lane < " + std::to_string(vec) +
             "; ++lane) {\n      const long long j = ((long long)" + tid() + " + (long long)k * " +
             std::to_string(blockSize) + "LL) * " + std::to_string(vec) + "LL + lane;\n      " +
             (exactChunks() ? std::string("{\n") : "if (j < " + std::to_string(redLen) + "LL) {\n");
    if (blockMode)
      return "    for (long long j = " + tid() + "; j < " + std::to_string(redLen) + "LL; j += " +
             (warpRows ? std::string("32") : std::string("blockDim.x")) + ") {\n";
    if (clusterSize > 1 && splitSteps > 0)
      return "    #pragma unroll\n    for (int k = 0; k < " + std::to_string(splitSteps) + "; ++k) {\n" + splitIndex("      ");
    if (clusterSize > 1)
      return "    for (long long j = j0 + ty; j < j0 + " + std::to_string(redLen / clusterSize) + "LL; j += " +
             std::to_string(tileGroups) + "LL) {\n";
    return "    for (long long j = ty; j < " + std::to_string(redLen) + "LL; j += " + std::to_string(tileGroups) +
           "LL) {\n";
  }
  std::string closeRowLoop() const { return useCache() ? "    }}}\n" : "    }\n"; }
  // A split tile's reduced index j at its constant-trip loop's step k.
  std::string splitIndex(const std::string &indent) const {
    return indent + "const long long j = j0 + ty + (long long)k * " + std::to_string(tileGroups) + "LL;\n";
  }

  // Elements of one cached input a block holds for one tile: its part of the reduced elements
  // times the tile's columns.
  int64_t tilePartElements() const { return redLen / clusterSize * cacheColumns; }
  // Declares xin<i>, the cached input's tile in dynamic shared memory at this thread's column
  // (inputs one after another; with prefetch, in the half rf_half of two tiles' memory).
  std::string tilePointer(size_t n, Value in) const {
    int i = llvm::find(r.inputs, in) - r.inputs.begin();
    std::string st = storageType(dtypeOf(in));
    return "    " + st + "* xin" + std::to_string(i) + " = reinterpret_cast<" + st + "*>(rf_cache_smem) + " +
           (prefetch ? "rf_half * " + std::to_string((int64_t)cached.size() * tilePartElements()) + "LL + " : std::string()) +
           std::to_string((int64_t)n * tilePartElements()) + "LL + (threadIdx.x % " + std::to_string(cacheColumns) + ");\n";
  }

  // With prefetch: the kernel's rf_copy_tile(base, half), which starts the asynchronous copies
  // (cp.async) of this block's part of the tile at `base` into half `half` of the tile memory
  // (layout as the loads without prefetch make: [part][32] per input), 16 bytes a copy where
  // the input's rows are 16-byte aligned, else 4; then its first call, before the tile loop.
  std::string tileCopier() const {
    int64_t part = redLen / clusterSize, perInput = tilePartElements();
    std::string out = "  const long long rf_tile_stride = (long long)(gridDim.x / " + std::to_string(clusterSize) +
                      "u) * 32LL;\n  int rf_half = 0;\n  auto rf_copy_tile = [&](long long tile, int half) {\n";
    for (auto [n, in] : llvm::enumerate(cached)) {
      int i = llvm::find(r.inputs, in) - r.inputs.begin();
      std::string src = "in" + std::to_string(i);
      std::string dst = "reinterpret_cast<float*>(rf_cache_smem) + half * " +
                        std::to_string((int64_t)cached.size() * perInput) + "LL + " + std::to_string((int64_t)n * perInput) + "LL";
      std::string g = "reinterpret_cast<const float*>(" + src + ") + (j0 + (c >> 3)) * " + std::to_string(outerLen) +
                      "LL + tile + (c & 7) * 4";
      out += "    {\n      float* d = " + dst + ";\n";
      if (outerLen % 4 == 0)
        out += "      if ((reinterpret_cast<unsigned long long>(" + src + ") & 15) == 0) {\n"
               "        for (int c = threadIdx.x; c < " + std::to_string(part * 8) + "; c += " + std::to_string(cacheBlock) + ") {\n"
               "          const unsigned a = (unsigned)__cvta_generic_to_shared(d + (c >> 3) * 32 + (c & 7) * 4);\n"
               "          asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"(a), \"l\"(" + g + ") : \"memory\");\n"
               "        }\n      } else\n";
      out += "      for (int c = threadIdx.x; c < " + std::to_string(perInput) + "; c += " + std::to_string(cacheBlock) + ") {\n"
             "        const unsigned a = (unsigned)__cvta_generic_to_shared(d + c);\n"
             "        asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4;\" :: \"r\"(a), \"l\"(reinterpret_cast<const float*>(" + src +
             ") + (j0 + (c >> 5)) * " + std::to_string(outerLen) + "LL + tile + (c & 31)) : \"memory\");\n      }\n";
      out += "    }\n";
    }
    out += "  };\n  if ((long long)(blockIdx.x / " + std::to_string(clusterSize) + "u) * 32LL < " + std::to_string(outerLen) +
           "LL) rf_copy_tile((long long)(blockIdx.x / " + std::to_string(clusterSize) + "u) * 32LL, 0);\n  asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n";
    return out;
  }

  // Loads this row's elements of the cached inputs into registers.
  std::string rowPrologue() const {
    std::string out;
    if (prefetch) {
      // This tile was copied in by the previous step (or before the loop); the next one goes to
      // the other half while this one computes.
      out += "    __syncthreads(); // the previous tile's last readers are done with the other half\n";
      out += "    if (base + rf_tile_stride < " + std::to_string(outerLen) + "LL) rf_copy_tile(base + rf_tile_stride, rf_half ^ 1);\n";
      out += "    asm volatile(\"cp.async.commit_group;\\n\\tcp.async.wait_group 1;\" ::: \"memory\"); // (this one's)\n";
      out += "    __syncthreads(); // and every thread's\n";
      for (auto [n, in] : llvm::enumerate(cached))
        out += tilePointer(n, in);
      return out;
    }
    if (columnCache) {
      // Each cached input's tile: [redLen][cacheColumns] of its storage type in dynamic shared memory.
      out += "    __syncthreads(); // the previous tile's last readers are done\n";
      for (auto [n, in] : llvm::enumerate(cached)) {
        int i = llvm::find(r.inputs, in) - r.inputs.begin();
        std::string nm = "xin" + std::to_string(i);
        out += tilePointer(n, in); // (a block holds its part of each input)
        out += "    #pragma unroll 16\n    for (int k = 0; k < " + std::to_string(chunks) +
               "; ++k) {\n" + tileIndices("      ") + "      " + nm + "[" + cacheIndex() + "] = in" +
               std::to_string(i) + "[" + fullIndex() + "];\n    }\n";
      }
      out += "    __syncthreads();\n";
      return out;
    }
    if (splitSteps > 0) { // a split tile's registers: this thread's elements of its part
      for (Value in : cached) {
        int i = llvm::find(r.inputs, in) - r.inputs.begin();
        std::string nm = "xin" + std::to_string(i);
        out += "    " + std::string(storageType(dtypeOf(in))) + " " + nm + "[" + std::to_string(splitSteps) +
               "];\n    #pragma unroll\n    for (int k = 0; k < " + std::to_string(splitSteps) + "; ++k) {\n" +
               splitIndex("      ") + "      " + nm + "[k] = in" + std::to_string(i) + "[" + fullIndex() + "];\n    }\n";
      }
      return out;
    }
    for (Value in : cached) {
      int i = llvm::find(r.inputs, in) - r.inputs.begin();
      std::string st = storageType(dtypeOf(in)), nm = "xin" + std::to_string(i);
      if (vec == 4) {
        std::string vt = std::string(dtypeOf(in) == DType::F32 ? "float4" : "int4");
        out += "    " + vt + " " + nm + "[" + std::to_string(chunks) + "];\n    #pragma unroll\n" +
               "    for (int k = 0; k < " + std::to_string(chunks) + "; ++k)\n      " + nm +
               "[k] = reinterpret_cast<const " + vt + "*>(in" + std::to_string(i) + " + row * " +
               std::to_string(redLen) + "LL)[" + tid() + " + k * " + std::to_string(blockSize) + "];\n";
      } else {
        out += "    " + st + " " + nm + "[" + std::to_string(chunks) + "];\n    #pragma unroll\n" +
               "    for (int k = 0; k < " + std::to_string(chunks) + "; ++k) {\n      const long long j = " + tid() + " + (long long)k * " +
               std::to_string(blockSize) + "LL;\n      if (j < " + std::to_string(redLen) + "LL) " + nm +
               "[k] = in" + std::to_string(i) + "[row * " + std::to_string(redLen) + "LL + j];\n    }\n";
      }
    }
    return out;
  }

  // Emits the F-space ops `target` depends on (inside a loop over j), returning its name.
  std::string emitFull(Value target, Scope &s, llvm::raw_ostream &os, const std::string &ind,
                       std::string &why) {
    auto it = s.names.find(target);
    if (it != s.names.end())
      return it->second;
    if (space.lookup(target) == Space::Row) // per-row (its shape may equal F when reducing 1s)
      return rowValue(target, s, os, ind, why);
    std::string nm;
    if (Operation *op = target.getDefiningOp(); op && llvm::is_contained(r.ops, op)) {
      const char *ct = computeType(dtypeOf(target));
      nm = s.fresh();
      if (auto c = dyn_cast<ConstantOp>(op)) {
        std::string lit = splatLiteral(c, why);
        if (lit.empty()) return "";
        os << ind << "const " << ct << " " << nm << " = " << lit << ";\n";
      } else if (isa<BroadcastInDimOp, TransposeOp>(op)) {
        Value in = op->getOperand(0);
        if (auto c = in.getDefiningOp<ConstantOp>()) {
          std::string lit = splatLiteral(c, why);
          if (lit.empty()) return "";
          os << ind << "const " << ct << " " << nm << " = " << lit << ";\n";
        } else if (space.lookup(in) == Space::Row && isa<BroadcastInDimOp>(op) &&
                   isReexpansion(cast<BroadcastInDimOp>(op))) {
          std::string rv = s.names.lookup(in);
          if (rv.empty()) {
            rv = rowValue(in, s, os, ind, why);
            if (rv.empty()) return "";
          }
          os << ind << "const " << ct << " " << nm << " = " << rv << ";\n";
        } else {
          int i = r.indexOf(in);
          if (i < 0) {
            why = "an index map over a value computed in the kernel";
            return "";
          }
          if (llvm::is_contained(invariant, op))
            os << ind << "const " << ct << " " << nm << " = reinterpret_cast<const float*>(&xinv" << i
               << "[k])[lane];\n";
          else {
            std::string offset = mappedInputOffset(op, shapeOf(in));
            if (offset.empty()) {
              why = "an index map whose result is not the reduction's shape";
              return "";
            }
            os << ind << "const " << ct << " " << nm << " = "
               << loadExpr("in" + std::to_string(i), offset, dtypeOf(in)) << ";\n";
          }
        }
      } else {
        SmallVector<std::string> a;
        for (Value v : op->getOperands()) {
          std::string x = space.lookup(v) == Space::Row ? rowValue(v, s, os, ind, why)
                                                        : emitFull(v, s, os, ind, why);
          if (x.empty()) return "";
          a.push_back(x);
        }
        std::string e = opExpr(op, a, why);
        if (e.empty()) return "";
        os << ind << "const " << ct << " " << nm << " = " << e << ";\n";
      }
    } else { // an F-shaped input
      int i = r.indexOf(target);
      nm = "x" + std::to_string(i) + "_" + std::to_string(s.counter++);
      std::string e;
      if (llvm::is_contained(cached, target))
        e = vec > 1 ? "reinterpret_cast<const " + std::string(storageType(dtypeOf(target))) + "*>(&xin" +
                          std::to_string(i) + "[k])[lane]"
                    : loadExpr("xin" + std::to_string(i), columnCache ? cacheIndex() : "k", dtypeOf(target));
      else
        e = loadExpr("in" + std::to_string(i), fullIndex(), dtypeOf(target));
      os << ind << "const " << computeType(dtypeOf(target)) << " " << nm << " = " << e << ";\n";
    }
    s.names[target] = nm;
    return nm;
  }

  // The name of a per-row value (computed at row scope before use).
  std::string rowValue(Value v, Scope &s, llvm::raw_ostream &os, const std::string &ind,
                       std::string &why) {
    auto it = rowNames.find(v);
    if (it != rowNames.end())
      return it->second;
    if (!v.getDefiningOp() || !llvm::is_contained(r.ops, v.getDefiningOp())) { // R-shaped input
      int i = r.indexOf(v);
      std::string nm = "r_in" + std::to_string(i);
      rowCode += "    const " + std::string(computeType(dtypeOf(v))) + " " + nm + " = " +
                 loadExpr("in" + std::to_string(i), "row", dtypeOf(v)) + ";\n";
      rowNames[v] = nm;
      return nm;
    }
    why = "a per-row value used before it is computed";
    return "";
  }

  llvm::DenseMap<Value, std::string> rowNames;
  std::string rowCode;

  bool emitBody(std::string &out, std::string &why) {
    llvm::raw_string_ostream os(out);
    os << rowPrologue();
    int rowCounter = 0;
    int reductionIndex = 0; // which of the cluster's slots a reduction uses
    auto flushRowCode = [&]() {
      os << rowCode;
      rowCode.clear();
    };
    for (Operation *op : r.ops) {
      Value res = op->getResult(0);
      if (isReductionOp(op)) {
        int kind = isa<ReduceMaxOp>(op) ? scalar::RF_REDUCE_MAX : isa<ReduceMinOp>(op) ? scalar::RF_REDUCE_MIN
                                                                                : scalar::RF_REDUCE_SUM;
        DType dt = dtypeOf(res);
        std::string acc = isFloat(dt) ? (dt == DType::F64 ? "double" : "float") : "long long";
        std::string init = "(" + acc + ")" + (isFloat(dt) ? "rf_reduce_identity_f<" + std::to_string(kind) + ">()"
                                                          : "rf_reduce_identity_i<" + std::to_string(kind) + ">(false)");
        std::string an = "acc" + std::to_string(rowCounter++);
        std::string loop;
        llvm::raw_string_ostream ls(loop);
        Scope s;
        std::string ind = "      ";
        std::string v = emitFull(op->getOperand(0), s, ls, ind, why);
        if (v.empty())
          return false;
        flushRowCode();
        os << "    " << acc << " " << an << " = " << init << ";\n" << openRowLoop();
        os << ls.str() << "      " << an << " = rf_reduce_combine<" << kind << ", " << acc << ">(" << an
           << ", (" << acc << ")" << v << ");\n" << closeRowLoop();
        os << "    " << an << " = " << (warpRows ? "rf_warp_reduce<" : blockMode ? "rf_block_reduce<" : columnCache ? "rf_tile_columns_reduce<" : "rf_tile_reduce<")
           << kind << ", " << (columnCache ? std::to_string(cacheColumns) + ", " : "") << acc
           << ">(" << an << ", reinterpret_cast<" << acc << "*>(smem_raw));\n";
        if (clusterSize > 1)
          os << "    " << an << " = rf_cluster_columns_reduce<" << kind << ", " << clusterSize << ", " << acc
             << ">(" << an << ", reinterpret_cast<" << acc << "*>(rf_cluster_slots) + (parity * "
             << reductionCount() << " + " << reductionIndex++ << ") * 32);\n";
        std::string nm = "r" + std::to_string(rowCounter);
        os << "    const " << computeType(dt) << " " << nm << " = (" << computeType(dt) << ")("
           << an << (isa<ReduceMeanOp>(op) ? " / (" + acc + ")" + std::to_string(redLen) : "") << ");\n";
        rowNames[res] = nm;
      } else if (space.lookup(res) == Space::Row) {
        // A per-row pointwise op (e.g. rsqrt(var + eps)): all threads compute it once per row.
        SmallVector<std::string> a;
        Scope s;
        std::string nm = "r" + std::to_string(++rowCounter) + "p";
        std::string e;
        bool indexMapOfInput = isa<BroadcastInDimOp, TransposeOp>(op) &&
                               r.indexOf(op->getOperand(0)) >= 0;
        if (isa<TransposeOp>(op) && !indexMapOfInput) {
          why = "a transpose of a per-row value";
          return false;
        }
        if (auto c = dyn_cast<ConstantOp>(op)) {
          e = splatLiteral(c, why);
        } else if (indexMapOfInput) { // an input of another shape, read per row through its map
          Value in = op->getOperand(0);
          e = loadExpr("in" + std::to_string(r.indexOf(in)),
                       mappedOffset("row", shapeOf(res), shapeOf(in), indexMap(op)), dtypeOf(in));
        } else {
          for (Value v : op->getOperands()) {
            std::string x = v.getDefiningOp<ConstantOp>() ? splatLiteral(v.getDefiningOp<ConstantOp>(), why)
                                                           : rowValue(v, s, os, "    ", why);
            if (x.empty())
              return false;
            a.push_back(x);
          }
          // A broadcast or transpose between the two forms of the reduced shape is a renaming.
          e = isa<BroadcastInDimOp, TransposeOp>(op) ? a[0] : opExpr(op, a, why);
        }
        if (e.empty())
          return false;
        flushRowCode();
        os << "    const " << computeType(dtypeOf(res)) << " " << nm << " = " << e << ";\n";
        rowNames[res] = nm;
      }
    }
    // The final pass writes the per-element outputs; per-row outputs are written once per row.
    // With 128-bit register chunks, each chunk's 4 elements of an output are gathered and stored
    // at once: 128 bits of f32, 64 of bfloat16 or f16. (Element by element, a warp's store
    // instruction writes every fourth element of 4 lines: a softmax writing f32 and bfloat16
    // probabilities so ran at 1.2 TB/s, its f32-only twin at 2.5.)
    bool anyFull = false;
    std::string loop;
    llvm::raw_string_ostream ls(loop);
    Scope s;
    auto wideType = [](DType d) { return dtypeSize(d) == 4 ? "float4" : "uint2"; };
    bool wideStores = useCache() && vec == 4 && llvm::all_of(r.outputs, [&](Value o) {
      return space.lookup(o) != Space::Full || dtypeOf(o) == DType::F32 || dtypeOf(o) == DType::BF16 ||
             dtypeOf(o) == DType::F16;
    });
    for (auto [i, o] : llvm::enumerate(r.outputs)) {
      if (space.lookup(o) != Space::Full)
        continue;
      anyFull = true;
      std::string v = emitFull(o, s, ls, "      ", why);
      if (v.empty())
        return false;
      if (wideStores)
        ls << "      " << storeStmt(vectorElements("vout" + std::to_string(i), dtypeOf(o), false), "lane", v, dtypeOf(o))
           << "\n";
      else
        ls << "      " << (blockMode ? "" : "if (live) ") << storeStmt("out" + std::to_string(i), fullIndex(), v, dtypeOf(o))
           << "\n";
    }
    for (auto [i, o] : llvm::enumerate(r.outputs)) {
      if (space.lookup(o) == Space::Full)
        continue;
      std::string v = rowValue(o, s, os, "    ", why);
      if (v.empty())
        return false;
      flushRowCode();
      os << (warpRows ? "    if (rf_lane == 0) " : blockMode ? "    if (threadIdx.x == 0) " : clusterSize > 1 ? (columnCache ? "    if (ty == 0 && rank == 0) " : "    if (ty == 0 && rank == 0 && live) ") : "    if (ty == 0 && live) ")
         << storeStmt("out" + std::to_string(i), "row", v, dtypeOf(o)) << "\n";
    }
    if (anyFull && wideStores) {
      flushRowCode();
      // vec == 4 implies the row length is a multiple of 4 * blockSize: no bounds checks.
      os << "    #pragma unroll\n    for (int k = 0; k < " << chunks << "; ++k) {\n";
      for (auto [i, o] : llvm::enumerate(r.outputs))
        if (space.lookup(o) == Space::Full)
          os << "    " << wideType(dtypeOf(o)) << " vout" << i << ";\n";
      os << "    #pragma unroll\n    for (int lane = 0; lane < 4; ++lane) {\n"
         << "      const long long j = ((long long)" << tid() << " + (long long)k * " << blockSize
         << "LL) * 4LL + lane;\n" << ls.str() << "    }\n";
      for (auto [i, o] : llvm::enumerate(r.outputs))
        if (space.lookup(o) == Space::Full)
          os << "    reinterpret_cast<" << wideType(dtypeOf(o)) << "*>(out" << i << " + row * " << redLen
             << "LL)[" << tid() << " + k * " << blockSize << "] = vout" << i << ";\n";
      os << "    }\n";
      return true;
    }
    flushRowCode();
    if (anyFull)
      os << openRowLoop() << ls.str() << closeRowLoop();
    return true;
  }
};

std::string sanitize(StringRef name) {
  std::string s = name.str();
  for (char &c : s)
    if (!isalnum((unsigned char)c) && c != '_')
      c = '_';
  return s;
}

// The ops after a library call (matmul, convolution) as one generated pointwise kernel over the
// library's result `product` (the kernel's input 0, then the region inputs it reads).
bool buildEpilogue(const Region &r, Operation *library, const std::string &name, KernelPlan &plan,
                   std::string &why) {
  LibraryCall &call = *plan.library;
  Value product = library->getResult(0);
  bool productIsOutput = llvm::is_contained(r.outputs, product);
  if (r.ops.size() == 1) {
    if (r.outputs.size() != 1 || r.outputs[0] != product) {
      why = "a library kernel whose outputs are not its result";
      return false;
    }
    call.productIsOutput = true;
    return true;
  }
  if (productIsOutput && r.outputs[0] != product) {
    why = "a library kernel that returns its result after other outputs";
    return false;
  }
  Region e = epilogueRegion(r, library, call.epilogueInputs);
  plan.kernel = PointwiseEmitter(e, name + "_epilogue").emit(why);
  call.productIsOutput = productIsOutput;
  return plan.kernel.has_value();
}

// cuBLASLt for the contraction, its epilogue where cuBLASLt has one, a generated kernel otherwise.
bool planMatmul(const Region &r, const std::string &name, const CodegenOptions &options, KernelPlan &plan,
                std::string &why) {
  auto mm = findOp<MatmulOp>(r);
  if (!mm) {
    why = "no matmul in a matmul_epilogue kernel";
    return false;
  }
  plan.library = LibraryCall{};
  plan.library->kind = LibraryCall::Kind::Matmul;
  MatmulCall &spec = plan.library->matmul;
  spec.lhsInput = r.indexOf(mm.getLhs());
  spec.rhsInput = r.indexOf(mm.getRhs());
  spec.dtype = dtypeOf(mm.getResult());
  if (spec.dtype == DType::I32 || spec.dtype == DType::I64) {
    why = "integer matmul";
    return false;
  }
  auto os = shapeOf(mm.getResult());
  MatmulGeometry mg = matmulGeometry(mm);
  spec.transposeA = mg.transposeA;
  spec.transposeB = mg.transposeB;
  spec.batchedA = mg.batchedA;
  spec.batchedB = mg.batchedB;
  spec.batch = mg.batch;
  spec.m = mg.m;
  spec.n = mg.n;
  spec.k = mg.k;
  // A large f32 A^T B: cuBLASLt's kernels for that layout run at ~65% of its best (RESULTS.md,
  // run 13), so A is transposed first and the product runs as A' B.
  if (options.transposeLargeLhs && spec.transposeA && !spec.transposeB && spec.dtype == DType::F32 &&
      spec.batch == 1 && !spec.batchedA && spec.m * spec.k >= ((int64_t)1 << 22)) {
    spec.transposeLhsFirst = true;
    spec.transposeA = false;
  }

  Value product = mm.getResult();
  SmallVector<Operation *> rest;
  for (Operation *op : r.ops)
    if (op != mm.getOperation())
      rest.push_back(op);
  bool productIsOutput = llvm::is_contained(r.outputs, product);
  // cuBLASLt epilogues: + bias[n] (broadcast over rows), then relu or gelu(tanh); or + C.
  if (!productIsOutput && r.outputs.size() == 1 && !rest.empty() && options.cublasLtEpilogues) {
    Operation *last = r.outputs[0].getDefiningOp();
    auto act = Activation::None;
    if (auto relu = dyn_cast_or_null<ReluOp>(last)) {
      act = Activation::Relu;
      last = relu.getOperand().getDefiningOp();
    } else if (auto gelu = dyn_cast_or_null<GeluOp>(last);
               gelu && gelu.getApproximate() == GeluApproximation::tanh && spec.dtype != DType::F64) {
      // cuBLASLt's GELU agrees with rf_gelu_tanh to f32 rounding, not to f64's: f64 takes the
      // generated epilogue.
      act = Activation::GeluTanh;
      last = gelu.getOperand().getDefiningOp();
    }
    if (auto add = dyn_cast_or_null<AddOp>(last)) {
      Value other = add.getLhs() == product ? add.getRhs() : add.getRhs() == product ? add.getLhs() : Value();
      auto bcast = other ? other.getDefiningOp<BroadcastInDimOp>() : nullptr;
      unsigned expectOps = 2 + (act != Activation::None);
      // The bias must hold one value per column: a single value broadcast over the columns too
      // (R's recycling of a length-1 vector) would make cuBLASLt read past it.
      if (bcast && rest.size() == expectOps && r.indexOf(bcast.getInput()) >= 0 &&
          shapeOf(bcast.getInput()).size() == 1 && bcast.getDims().size() == 1 &&
          bcast.getDims()[0] == (int64_t)os.size() - 1 && shapeOf(bcast.getInput())[0] == os.back()) {
        spec.biasInput = r.indexOf(bcast.getInput());
        spec.activation = act;
        plan.library->productIsOutput = false;
        return true;
      }
      if (other && act == Activation::None && rest.size() == 1 && r.indexOf(other) >= 0 &&
          shapeOf(other) == os) {
        spec.residualInput = r.indexOf(other);
        plan.library->productIsOutput = false;
        return true;
      }
    }
  }
  // C - c * (A B) for a splat constant c (rfuse-autodiff's SGD step on a weight: W - lr dW):
  // alpha = -c, beta = 1.
  if (!productIsOutput && r.outputs.size() == 1 && spec.dtype != DType::F64) {
    SmallVector<Operation *> compute;
    for (Operation *op : rest)
      if (!isa<ConstantOp>(op))
        compute.push_back(op);
    // A bfloat16 / f16 product widened to f32 and read by nothing else (autocast's products
    // whose readers compute in f32: attention's scores, a gradient's f32 copy): cuBLASLt writes
    // f32 (MatmulCall::f32Result), alone or with the scale below, and no epilogue kernel reads
    // the narrow product to write it again four bytes wide.
    auto widen = product.hasOneUse() ? dyn_cast<CastOp>(*product.getUsers().begin()) : CastOp();
    bool widened = false; // the scale below reads the widened product
    if (widen && options.f32ResultsOfNarrowProducts && (spec.dtype == DType::BF16 || spec.dtype == DType::F16) && dtypeOf(widen.getResult()) == DType::F32 &&
        !compute.empty() && compute[0] == widen.getOperation()) {
      if (compute.size() == 1 && widen.getResult() == r.outputs[0]) {
        spec.f32Result = true;
        plan.library->productIsOutput = false;
        return true;
      }
      if (compute.size() == 2) {
        product = widen.getResult();
        compute.erase(compute.begin());
        widened = true;
      }
    }
    // c * (A B), (A B) * c or (A B) / c alone (attention's scores scaled by 1 / sqrt(d)):
    // alpha = c or 1 / c, with no epilogue kernel reading and writing the product again.
    if (compute.size() == 1 && compute[0]->getResult(0) == r.outputs[0] && isa<MulOp, DivOp>(compute[0])) {
      Operation *op = compute[0];
      bool div = isa<DivOp>(op);
      Value other = op->getOperand(0) == product && op->getOperand(1) != product ? op->getOperand(1)
                    : !div && op->getOperand(1) == product ? op->getOperand(0) : Value();
      std::optional<double> v = other ? floatSplatValue(other) : std::nullopt;
      if (v && *v != 0 && std::isfinite(*v)) {
        spec.alpha = div ? 1 / *v : *v;
        spec.f32Result = widened;
        plan.library->productIsOutput = false;
        return true;
      }
    }
    if (widened) // a widened product with something other than a scale after it
      return buildEpilogue(r, mm.getOperation(), name, plan, why);
    auto sub = compute.size() == 2 ? dyn_cast<SubOp>(compute[1]) : SubOp();
    auto mul = compute.size() == 2 ? dyn_cast<MulOp>(compute[0]) : MulOp();
    if (sub && mul && sub.getResult() == r.outputs[0] && sub.getRhs() == mul.getResult() &&
        r.indexOf(sub.getLhs()) >= 0 && shapeOf(sub.getLhs()) == os) {
      Value other = mul.getLhs() == product ? mul.getRhs() : mul.getRhs() == product ? mul.getLhs() : Value();
      if (std::optional<double> v = other ? floatSplatValue(other) : std::nullopt) {
        spec.alpha = -*v;
        spec.residualInput = r.indexOf(sub.getLhs());
        plan.library->productIsOutput = false;
        return true;
      }
    }
  }
  return buildEpilogue(r, mm.getOperation(), name, plan, why);
}

// Plans cuDNN for a conv_epilogue region's convolution (or a lone convolution gradient) and a
// generated kernel for the rest.
bool planConv(const Region &r, const std::string &name, KernelPlan &plan, std::string &why) {
  auto found = findConvolution(r, why);
  if (!found)
    return false;
  auto [conv, operands] = *found;
  plan.library = LibraryCall{};
  plan.library->kind = LibraryCall::Kind::Conv;
  ConvCall &spec = plan.library->conv;
  spec.dtype = dtypeOf(conv->getResult(0));
  spec.geometry = convGeometry(conv);
  const ConvGeometry &cg = spec.geometry;
  if (cg.padTop != cg.padBottom || cg.padLeft != cg.padRight) {
    why = "asymmetric padding (cuDNN pads symmetrically)";
    return false;
  }
  spec.inputIndex = operands.input;
  spec.filterIndex = operands.filter;
  spec.gradOutputIndex = operands.gradOutput;
  spec.biasIndex = operands.bias;
  return buildEpilogue(r, conv, name, plan, why);
}

bool planPool(Operation *op, KernelPlan &plan, std::string &why) {
  PoolCall p;
  p.geometry = poolGeometry(op);
  if (p.geometry.padTop != p.geometry.padBottom || p.geometry.padLeft != p.geometry.padRight) {
    why = "asymmetric padding (cuDNN pads symmetrically)";
    return false;
  }
  p.dtype = dtypeOf(op->getResult(0));
  plan.library = LibraryCall{};
  plan.library->kind = LibraryCall::Kind::Pool;
  plan.library->pool = p;
  return true;
}

// rfuse.recurrent / rfuse.recurrent_backward: one cuDNN RNN call (its RNN API takes f32, f16
// and f64; bfloat16 recurrent layers stay with the interpreter).
template <class RecurrentOpT> bool planRecurrent(RecurrentOpT op, KernelPlan &plan, std::string &why) {
  RecurrentCall c;
  c.backward = isa<RecurrentBackwardOp>(op.getOperation());
  c.dtype = dtypeOf(op.getX());
  if (c.dtype != DType::F32 && c.dtype != DType::F16 && c.dtype != DType::F64) {
    why = "a " + std::string(dtypeName(c.dtype)) + " recurrent layer (cuDNN's RNN API takes f32, f16 and f64)";
    return false;
  }
  auto x = llvm::cast<RankedTensorType>(op.getX().getType());
  c.steps = x.getShape()[0]; // (time first)
  c.batch = x.getShape()[1];
  c.inputSize = x.getShape()[2];
  c.hidden = llvm::cast<RankedTensorType>(op.getH0().getType()).getShape()[1];
  if (c.batch == 0 || c.steps == 0 || c.inputSize == 0 || c.hidden == 0) {
    why = "an empty recurrent layer";
    return false;
  }
  switch (op.getMode()) {
  case RecurrentMode::lstm: c.cell = RecurrentCall::Cell::Lstm; break;
  case RecurrentMode::gru: c.cell = RecurrentCall::Cell::Gru; break;
  case RecurrentMode::rnn_tanh: c.cell = RecurrentCall::Cell::RnnTanh; break;
  case RecurrentMode::rnn_relu: c.cell = RecurrentCall::Cell::RnnRelu; break;
  }
  plan.library = LibraryCall{};
  plan.library->kind = LibraryCall::Kind::Recurrent;
  plan.library->recurrent = c;
  return true;
}

// The launch grid for the target: grid-stride kernels one wave of 32 blocks per SM at most, row
// kernels a block per row (or one resident wave), column kernels a thread per output.
void chooseGrid(KernelSpec &k, const CudaTarget &target, const CodegenOptions &options) {
  auto cap = [](int64_t g) { return (unsigned)std::max<int64_t>(1, std::min<int64_t>(g, 2147483647)); };
  int64_t block = k.blockSize, sms = std::max(1, target.multiprocessors);
  switch (k.launch) {
  case LaunchKind::GridStride:
    k.grid = cap(std::min<int64_t>((k.elements / k.vectorWidth + block - 1) / block, sms * 32));
    break;
  case LaunchKind::BlockPerRow:
  { // (rowsPerBlock rows a block: a warp each)
    int64_t blocks = (k.rows + k.rowsPerBlock - 1) / k.rowsPerBlock;
    k.grid = cap(options.rowGridWave ? std::min<int64_t>(blocks, sms * std::max<int64_t>(1, 2048 / block)) : blocks);
  }
    break;
  case LaunchKind::ThreadPerColumn: { // tiles of 32 (or 8) outputs, at most a few resident waves
    int64_t cs = std::max(1, k.clusterSize); // a cluster's blocks share a tile
    k.grid = cap(std::min<int64_t>((k.columns + k.columnsPerBlock - 1) / k.columnsPerBlock, sms * 16 / cs) * cs);
    break;
  }
  case LaunchKind::Tiles: // chosen with the kernel
    break;
  }
}

void finish(KernelPlan &plan, std::string why, const CudaTarget &target, const CodegenOptions &options) {
  if (plan.kernel)
    chooseGrid(*plan.kernel, target, options);
  if (!plan.kernel && !plan.library)
    plan.unsupported = why.empty() ? "no GPU code for this kernel" : why;
}

} // namespace

KernelPlan planKernel(func::FuncOp fn, const CudaTarget &target, const CodegenOptions &options) {
  KernelPlan plan;
  plan.function = fn.getName().str();
  auto kind = fn->getAttrOfType<FusionKindAttr>("rfuse.kernel");
  if (!kind) {
    plan.unsupported = "not a kernel function";
    return plan;
  }
  plan.kind = stringifyFusionKind(kind.getValue()).str();
  std::string why;
  Region r = regionOf(fn);
  bool ok = true;
  switch (kind.getValue()) {
  case FusionKind::pointwise:
    plan.kernel = PointwiseEmitter(r, sanitize(fn.getName())).emit(why);
    break;
  case FusionKind::reduction:
    plan.kernel = ReductionEmitter(r, sanitize(fn.getName()), options, target).emit(why);
    break;
  case FusionKind::matmul_epilogue:
    ok = planMatmul(r, sanitize(fn.getName()), options, plan, why);
    break;
  case FusionKind::conv_epilogue:
    ok = planConv(r, sanitize(fn.getName()), plan, why);
    break;
  }
  if (!ok) {
    plan.library.reset();
    plan.kernel.reset();
  }
  finish(plan, why, target, options);
  return plan;
}

// A cumulative op: a thread per line (grid-stride over the lines), each a sequential pass along
// the scanned dim; float sums and products accumulate in double, as the interpreter's do.
std::optional<KernelSpec> emitScan(ScanOp s, const std::string &name, std::string &why) {
  auto shape = shapeOf(s.getInput());
  int64_t dim = s.getDim(), len = shape[dim], inner = 1, outer = 1;
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
    if (d != dim)
      (d < dim ? outer : inner) *= shape[d];
  DType dt = dtypeOf(s.getInput());
  std::string ct = computeType(dt);
  bool wide = isFloat(dt) && (s.getKind() == ScanKind::sum || s.getKind() == ScanKind::prod);
  std::string acc = wide ? "double" : isFloat(dt) ? ct : "long long";
  std::string combine;
  switch (s.getKind()) {
  case ScanKind::sum: combine = "a + v"; break;
  case ScanKind::prod: combine = "a * v"; break;
  case ScanKind::max: combine = "rf_max<" + acc + ">(a, v)"; break;
  case ScanKind::min: combine = "rf_min<" + acc + ">(a, v)"; break;
  }
  std::string src;
  llvm::raw_string_ostream os(src);
  os << "// rfuse scan kernel " << name << ": " << outer * inner << " lines of " << len << "\n"
     << describeOps({s.getOperation()}, s.getLoc()) << "\n" << prelude() << "\nextern \"C\" __global__ void " << name
     << "(const " << storageType(dt) << "* __restrict__ in0, " << storageType(dt) << "* __restrict__ out0) {\n"
     << "  const long long lines = " << outer * inner << "LL;\n"
     << "  const long long stride = (long long)gridDim.x * blockDim.x;\n"
     << "  for (long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x; line < lines; line += stride) {\n"
     << "    const long long base = (line / " << inner << "LL) * " << len * inner << "LL + line % " << inner << "LL;\n"
     << "    " << acc << " a = 0;\n"
     << "    for (long long j = 0; j < " << len << "LL; ++j) {\n"
     << "      const " << acc << " v = (" << acc << ")" << loadExpr("in0", "base + j * " + std::to_string(inner) + "LL", dt) << ";\n"
     << "      a = j == 0 ? v : " << combine << ";\n"
     << "      " << storeStmt("out0", "base + j * " + std::to_string(inner) + "LL", "(" + ct + ")a", dt) << "\n"
     << "    }\n  }\n}\n";
  KernelSpec k;
  k.name = name;
  k.source = os.str();
  k.launch = LaunchKind::GridStride;
  k.elements = outer * inner;
  k.vectorWidth = 1;
  k.numInputs = 1;
  k.numOutputs = 1;
  (void)why;
  return k;
}

// A one-output kernel of `inputs` inputs whose threads stride over `elements`.
KernelSpec gridStrideKernel(const std::string &name, std::string source, int64_t elements, int inputs) {
  KernelSpec k;
  k.name = name;
  k.source = std::move(source);
  k.launch = LaunchKind::GridStride;
  k.elements = elements;
  k.vectorWidth = 1;
  k.numInputs = inputs;
  k.numOutputs = 1;
  return k;
}

// Uniform draws (rfuse.random_uniform): a thread per element (grid-stride), ScalarOps.h's Philox
// at the element's flat index under the seed, as the interpreter computes it.
std::optional<KernelSpec> emitRandomUniform(RandomUniformOp r, const std::string &name) {
  int64_t n = numElements(shapeOf(r.getResult()));
  std::string src;
  llvm::raw_string_ostream os(src);
  os << "// rfuse random kernel " << name << ": " << n << " uniform draws\n"
     << describeOps({r.getOperation()}, r.getLoc()) << "\n" << prelude() << "\nextern \"C\" __global__ void " << name
     << "(const int* __restrict__ in0, float* __restrict__ out0) {\n"
     << "  const unsigned int k0 = (unsigned int)in0[0], k1 = (unsigned int)in0[1];\n"
     << "  const long long stride = (long long)gridDim.x * blockDim.x;\n"
     << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < " << n << "LL; i += stride)\n"
     << "    out0[i] = rf_random_uniform((unsigned long long)i, k0, k1);\n"
     << "}\n";
  return gridStrideKernel(name, os.str(), n, 1);
}

// rfuse.max_pool2d_backward as a generated kernel (option max_pool_backward_kernel), gathered
// instead of scattered: a thread per element of the input's gradient sums the gradients of the
// windows that cover it and whose first maximum it is (the interpreter's rule, PoolGeometry::run:
// the first tap equal to the window's output, or its first tap when that output is NaN), in the
// windows' row-major order. No atomics, deterministic, and no zero-fill first. cuDNN's NHWC
// kernel took 90 us for ResNet-18's first pooling (256 x 16 x 16 x 64) on an H100.
std::optional<KernelSpec> emitMaxPoolBackward(MaxPool2dBackwardOp op, const std::string &name) {
  PoolGeometry g = poolGeometry(op);
  DType dt = dtypeOf(op->getResult(0));
  const char *st = storageType(dt), *ct = computeType(dt);
  int64_t n = g.n * g.c * g.h * g.w;
  auto L = [](int64_t v) { return std::to_string(v) + "LL"; };
  auto inputAt = [&](const std::string &y, const std::string &x) {
    return g.nhwc ? "((b * " + L(g.h) + " + " + y + ") * " + L(g.w) + " + " + x + ") * " + L(g.c) + " + ch"
                  : "((b * " + L(g.c) + " + ch) * " + L(g.h) + " + " + y + ") * " + L(g.w) + " + " + x;
  };
  auto outputAt = [&](const std::string &y, const std::string &x) {
    return g.nhwc ? "((b * " + L(g.oh) + " + " + y + ") * " + L(g.ow) + " + " + x + ") * " + L(g.c) + " + ch"
                  : "((b * " + L(g.c) + " + ch) * " + L(g.oh) + " + " + y + ") * " + L(g.ow) + " + " + x;
  };
  std::string src;
  llvm::raw_string_ostream os(src);
  os << "// rfuse max pool backward kernel " << name << ": " << n << " input gradients, windows " << g.kh << "x" << g.kw
     << " stride " << g.strideH << "x" << g.strideW << (g.nhwc ? ", NHWC" : ", NCHW") << "\n"
     << describeOps({op.getOperation()}, op.getLoc()) << "\n" << prelude() << "\nextern \"C\" __global__ void " << name
     << "(const " << st << "* __restrict__ in0, const " << st << "* __restrict__ in1, const " << st
     << "* __restrict__ in2, " << st << "* __restrict__ out0) {\n"
     << "  const long long stride = (long long)gridDim.x * blockDim.x;\n"
     << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < " << L(n) << "; i += stride) {\n";
  if (g.nhwc)
    os << "    const long long ch = i % " << L(g.c) << ", ix = (i / " << L(g.c) << ") % " << L(g.w) << ", iy = (i / "
       << L(g.c * g.w) << ") % " << L(g.h) << ", b = i / " << L(g.c * g.w * g.h) << ";\n";
  else
    os << "    const long long ix = i % " << L(g.w) << ", iy = (i / " << L(g.w) << ") % " << L(g.h) << ", ch = (i / "
       << L(g.w * g.h) << ") % " << L(g.c) << ", b = i / " << L(g.w * g.h * g.c) << ";\n";
  // The windows covering (iy, ix): y * strideH - padTop <= iy < y * strideH - padTop + kh.
  os << "    const long long ylo = iy + " << L(g.padTop - g.kh + 1) << " <= 0 ? 0LL : (iy + " << L(g.padTop - g.kh + 1)
     << " + " << L(g.strideH - 1) << ") / " << L(g.strideH) << ";\n"
     << "    const long long yhi = min((iy + " << L(g.padTop) << ") / " << L(g.strideH) << ", " << L(g.oh - 1) << ");\n"
     << "    const long long xlo = ix + " << L(g.padLeft - g.kw + 1) << " <= 0 ? 0LL : (ix + " << L(g.padLeft - g.kw + 1)
     << " + " << L(g.strideW - 1) << ") / " << L(g.strideW) << ";\n"
     << "    const long long xhi = min((ix + " << L(g.padLeft) << ") / " << L(g.strideW) << ", " << L(g.ow - 1) << ");\n"
     << "    " << ct << " acc = (" << ct << ")0;\n"
     << "    for (long long y = ylo; y <= yhi; ++y)\n"
     << "      for (long long x = xlo; x <= xhi; ++x) {\n"
     << "        const long long o = " << outputAt("y", "x") << ";\n"
     << "        const " << ct << " m = " << loadExpr("in1", "o", dt) << ";\n"
     << "        // the window's first tap equal to its maximum (inside the input; row-major)\n"
     << "        const long long y0 = y * " << L(g.strideH) << " - " << L(g.padTop) << ", x0 = x * " << L(g.strideW)
     << " - " << L(g.padLeft) << ";\n"
     << "        long long first = -1;\n"
     << "        for (long long ty = max(y0, 0LL); ty < min(y0 + " << L(g.kh) << ", " << L(g.h) << ") && first < 0; ++ty)\n"
     << "          for (long long tx = max(x0, 0LL); tx < min(x0 + " << L(g.kw) << ", " << L(g.w) << "); ++tx) {\n"
     << "            const " << ct << " v = " << loadExpr("in0", inputAt("ty", "tx"), dt) << ";\n"
     << "            if (v == m || m != m) { first = ty * " << L(g.w) << " + tx; break; }\n"
     << "          }\n"
     << "        if (first == iy * " << L(g.w) << " + ix) acc += " << loadExpr("in2", "o", dt) << ";\n"
     << "      }\n"
     << "    " << storeStmt("out0", "i", "acc", dt) << "\n"
     << "  }\n}\n";
  return gridStrideKernel(name, os.str(), n, 3);
}

KernelPlan planOperation(Operation *op, const std::string &name, const CudaTarget &target,
                         const CodegenOptions &options) {
  KernelPlan plan;
  plan.function = name;
  Region r = regionOfOperation(op);
  std::string why;
  bool ok = true;
  if (isa<MatmulOp>(op)) {
    plan.kind = "matmul_epilogue";
    ok = planMatmul(r, name, options, plan, why);
  } else if (isReductionOp(op)) {
    plan.kind = "reduction";
    plan.kernel = ReductionEmitter(r, name, options, target).emit(why);
  } else if (isa<PointwiseOpInterface, CastOp>(op) || isIndexReadOp(op)) {
    plan.kind = "pointwise";
    plan.kernel = PointwiseEmitter(r, name).emit(why);
  } else if (auto s = dyn_cast<ScanOp>(op)) {
    plan.kind = "scan";
    plan.kernel = emitScan(s, name, why);
  } else if (auto u = dyn_cast<RandomUniformOp>(op)) {
    plan.kind = "random";
    plan.kernel = emitRandomUniform(u, name);
  } else if (auto mp = dyn_cast<MaxPool2dBackwardOp>(op); mp && options.maxPoolBackwardKernel) {
    plan.kind = "pool";
    plan.kernel = emitMaxPoolBackward(mp, name);
  } else if (isPoolingOp(op)) {
    plan.kind = "pool";
    ok = planPool(op, plan, why);
  } else if (isConvolutionOp(op)) {
    plan.kind = "conv_epilogue";
    ok = planConv(r, name, plan, why);
  } else if (auto rec = dyn_cast<RecurrentOp>(op)) {
    plan.kind = "recurrent";
    ok = planRecurrent(rec, plan, why);
  } else if (auto rec = dyn_cast<RecurrentBackwardOp>(op)) {
    plan.kind = "recurrent";
    ok = planRecurrent(rec, plan, why);
  } else if (auto a = dyn_cast<AttentionOp>(op)) {
    plan.kind = "attention";
    plan.kernel = emitAttention(a, name, why);
  } else if (auto a = dyn_cast<AttentionBackwardOp>(op)) {
    plan.kind = "attention";
    plan.kernel = emitAttentionBackward(a, name, why);
  } else {
    why = "no GPU code for '" + op->getName().getStringRef().str() + "'";
  }
  if (!ok) {
    plan.library.reset();
    plan.kernel.reset();
  }
  finish(plan, why, target, options);
  return plan;
}

} // namespace rfuse::cuda
