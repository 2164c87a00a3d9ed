#include "FusionGrouping.h"
#include "rfuse/IR/Geometry.h"

#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <functional>
#include <optional>

using namespace mlir;

namespace rfuse::fusion {

bool isElementwiseLike(Operation *op) {
  return isa<PointwiseOpInterface, CastOp>(op) || isIndexReadOp(op);
}

namespace {

// Library calls that take a generated epilogue: matmuls, convolutions and their gradients.
bool isAnchor(Operation *op) { return isa<MatmulOp>(op) || isConvolutionOp(op); }

// Splat constants are cloned into every region that uses them instead of being passed in.
bool isSplatConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  return c && llvm::isa<SplatElementsAttr>(c.getValue());
}

// Whether operand `v` of `op` is cloned into op's region: splats are, except as operands of a
// library call (a matmul or convolution reads its operands from memory: they are inputs).
bool clonedIn(Operation *op, Value v) { return isSplatConstant(v) && !isAnchor(op); }

ArrayRef<int64_t> shapeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); }

// The reduced shape of `full` over `dims`, with (keep) or without the reduced dimensions.
SmallVector<int64_t> reducedShape(ArrayRef<int64_t> full, ArrayRef<int64_t> dims, bool keep) {
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < (int64_t)full.size(); ++d) {
    if (!llvm::is_contained(dims, d))
      out.push_back(full[d]);
    else if (keep)
      out.push_back(1);
  }
  return out;
}

class Grouper {
public:
  Grouper(func::FuncOp fn, const Options &options) : fn(fn), options(options) {
    for (Operation &op : fn.getBody().front()) {
      position[&op] = ops.size();
      order[&op] = ops.size();
      ops.push_back(&op);
    }
  }

  Result run() {
    for (Operation *op : ops)
      if (isCandidate(op))
        classes.insert(op);
    // Grow groups along def-use edges in program order of the consumer.
    for (Operation *op : ops) {
      if (!isCandidate(op))
        continue;
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!def || !isCandidate(def) || classes.isEquivalent(def, op))
          continue;
        tryMerge(def, op);
      }
    }
    // A matmul whose result is read through slices (an LSTM step's gates) joins its readers
    // once they have formed their group: only then do the slices cover the result.
    if (options.mode == Mode::MatmulEpilogue)
      for (Operation *op : ops)
        if (isa<MatmulOp>(op))
          for (Operation *user : op->getUsers())
            if (isCandidate(user) && !classes.isEquivalent(op, user))
              tryMerge(op, user);
    Result result;
    SmallVector<SmallVector<Operation *>> groups;
    for (auto it = classes.begin(); it != classes.end(); ++it) {
      if (!it->isLeader())
        continue;
      SmallVector<Operation *> members(classes.member_begin(it), classes.member_end());
      llvm::sort(members, [&](Operation *a, Operation *b) { return position[a] < position[b]; });
      if (shouldMaterialize(members))
        groups.push_back(members);
    }
    for (auto &members : groups) {
      materialize(members);
      ++result.regions;
      result.fusedOps += members.size();
    }
    if (!groups.empty())
      sortTopologically(&fn.getBody().front());
    return result;
  }

private:
  func::FuncOp fn;
  Options options;
  std::vector<Operation *> ops;
  llvm::DenseMap<Operation *, size_t> position;
  llvm::EquivalenceClasses<Operation *> classes;
  // A topological order of the contracted graph (each group one node, every other op of the
  // block its own), kept valid across merges (Pearce & Kelly's dynamic topological order): a
  // merge's cycle check only visits the nodes ordered between the two it merges. Keyed by node
  // (a group's leader).
  llvm::DenseMap<Operation *, int64_t> order;

  // The node an op of the block stands for: its group's leader, or itself.
  Operation *nodeOf(Operation *op) {
    auto it = classes.findValue(op);
    return it == classes.end() ? op : classes.getLeaderValue(op);
  }
  SmallVector<Operation *> nodeMembers(Operation *node) {
    if (classes.findValue(node) == classes.end())
      return {node};
    return membersOf(node);
  }
  // The nodes `node` reads from (succ = false) or feeds (succ = true), itself excluded.
  template <class F> void forEachNeighbour(Operation *node, bool succ, F &&f) {
    Block *block = &fn.getBody().front();
    for (Operation *m : nodeMembers(node)) {
      if (succ) {
        for (Operation *user : m->getUsers())
          if (Operation *u = block->findAncestorOpInBlock(*user))
            if (Operation *n = nodeOf(u); n != node)
              f(n);
      } else {
        for (Value v : m->getOperands())
          if (Operation *d = v.getDefiningOp(); d && d->getBlock() == block)
            if (Operation *n = nodeOf(d); n != node)
              f(n);
      }
    }
  }

  // Whether nodes a -> b (an edge: b reads a) can be merged without a cycle, i.e. no other path
  // leads from a to b. If so, reorders the nodes between them so that the merged node has a
  // valid place in the order, and returns that place.
  std::optional<int64_t> orderForMerge(Operation *a, Operation *b) {
    int64_t lo = order[a], hi = order[b];
    // Forward from a, through nodes ordered before b (later ones cannot reach b).
    SmallVector<Operation *> stack, forward, backward;
    llvm::SmallPtrSet<Operation *, 32> seen;
    bool cycle = false;
    auto visitForward = [&](Operation *n) {
      if (n == b) {
        cycle = true;
        return;
      }
      if (order[n] < hi && seen.insert(n).second) {
        stack.push_back(n);
        forward.push_back(n);
      }
    };
    forEachNeighbour(a, true, [&](Operation *n) {
      if (n != b)
        visitForward(n);
    });
    while (!stack.empty() && !cycle)
      forEachNeighbour(stack.pop_back_val(), true, visitForward);
    if (cycle)
      return std::nullopt;
    // Backward from b, through nodes ordered after a.
    auto visitBackward = [&](Operation *n) {
      if (n != a && order[n] > lo && seen.insert(n).second) {
        stack.push_back(n);
        backward.push_back(n);
      }
    };
    forEachNeighbour(b, false, visitBackward);
    while (!stack.empty())
      forEachNeighbour(stack.pop_back_val(), false, visitBackward);
    // Reassign their places: b's ancestors take the lowest, in their order (so each moves
    // down), a's descendants the highest (each moves up), the merged node the one after the
    // ancestors; nodes in between that are neither keep theirs. One place is left unused.
    auto byOrder = [&](Operation *x, Operation *y) { return order[x] < order[y]; };
    llvm::sort(forward, byOrder);
    llvm::sort(backward, byOrder);
    SmallVector<int64_t> slots = {lo, hi};
    for (Operation *n : forward)
      slots.push_back(order[n]);
    for (Operation *n : backward)
      slots.push_back(order[n]);
    llvm::sort(slots);
    for (size_t k = 0; k < backward.size(); ++k)
      order[backward[k]] = slots[k];
    int64_t merged = slots[backward.size()];
    for (size_t k = 0; k < forward.size(); ++k)
      order[forward[k]] = slots[slots.size() - forward.size() + k];
    return merged;
  }

  bool isCandidate(Operation *op) {
    if (op->getParentOp() != fn.getOperation() || op->getNumResults() != 1)
      return false;
    if (isa<ConstantOp>(op))
      return false; // splats are cloned in; dense constants are inputs
    switch (options.mode) {
    case Mode::Elementwise:
      return isElementwiseLike(op);
    case Mode::Reduction:
      return isElementwiseLike(op) || isReductionOp(op);
    case Mode::MatmulEpilogue:
      return isElementwiseLike(op) || isAnchor(op);
    }
    return false;
  }

  SmallVector<Operation *> membersOf(Operation *op) {
    return SmallVector<Operation *>(classes.findLeader(op), classes.member_end());
  }

  void tryMerge(Operation *a, Operation *b) {
    if (options.mode == Mode::MatmulEpilogue && leftForItsReduction(a, b))
      return;
    llvm::SmallPtrSet<Operation *, 16> set;
    for (Operation *m : membersOf(a))
      set.insert(m);
    for (Operation *m : membersOf(b))
      set.insert(m);
    if (options.maxOps && set.size() > options.maxOps)
      return;
    if (!isValid(set))
      return;
    std::optional<int64_t> place = orderForMerge(nodeOf(a), nodeOf(b));
    if (!place)
      return; // the merged group would need its own result: a cycle between regions
    classes.unionSets(a, b);
    order[classes.getLeaderValue(a)] = *place;
  }

  // Whether `op`, joining `group`'s epilogue, reads another full-size value from outside it
  // and feeds only reductions (a softmax's backward: g * p, summed per row): in the epilogue,
  // the epilogue would write it and the reduction kernel, which reads that other value too,
  // read it back. Left out, the reduction computes it from what it reads anyway.
  bool leftForItsReduction(Operation *group, Operation *op) {
    if (isAnchor(op) || isIndexReadOp(op) || op->use_empty() ||
        !llvm::all_of(op->getUsers(), [](Operation *u) { return isReductionOp(u); }))
      return false;
    ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
    return llvm::any_of(op->getOperands(), [&](Value v) {
      Operation *d = v.getDefiningOp();
      if (shapeOf(v) != shape || isSplatConstant(v) || (d && isa<BroadcastInDimOp>(d)))
        return false;
      return !d || !classes.isEquivalent(d, group);
    });
  }

  // --- Validity: the iteration-space rules of each mode ---------------------------------------

  bool isValid(const llvm::SmallPtrSetImpl<Operation *> &set) {
    auto inside = [&](Value v) {
      Operation *d = v.getDefiningOp();
      return d && set.contains(d);
    };
    SmallVector<Operation *> reductions, anchors, elementwise;
    for (Operation *op : set) {
      if (isReductionOp(op))
        reductions.push_back(op);
      else if (isAnchor(op))
        anchors.push_back(op);
      else
        elementwise.push_back(op);
    }

    if (!reductions.empty()) {
      // One iteration space F reduced over one set of dims D.
      ArrayRef<int64_t> full = shapeOf(reductions[0]->getOperand(0));
      SmallVector<int64_t> dims(reductionDims(reductions[0]));
      llvm::sort(dims);
      for (Operation *r : reductions) {
        SmallVector<int64_t> d(reductionDims(r));
        llvm::sort(d);
        if (shapeOf(r->getOperand(0)) != full || d != dims)
          return false;
      }
      SmallVector<int64_t> keep = reducedShape(full, dims, true), drop = reducedShape(full, dims, false);
      SmallVector<int64_t> kept; // the non-reduced dims of F, where R's dims land
      for (int64_t d = 0; d < (int64_t)full.size(); ++d)
        if (!llvm::is_contained(dims, d))
          kept.push_back(d);
      for (Operation *op : elementwise) {
        ArrayRef<int64_t> s = shapeOf(op->getResult(0));
        if (isIndexingOp(op)) // read only by pointwise kernels (KernelRegion.h's readElement)
          return false;
        if (s != full && s != ArrayRef<int64_t>(keep) && s != ArrayRef<int64_t>(drop))
          return false;
        if (isa<TransposeOp>(op) && inside(op->getOperand(0)))
          return false;
        if (auto b = dyn_cast<BroadcastInDimOp>(op); b && inside(b.getInput())) {
          // Only re-expanding a reduced value over the reduced dims: R -> F.
          ArrayRef<int64_t> in = shapeOf(b.getInput());
          if (s != full)
            return false;
          bool keepForm = in == ArrayRef<int64_t>(keep) &&
                          llvm::equal(b.getDims(), llvm::seq<int64_t>(0, full.size()));
          bool dropForm = in == ArrayRef<int64_t>(drop) && b.getDims() == ArrayRef<int64_t>(kept);
          if (!keepForm && !dropForm)
            return false;
        }
      }
      return anchors.empty();
    }

    if (!anchors.empty()) {
      if (anchors.size() > 1)
        return false;
      Operation *anchor = anchors[0];
      for (Value v : anchor->getOperands())
        if (inside(v))
          return false; // no prologue: the library reads the contraction's operands
      Value product = anchor->getResult(0);
      // The epilogue is a pointwise kernel that takes the library's result as an input: its
      // ops run over one iteration space, the result's shape or (a matmul's result read only
      // through slices, as an LSTM step's four gates are) another; slices read inputs or the
      // result, broadcasts and transposes inputs (or index reads of them), never values computed
      // in the epilogue.
      // Whether an index read reads inputs: directly or through other index reads, and slices
      // the product too (broadcasts and transposes of the product stay outside).
      std::function<bool(Operation *)> readsInputs = [&](Operation *op) {
        Value v = op->getOperand(0);
        if (!inside(v))
          return true;
        if (v == product)
          return isa<SliceOp>(op);
        Operation *d = v.getDefiningOp();
        return isIndexReadOp(d) && readsInputs(d);
      };
      // (Slices alone, while the region grows, give it their shape.)
      std::optional<ArrayRef<int64_t>> space;
      for (bool readsToo : {false, true}) {
        for (Operation *op : elementwise)
          if (readsToo ? isa<SliceOp>(op) : !isIndexReadOp(op)) {
            if (!space)
              space = shapeOf(op->getResult(0));
            else if (shapeOf(op->getResult(0)) != *space)
              return false;
          }
        if (space)
          break;
      }
      ArrayRef<int64_t> out = space ? *space : shapeOf(product);
      if (isConvolutionOp(anchor) && out != shapeOf(product))
        return false; // (a convolution's epilogue runs over its result)
      if (!coveredBySlices(product, set))
        return false;
      for (Operation *op : product.getUsers())
        if (set.contains(op) && !isIndexReadOp(op) && shapeOf(product) != out)
          return false; // read at the iteration index, so of the iteration's shape
      // Epilogue ops continue the contraction's result: each depends on the anchor. Index maps
      // (bias broadcasts) only read inputs. A convolution's epilogue may also compute values
      // that only feed it (an optimizer's momentum * buffer, added to a filter gradient): it is
      // a generated kernel anyway. A matmul's may not: left outside, such a value is an input
      // that cuBLASLt adds for free (beta = 1), inside it would force a generated epilogue.
      // (A matmul whose result is read through slices has a generated epilogue too.)
      bool sideValues = isConvolutionOp(anchor) || out != shapeOf(product);
      llvm::SmallPtrSet<Operation *, 16> dependent = {anchor};
      SmallVector<Operation *> inOrder(set.begin(), set.end());
      llvm::sort(inOrder, [&](Operation *x, Operation *y) { return position[x] < position[y]; });
      for (Operation *op : inOrder) // program order: operands before users
        if (op != anchor &&
            llvm::any_of(op->getOperands(), [&](Value v) {
              return v.getDefiningOp() && dependent.contains(v.getDefiningOp());
            }))
          dependent.insert(op);
      // (An index read read only by other index reads — a bias slice, then broadcast — may have
      // any shape: the kernel composes the maps.)
      auto readThrough = [&](Operation *op) {
        return isIndexReadOp(op) && !op->use_empty() &&
               llvm::all_of(op->getUsers(), [&](Operation *u) { return set.contains(u) && isIndexReadOp(u); });
      };
      for (Operation *op : elementwise) {
        if ((shapeOf(op->getResult(0)) != out && !readThrough(op)) || (isIndexingOp(op) && !isa<SliceOp>(op)))
          return false;
        if (isIndexReadOp(op) && !readsInputs(op))
          return false;
        if (!isIndexReadOp(op) && !dependent.contains(op) &&
            !(sideValues && llvm::all_of(op->getUsers(), [&](Operation *u) { return set.contains(u); })))
          return false;
      }
      return true;
    }

    // Pointwise only: one iteration space. Index-read ops read region inputs or other
    // index-read ops of the region (a slice of a gather); a concatenation or pad computed at the
    // iteration index may also read pointwise values of the region, which the kernel then
    // computes at the positions read (once per element: never through a second index map).
    // Values only read that way may have any shape (codegen's readThroughIndexMaps).
    llvm::DenseSet<Operation *> hidden;
    SmallVector<Operation *> inOrder(elementwise);
    llvm::sort(inOrder, [&](Operation *x, Operation *y) { return position[x] < position[y]; });
    for (Operation *op : llvm::reverse(inOrder)) {
      bool pointwise = !isIndexReadOp(op);
      if (op->use_empty())
        continue;
      if (llvm::all_of(op->getUsers(), [&](Operation *u) {
            return set.contains(u) &&
                   (hidden.contains(u) || (pointwise ? isa<ConcatOp, PadOp>(u) : isIndexReadOp(u)));
          }))
        hidden.insert(op);
    }
    std::optional<ArrayRef<int64_t>> s;
    for (Operation *op : elementwise) {
      if (isIndexReadOp(op))
        for (Value v : op->getOperands())
          if (inside(v) && !isIndexReadOp(v.getDefiningOp()) &&
              !(isa<ConcatOp, PadOp>(op) && !hidden.contains(op)))
            return false;
      if (hidden.contains(op))
        continue;
      if (!s)
        s = shapeOf(op->getResult(0));
      else if (shapeOf(op->getResult(0)) != *s)
        return false;
    }
    return true;
  }

  // Whether the slices of `product` in `set` (if any) read all of it: then the epilogue reads
  // the whole result (an LSTM step's four gates), not a part of one that other kernels read
  // too (the input projection of every time step), which would become its outputs.
  static bool coveredBySlices(Value product, const llvm::SmallPtrSetImpl<Operation *> &set) {
    SmallVector<SliceOp> slices;
    for (Operation *u : product.getUsers())
      if (auto s = dyn_cast<SliceOp>(u); s && set.contains(u))
        slices.push_back(s);
    if (slices.empty())
      return true;
    ArrayRef<int64_t> shape = shapeOf(product);
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    int64_t read = 0; // (fewer elements than the result: cannot cover it, no need to look)
    for (SliceOp s : slices)
      read += llvm::cast<RankedTensorType>(s.getType()).getNumElements();
    if (read < n || n > (int64_t(1) << 24))
      return false;
    std::vector<bool> hit(n, false);
    int64_t count = 0;
    SmallVector<int64_t> strides(shape.size(), 1);
    for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * shape[d + 1];
    for (SliceOp s : slices) {
      ArrayRef<int64_t> start = s.getStart(), step = s.getStrides(), size = shapeOf(s.getResult());
      SmallVector<int64_t> idx(size.size(), 0);
      int64_t total = 1;
      for (int64_t d : size)
        total *= d;
      for (int64_t k = 0; k < total; ++k) {
        int64_t flat = 0;
        for (size_t d = 0; d < size.size(); ++d)
          flat += (start[d] + idx[d] * step[d]) * strides[d];
        if (!hit[flat]) {
          hit[flat] = true;
          ++count;
        }
        for (int64_t d = (int64_t)size.size() - 1; d >= 0; --d) { // next index, last dim fastest
          if (++idx[d] < size[d])
            break;
          idx[d] = 0;
        }
      }
    }
    return count == n;
  }

  bool shouldMaterialize(ArrayRef<Operation *> members) {
    bool hasReduction = llvm::any_of(members, isReductionOp);
    bool hasAnchor = llvm::any_of(members, isAnchor);
    switch (options.mode) {
    case Mode::Elementwise:
      return true;
    case Mode::Reduction:
      return hasReduction;
    case Mode::MatmulEpilogue:
      return hasAnchor;
    }
    return false;
  }

  FusionKind kindOf(ArrayRef<Operation *> members) {
    if (llvm::any_of(members, isConvolutionOp))
      return FusionKind::conv_epilogue;
    if (llvm::any_of(members, [](Operation *op) { return isa<MatmulOp>(op); }))
      return FusionKind::matmul_epilogue;
    if (llvm::any_of(members, isReductionOp))
      return FusionKind::reduction;
    return FusionKind::pointwise;
  }

  void materialize(ArrayRef<Operation *> members) {
    llvm::SmallPtrSet<Operation *, 16> set(members.begin(), members.end());
    llvm::SetVector<Value> inputs;
    SmallVector<Value> outputs;
    for (Operation *op : members) {
      for (Value v : op->getOperands()) {
        Operation *d = v.getDefiningOp();
        if ((d && set.contains(d)) || clonedIn(op, v))
          continue;
        inputs.insert(v);
      }
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *u) { return !set.contains(u); }))
          outputs.push_back(r);
    }
    OpBuilder b(members.back());
    Location loc = members.size() == 1 ? members[0]->getLoc()
                                       : b.getFusedLoc(llvm::to_vector(llvm::map_range(
                                             members, [](Operation *op) { return op->getLoc(); })));
    SmallVector<Type> resultTypes;
    for (Value v : outputs)
      resultTypes.push_back(v.getType());
    auto fusion = b.create<FusionOp>(loc, resultTypes, FusionKindAttr::get(b.getContext(), kindOf(members)),
                                     inputs.getArrayRef());
    Block *body = b.createBlock(&fusion.getBody());
    IRMapping map;
    for (Value in : inputs)
      map.map(in, body->addArgument(in.getType(), in.getLoc()));
    b.setInsertionPointToStart(body);
    for (Operation *op : members) {
      for (Value v : op->getOperands())
        if (!map.contains(v) && clonedIn(op, v))
          map.map(v, b.clone(*v.getDefiningOp())->getResult(0));
      Operation *clone = b.clone(*op, map);
      if (options.testFlipSubOperands && isa<SubOp>(clone)) {
        Value l = clone->getOperand(0), r = clone->getOperand(1);
        clone->setOperands({r, l});
      }
    }
    SmallVector<Value> yielded;
    for (Value v : outputs)
      yielded.push_back(map.lookup(v));
    b.create<YieldOp>(loc, yielded);
    for (auto [old, repl] : llvm::zip(outputs, fusion.getResults()))
      old.replaceUsesWithIf(repl, [&](OpOperand &use) { return !set.contains(use.getOwner()); });
    for (Operation *op : llvm::reverse(members))
      op->erase();
  }
};

} // namespace

// A broadcast read by several ops becomes one per reader, so that each fuses into its reader's
// kernel as an index map of the small value: shared, a kernel that computes it would write the
// broadcast in full for the others to read (a softmax's row sums, saved for its gradient, as a
// tensor of the scores' size).
void broadcastPerUse(func::FuncOp fn) {
  SmallVector<BroadcastInDimOp> shared;
  fn.walk([&](BroadcastInDimOp b) {
    // (A broadcast of a program input is read through an index map wherever it is: only one of
    // a computed value can make its kernel write it in full.)
    if (!b->hasOneUse() && !b->use_empty() && b.getInput().getDefiningOp() && !b->getParentOfType<FusionOp>())
      shared.push_back(b);
  });
  for (BroadcastInDimOp b : shared) {
    // Only readers a kernel can take it into (not a library call's operand, nor a region already
    // made): the original stays for the others, or for the first reader when all can.
    SmallVector<OpOperand *> fusable;
    size_t total = 0;
    for (OpOperand &use : b->getUses()) {
      ++total;
      if (isElementwiseLike(use.getOwner()) || isReductionOp(use.getOwner()))
        fusable.push_back(&use);
    }
    for (OpOperand *use : llvm::drop_begin(fusable, fusable.size() == total ? 1 : 0)) {
      OpBuilder builder(use->getOwner());
      use->set(builder.clone(*b.getOperation())->getResult(0));
    }
  }
}

Result fuse(func::FuncOp fn, const Options &options) {
  if (fn.isExternal())
    return {};
  broadcastPerUse(fn);
  return Grouper(fn, options).run();
}

void fuseAndRecord(func::FuncOp fn, const Options &options, Pass::Statistic &regions,
                   Pass::Statistic &fusedOps, Pass::Statistic &kernels, Pass::Statistic &bytes) {
  Result result = fuse(fn, options);
  regions += result.regions;
  fusedOps += result.fusedOps;
  Cost cost = estimateCost(fn);
  kernels += cost.kernels;
  bytes += cost.bytes;
}

Cost estimateCost(func::FuncOp fn) {
  Cost cost;
  auto bytesOf = [](Value v) -> uint64_t {
    auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
    if (!t || !t.hasStaticShape())
      return 0;
    return t.getNumElements() * std::max<uint64_t>(1, t.getElementTypeBitWidth() / 8);
  };
  if (fn.isExternal())
    return cost;
  for (Operation &op : fn.getBody().front()) {
    // Constants are baked in; reshapes are views; returns move nothing; a call is a kernel only
    // when it calls an outlined kernel function (other calls are not yet inlined helpers).
    if (isa<ConstantOp, ReshapeOp, func::ReturnOp>(op))
      continue;
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (!callee || !callee->hasAttr("rfuse.kernel"))
        continue;
    }
    ++cost.kernels;
    llvm::SmallPtrSet<Value, 8> seen;
    for (Value v : op.getOperands())
      if (!isSplatConstant(v) && seen.insert(v).second)
        cost.bytes += bytesOf(v);
    for (Value r : op.getResults())
      cost.bytes += bytesOf(r);
  }
  return cost;
}

} // namespace rfuse::fusion
