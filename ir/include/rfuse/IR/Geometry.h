//===- Geometry.h - the index spaces of convolution and pooling ops --------------*- C++ -*-===//
//
// The forward convolution's sizes, read off any of rfuse.conv2d, conv2d_backward_input and
// conv2d_backward_filter (each holds two of input / filter / output as operands, the third as
// its result), and likewise for the pools and their gradients. The interpreter, the CPU lowering
// and the CUDA planner all describe these ops by these structs.
//
//===----------------------------------------------------------------------===//
#ifndef RFUSE_IR_GEOMETRY_H
#define RFUSE_IR_GEOMETRY_H

#include "rfuse/IR/ConvPoolGeometry.h"

#include "mlir/IR/Operation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace rfuse {

/// rfuse.conv2d and its two gradients; the pools and their gradients.
bool isConvolutionOp(mlir::Operation *op);
bool isPoolingOp(mlir::Operation *op);

/// rfuse.reduce_sum, reduce_mean, reduce_max and reduce_min; their `dims` and `keep_dims`.
bool isReductionOp(mlir::Operation *op);
llvm::ArrayRef<int64_t> reductionDims(mlir::Operation *op);
bool reductionKeepsDims(mlir::Operation *op);

/// rfuse.slice, reverse, pad, concat and gather: ops whose every element is an element of an
/// operand (or pad's constant) read at a position the op's attributes map it to.
bool isIndexingOp(mlir::Operation *op);
/// The indexing ops, broadcasts and transposes: every op codegen reads through an index map.
bool isIndexReadOp(mlir::Operation *op);

/// The geometry of rfuse.conv2d, conv2d_backward_input or conv2d_backward_filter.
ConvGeometry convGeometry(mlir::Operation *convOp);

/// The geometry of a max/avg pooling op or its gradient.
PoolGeometry poolGeometry(mlir::Operation *poolOp);

} // namespace rfuse

#endif
