// rfuse-unfuse on a module without any fusion: nothing changes and the statistic is zero.
// RUN: rfuse-opt %s --rfuse-unfuse | FileCheck %s
// RUN: %if llvm-stats %{ rfuse-opt %s --rfuse-unfuse -mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS %}

// STATS: Unfuse
// STATS-NEXT: (S) 0 fusions-dissolved - Number of fusion regions dissolved

// CHECK-LABEL: func.func @plain
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[M:[a-z0-9]+]]: tensor<4xi1>)
// CHECK-NEXT: %[[N:.+]] = rfuse.neg %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.select %[[M]], %[[X]], %[[N]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: return %[[S]] : tensor<4xf32>
func.func @plain(%x: tensor<4xf32>, %m: tensor<4xi1>) -> tensor<4xf32> {
  %n = rfuse.neg %x : tensor<4xf32>
  %s = rfuse.select %m, %x, %n : tensor<4xi1>, tensor<4xf32>
  return %s : tensor<4xf32>
}
