#include "KernelRegion.h"

#include "rfuse/IR/Geometry.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace rfuse::codegen {

Region regionOf(func::FuncOp fn) {
  Region r{{}, {}, {}, fn.getLoc()};
  Block &body = fn.getBody().front();
  for (BlockArgument a : body.getArguments())
    r.inputs.push_back(a);
  for (Operation &op : body.without_terminator())
    r.ops.push_back(&op);
  for (Value v : body.getTerminator()->getOperands())
    r.outputs.push_back(v);
  return r;
}

llvm::DenseSet<Operation *> readThroughIndexMaps(const Region &r) {
  llvm::DenseSet<Operation *> hidden;
  for (Operation *op : llvm::reverse(r.ops)) { // users before their operands
    bool pointwise = isa<PointwiseOpInterface, CastOp>(op);
    if ((!isIndexReadOp(op) && !pointwise) || op->use_empty() || llvm::is_contained(r.outputs, op->getResult(0)))
      continue;
    bool readThrough = llvm::all_of(op->getUsers(), [&](Operation *u) {
      if (!llvm::is_contained(r.ops, u))
        return false;
      if (hidden.contains(u))
        return true;
      return pointwise ? isa<ConcatOp, PadOp>(u) : isIndexReadOp(u);
    });
    if (readThrough)
      hidden.insert(op);
  }
  return hidden;
}

Region regionOfOperation(Operation *op) {
  Region r{{}, {op}, {}, op->getLoc()};
  for (Value v : op->getOperands())
    if (!llvm::is_contained(r.inputs, v))
      r.inputs.push_back(v);
  for (Value v : op->getResults())
    r.outputs.push_back(v);
  return r;
}

Region epilogueRegion(const Region &r, Operation *library, std::vector<int> &inputPositions) {
  Value product = library->getResult(0);
  Region e{{product}, {}, {}, r.loc};
  for (Operation *op : r.ops) {
    if (op == library)
      continue;
    e.ops.push_back(op);
    for (Value v : op->getOperands())
      if (int i = r.indexOf(v); i >= 0 && !llvm::is_contained(e.inputs, v)) {
        e.inputs.push_back(v);
        inputPositions.push_back(i);
      }
  }
  for (Value o : r.outputs)
    if (o != product)
      e.outputs.push_back(o);
  return e;
}

int64_t numElements(ArrayRef<int64_t> s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

SmallVector<int64_t> indexMap(Operation *op) {
  SmallVector<int64_t> map;
  if (auto b = dyn_cast<BroadcastInDimOp>(op)) {
    map.assign(shapeOf(b.getResult()).size(), -1);
    for (auto [i, d] : llvm::enumerate(b.getDims()))
      map[d] = i;
  } else if (auto t = dyn_cast<TransposeOp>(op)) {
    map.assign(t.getPerm().begin(), t.getPerm().end());
  }
  return map;
}

MatmulGeometry matmulGeometry(MatmulOp mm) {
  auto ls = shapeOf(mm.getLhs()), rs = shapeOf(mm.getRhs()), os = shapeOf(mm.getResult());
  MatmulGeometry g;
  g.transposeA = mm.getTransposeA();
  g.transposeB = mm.getTransposeB();
  g.batchedA = ls.size() == 3;
  g.batchedB = rs.size() == 3;
  g.batch = os.size() == 3 ? os[0] : 1;
  g.m = os[os.size() - 2];
  g.n = os[os.size() - 1];
  g.k = g.transposeA ? ls[ls.size() - 2] : ls[ls.size() - 1];
  return g;
}

ReductionLayout::ReductionLayout(const Region &r) {
  Operation *first = *llvm::find_if(r.ops, isReductionOp);
  full = SmallVector<int64_t>(shapeOf(first->getOperand(0)));
  SmallVector<int64_t> dims(reductionDims(first));
  llvm::sort(dims);
  int64_t rank = full.size(), nd = dims.size();
  suffix = llvm::equal(dims, llvm::seq<int64_t>(rank - nd, rank));
  prefix = llvm::equal(dims, llvm::seq<int64_t>(0, nd));
  for (int64_t d = 0; d < rank; ++d) {
    if (llvm::is_contained(dims, d)) {
      redLen *= full[d];
      reducedDims.push_back(d);
    } else {
      outerLen *= full[d];
      outerDims.push_back(d);
    }
  }
  fullN = numElements(full);
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = llvm::is_contained(reducedDims, d);
    if (!reduced)
      dropShape.push_back(full[d]);
    keepShape.push_back(reduced ? 1 : full[d]);
  }
  for (Value in : r.inputs)
    space[in] = classify(in);
  for (Operation *op : r.ops)
    space[op->getResult(0)] = isReductionOp(op) ? Space::Row : classify(op->getResult(0));
}

ReductionLayout::Space ReductionLayout::classify(Value v) const {
  ArrayRef<int64_t> s = shapeOf(v);
  if (s == ArrayRef<int64_t>(full))
    return Space::Full;
  if (s == ArrayRef<int64_t>(keepShape) || s == ArrayRef<int64_t>(dropShape))
    return Space::Row;
  return Space::Other;
}

bool ReductionLayout::isReexpansion(BroadcastInDimOp b) const {
  ArrayRef<int64_t> in = shapeOf(b.getInput());
  if (shapeOf(b.getResult()) != ArrayRef<int64_t>(full))
    return false;
  if (in == ArrayRef<int64_t>(keepShape))
    return llvm::equal(b.getDims(), llvm::seq<int64_t>(0, full.size()));
  return in == ArrayRef<int64_t>(dropShape) && b.getDims() == ArrayRef<int64_t>(outerDims);
}

ReductionLayout::Coord ReductionLayout::coord(int64_t d) const {
  bool reduced = llvm::is_contained(reducedDims, d);
  const SmallVector<int64_t> &group = reduced ? reducedDims : outerDims;
  int64_t inner = 1;
  size_t pos = llvm::find(group, d) - group.begin();
  for (size_t i = pos + 1; i < group.size(); ++i)
    inner *= full[group[i]];
  return {reduced, inner, pos == 0 ? 0 : full[d]};
}

std::optional<std::pair<Operation *, ConvOperands>> findConvolution(const Region &r, std::string &why) {
  auto it = llvm::find_if(r.ops, isConvolutionOp);
  if (it == r.ops.end()) {
    why = "no convolution in a conv_epilogue kernel";
    return std::nullopt;
  }
  ConvOperands o;
  auto index = [&](Value v) { return v ? r.indexOf(v) : -1; };
  bool computed = false;
  llvm::TypeSwitch<Operation *>(*it)
      .Case([&](Conv2dOp c) {
        o.input = index(c.getInput());
        o.filter = index(c.getFilter());
        o.bias = index(c.getBias());
        computed = o.input < 0 || o.filter < 0 || (c.getBias() && o.bias < 0);
      })
      .Case([&](Conv2dBackwardInputOp c) {
        o.gradOutput = index(c.getGradOutput());
        o.filter = index(c.getFilter());
        computed = o.gradOutput < 0 || o.filter < 0;
      })
      .Case([&](Conv2dBackwardFilterOp c) {
        o.input = index(c.getInput());
        o.gradOutput = index(c.getGradOutput());
        computed = o.input < 0 || o.gradOutput < 0;
      });
  if (computed) {
    why = "a convolution whose operands are computed in the region";
    return std::nullopt;
  }
  return std::make_pair(*it, o);
}

} // namespace rfuse::codegen
