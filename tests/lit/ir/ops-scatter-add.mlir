// rfuse.scatter_add: round trips in the custom and generic forms, exact values through the
// reference interpreter and through the CPU backend (a host step there), against the
// take_along it undoes. Its gradient and take_along's: tests/lit/passes/autodiff-take-along.mlir.
// RUN: rfuse-opt %s | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | rfuse-opt | FileCheck %s
// RUN: rfuse-run %s --entry values | FileCheck %s --check-prefix=VALUES
// RUN: rfuse-run %s --entry values --device cpu-jit | FileCheck %s --check-prefix=VALUES
// RUN: rfuse-run %s --entry computed --random --seed 3 > %t.interp
// RUN: rfuse-run %s --entry computed --random --seed 3 --device cpu-jit > %t.cpu
// RUN: diff %t.interp %t.cpu

// CHECK-LABEL: func.func @computed
// CHECK: rfuse.scatter_add %{{.*}}, %{{.*}}, dim = 1 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x4xf32>
func.func @computed(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  %v, %i = rfuse.sort %x, dim = 1 : tensor<2x3xf32>
  %s = rfuse.scatter_add %v, %i, dim = 1 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// Rows of [[1, 2, 3], [4, 5, 6]] added at positions [[0, 2, 0], [3, 3, 1]] along dim 1 of a
// 2x4 result: row 0 gets 1 + 3 at 0 and 2 at 2; row 1 gets 6 at 1 and 4 + 5 at 3. Along dim 0
// of a 3x2 result, positions [[2, 0], [2, 2]]: (1 + 3) at [2, 0], 2 at [0, 1], 4 at [2, 1].
// A position out of range is clamped (-1 -> 0, 7 -> 3).
// VALUES: output 0: tensor<2x4xf64> shape [2, 4] sum 21
// VALUES-NEXT: first: 4 0 2 0 0 6
// VALUES: output 1: tensor<3x2xf64> shape [3, 2]
// VALUES-NEXT: first: 0 2 0 0 4 4
// VALUES: output 2: tensor<1x4xf64> shape [1, 4]
// VALUES-NEXT: first: 1 0 0 2
func.func @values() -> (tensor<2x4xf64>, tensor<3x2xf64>, tensor<1x4xf64>) {
  %x = rfuse.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf64>
  %i = rfuse.constant dense<[[0, 2, 0], [3, 3, 1]]> : tensor<2x3xi64>
  %s = rfuse.scatter_add %x, %i, dim = 1 : (tensor<2x3xf64>, tensor<2x3xi64>) -> tensor<2x4xf64>
  %y = rfuse.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf64>
  %j = rfuse.constant dense<[[2, 0], [2, 2]]> : tensor<2x2xi32>
  %t = rfuse.scatter_add %y, %j, dim = 0 : (tensor<2x2xf64>, tensor<2x2xi32>) -> tensor<3x2xf64>
  %z = rfuse.constant dense<[[1.0, 2.0]]> : tensor<1x2xf64>
  %k = rfuse.constant dense<[[-1, 7]]> : tensor<1x2xi64>
  %u = rfuse.scatter_add %z, %k, dim = 1 : (tensor<1x2xf64>, tensor<1x2xi64>) -> tensor<1x4xf64>
  return %s, %t, %u : tensor<2x4xf64>, tensor<3x2xf64>, tensor<1x4xf64>
}
