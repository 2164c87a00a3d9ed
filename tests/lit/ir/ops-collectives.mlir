// rfuse.all_reduce round-trips in the custom form and through the generic form; its results
// have its operands' types (inferred), one per operand.
// RUN: rfuse-opt %s | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | rfuse-opt | FileCheck %s
// RUN: rfuse-run %s --entry one --random --seed 3 > %t.run
// RUN: rfuse-run %s --entry identity --random --seed 3 | diff - %t.run
// CHECK-LABEL: func.func @bucket
// CHECK: %[[R:.*]]:2 = rfuse.all_reduce %arg0, %arg1 reduction = mean : tensor<8x4xf32>, tensor<4xf64>
// CHECK: return %[[R]]#0, %[[R]]#1 : tensor<8x4xf32>, tensor<4xf64>
func.func @bucket(%a: tensor<8x4xf32>, %b: tensor<4xf64>) -> (tensor<8x4xf32>, tensor<4xf64>) {
  %r:2 = rfuse.all_reduce %a, %b reduction = mean : tensor<8x4xf32>, tensor<4xf64>
  return %r#0, %r#1 : tensor<8x4xf32>, tensor<4xf64>
}
// CHECK-LABEL: func.func @one
// CHECK: rfuse.all_reduce %arg0 reduction = sum : tensor<3xf32>
// Outside a process group (one rank) the sum over the ranks is the value: rfuse-run gives the
// same output as the identity function.
func.func @one(%a: tensor<3xf32>) -> tensor<3xf32> {
  %r = rfuse.all_reduce %a reduction = sum : tensor<3xf32>
  return %r : tensor<3xf32>
}
func.func @identity(%a: tensor<3xf32>) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}
