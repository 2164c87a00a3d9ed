// Round trips of the indexing ops (slice, reverse, pad, concat, gather) in the custom form and
// through the generic form; their inferred result types; their folders; and, through the
// reference interpreter, their values on exact inputs.
// RUN: rfuse-opt %s | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --canonicalize | FileCheck %s --check-prefix=FOLD
// RUN: rfuse-run %s --entry values --print-count 12 | FileCheck %s --check-prefix=VALUES
// RUN: rfuse-run %s --entry scan_values | FileCheck %s --check-prefix=SCAN

// CHECK-LABEL: func.func @indexing
func.func @indexing(%x: tensor<6xf32>, %m: tensor<4x3xf64>, %b: tensor<2xf32>, %i: tensor<2xi32>)
    -> (tensor<2xf32>, tensor<2x3xf64>, tensor<6xf32>, tensor<4x3xf64>, tensor<11xf32>, tensor<8xf32>, tensor<4x2xf64>, tensor<2xf32>) {
  // CHECK: rfuse.slice %{{.*}} {limit = array<i64: 5>, start = array<i64: 1>, strides = array<i64: 3>} : (tensor<6xf32>) -> tensor<2xf32>
  %0 = rfuse.slice %x {start = array<i64: 1>, limit = array<i64: 5>, strides = array<i64: 3>} : (tensor<6xf32>) -> tensor<2xf32>
  // CHECK: rfuse.slice %{{.*}} : (tensor<4x3xf64>) -> tensor<2x3xf64>
  %1 = rfuse.slice %m {start = array<i64: 2, 0>, limit = array<i64: 4, 3>, strides = array<i64: 1, 1>} : (tensor<4x3xf64>) -> tensor<2x3xf64>
  // CHECK: rfuse.reverse %{{.*}}, dims = [0] : tensor<6xf32>
  %2 = rfuse.reverse %x, dims = [0] : tensor<6xf32>
  // CHECK: rfuse.reverse %{{.*}}, dims = [1, 0] : tensor<4x3xf64>
  %3 = rfuse.reverse %m, dims = [1, 0] : tensor<4x3xf64>
  // 2 before, 3 after: 2 + 6 + 3 = 11.
  // CHECK: rfuse.pad %{{.*}} {high = array<i64: 3>, interior = array<i64: 0>, low = array<i64: 2>, value = 0.000000e+00 : f64} : (tensor<6xf32>) -> tensor<11xf32>
  %4 = rfuse.pad %x {low = array<i64: 2>, high = array<i64: 3>, interior = array<i64: 0>, value = 0.0 : f64} : (tensor<6xf32>) -> tensor<11xf32>
  // CHECK: rfuse.concat(%{{.*}}, %{{.*}}) dim = 0 : (tensor<6xf32>, tensor<2xf32>) -> tensor<8xf32>
  %5 = rfuse.concat(%x, %b) dim = 0 : (tensor<6xf32>, tensor<2xf32>) -> tensor<8xf32>
  // CHECK: rfuse.gather %{{.*}}, %{{.*}}, dim = 1 : (tensor<4x3xf64>, tensor<2xi32>) -> tensor<4x2xf64>
  %6 = rfuse.gather %m, %i, dim = 1 : (tensor<4x3xf64>, tensor<2xi32>) -> tensor<4x2xf64>
  %c = rfuse.constant dense<[5, 0]> : tensor<2xi64>
  // CHECK: rfuse.gather %{{.*}}, %{{.*}}, dim = 0 : (tensor<6xf32>, tensor<2xi64>) -> tensor<2xf32>
  %7 = rfuse.gather %x, %c, dim = 0 : (tensor<6xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2xf32>, tensor<2x3xf64>, tensor<6xf32>, tensor<4x3xf64>, tensor<11xf32>, tensor<8xf32>, tensor<4x2xf64>, tensor<2xf32>
}

// Folders: a slice of everything, a pad of nothing, a one-operand concat, a reverse of a reverse
// and a reverse along size-1 dims are their operand.
// FOLD-LABEL: func.func @folds
// FOLD-SAME: (%[[X:[a-z0-9]+]]: tensor<6xf32>, %[[R:[a-z0-9]+]]: tensor<1x4xf32>)
// FOLD-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[R]]
func.func @folds(%x: tensor<6xf32>, %r: tensor<1x4xf32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<1x4xf32>) {
  %0 = rfuse.slice %x {start = array<i64: 0>, limit = array<i64: 6>, strides = array<i64: 1>} : (tensor<6xf32>) -> tensor<6xf32>
  %1 = rfuse.pad %x {low = array<i64: 0>, high = array<i64: 0>, interior = array<i64: 0>, value = 1.0 : f64} : (tensor<6xf32>) -> tensor<6xf32>
  %2 = rfuse.concat(%x) dim = 0 : (tensor<6xf32>) -> tensor<6xf32>
  %a = rfuse.reverse %x, dims = [0] : tensor<6xf32>
  %3 = rfuse.reverse %a, dims = [0] : tensor<6xf32>
  %4 = rfuse.reverse %r, dims = [0] : tensor<1x4xf32>
  return %0, %1, %2, %3, %4 : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<1x4xf32>
}

// Exact values: x = [0, 1, ..., 5].
// VALUES: output 0: tensor<2xf64> shape [2]
// VALUES-NEXT: first: 1 4
// VALUES: output 1: tensor<6xf64> shape [6]
// VALUES-NEXT: first: 5 4 3 2 1 0
// VALUES: output 2: tensor<12xf64> shape [12]
// VALUES-NEXT: first: -1 0 9 1 9 2 9 3 9 4 9 5
// VALUES: output 3: tensor<9xf64> shape [9]
// VALUES-NEXT: first: 0 1 2 3 4 5 10 20 30
// VALUES: output 4: tensor<4xf64> shape [4]
// VALUES-NEXT: first: 5 5 0 3
func.func @values() -> (tensor<2xf64>, tensor<6xf64>, tensor<12xf64>, tensor<9xf64>, tensor<4xf64>) {
  %x = rfuse.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<6xf64>
  %y = rfuse.constant dense<[10.0, 20.0, 30.0]> : tensor<3xf64>
  %0 = rfuse.slice %x {start = array<i64: 1>, limit = array<i64: 6>, strides = array<i64: 3>} : (tensor<6xf64>) -> tensor<2xf64>
  %1 = rfuse.reverse %x, dims = [0] : tensor<6xf64>
  %p = rfuse.pad %x {low = array<i64: 1>, high = array<i64: 0>, interior = array<i64: 1>, value = 9.0 : f64} : (tensor<6xf64>) -> tensor<12xf64>
  %m1 = rfuse.constant dense<-1.0> : tensor<1xf64>
  %s = rfuse.slice %p {start = array<i64: 1>, limit = array<i64: 12>, strides = array<i64: 1>} : (tensor<12xf64>) -> tensor<11xf64>
  %2 = rfuse.concat(%m1, %s) dim = 0 : (tensor<1xf64>, tensor<11xf64>) -> tensor<12xf64>
  %3 = rfuse.concat(%x, %y) dim = 0 : (tensor<6xf64>, tensor<3xf64>) -> tensor<9xf64>
  %i = rfuse.constant dense<[5, 5, 0, 3]> : tensor<4xi64>
  %4 = rfuse.gather %x, %i, dim = 0 : (tensor<6xf64>, tensor<4xi64>) -> tensor<4xf64>
  return %0, %1, %2, %3, %4 : tensor<2xf64>, tensor<6xf64>, tensor<12xf64>, tensor<9xf64>, tensor<4xf64>
}

// Cumulative ops (rfuse.scan): round trip, and exact values.
// CHECK-LABEL: func.func @scans
// CHECK: rfuse.scan %{{.*}}, dim = 1, kind = sum : tensor<2x3xf32>
// CHECK: rfuse.scan %{{.*}}, dim = 0, kind = max : tensor<2x3xf32>
func.func @scans(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = rfuse.scan %x, dim = 1, kind = sum : tensor<2x3xf32>
  %1 = rfuse.scan %x, dim = 0, kind = max : tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}
// SCAN: output 0: tensor<5xf64> shape [5]
// SCAN-NEXT: first: 1 3 6 10 15
// SCAN: output 1: tensor<5xf64> shape [5]
// SCAN-NEXT: first: 1 2 6 24 120
// SCAN: output 2: tensor<5xf64> shape [5]
// SCAN-NEXT: first: 1 2 3 4 5
// SCAN: output 3: tensor<5xi32> shape [5]
// SCAN-NEXT: first: 1 1 1 1 1
func.func @scan_values() -> (tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xi32>) {
  %x = rfuse.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<5xf64>
  %i = rfuse.constant dense<[1, 2, 3, 4, 5]> : tensor<5xi32>
  %0 = rfuse.scan %x, dim = 0, kind = sum : tensor<5xf64>
  %1 = rfuse.scan %x, dim = 0, kind = prod : tensor<5xf64>
  %2 = rfuse.scan %x, dim = 0, kind = max : tensor<5xf64>
  %3 = rfuse.scan %i, dim = 0, kind = min : tensor<5xi32>
  return %0, %1, %2, %3 : tensor<5xf64>, tensor<5xf64>, tensor<5xf64>, tensor<5xi32>
}
