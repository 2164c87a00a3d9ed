// rfuse-fuse-attention: softmax(scale q k^T) v, written out op by op, becomes one rfuse.attention
// (see Passes.td).
#include "rfuse/Passes/Passes.h"
#include "Softmax.h"
#include "TransposeSinking.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/SetVector.h"

#include <array>
#include <cmath>
#include <limits>

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

// The row-major strides of a tensor of `shape` along the scores' axes [B, L, S], its dim j
// holding axis axisOfDim[j] (a size-1 dim: stride 0).
std::array<int64_t, 3> stridesAlongScores(ArrayRef<int64_t> shape, ArrayRef<int64_t> axisOfDim) {
  std::array<int64_t, 3> stride = {0, 0, 0};
  int64_t step = 1;
  for (int64_t j = (int64_t)shape.size() - 1; j >= 0; --j) {
    if (shape[j] != 1)
      stride[axisOfDim[j]] = step;
    step *= shape[j];
  }
  return stride;
}

// A mask on the scores: masked_fill (select(mask, fill, x), or select(mask, x, fill) for the
// complement), or an added constant whose values are all 0 or -inf (torch's float masks).
struct MaskUse {
  Value value; // i1, or the added f32 constant
  SmallVector<int64_t> axes; // its layout, as OnPath's
  bool negate = false;       // masked where the value is false
  bool additive = false;     // masked where the constant is -inf
};

// Dropout on the probabilities: P * (cast(u >= threshold) * scale), u rfuse.random_uniform's
// draws (possibly transposed), in f32 as the R frontend traces nnf_dropout.
struct DropoutUse {
  Value seed;
  double threshold = 0, scale = 1;
  std::array<int64_t, 3> strides = {0, 0, 0}; // of the draws' flat index along b, l, s
};

struct Match {
  MatmulOp scores, product; // q k^T, and P v
  double scale = 1;
  std::optional<DropoutUse> dropout;
  SmallVector<MaskUse> masks;
  double fill = -std::numeric_limits<double>::infinity(); // a masked score, after the scale
  // Every op of the pattern: what is erased once nothing reads it.
  llvm::SetVector<Operation *> ops;
};

// The elements of a constant, possibly broadcast: the constant and the broadcast's dims (the
// constant's dim i is the value's dim dims[i]; none: the same shape).
std::optional<std::pair<DenseElementsAttr, SmallVector<int64_t>>> constantElements(Value v) {
  SmallVector<int64_t> dims;
  if (auto b = v.getDefiningOp<BroadcastInDimOp>()) {
    dims.assign(b.getDims().begin(), b.getDims().end());
    v = b.getInput();
  } else {
    dims = llvm::to_vector(llvm::seq<int64_t>(0, tensorOf(v).getRank()));
  }
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  return std::make_pair(attr, dims);
}

// A float mask's elements, masked (-inf) or not (0); nothing if some element is neither. (f32
// read as floats: a mask of W7's scores has 16M elements, which APFloat reads several times
// slower.)
std::optional<std::vector<uint8_t>> floatMaskElements(DenseElementsAttr attr) {
  std::vector<uint8_t> masked;
  masked.reserve(attr.getNumElements());
  auto take = [&](bool isZero, bool isMinusInf) {
    masked.push_back(isMinusInf);
    return isZero || isMinusInf;
  };
  if (attr.getElementType().isF32()) {
    for (float x : attr.getValues<float>())
      if (!take(x == 0, x == -std::numeric_limits<float>::infinity()))
        return std::nullopt;
  } else {
    for (APFloat x : attr.getValues<APFloat>())
      if (!take(x.isZero(), x.isInfinity() && x.isNegative()))
        return std::nullopt;
  }
  return masked;
}

// Whether an added value is a constant of 0s and -infs (a float mask).
bool isFloatMaskConstant(Value v) {
  auto c = constantElements(v);
  return c && isa<FloatType>(c->first.getElementType()) && floatMaskElements(c->first);
}

// A mask op on the path at `def` (reading `at`'s value): records it and moves `at` to its other
// operand; false if `def` is no mask op this pass takes.
bool takeMask(Operation *def, OnPath &at, Match &m) {
  MaskUse use{Value(), at.axes};
  double fill = -std::numeric_limits<double>::infinity();
  Value rest;
  if (auto sel = dyn_cast<SelectOp>(def)) {
    std::optional<double> onTrue = splatValue(sel.getOnTrue()), onFalse = splatValue(sel.getOnFalse());
    if (onTrue.has_value() == onFalse.has_value())
      return false;
    use.value = sel.getCond();
    use.negate = onFalse.has_value();
    fill = onTrue ? *onTrue : *onFalse;
    rest = onTrue ? sel.getOnFalse() : sel.getOnTrue();
  } else if (auto add = dyn_cast<AddOp>(def)) {
    Value lhs = add.getLhs(), rhs = add.getRhs();
    if (isFloatMaskConstant(lhs))
      std::swap(lhs, rhs);
    if (!isFloatMaskConstant(rhs) || isFloatMaskConstant(lhs))
      return false;
    use.value = rhs;
    use.additive = true;
    rest = lhs;
  } else {
    return false;
  }
  // The scale applied after the mask scales the fill too (the factors seen so far, walking up).
  fill *= m.scale;
  if (std::isnan(fill) || fill == std::numeric_limits<double>::infinity())
    return false;
  if (!m.masks.empty() && fill != m.fill) // masks filling different values: not one op's
    return false;
  m.fill = fill;
  m.masks.push_back(use);
  at.value = rest;
  return true;
}

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

// The dropout factor `factor` (cast(u >= threshold) times a constant) of a probability in
// layout `axes`: the seed, threshold, scale and the draws' strides; its ops recorded.
std::optional<DropoutUse> matchDropoutFactor(Value factor, ArrayRef<int64_t> axes, Match &m) {
  SmallVector<Operation *> ops;
  DropoutUse d;
  Value kept = factor;
  if (auto mul = factor.getDefiningOp<MulOp>()) {
    Value x = mul.getLhs(), c = mul.getRhs();
    std::optional<double> k = splatValue(c);
    if (!k) {
      std::swap(x, c);
      k = splatValue(c);
    }
    if (!k || !(*k > 0) || std::isinf(*k) || !mul->hasOneUse())
      return std::nullopt;
    d.scale = *k;
    kept = x;
    ops.push_back(mul);
  }
  auto cast = kept.getDefiningOp<CastOp>();
  if (!cast || !cast->hasOneUse() || !tensorOf(cast.getInput()).getElementType().isInteger(1))
    return std::nullopt;
  auto cmp = cast.getInput().getDefiningOp<CompareOp>();
  if (!cmp || !cmp->hasOneUse() || cmp.getPredicate() != CmpPredicate::ge)
    return std::nullopt;
  std::optional<double> threshold = splatValue(cmp.getRhs());
  if (!threshold || !(*threshold >= 0 && *threshold <= 1))
    return std::nullopt;
  d.threshold = *threshold;
  ops.push_back(cast);
  ops.push_back(cmp);
  // The draws, through transposes, each dim holding one axis of the scores.
  OnPath u{cmp.getLhs(), SmallVector<int64_t>(axes.begin(), axes.end())};
  while (auto t = u.value.getDefiningOp<TransposeOp>()) {
    if (!t->hasOneUse())
      return std::nullopt;
    ops.push_back(t);
    u = {t.getInput(), axesBefore(t, u.axes)};
  }
  auto draws = u.value.getDefiningOp<RandomUniformOp>();
  if (!draws || !draws->hasOneUse())
    return std::nullopt;
  ops.push_back(draws);
  d.strides = stridesAlongScores(tensorOf(draws.getResult()).getShape(), u.axes);
  d.seed = draws.getSeed();
  m.ops.insert(ops.begin(), ops.end());
  return d;
}

// A dropout at `def` on the path (P times its factor, in f32): recorded, and `at` moved to P.
bool takeDropout(Operation *def, OnPath &at, Match &m) {
  auto mul = dyn_cast_or_null<MulOp>(def);
  if (!mul || m.dropout || !mul->hasOneUse() || !tensorOf(mul.getResult()).getElementType().isF32())
    return false;
  for (auto [p, factor] : {std::pair{mul.getLhs(), mul.getRhs()}, {mul.getRhs(), mul.getLhs()}})
    if (auto d = matchDropoutFactor(factor, at.axes, m)) {
      m.dropout = *d;
      m.ops.insert(mul);
      at.value = p;
      return true;
    }
  return false;
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
  if (takeDropout(p.value.getDefiningOp(), p, m))
    p = walkLayoutOps(p, m);
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
    } else if (takeMask(def, s, m)) {
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
  // Masks that are not all constants are combined at run time, by or-ing i1 masks: an added
  // float mask then has to be a constant too (it always is, isFloatMaskConstant) and with
  // non-constant selects it is not taken.
  bool allConstant = llvm::all_of(m.masks, [](const MaskUse &u) { return constantElements(u.value).has_value(); });
  if (!allConstant && llvm::any_of(m.masks, [](const MaskUse &u) { return u.additive; }))
    return std::nullopt;
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

// The op's masking: `causal`, and a mask [B or 1, L or 1, S or 1] for what causal does not cover.
struct OpMask {
  bool causal = false;
  Value mask;
};

// Constant masks, known here: which scores [B, L, S] they mask (row-major), or nothing if some
// mask is not a constant.
std::optional<std::vector<uint8_t>> maskedPositions(const Match &m, int64_t B, int64_t L, int64_t S) {
  std::vector<uint8_t> masked(B * L * S, 0);
  for (const MaskUse &u : m.masks) {
    auto c = constantElements(u.value);
    if (!c)
      return std::nullopt;
    auto [attr, dims] = *c;
    std::vector<uint8_t> on; // the constant's elements: masked or not
    if (u.additive) {
      on = *floatMaskElements(attr); // (takeMask took only 0s and -infs)
    } else {
      on.reserve(attr.getNumElements());
      for (bool x : attr.getValues<bool>())
        on.push_back(x != u.negate);
    }
    // Constant dim j is the value's dim dims[j] (size 1: spread), and value dim i holds axis
    // axes[i] of the scores: the constant's stride along each scores axis.
    SmallVector<int64_t> axisOfDim;
    for (int64_t dim : dims)
      axisOfDim.push_back(u.axes[dim]);
    std::array<int64_t, 3> stride = stridesAlongScores(attr.getType().getShape(), axisOfDim);
    for (int64_t b = 0, i = 0; b < B; ++b)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t s = 0; s < S; ++s, ++i)
          masked[i] |= on[b * stride[0] + l * stride[1] + s * stride[2]];
  }
  return masked;
}

// Constant masks as `causal` (every score with s > l masked, the kernel skipping those tiles)
// and the smallest [B or 1, L or 1, S or 1] mask that agrees with the rest.
OpMask compressMask(OpBuilder &b, Location loc, const std::vector<uint8_t> &masked, int64_t B, int64_t L, int64_t S) {
  OpMask out;
  auto at = [&](int64_t bi, int64_t l, int64_t s) { return masked[(bi * L + l) * S + s]; };
  out.causal = S > 1;
  for (int64_t bi = 0; bi < B && out.causal; ++bi)
    for (int64_t l = 0; l < L && out.causal; ++l)
      for (int64_t s = l + 1; s < S && out.causal; ++s)
        out.causal = at(bi, l, s);
  auto cared = [&](int64_t l, int64_t s) { return !out.causal || s <= l; };
  bool any = false;
  for (int64_t bi = 0; bi < B && !any; ++bi)
    for (int64_t l = 0; l < L && !any; ++l)
      for (int64_t s = 0; s < S && !any; ++s)
        any = cared(l, s) && at(bi, l, s);
  if (!any)
    return out;
  // Which of B, L, S the mask keeps (bits 4, 2, 1), smallest first.
  SmallVector<int> keeps = {0, 1, 2, 3, 4, 5, 6, 7};
  auto sizeOf = [&](int keep) { return (keep & 4 ? B : 1) * (keep & 2 ? L : 1) * (keep & 1 ? S : 1); };
  llvm::stable_sort(keeps, [&](int x, int y) { return sizeOf(x) < sizeOf(y); });
  for (int keep : keeps) {
    int64_t dims[3] = {keep & 4 ? B : 1, keep & 2 ? L : 1, keep & 1 ? S : 1};
    std::vector<int8_t> r(sizeOf(keep), -1);
    bool agrees = true;
    for (int64_t bi = 0; bi < B && agrees; ++bi)
      for (int64_t l = 0; l < L && agrees; ++l)
        for (int64_t s = 0; s < S && agrees; ++s) {
          if (!cared(l, s))
            continue;
          int8_t &x = r[((keep & 4 ? bi : 0) * dims[1] + (keep & 2 ? l : 0)) * dims[2] + (keep & 1 ? s : 0)];
          int8_t want = at(bi, l, s);
          agrees = x < 0 || x == want;
          x = want;
        }
    if (!agrees)
      continue;
    SmallVector<bool> values(r.begin(), r.end()); // (-1, a don't-care, as true: any value would do)
    auto type = RankedTensorType::get({dims[0], dims[1], dims[2]}, b.getI1Type());
    out.mask = b.create<ConstantOp>(loc, DenseElementsAttr::get(type, ArrayRef<bool>(values)));
    return out;
  }
  llvm_unreachable("the mask keeping every dim agrees");
}

// Masks known only at run time: each moved to [B, L, S], negated if it marks what is kept, and
// or-ed together.
Value combineMasks(OpBuilder &b, Location loc, const Match &m) {
  Value combined;
  for (const MaskUse &u : m.masks) {
    Value x = u.value;
    SmallVector<int64_t> perm(3);
    for (auto [i, axis] : llvm::enumerate(u.axes))
      perm[axis] = i;
    if (perm != SmallVector<int64_t>{0, 1, 2})
      x = b.create<TransposeOp>(loc, x, perm);
    if (u.negate)
      x = b.create<NotOp>(loc, x.getType(), x);
    combined = combined ? b.create<OrOp>(loc, x.getType(), combined, x).getResult() : x;
  }
  return combined;
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
      int64_t B = qt.getShape()[0], L = qt.getShape()[1], S = tensorOf(v).getShape()[1];
      OpMask mask;
      if (!m.masks.empty()) {
        if (auto masked = maskedPositions(m, B, L, S))
          mask = compressMask(b, loc, *masked, B, L, S);
        else
          mask.mask = combineMasks(b, loc, m);
      }
      auto lseType = RankedTensorType::get({B, L}, b.getF32Type());
      bool fillsInf = m.fill == -std::numeric_limits<double>::infinity();
      const std::optional<DropoutUse> &d = m.dropout;
      auto attention = b.create<AttentionOp>(
          loc, m.product.getResult().getType(), lseType, q, k, v, mask.mask, d ? d->seed : Value(),
          b.getF64FloatAttr(m.scale), mask.causal ? b.getUnitAttr() : UnitAttr(),
          (mask.causal || mask.mask) && !fillsInf ? b.getF64FloatAttr(m.fill) : FloatAttr(),
          d ? b.getF64FloatAttr(d->threshold) : FloatAttr(), d ? b.getF64FloatAttr(d->scale) : FloatAttr(),
          d ? b.getDenseI64ArrayAttr(d->strides) : DenseI64ArrayAttr());
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
