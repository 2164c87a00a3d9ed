// The index spaces of the convolution and pooling ops (see Geometry.h).
#include "rfuse/IR/Geometry.h"
#include "rfuse/IR/RfuseDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace rfuse {
namespace {
ArrayRef<int64_t> shapeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); }

// A 4-D shape as (N, C, H, W) whatever its layout; a filter reads as (O, C/groups, KH, KW).
struct Dims {
  int64_t n, c, h, w;
};
Dims dimsOf(Value v, bool nhwc) {
  auto s = shapeOf(v);
  return nhwc ? Dims{s[0], s[3], s[1], s[2]} : Dims{s[0], s[1], s[2], s[3]};
}

template <class OpT>
ConvGeometry fill(OpT op, ConvDirection d, Value input, Value filter, Value output) {
  ConvGeometry g;
  g.direction = d;
  g.nhwc = op.getLayout() == Layout::NHWC;
  Dims x = dimsOf(input, g.nhwc), f = dimsOf(filter, g.nhwc), y = dimsOf(output, g.nhwc);
  g.n = x.n;
  g.c = x.c;
  g.h = x.h;
  g.w = x.w;
  g.o = f.n;
  g.kh = f.h;
  g.kw = f.w;
  g.oh = y.h;
  g.ow = y.w;
  auto st = op.getStrides(), pad = op.getPadding(), dil = op.getDilation();
  g.strideH = st[0];
  g.strideW = st[1];
  g.padTop = pad[0];
  g.padBottom = pad[1];
  g.padLeft = pad[2];
  g.padRight = pad[3];
  g.dilationH = dil[0];
  g.dilationW = dil[1];
  g.groups = op.getGroups();
  return g;
}

template <class OpT> PoolGeometry fillPool(OpT op, Value input, Value output) {
  PoolGeometry p;
  p.nhwc = op.getLayout() == Layout::NHWC;
  Dims in = dimsOf(input, p.nhwc), out = dimsOf(output, p.nhwc);
  p.n = in.n;
  p.c = in.c;
  p.h = in.h;
  p.w = in.w;
  p.oh = out.h;
  p.ow = out.w;
  auto k = op.getKernel(), st = op.getStrides(), pad = op.getPadding();
  p.kh = k[0];
  p.kw = k[1];
  p.strideH = st[0];
  p.strideW = st[1];
  p.padTop = pad[0];
  p.padBottom = pad[1];
  p.padLeft = pad[2];
  p.padRight = pad[3];
  return p;
}
} // namespace

bool isConvolutionOp(Operation *op) { return isa<Conv2dOp, Conv2dBackwardInputOp, Conv2dBackwardFilterOp>(op); }
bool isPoolingOp(Operation *op) {
  return isa<MaxPool2dOp, AvgPool2dOp, MaxPool2dBackwardOp, AvgPool2dBackwardOp>(op);
}

bool isReductionOp(Operation *op) { return isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>(op); }

ArrayRef<int64_t> reductionDims(Operation *op) {
  return llvm::TypeSwitch<Operation *, ArrayRef<int64_t>>(op)
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>([](auto r) { return r.getDims(); });
}

bool reductionKeepsDims(Operation *op) {
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>([](auto r) { return r.getKeepDims(); });
}

bool isIndexingOp(Operation *op) { return isa<SliceOp, ReverseOp, PadOp, ConcatOp, GatherOp>(op); }

bool isIndexReadOp(Operation *op) { return isIndexingOp(op) || isa<BroadcastInDimOp, TransposeOp>(op); }

ConvGeometry convGeometry(Operation *op) {
  return llvm::TypeSwitch<Operation *, ConvGeometry>(op)
      .Case([](Conv2dOp c) { return fill(c, ConvDirection::Forward, c.getInput(), c.getFilter(), c.getResult()); })
      .Case([](Conv2dBackwardInputOp c) {
        return fill(c, ConvDirection::BackwardInput, c.getResult(), c.getFilter(), c.getGradOutput());
      })
      .Case([](Conv2dBackwardFilterOp c) {
        return fill(c, ConvDirection::BackwardFilter, c.getInput(), c.getResult(), c.getGradOutput());
      });
}

PoolGeometry poolGeometry(Operation *op) {
  return llvm::TypeSwitch<Operation *, PoolGeometry>(op)
      .Case([](MaxPool2dOp p) { return fillPool(p, p.getInput(), p.getResult()); })
      .Case([](AvgPool2dOp p) {
        PoolGeometry g = fillPool(p, p.getInput(), p.getResult());
        g.isMax = false;
        g.countIncludePad = p.getCountIncludePad();
        return g;
      })
      .Case([](MaxPool2dBackwardOp p) {
        PoolGeometry g = fillPool(p, p.getInput(), p.getGradOutput());
        g.backward = true;
        return g;
      })
      .Case([](AvgPool2dBackwardOp p) {
        PoolGeometry g = fillPool(p, p.getResult(), p.getGradOutput());
        g.isMax = false;
        g.countIncludePad = p.getCountIncludePad();
        g.backward = true;
        return g;
      });
}

} // namespace rfuse
