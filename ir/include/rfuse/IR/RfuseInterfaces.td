//===- RfuseInterfaces.td - rfuse op interfaces ----------------*- tablegen -*-===//
#ifndef RFUSE_INTERFACES_TD
#define RFUSE_INTERFACES_TD

include "mlir/IR/OpBase.td"

//===----------------------------------------------------------------------===//
// Interfaces
//===----------------------------------------------------------------------===//

def Rfuse_PointwiseOpInterface : OpInterface<"PointwiseOpInterface"> {
  let cppNamespace = "::rfuse";
  let description = [{
    An op that applies one scalar function element by element to operands of one shape. Its
    scalar semantics live in `ScalarOps.h` under the kind returned by `getScalarOp()`; the
    interpreter, CUDA codegen and CPU lowering all dispatch on that kind.
  }];
  let methods = [
    InterfaceMethod<"The scalar operation this op applies per element.",
                    "::rfuse::ScalarOpKind", "getScalarOp">,
  ];
}

def Rfuse_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::rfuse";
  let description = [{
    An op reverse-mode differentiation (`rfuse-autodiff`) can go through: given the cotangent of
    each result, it builds the cotangents of its operands (vector-Jacobian products) with rfuse
    ops. Every op's rule is written once, in `ir/lib/Vjp.cpp`.
  }];
  let methods = [
    InterfaceMethod<[{
      Builds at `builder`'s insertion point the cotangent of each operand, given the cotangent of
      each result (null where a result has none), into `operandGrads` (one entry per operand;
      null where the operand gets no gradient: masks, integers, a comparison's inputs). Cotangents
      have their value's exact type; broadcasts are summed back to the operand's shape.
    }], "::mlir::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads),
      /*methodBody=*/[{}],
      /*defaultImplementation=*/[{
        return ::rfuse::buildVjp($_op.getOperation(), builder, resultGrads, operandGrads);
      }]>,
  ];
}

#endif // RFUSE_INTERFACES_TD
