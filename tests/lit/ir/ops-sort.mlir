// rfuse.sort and rfuse.take_along: round trips in the custom and generic forms, the inferred
// result types, exact values through the reference interpreter and through the CPU backend
// (where sort is a host step). Its gradient: tests/lit/passes/autodiff-sort.mlir.
// RUN: rfuse-opt %s | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | rfuse-opt | FileCheck %s
// RUN: rfuse-run %s --entry values | FileCheck %s --check-prefix=VALUES
// RUN: rfuse-run %s --entry values --device cpu-jit | FileCheck %s --check-prefix=VALUES
// On computed operands the CPU backend runs sort as a host step and take_along as a kernel.
// RUN: rfuse-run %s --entry sorts --random --seed 3 > %t.interp
// RUN: rfuse-run %s --entry sorts --random --seed 3 --device cpu-jit > %t.cpu
// RUN: diff %t.interp %t.cpu

// CHECK-LABEL: func.func @sorts
// CHECK: %{{.*}}, %{{.*}} = rfuse.sort %{{.*}}, dim = 1 : tensor<2x3xf32>
// CHECK: rfuse.sort %{{.*}}, dim = 0 {descending, nan_largest} : tensor<2x3xf32>
// CHECK: rfuse.take_along %{{.*}}, %{{.*}}, dim = 1 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
func.func @sorts(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %v, %i = rfuse.sort %x, dim = 1 : tensor<2x3xf32>
  %w, %j = rfuse.sort %x, dim = 0 {descending, nan_largest} : tensor<2x3xf32>
  %t = rfuse.take_along %x, %i, dim = 1 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  return %v, %i, %w, %t : tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>, tensor<2x3xf32>
}

// Stable (the two 2s keep their order), NaN last in both directions without nan_largest (R's
// na.last = TRUE), above +Inf with it (torch), -0 == +0; rows of a matrix sorted along dim 1;
// take_along by the indices gives the sorted values again.
// VALUES: output 0: tensor<6xf64> shape [6]
// VALUES-NEXT: first: -inf -0 0 2 2 nan
// VALUES: output 1: tensor<6xi64> shape [6]
// VALUES-NEXT: first: 4 2 5 0 3 1
// VALUES: output 2: tensor<6xf64> shape [6]
// VALUES-NEXT: first: 2 2 -0 0 -inf nan
// VALUES: output 3: tensor<6xi64> shape [6]
// VALUES-NEXT: first: 0 3 2 5 4 1
// VALUES: output 4: tensor<6xf64> shape [6]
// VALUES-NEXT: first: nan 2 2 -0 0 -inf
// VALUES: output 5: tensor<2x3xf64> shape [2, 3]
// VALUES-NEXT: first: 1 3 5 0 4 6
// VALUES: output 6: tensor<2x3xi64> shape [2, 3]
// VALUES-NEXT: first: 1 0 2 2 1 0
// VALUES: output 7: tensor<2x3xf64> shape [2, 3]
// VALUES-NEXT: first: 1 3 5 0 4 6
func.func @values() -> (tensor<6xf64>, tensor<6xi64>, tensor<6xf64>, tensor<6xi64>, tensor<6xf64>, tensor<2x3xf64>, tensor<2x3xi64>, tensor<2x3xf64>) {
  %x = rfuse.constant dense<[2.0, 0x7FF8000000000000, -0.0, 2.0, 0xFFF0000000000000, 0.0]> : tensor<6xf64>
  %v, %i = rfuse.sort %x, dim = 0 : tensor<6xf64>
  %d, %j = rfuse.sort %x, dim = 0 {descending} : tensor<6xf64>
  %n, %k = rfuse.sort %x, dim = 0 {descending, nan_largest} : tensor<6xf64>
  %m = rfuse.constant dense<[[3.0, 1.0, 5.0], [6.0, 4.0, 0.0]]> : tensor<2x3xf64>
  %mv, %mi = rfuse.sort %m, dim = 1 : tensor<2x3xf64>
  %t = rfuse.take_along %m, %mi, dim = 1 : (tensor<2x3xf64>, tensor<2x3xi64>) -> tensor<2x3xf64>
  return %v, %i, %d, %j, %n, %mv, %mi, %t : tensor<6xf64>, tensor<6xi64>, tensor<6xf64>, tensor<6xi64>, tensor<6xf64>, tensor<2x3xf64>, tensor<2x3xi64>, tensor<2x3xf64>
}

