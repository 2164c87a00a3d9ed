// The index spaces of the convolution and pooling ops (see Geometry.h).
#include "rfuse/IR/Geometry.h"
#include "rfuse/IR/RfuseDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace rfuse {
namespace {
ArrayRef<int64_t> shapeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getShape(); }

template <class OpT>
ConvGeometry fill(OpT op, ConvDirection d, Value input, Value filter, Value output) {
  ConvGeometry g;
  g.direction = d;
  g.nhwc = op.getLayout() == Layout::NHWC;
  auto x = shapeOf(input), f = shapeOf(filter), y = shapeOf(output);
  g.n = x[0];
  g.c = g.nhwc ? x[3] : x[1];
  g.h = g.nhwc ? x[1] : x[2];
  g.w = g.nhwc ? x[2] : x[3];
  g.o = f[0];
  g.kh = g.nhwc ? f[1] : f[2];
  g.kw = g.nhwc ? f[2] : f[3];
  g.oh = g.nhwc ? y[1] : y[2];
  g.ow = g.nhwc ? y[2] : y[3];
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
  auto in = shapeOf(input), out = shapeOf(output);
  p.n = in[0];
  p.c = p.nhwc ? in[3] : in[1];
  p.h = p.nhwc ? in[1] : in[2];
  p.w = p.nhwc ? in[2] : in[3];
  p.oh = p.nhwc ? out[1] : out[2];
  p.ow = p.nhwc ? out[2] : out[3];
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
