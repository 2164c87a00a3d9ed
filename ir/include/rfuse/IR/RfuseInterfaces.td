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

#endif // RFUSE_INTERFACES_TD
