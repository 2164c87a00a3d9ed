// What the CUDA and the CPU code generators both need to know about an outlined kernel: its
// region (inputs, ops, outputs), index maps, and how a reduction region's iteration space splits
// into outer (kept) and reduced dims. One analysis, two emitters.
#ifndef RFUSE_CODEGEN_KERNELREGION_H
#define RFUSE_CODEGEN_KERNELREGION_H

#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

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

bool isReduction(mlir::Operation *op);
llvm::ArrayRef<int64_t> reductionDims(mlir::Operation *op);

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
