// What the CUDA and the CPU code generators both need to know about an outlined kernel: its
// region (inputs, ops, outputs), index maps, and how a reduction region's iteration space splits
// into outer (kept) and reduced dims. One analysis, two emitters.
#ifndef RFUSE_CODEGEN_KERNELREGION_H
#define RFUSE_CODEGEN_KERNELREGION_H

#include "rfuse/IR/Geometry.h"
#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rfuse::codegen {

/// A region to emit: its inputs (kernel parameters), ops in order, and outputs.
struct Region {
  llvm::SmallVector<mlir::Value> inputs;
  llvm::SmallVector<mlir::Operation *> ops;
  llvm::SmallVector<mlir::Value> outputs;
  mlir::Location loc;
  /// Position of `v` among the inputs, or -1.
  int indexOf(mlir::Value v) const {
    auto it = llvm::find(inputs, v);
    return it == inputs.end() ? -1 : (int)(it - inputs.begin());
  }
};

/// The region of a kernel function: its arguments, body ops and returned values.
Region regionOf(mlir::func::FuncOp fn);
/// A one-op region for an op no kernel holds: its distinct operands, the op, its results.
Region regionOfOperation(mlir::Operation *op);

/// The (last) op of type OpT in a region, or null.
template <class OpT> OpT findOp(const Region &r) {
  OpT found;
  for (mlir::Operation *op : r.ops)
    if (auto o = llvm::dyn_cast<OpT>(op))
      found = o;
  return found;
}

/// Region input indices of a convolution's (or convolution gradient's) operands: -1 where the
/// op has no such operand in its direction.
struct ConvOperands {
  int input = -1, filter = -1, gradOutput = -1, bias = -1;
};
/// The convolution op of a region and its operands' input indices; nullopt (with `why`) when
/// there is none or an operand is computed inside the region (the library reads its operands).
std::optional<std::pair<mlir::Operation *, ConvOperands>> findConvolution(const Region &r, std::string &why);

/// The ops of `r` after a library call (a matmul, a convolution) as a region of their own over
/// its result: inputs are the result, then the inputs of `r` those ops read (their positions in
/// `r` appended to `inputPositions`); outputs are r's outputs other than the result.
Region epilogueRegion(const Region &r, mlir::Operation *library, std::vector<int> &inputPositions);

inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getShape();
}
int64_t numElements(llvm::ArrayRef<int64_t> shape);
/// Row-major strides.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);
/// The index map of a broadcast or transpose reading an input, as result dim -> input dim (-1
/// where a broadcast adds the dim).
llvm::SmallVector<int64_t> indexMap(mlir::Operation *op);

/// The ops of a pointwise region whose results are only read through index maps: by other
/// index-read ops (a slice of a gather), or, for pointwise ops, by a concatenation or pad
/// (directly or through other such ops). The kernel never computes them at its own iteration
/// index, only element by element where a reader needs one (readElement); they may have any
/// shape.
llvm::DenseSet<mlir::Operation *> readThroughIndexMaps(const Region &r);

/// The element of `v` at `coords` (one index per dim of v), read through chains of index-read
/// ops (slice, reverse, pad, concat, gather, broadcast, transpose) down to region inputs and
/// splat constants: one definition of every index map for both code generators. `E` builds the
/// expressions of one emitter (strings for CUDA, MLIR values for the CPU), all of one type T:
///   T cst(int64_t); T add(T, T); T sub(T, T); T mulc(T, int64_t); T divc(T, int64_t);
///   T remc(T, int64_t); T clamp(T, int64_t lo, int64_t hi); T lt(T, T); T ge(T, T); T eq(T, T);
///   T both(T, T) (conditions); T load(int input, ArrayRef<T> coords); T splat(ConstantOp);
///   T padValue(double, Value like); T select(T cond, T onTrue, T onFalse);
///   T index(int input, T position) (an element of a 1-D integer input, as an index);
///   T apply(Operation *pointwiseOrCast, ArrayRef<T> operands).
/// Reads are clamped into range, so an emitter may evaluate both sides of a select. A pointwise
/// op of the region (behind a concatenation or pad) is computed at the coordinates read.
template <class E, class T = typename E::T>
T readElement(E &e, const Region &r, mlir::Value v, llvm::SmallVector<T> coords, std::string &why) {
  using namespace mlir;
  if (int i = r.indexOf(v); i >= 0)
    return e.load(i, coords);
  Operation *op = v.getDefiningOp();
  if (auto c = llvm::dyn_cast_if_present<ConstantOp>(op)) {
    if (llvm::isa<SplatElementsAttr>(c.getValue()))
      return e.splat(c);
    why = "a dense constant read inside a kernel";
    return T();
  }
  if (!op || !llvm::is_contained(r.ops, op) || !(isIndexReadOp(op) || llvm::isa<PointwiseOpInterface, CastOp>(op))) {
    why = "an index map over a value computed in the kernel";
    return T();
  }
  if (!isIndexReadOp(op)) {
    llvm::SmallVector<T> args;
    for (Value x : op->getOperands()) {
      args.push_back(readElement(e, r, x, coords, why));
      if (!why.empty())
        return T();
    }
    return e.apply(op, args);
  }
  Value in = op->getOperand(0);
  auto inShape = shapeOf(in);
  llvm::SmallVector<T> src(inShape.size(), e.cst(0));
  if (auto s = llvm::dyn_cast<SliceOp>(op)) {
    for (size_t d = 0; d < inShape.size(); ++d)
      src[d] = e.add(e.cst(s.getStart()[d]), e.mulc(coords[d], s.getStrides()[d]));
    return readElement(e, r, in, src, why);
  }
  if (auto rv = llvm::dyn_cast<ReverseOp>(op)) {
    for (size_t d = 0; d < inShape.size(); ++d)
      src[d] = llvm::is_contained(rv.getDims(), (int64_t)d) ? e.sub(e.cst(inShape[d] - 1), coords[d]) : coords[d];
    return readElement(e, r, in, src, why);
  }
  if (auto b = llvm::dyn_cast<BroadcastInDimOp>(op)) {
    for (size_t d = 0; d < inShape.size(); ++d)
      src[d] = inShape[d] == 1 ? e.cst(0) : coords[b.getDims()[d]];
    return readElement(e, r, in, src, why);
  }
  if (auto t = llvm::dyn_cast<TransposeOp>(op)) {
    for (size_t d = 0; d < coords.size(); ++d)
      src[t.getPerm()[d]] = coords[d];
    return readElement(e, r, in, src, why);
  }
  if (auto g = llvm::dyn_cast<GatherOp>(op)) {
    int64_t dim = g.getDim();
    src = coords;
    // Indices all equal are a splat constant, cloned into the kernel: the position is known.
    auto c = g.getIndices().getDefiningOp<ConstantOp>();
    if (auto splat = c ? llvm::dyn_cast<SplatElementsAttr>(c.getValue()) : SplatElementsAttr()) {
      int64_t at = splat.getSplatValue<llvm::APInt>().getSExtValue();
      src[dim] = e.cst(std::clamp<int64_t>(at, 0, inShape[dim] - 1));
      return readElement(e, r, in, src, why);
    }
    int idx = r.indexOf(g.getIndices());
    if (idx < 0) {
      why = "a gather by indices computed in the kernel";
      return T();
    }
    src[dim] = e.clamp(e.index(idx, coords[dim]), 0, inShape[dim] - 1);
    return readElement(e, r, in, src, why);
  }
  if (auto p = llvm::dyn_cast<PadOp>(op)) {
    T inside;
    bool any = false;
    for (size_t d = 0; d < inShape.size(); ++d) {
      int64_t low = p.getLow()[d], step = p.getInterior()[d] + 1;
      int64_t span = inShape[d] == 0 ? 0 : (inShape[d] - 1) * step + 1;
      T t = e.sub(coords[d], e.cst(low));
      T ok = e.both(e.ge(t, e.cst(0)), e.lt(t, e.cst(span)));
      if (step > 1)
        ok = e.both(ok, e.eq(e.remc(e.clamp(t, 0, span), step), e.cst(0)));
      inside = any ? e.both(inside, ok) : ok;
      any = true;
      src[d] = step > 1 ? e.divc(e.clamp(t, 0, span - 1), step) : e.clamp(t, 0, inShape[d] - 1);
    }
    T fill = e.padValue(p.getValue().convertToDouble(), v);
    if (llvm::is_contained(inShape, 0))
      return fill;
    T x = readElement(e, r, in, src, why);
    return any ? e.select(inside, x, fill) : x;
  }
  auto c = llvm::cast<ConcatOp>(op);
  int64_t dim = c.getDim(), offset = 0;
  llvm::SmallVector<std::pair<int64_t, Value>> parts; // (end offset, operand), non-empty ones
  for (Value x : c.getInputs()) {
    int64_t n = shapeOf(x)[dim];
    if (n > 0)
      parts.push_back({offset += n, x});
  }
  if (parts.empty())
    return e.padValue(0.0, v); // (an empty result: never read)
  T result;
  for (size_t k = parts.size(); k-- > 0;) {
    int64_t begin = k == 0 ? 0 : parts[k - 1].first, n = parts[k].first - begin;
    llvm::SmallVector<T> at = coords;
    at[dim] = e.clamp(e.sub(coords[dim], e.cst(begin)), 0, n - 1);
    T x = readElement(e, r, parts[k].second, at, why);
    result = k + 1 == parts.size() ? x : e.select(e.lt(coords[dim], e.cst(parts[k].first)), x, result);
  }
  return result;
}


/// A matmul's sizes: row-major C[batch, m, n] = op(A)[batch?, m, k] op(B)[batch?, k, n].
struct MatmulGeometry {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false, batchedA = false, batchedB = false;
};
MatmulGeometry matmulGeometry(MatmulOp mm);


/// A reduction region's iteration space, from its first reduction: the full shape F splits into
/// outer (kept) dims, flattened to `o` in [0, outerLen), and reduced dims, flattened to `j` in
/// [0, redLen). Values live per element (Full), per outer index (Row: the reduced shape, with or
/// without the kept 1s) or elsewhere (Other).
class ReductionLayout {
public:
  enum class Space { Full, Row, Other };
  explicit ReductionLayout(const Region &r);

  llvm::SmallVector<int64_t> full, outerDims, reducedDims, keepShape, dropShape;
  int64_t redLen = 1, outerLen = 1, fullN = 1;
  bool suffix = false; ///< the reduced dims are the trailing ones: o-major, rows contiguous
  bool prefix = false; ///< the reduced dims are the leading ones: j-major, columns contiguous

  Space spaceOf(mlir::Value v) const { return space.lookup(v); }
  Space classify(mlir::Value v) const;
  /// Whether a broadcast re-expands a reduced-shape value over exactly the reduced dims (so
  /// every element of a row reads the row's value).
  bool isReexpansion(BroadcastInDimOp b) const;

  /// The coordinate along F's dim d: ((reduced ? j : o) / divisor) % modulo (modulo 0: none,
  /// for the outermost dim of its group).
  struct Coord {
    bool reduced;
    int64_t divisor, modulo;
  };
  Coord coord(int64_t d) const;

private:
  llvm::DenseMap<mlir::Value, Space> space;
};

} // namespace rfuse::codegen

#endif
