// Shape rules of rfuse's structured ops, in one place: the ops' type inference and verifiers call
// them, and so does the frontend's GraphBuilder, which turns a failure into a ShapeError before
// any IR is built. Each returns false and fills `err` (a sentence naming the offending operand,
// without the op name) when the shapes do not fit.
#ifndef RFUSE_IR_SHAPEFUNCTIONS_H
#define RFUSE_IR_SHAPEFUNCTIONS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>
#include <string>

namespace rfuse {
using Shape = llvm::SmallVector<int64_t, 4>;

std::string shapeToString(llvm::ArrayRef<int64_t> shape);

bool inferTransposeShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> perm, Shape &out,
                         std::string &err);
bool inferReduceShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> dims, bool keepDims,
                      Shape &out, std::string &err);
bool inferMatmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs, bool transposeA,
                      bool transposeB, Shape &out, std::string &err);
bool inferConv2dShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> filter,
                      std::optional<llvm::ArrayRef<int64_t>> bias, llvm::ArrayRef<int64_t> strides,
                      llvm::ArrayRef<int64_t> padding, llvm::ArrayRef<int64_t> dilation,
                      int64_t groups, bool nhwc, Shape &out, std::string &err);
bool inferPool2dShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> kernel,
                      llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> padding, bool nhwc,
                      Shape &out, std::string &err);
bool checkBroadcastInDim(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> dims,
                         llvm::ArrayRef<int64_t> out, std::string &err);
bool checkReshape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out, std::string &err);
bool inferSliceShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> start,
                     llvm::ArrayRef<int64_t> limit, llvm::ArrayRef<int64_t> strides, Shape &out,
                     std::string &err);
bool inferPadShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> low,
                   llvm::ArrayRef<int64_t> high, llvm::ArrayRef<int64_t> interior, Shape &out,
                   std::string &err);
bool inferConcatShape(llvm::ArrayRef<llvm::SmallVector<int64_t, 4>> ins, int64_t dim, Shape &out,
                      std::string &err);
bool inferGatherShape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> indices, int64_t dim,
                      Shape &out, std::string &err);
bool checkReverseDims(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> dims, std::string &err);
/// Numpy-style broadcast of two shapes (trailing dimensions aligned, 1 stretches).
bool broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b, Shape &out,
                     std::string &err);

} // namespace rfuse

#endif
