// A softmax as traced code writes it, exp(z) / broadcast(reduce_sum(exp(z), dims)): found by
// rfuse-softmax-vjp (which gives it its output's VJP) and rfuse-fuse-attention (which fuses it
// with the products around it).
#ifndef RFUSE_PASSES_SOFTMAX_H
#define RFUSE_PASSES_SOFTMAX_H

#include "rfuse/IR/RfuseDialect.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace rfuse {

struct Softmax {
  DivOp div;                 // p = e / broadcast(sum)
  ExpOp exp;                 // e = exp(z)
  mlir::Operation *sum;      // reduce_sum(e, dims)
  llvm::SmallVector<mlir::Operation *> between; // the reshape (if any) and the broadcast from the sum to div
  llvm::SmallVector<int64_t> dims; // the softmax's dims (the sum's)
};

// Whether `div` is e / broadcast(sum(e, dims)) over exactly those dims (the sum spread over
// exactly the summed dims), with e = exp(z), and e and the sum read by nothing else.
std::optional<Softmax> matchSoftmax(DivOp div);

} // namespace rfuse

#endif
