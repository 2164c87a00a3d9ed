// The rfuse dialect: ops, enums, interfaces. Include this to work with rfuse IR.
#ifndef RFUSE_IR_RFUSEDIALECT_H
#define RFUSE_IR_RFUSEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "rfuse/IR/DType.h"
#include "rfuse/IR/ScalarOpKind.h"

#include <array>
#include <optional>

#include "rfuse/IR/RfuseDialect.h.inc"
#include "rfuse/IR/RfuseEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "rfuse/IR/RfuseAttrs.h.inc"
namespace rfuse {
/// The vector-Jacobian product of `op` (VjpOpInterface's rule; ir/lib/Vjp.cpp).
mlir::LogicalResult buildVjp(mlir::Operation *op, mlir::OpBuilder &builder,
                             mlir::ArrayRef<mlir::Value> resultGrads,
                             llvm::SmallVectorImpl<mlir::Value> &operandGrads);
} // namespace rfuse
#include "rfuse/IR/RfuseInterfaces.h.inc"
#define GET_OP_CLASSES
#include "rfuse/IR/RfuseOps.h.inc"

namespace rfuse {
/// The mlir element type of a dtype, and back (false for types rfuse does not carry).
mlir::Type toMlirType(mlir::MLIRContext *ctx, DType t);
bool fromMlirType(mlir::Type t, DType &out);
/// The dtype of a ranked tensor value's elements (values of verified rfuse IR always have one).
DType dtypeOf(mlir::Value tensor);
/// The value of `v` when an rfuse.constant makes it a float splat (any shape), else nothing.
std::optional<double> floatSplatValue(mlir::Value v);
/// An attention mask's [B or 1, L or 1, S or 1] dims as row-major strides along B, L and S (0
/// along a size-1 dim, spread over the others): what the interpreter and the kernels index by.
std::array<int64_t, 3> attentionMaskStrides(llvm::ArrayRef<int64_t> maskDims);
} // namespace rfuse

#endif
