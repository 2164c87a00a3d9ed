// Indexing fuses: slices, reversals, pads, concatenations and gathers are index maps that the
// pointwise kernel reading them evaluates element by element, so they add no kernel of their
// own (counted here through the default pipeline), also when they read each other; they never
// join a reduction or a matmul epilogue, whose kernels read their inputs as they are.
// RUN: rfuse-opt %s --rfuse-pipeline=default | FileCheck %s
// Fusion does not change what is computed.
// RUN: rfuse-run %s --entry stencil --random --seed 5 > %t.ref
// RUN: rfuse-opt %s --rfuse-pipeline=default > %t.fused.mlir
// RUN: rfuse-run %t.fused.mlir --entry stencil --random --seed 5 > %t.fused
// RUN: diff %t.ref %t.fused
// RUN: rfuse-run %s --entry chains --random --seed 5 > %t.ref2
// RUN: rfuse-run %t.fused.mlir --entry chains --random --seed 5 > %t.fused2
// RUN: diff %t.ref2 %t.fused2

// A heat-equation step on the interior, re-assembled with the boundary values: one kernel.
// CHECK-LABEL: func.func @stencil
// CHECK-COUNT-1: call @stencil_k
// CHECK-NOT: call @stencil_k
// CHECK: return
func.func @stencil(%u: tensor<64xf64>) -> tensor<64xf64> {
  %l = rfuse.slice %u {start = array<i64: 0>, limit = array<i64: 62>, strides = array<i64: 1>} : (tensor<64xf64>) -> tensor<62xf64>
  %m = rfuse.slice %u {start = array<i64: 1>, limit = array<i64: 63>, strides = array<i64: 1>} : (tensor<64xf64>) -> tensor<62xf64>
  %r = rfuse.slice %u {start = array<i64: 2>, limit = array<i64: 64>, strides = array<i64: 1>} : (tensor<64xf64>) -> tensor<62xf64>
  %two = rfuse.constant dense<2.0> : tensor<62xf64>
  %k = rfuse.constant dense<0.25> : tensor<62xf64>
  %mm = rfuse.mul %m, %two : tensor<62xf64>
  %d = rfuse.sub %l, %mm : tensor<62xf64>
  %d2 = rfuse.add %d, %r : tensor<62xf64>
  %s = rfuse.mul %d2, %k : tensor<62xf64>
  %in = rfuse.add %m, %s : tensor<62xf64>
  %first = rfuse.slice %u {start = array<i64: 0>, limit = array<i64: 1>, strides = array<i64: 1>} : (tensor<64xf64>) -> tensor<1xf64>
  %last = rfuse.slice %u {start = array<i64: 63>, limit = array<i64: 64>, strides = array<i64: 1>} : (tensor<64xf64>) -> tensor<1xf64>
  %0 = rfuse.concat(%first, %in, %last) dim = 0 : (tensor<1xf64>, tensor<62xf64>, tensor<1xf64>) -> tensor<64xf64>
  return %0 : tensor<64xf64>
}

// Index maps over index maps (a strided slice of a gathered transpose, a broadcast of a slice,
// a pad of a reversal) fuse into the pointwise work that reads them: two kernels, one per
// iteration space.
// CHECK-LABEL: func.func @chains
// CHECK-COUNT-2: call @chains_k
// CHECK-NOT: call @chains_k
// CHECK: return
func.func @chains(%x: tensor<6x9xf32>, %v: tensor<9xf32>) -> (tensor<3x3xf32>, tensor<12xf32>) {
  %t = rfuse.transpose %x, perm = [1, 0] : (tensor<6x9xf32>) -> tensor<9x6xf32>
  %i = rfuse.constant dense<[5, 1, 2]> : tensor<3xi64>
  %g = rfuse.gather %t, %i, dim = 1 : (tensor<9x6xf32>, tensor<3xi64>) -> tensor<9x3xf32>
  %s = rfuse.slice %g {start = array<i64: 1, 0>, limit = array<i64: 9, 3>, strides = array<i64: 3, 1>} : (tensor<9x3xf32>) -> tensor<3x3xf32>
  %vs = rfuse.slice %v {start = array<i64: 2>, limit = array<i64: 5>, strides = array<i64: 1>} : (tensor<9xf32>) -> tensor<3xf32>
  %b = rfuse.broadcast_in_dim %vs, dims = [1] : (tensor<3xf32>) -> tensor<3x3xf32>
  %e = rfuse.exp %s : tensor<3x3xf32>
  %r = rfuse.add %e, %b : tensor<3x3xf32>
  %rv = rfuse.reverse %v, dims = [0] : tensor<9xf32>
  %p = rfuse.pad %rv {low = array<i64: 1>, high = array<i64: 2>, interior = array<i64: 0>, value = -1.0 : f64} : (tensor<9xf32>) -> tensor<12xf32>
  %q = rfuse.tanh %p : tensor<12xf32>
  return %r, %q : tensor<3x3xf32>, tensor<12xf32>
}

// A slice feeding a reduction is computed by a pointwise kernel of its own: the reduction
// kernel reads its input as it is.
// CHECK-LABEL: func.func @sliced_sum
// CHECK: call @sliced_sum_k{{[0-9]+}}_pointwise
// CHECK: call @sliced_sum_k{{[0-9]+}}_reduction
// CHECK: func.func private @sliced_sum_k{{[0-9]+}}_reduction
// CHECK-NOT: rfuse.slice
// CHECK: rfuse.reduce_sum
func.func @sliced_sum(%x: tensor<8x16xf32>) -> tensor<4xf32> {
  %s = rfuse.slice %x {start = array<i64: 2, 0>, limit = array<i64: 6, 16>, strides = array<i64: 1, 1>} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %e = rfuse.exp %s : tensor<4x16xf32>
  %r = rfuse.reduce_sum %e, dims = [1] : (tensor<4x16xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
