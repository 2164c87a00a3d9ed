// rfuse-fuse-attention: softmax(scale q k^T) v, written out op by op, becomes one rfuse.attention
// (see Passes.td).
#include "rfuse/Passes/Passes.h"
#include "Softmax.h"
#include "TransposeSinking.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace rfuse {
#define GEN_PASS_DEF_FUSEATTENTION
#include "rfuse/Passes/Passes.h.inc"

namespace {

bool isNarrowFloat(Type t) { return t.isBF16() || t.isF16(); }

// A cast between float types (a rounding the fused op may skip; never one to or from integers).
bool isFloatCast(CastOp c) {
  return isa<FloatType>(tensorOf(c.getInput()).getElementType()) && isa<FloatType>(tensorOf(c.getResult()).getElementType());
}

// The value of a float splat constant, possibly broadcast.
std::optional<double> splatValue(Value v) {
  if (auto b = v.getDefiningOp<BroadcastInDimOp>())
    v = b.getInput();
  return floatSplatValue(v);
}

// A value on the path between the two products, and which axis of the scores [B, L, S] each of
// its dims holds (its layout).
struct OnPath {
  Value value;
  SmallVector<int64_t> axes;
};

// Through a transpose from result to operand: operand dim perm[i] holds result dim i's axis.
SmallVector<int64_t> axesBefore(TransposeOp t, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> in(axes.size());
  for (auto [i, p] : llvm::enumerate(t.getPerm()))
    in[p] = axes[i];
  return in;
}

struct Match {
  MatmulOp scores, product; // q k^T, and P v
  double scale = 1;
  // Every op of the pattern: what is erased once nothing reads it.
  llvm::SetVector<Operation *> ops;
};

// Follows casts and transposes up from `at` (tracking the layout); the ops walked are recorded.
OnPath walkLayoutOps(OnPath at, Match &m) {
  while (Operation *def = at.value.getDefiningOp()) {
    if (!def->hasOneUse())
      break;
    if (auto t = dyn_cast<TransposeOp>(def)) {
      at = {t.getInput(), axesBefore(t, at.axes)};
    } else if (auto c = dyn_cast<CastOp>(def); c && isFloatCast(c)) {
      at.value = c.getInput();
    } else {
      break;
    }
    m.ops.insert(def);
  }
  return at;
}

std::optional<Match> matchAttention(MatmulOp product) {
  Match m;
  m.product = product;
  m.ops.insert(product);
  auto outType = tensorOf(product.getResult());
  Type narrow = outType.getElementType();
  if (product.getTransposeA() || product.getTransposeB() || outType.getRank() != 3 || !isNarrowFloat(narrow) ||
      tensorOf(product.getLhs()).getRank() != 3 || tensorOf(product.getRhs()).getRank() != 3)
    return std::nullopt;
  // P, [B, L, S], back to the softmax (rounded to the narrow type on the way).
  OnPath p = walkLayoutOps({product.getLhs(), {0, 1, 2}}, m);
  auto div = p.value.getDefiningOp<DivOp>();
  if (!div || !div->hasOneUse() || !tensorOf(div.getResult()).getElementType().isF32())
    return std::nullopt;
  std::optional<Softmax> softmax = matchSoftmax(div);
  if (!softmax)
    return std::nullopt;
  int64_t keysDim = llvm::find(p.axes, 2) - p.axes.begin();
  ArrayRef<int64_t> shape = tensorOf(div.getResult()).getShape();
  for (int64_t d : softmax->dims)
    if (d != keysDim && shape[d] != 1)
      return std::nullopt;
  if (!llvm::is_contained(softmax->dims, keysDim) && shape[keysDim] != 1)
    return std::nullopt;
  m.ops.insert(div);
  m.ops.insert(softmax->between.begin(), softmax->between.end());
  m.ops.insert(softmax->sum);
  m.ops.insert(softmax->exp);
  // z - m, with m constant along the keys (each row's maximum): the softmax is the same.
  Value z = softmax->exp.getOperand();
  if (auto sub = z.getDefiningOp<SubOp>()) {
    auto spread = sub.getRhs().getDefiningOp<BroadcastInDimOp>();
    if (!sub->hasOneUse() || !spread)
      return std::nullopt;
    ArrayRef<int64_t> from = tensorOf(spread.getInput()).getShape();
    for (auto [i, d] : llvm::enumerate(spread.getDims()))
      if (d == keysDim && from[i] != 1)
        return std::nullopt;
    m.ops.insert(sub);
    // The maximum's own ops up to z, when nothing else reads them (else they stay).
    z = sub.getLhs();
    for (Operation *op = spread; op && op->hasOneUse() && isa<BroadcastInDimOp, ReshapeOp, StopGradientOp, ReduceMaxOp>(op);
         op = op->getOperand(0).getDefiningOp()) {
      m.ops.insert(op);
      if (op->getOperand(0) == z)
        break;
    }
  }
  // The scale (divisions and products by constants) and the widening, back to q k^T.
  OnPath s{z, p.axes};
  while (true) {
    Operation *def = s.value.getDefiningOp();
    if (!def)
      return std::nullopt;
    // z is read by the subtraction and the maximum; everything before it by one op.
    if (s.value != z && !def->hasOneUse())
      return std::nullopt;
    if (s.value == z && !llvm::all_of(def->getUsers(), [&](Operation *u) { return llvm::is_contained(m.ops, u); }))
      return std::nullopt;
    if (isa<DivOp, MulOp>(def)) {
      Value x = def->getOperand(0), c = def->getOperand(1);
      std::optional<double> k = splatValue(c);
      if (!k && isa<MulOp>(def)) {
        std::swap(x, c);
        k = splatValue(c);
      }
      if (!k || *k == 0)
        return std::nullopt;
      m.scale *= isa<DivOp>(def) ? 1 / *k : *k;
      s.value = x;
    } else if (auto t = dyn_cast<TransposeOp>(def)) {
      s = {t.getInput(), axesBefore(t, s.axes)};
    } else if (auto c = dyn_cast<CastOp>(def); c && isFloatCast(c)) {
      s.value = c.getInput();
    } else if (auto mm = dyn_cast<MatmulOp>(def)) {
      if (s.axes != SmallVector<int64_t>{0, 1, 2} || mm.getTransposeA())
        return std::nullopt;
      m.scores = mm;
      m.ops.insert(mm);
      break;
    } else {
      return std::nullopt;
    }
    m.ops.insert(def);
  }
  Value q = m.scores.getLhs(), k = m.scores.getRhs(), v = product.getRhs();
  auto qt = tensorOf(q), kt = tensorOf(k), vt = tensorOf(v);
  if (qt.getRank() != 3 || kt.getRank() != 3 || qt.getElementType() != narrow || kt.getElementType() != narrow ||
      vt.getElementType() != narrow)
    return std::nullopt;
  // What the GPU kernel takes: the head dim a multiple of 16, at most 128, v's the same.
  int64_t d = qt.getShape()[2];
  if (d % 16 != 0 || d > 128 || vt.getShape()[2] != d)
    return std::nullopt;
  return m;
}

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  using FuseAttentionBase::FuseAttentionBase;

  void runOnOperation() override {
    SmallVector<Match> found;
    getOperation().walk([&](MatmulOp mm) {
      if (auto m = matchAttention(mm))
        found.push_back(*m);
    });
    for (Match &m : found) {
      OpBuilder b(m.product);
      Location loc = m.product.getLoc();
      Value q = m.scores.getLhs(), k = m.scores.getRhs(), v = m.product.getRhs();
      if (!m.scores.getTransposeB()) // k^T [B, D, S] -> k [B, S, D]
        k = b.create<TransposeOp>(loc, k, ArrayRef<int64_t>{0, 2, 1});
      auto qt = tensorOf(q);
      auto lseType = RankedTensorType::get({qt.getShape()[0], qt.getShape()[1]}, b.getF32Type());
      auto attention = b.create<AttentionOp>(loc, m.product.getResult().getType(), lseType, q, k, v,
                                             b.getF64FloatAttr(m.scale));
      m.product.getResult().replaceAllUsesWith(attention.getOut());
      // Erase what nothing reads any more, consumers before what they read (constants are left
      // to the canonicalizer; what something else still reads stays).
      SmallVector<Operation *> left(m.ops.begin(), m.ops.end());
      for (bool erased = true; erased;) {
        erased = false;
        for (Operation *&op : left)
          if (op && op->use_empty()) {
            op->erase();
            op = nullptr;
            erased = true;
          }
      }
      ++numFused;
    }
  }
};

} // namespace
} // namespace rfuse
