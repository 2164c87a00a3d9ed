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

using namespace mlir;

namespace rfuse::fusion {

bool isElementwiseLike(Operation *op) {
  return isa<PointwiseOpInterface, CastOp, BroadcastInDimOp, TransposeOp>(op);
}

namespace {

bool isReduction(Operation *op) {
  return isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>(op);
}
// Library calls that take a generated epilogue: matmuls, convolutions and their gradients.
bool isAnchor(Operation *op) { return isa<MatmulOp>(op) || isConvolutionOp(op); }

// Splat constants are cloned into every region that uses them instead of being passed in.
bool isSplatConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  return c && llvm::isa<SplatElementsAttr>(c.getValue());
}

ArrayRef<int64_t> shapeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); }

ArrayRef<int64_t> reductionDims(Operation *op) {
  return llvm::TypeSwitch<Operation *, ArrayRef<int64_t>>(op)
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>(
          [](auto r) { return r.getDims(); });
}

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

  bool isCandidate(Operation *op) {
    if (op->getParentOp() != fn.getOperation() || op->getNumResults() != 1)
      return false;
    if (isa<ConstantOp>(op))
      return false; // splats are cloned in; dense constants are inputs
    switch (options.mode) {
    case Mode::Elementwise:
      return isElementwiseLike(op);
    case Mode::Reduction:
      return isElementwiseLike(op) || isReduction(op);
    case Mode::MatmulEpilogue:
      return isElementwiseLike(op) || isAnchor(op);
    }
    return false;
  }

  SmallVector<Operation *> membersOf(Operation *op) {
    return SmallVector<Operation *>(classes.findLeader(op), classes.member_end());
  }

  void tryMerge(Operation *a, Operation *b) {
    llvm::SmallPtrSet<Operation *, 16> set;
    for (Operation *m : membersOf(a))
      set.insert(m);
    for (Operation *m : membersOf(b))
      set.insert(m);
    if (options.maxOps && set.size() > options.maxOps)
      return;
    if (!isValid(set) || !isConvex(set))
      return;
    classes.unionSets(a, b);
  }

  // --- Validity: the iteration-space rules of each mode ---------------------------------------

  bool isValid(const llvm::SmallPtrSetImpl<Operation *> &set) {
    auto inside = [&](Value v) {
      Operation *d = v.getDefiningOp();
      return d && set.contains(d);
    };
    SmallVector<Operation *> reductions, anchors, elementwise;
    for (Operation *op : set) {
      if (isReduction(op))
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
      ArrayRef<int64_t> out = shapeOf(anchor->getResult(0));
      // Epilogue ops continue the contraction's result: each depends on the anchor. Index maps
      // (bias broadcasts) only read inputs. A convolution's epilogue may also compute values
      // that only feed it (an optimizer's momentum * buffer, added to a filter gradient): it is
      // a generated kernel anyway. A matmul's may not: left outside, such a value is an input
      // that cuBLASLt adds for free (beta = 1), inside it would force a generated epilogue.
      bool sideValues = isConvolutionOp(anchor);
      llvm::SmallPtrSet<Operation *, 16> dependent = {anchor};
      for (Operation *op : ops) // program order: operands before users
        if (set.contains(op) && op != anchor &&
            llvm::any_of(op->getOperands(), [&](Value v) {
              return v.getDefiningOp() && dependent.contains(v.getDefiningOp());
            }))
          dependent.insert(op);
      for (Operation *op : elementwise) {
        if (shapeOf(op->getResult(0)) != out)
          return false;
        bool isIndexMap = isa<BroadcastInDimOp, TransposeOp>(op);
        if (isIndexMap) {
          if (inside(op->getOperand(0)))
            return false;
        } else if (!dependent.contains(op) &&
                   !(sideValues && llvm::all_of(op->getUsers(), [&](Operation *u) { return set.contains(u); }))) {
          return false;
        }
      }
      return true;
    }

    // Pointwise only: one iteration space; index maps read region inputs.
    ArrayRef<int64_t> s = shapeOf(elementwise[0]->getResult(0));
    for (Operation *op : elementwise) {
      if (shapeOf(op->getResult(0)) != s)
        return false;
      if (isa<BroadcastInDimOp, TransposeOp>(op) && inside(op->getOperand(0)))
        return false;
    }
    return true;
  }

  // A merged group must keep the graph of regions acyclic: no value may leave the group and flow
  // back into it through outside ops, where an outside op that belongs to another group stands
  // for its whole group (a region runs as one unit, so it waits for all of its inputs). Without
  // that second part two groups can each be convex and yet need each other's results.
  bool isConvex(const llvm::SmallPtrSetImpl<Operation *> &set) {
    llvm::SmallPtrSet<Operation *, 32> visited;
    SmallVector<Operation *> stack;
    auto pushOperandsOf = [&](Operation *op) -> bool {
      for (Value v : op->getOperands()) {
        Operation *d = v.getDefiningOp();
        if (!d || d->getBlock() != &fn.getBody().front())
          continue;
        if (set.contains(d))
          return false;
        if (!visited.contains(d))
          stack.push_back(d);
      }
      return true;
    };
    for (Operation *op : set)
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp(); d && !set.contains(d) && d->getBlock() == &fn.getBody().front())
          stack.push_back(d);
    while (!stack.empty()) {
      Operation *op = stack.pop_back_val();
      if (!visited.insert(op).second)
        continue;
      if (classes.findValue(op) != classes.end()) {
        for (auto it = classes.findLeader(op); it != classes.member_end(); ++it) {
          visited.insert(*it);
          if (!pushOperandsOf(*it))
            return false;
        }
      } else if (!pushOperandsOf(op)) {
        return false;
      }
    }
    return true;
  }

  bool shouldMaterialize(ArrayRef<Operation *> members) {
    bool hasReduction = llvm::any_of(members, isReduction);
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
    if (llvm::any_of(members, isReduction))
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
        if ((d && set.contains(d)) || isSplatConstant(v))
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
        if (!map.contains(v) && isSplatConstant(v))
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

Result fuse(func::FuncOp fn, const Options &options) {
  if (fn.isExternal())
    return {};
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
