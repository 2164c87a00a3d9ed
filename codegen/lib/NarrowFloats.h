// Narrow floats (f16, bf16) on the CPU backend: stored narrow, computed in f32.
#ifndef RFUSE_CODEGEN_NARROWFLOATS_H
#define RFUSE_CODEGEN_NARROWFLOATS_H

#include "KernelRegion.h"

#include "mlir/IR/BuiltinOps.h"

namespace rfuse::cpu {

bool isNarrowFloat(mlir::Type t);
/// Whether a value of the region (input, result, output) is f16 or bf16.
bool hasNarrowFloats(const codegen::Region &r);

/// A copy of the pointwise or reduction region `r` (as a function in `scratch`) that computes in
/// f32 what `r` computes in f16/bf16, as the interpreter does: each narrow operand is extended
/// to f32 where an arithmetic op reads it, and each arithmetic op's narrow result is rounded to
/// its dtype (a cast to it and back) — so results agree with the interpreter's op for op. Index
/// maps (broadcasts, transposes, slices, ...) move narrow values as they are; outputs are cast
/// back to their narrow dtype. Its inputs and outputs have `r`'s types (the memory stays narrow).
codegen::Region widenNarrowFloats(const codegen::Region &r, mlir::ModuleOp scratch);

} // namespace rfuse::cpu

#endif
