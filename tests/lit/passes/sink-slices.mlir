// rfuse-sink-slices: slices move above the pointwise ops, broadcasts and transposes they read
// (an LSTM step's four gate slices of `x_t W + h U + b` become sums of slices of the inputs),
// slices of slices compose, x[, t, ] of an [A, T, B] array reshaped to [A, B] becomes a
// column range of its [A, T * B] view, and such a column range of a transposed value's view
// moves above the transpose.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-sink-slices))' | FileCheck %s
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-sink-slices))' | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s

// CHECK-LABEL: func.func @lstm_gates
// CHECK-DAG: %[[TWO:.*]] = rfuse.constant dense<2.000000e+00> : tensor<128x8xf32>
// CHECK-DAG: %[[VIEW:.*]] = rfuse.reshape %arg0 : (tensor<512x4x8xf32>) -> tensor<512x32xf32>
// The input gate: columns 8..15 (t = 1) of the view, rows 0..127 of h U and of the bias.
// CHECK: %[[XI:.*]] = rfuse.slice %[[VIEW]] {limit = array<i64: 128, 16>, start = array<i64: 0, 8>, strides = array<i64: 1, 1>}
// CHECK: %[[HI:.*]] = rfuse.slice %arg2 {limit = array<i64: 128, 8>, start = array<i64: 0, 0>, strides = array<i64: 1, 1>}
// CHECK: %[[BI:.*]] = rfuse.slice %arg1 {limit = array<i64: 128>, start = array<i64: 0>, strides = array<i64: 1>} : (tensor<512xf32>) -> tensor<128xf32>
// CHECK: %[[BBI:.*]] = rfuse.broadcast_in_dim %[[BI]], dims = [0] : (tensor<128xf32>) -> tensor<128x8xf32>
// CHECK: %[[G0I:.*]] = rfuse.add %[[HI]], %[[BBI]] : tensor<128x8xf32>
// CHECK: %[[GI:.*]] = rfuse.add %[[XI]], %[[G0I]] : tensor<128x8xf32>
// The output gate went through a transpose, a splat constant and another transpose.
// CHECK: %[[XO:.*]] = rfuse.slice %[[VIEW]] {limit = array<i64: 512, 16>, start = array<i64: 384, 8>, strides = array<i64: 1, 1>}
// CHECK: %[[GO:.*]] = rfuse.add %[[XO]], %{{.*}} : tensor<128x8xf32>
// CHECK: %[[O:.*]] = rfuse.mul %[[GO]], %[[TWO]] : tensor<128x8xf32>
// CHECK-NOT: rfuse.transpose
// CHECK-NOT: tensor<512x8xf32>) -> tensor<512x8xf32>
// CHECK: return
func.func @lstm_gates(%proj: tensor<512x4x8xf32>, %b: tensor<512xf32>, %hu: tensor<512x8xf32>, %c: tensor<128x8xf32>) -> (tensor<128x8xf32>, tensor<128x8xf32>) {
  %s = rfuse.slice %proj {start = array<i64: 0, 1, 0>, limit = array<i64: 512, 2, 8>, strides = array<i64: 1, 1, 1>} : (tensor<512x4x8xf32>) -> tensor<512x1x8xf32>
  %x = rfuse.reshape %s : (tensor<512x1x8xf32>) -> tensor<512x8xf32>
  %bb = rfuse.broadcast_in_dim %b, dims = [0] : (tensor<512xf32>) -> tensor<512x8xf32>
  %g0 = rfuse.add %hu, %bb : tensor<512x8xf32>
  %g = rfuse.add %x, %g0 : tensor<512x8xf32>
  %i = rfuse.slice %g {start = array<i64: 0, 0>, limit = array<i64: 128, 8>, strides = array<i64: 1, 1>} : (tensor<512x8xf32>) -> tensor<128x8xf32>
  %f = rfuse.slice %g {start = array<i64: 128, 0>, limit = array<i64: 256, 8>, strides = array<i64: 1, 1>} : (tensor<512x8xf32>) -> tensor<128x8xf32>
  %si = rfuse.sigmoid %i : tensor<128x8xf32>
  %sf = rfuse.sigmoid %f : tensor<128x8xf32>
  %fc = rfuse.mul %sf, %c : tensor<128x8xf32>
  %two = rfuse.constant dense<2.0> : tensor<512x8xf32>
  %g2 = rfuse.mul %g, %two : tensor<512x8xf32>
  %t = rfuse.transpose %g2, perm = [1, 0] : (tensor<512x8xf32>) -> tensor<8x512xf32>
  %o = rfuse.slice %t {start = array<i64: 0, 384>, limit = array<i64: 8, 512>, strides = array<i64: 1, 1>} : (tensor<8x512xf32>) -> tensor<8x128xf32>
  %ot = rfuse.transpose %o, perm = [1, 0] : (tensor<8x128xf32>) -> tensor<128x8xf32>
  %h = rfuse.mul %si, %ot : tensor<128x8xf32>
  %cn = rfuse.add %fc, %h : tensor<128x8xf32>
  return %cn, %h : tensor<128x8xf32>, tensor<128x8xf32>
}

// A slice of a slice is one slice (rows 0, 2, .. then 1, 4, 7 of those: 2, 8, 14); a pointwise op with
// a user that is not a slice stays (computing it twice would not remove it).
// CHECK-LABEL: func.func @compose
// CHECK: %[[E:.*]] = rfuse.exp %arg0 : tensor<16x8xf32>
// CHECK: %[[S:.*]] = rfuse.slice %[[E]] {limit = array<i64: 15, 6>, start = array<i64: 2, 1>, strides = array<i64: 6, 2>} : (tensor<16x8xf32>) -> tensor<3x3xf32>
// CHECK: return %[[S]], %[[E]]
func.func @compose(%x: tensor<16x8xf32>) -> (tensor<3x3xf32>, tensor<16x8xf32>) {
  %e = rfuse.exp %x : tensor<16x8xf32>
  %a = rfuse.slice %e {start = array<i64: 0, 1>, limit = array<i64: 16, 8>, strides = array<i64: 2, 1>} : (tensor<16x8xf32>) -> tensor<8x7xf32>
  %b = rfuse.slice %a {start = array<i64: 1, 0>, limit = array<i64: 8, 6>, strides = array<i64: 3, 2>} : (tensor<8x7xf32>) -> tensor<3x3xf32>
  return %b, %e : tensor<3x3xf32>, tensor<16x8xf32>
}

// A unit slice of the last dim, or one whose reshape keeps the dim, is left alone.
// CHECK-LABEL: func.func @kept
// CHECK: rfuse.slice %arg0 {limit = array<i64: 4, 3>, start = array<i64: 0, 2>
// CHECK: rfuse.reshape %{{.*}} : (tensor<4x1xf32>) -> tensor<4xf32>
// CHECK: rfuse.slice %arg1 {limit = array<i64: 4, 2, 5>, start = array<i64: 0, 1, 0>
// CHECK: rfuse.reshape %{{.*}} : (tensor<4x1x5xf32>) -> tensor<20xf32>
func.func @kept(%x: tensor<4x6xf32>, %y: tensor<4x3x5xf32>) -> (tensor<4xf32>, tensor<20xf32>) {
  %a = rfuse.slice %x {start = array<i64: 0, 2>, limit = array<i64: 4, 3>, strides = array<i64: 1, 1>} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %ar = rfuse.reshape %a : (tensor<4x1xf32>) -> tensor<4xf32>
  %b = rfuse.slice %y {start = array<i64: 0, 1, 0>, limit = array<i64: 4, 2, 5>, strides = array<i64: 1, 1, 1>} : (tensor<4x3x5xf32>) -> tensor<4x1x5xf32>
  %br = rfuse.reshape %b : (tensor<4x1x5xf32>) -> tensor<20xf32>
  return %ar, %br : tensor<4xf32>, tensor<20xf32>
}

// One time step of a time-first [T, B, H] output read in R's layout ([H, T, B], viewed as
// [H, T * B]): only that step is transposed (the slice moves above the transpose and the view).
// CHECK-LABEL: func.func @last_step_of_a_transposed_output
// CHECK-NEXT: %[[S:.*]] = rfuse.slice %arg0 {limit = array<i64: 6, 8, 16>, start = array<i64: 5, 0, 0>, strides = array<i64: 1, 1, 1>} : (tensor<6x8x16xf32>) -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[T:.*]] = rfuse.transpose %[[S]], perm = [2, 0, 1] : (tensor<1x8x16xf32>) -> tensor<16x1x8xf32>
// CHECK-NEXT: %[[R:.*]] = rfuse.reshape %[[T]] : (tensor<16x1x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @last_step_of_a_transposed_output(%y: tensor<6x8x16xf32>) -> tensor<16x8xf32> {
  %t = rfuse.transpose %y, perm = [2, 0, 1] : (tensor<6x8x16xf32>) -> tensor<16x6x8xf32>
  %v = rfuse.reshape %t : (tensor<16x6x8xf32>) -> tensor<16x48xf32>
  %s = rfuse.slice %v {limit = array<i64: 16, 48>, start = array<i64: 0, 40>, strides = array<i64: 1, 1>} : (tensor<16x48xf32>) -> tensor<16x8xf32>
  return %s : tensor<16x8xf32>
}

// The transposed output read twice: nothing moves (the transpose is made anyway).
// CHECK-LABEL: func.func @transposed_output_read_twice
// CHECK: rfuse.transpose %arg0
// CHECK: rfuse.slice %{{.*}} {limit = array<i64: 16, 48>, start = array<i64: 0, 40>
func.func @transposed_output_read_twice(%y: tensor<6x8x16xf32>) -> (tensor<16x8xf32>, tensor<16x6x8xf32>) {
  %t = rfuse.transpose %y, perm = [2, 0, 1] : (tensor<6x8x16xf32>) -> tensor<16x6x8xf32>
  %v = rfuse.reshape %t : (tensor<16x6x8xf32>) -> tensor<16x48xf32>
  %s = rfuse.slice %v {limit = array<i64: 16, 48>, start = array<i64: 0, 40>, strides = array<i64: 1, 1>} : (tensor<16x48xf32>) -> tensor<16x8xf32>
  return %s, %t : tensor<16x8xf32>, tensor<16x6x8xf32>
}
