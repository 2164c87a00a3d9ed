// Moving transposes down through the ops that do not care about layout, so that consecutive
// ones meet and cancel (transpose's folder composes them): shared by rfuse-channels-last (its
// rank-4 layout transposes around convolutions) and rfuse-sink-transposes (any rank).
#ifndef RFUSE_PASSES_TRANSPOSESINKING_H
#define RFUSE_PASSES_TRANSPOSESINKING_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/Statistic.h"

namespace rfuse {

inline mlir::RankedTensorType tensorOf(mlir::Value v) { return llvm::cast<mlir::RankedTensorType>(v.getType()); }

// The type of transpose(t, perm): result dimension i is dimension perm[i] of t.
mlir::RankedTensorType permuted(mlir::RankedTensorType t, llvm::ArrayRef<int64_t> perm, mlir::Type element = {});

// The type T' with transpose(T', perm) = t: the layout before the transpose.
mlir::RankedTensorType unpermuted(mlir::RankedTensorType t, llvm::ArrayRef<int64_t> perm, mlir::Type element);

// `op` (a pointwise op or cast, one result) cloned over its operands in another shape:
// `convert(v, make)` gives an operand's value there (`make` false only checks that there is one),
// and the clone's result has `shape` and op's element type. Null, with nothing created, when
// some operand has none. Moving transposes (here) and reshapes (rfuse-move-reshapes) below such
// ops both rebuild them so.
mlir::Value rebuildInShape(mlir::PatternRewriter &rw, mlir::Operation *op, llvm::ArrayRef<int64_t> shape,
                           llvm::function_ref<mlir::Value(mlir::Value, bool make)> convert);

// op(transpose(x, p), broadcast(v), ...) -> transpose(op(x, broadcast'(v), ...), p) for pointwise
// ops and casts, and reduce(transpose(x, p), dims) -> reduce(x, p[dims]) (the kept dims put back
// in order by a transpose when needed), for transposes of `rank` dims (0: any rank). `count`
// counts the transposes moved.
void addTransposeSinkingPatterns(mlir::RewritePatternSet &patterns, llvm::Statistic &count, int64_t rank);

} // namespace rfuse

#endif
