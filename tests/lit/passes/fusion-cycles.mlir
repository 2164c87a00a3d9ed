// Groups that are each convex can still need each other's results; the fusion passes must not
// form such pairs (the output would not verify: "operand does not dominate this use").
// RUN: rfuse-opt %s --rfuse-fuse-elementwise | rfuse-opt | FileCheck %s --check-prefix=EW
// RUN: rfuse-opt %s --rfuse-fuse-matmul-epilogue | rfuse-opt | FileCheck %s --check-prefix=MM
// RUN: rfuse-opt %s --rfuse-fuse-reductions | rfuse-opt | FileCheck %s --check-prefix=RED
// RUN: rfuse-opt %s --rfuse-fuse-elementwise=max-ops=3 | rfuse-opt | FileCheck %s --check-prefix=MAX3
// RUN: rfuse-opt %s --rfuse-pipeline=default | rfuse-opt | FileCheck %s --check-prefix=DEF

// EW-LABEL: func.func @two_chains
// EW-COUNT-2: rfuse.fusion pointwise
// EW-NOT: rfuse.fusion
// DEF-LABEL: func.func @two_chains
func.func @two_chains(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a1 = rfuse.exp %x : tensor<4x4xf32>
  %b1 = rfuse.neg %y : tensor<4x4xf32>
  %t = rfuse.transpose %a1, perm = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %b2 = rfuse.add %b1, %t : tensor<4x4xf32>
  %a2 = rfuse.add %a1, %b1 : tensor<4x4xf32>
  return %a2, %b2 : tensor<4x4xf32>, tensor<4x4xf32>
}

// EW-LABEL: func.func @crossed_epilogues
// MM-LABEL: func.func @crossed_epilogues
// MM-COUNT-2: rfuse.fusion matmul_epilogue
// MM-NOT: rfuse.fusion matmul_epilogue
func.func @crossed_epilogues(%a: tensor<4x4xf32>, %w: tensor<4x4xf32>, %v: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %m1 = rfuse.matmul %a, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = rfuse.matmul %a, %v : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e1 = rfuse.add %m1, %m2 : tensor<4x4xf32>
  %e2 = rfuse.sub %m2, %m1 : tensor<4x4xf32>
  return %e1, %e2 : tensor<4x4xf32>, tensor<4x4xf32>
}

// RED-LABEL: func.func @crossed_reductions
// RED-COUNT-2: rfuse.fusion reduction
// RED-NOT: rfuse.fusion reduction
func.func @crossed_reductions(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>) {
  %r1 = rfuse.reduce_sum %x, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %c1 = rfuse.reduce_sum %y, dims = [0] : (tensor<4x8xf32>) -> tensor<8xf32>
  %bc = rfuse.broadcast_in_dim %c1, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %br = rfuse.broadcast_in_dim %r1, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %e1 = rfuse.add %br, %bc : tensor<4x8xf32>
  %e2 = rfuse.sub %bc, %br : tensor<4x8xf32>
  %t2 = rfuse.transpose %e2, perm = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %e1, %t2 : tensor<4x8xf32>, tensor<8x4xf32>
}

// MAX3-LABEL: func.func @bounded
// MAX3: rfuse.fusion pointwise
func.func @bounded(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %p = rfuse.exp %x : tensor<4xf32>
  %q = rfuse.tanh %p : tensor<4xf32>
  %n = rfuse.neg %x : tensor<4xf32>
  %r = rfuse.sub %q, %n : tensor<4xf32>
  %s = rfuse.mul %q, %n : tensor<4xf32>
  return %r, %s : tensor<4xf32>, tensor<4xf32>
}

// An op that reads only broadcasts of inputs does not join a matmul's epilogue.
// MM-LABEL: func.func @unrelated_sum_stays_out
// MM: %[[S:.*]] = rfuse.add
// MM: rfuse.fusion matmul_epilogue
func.func @unrelated_sum_stays_out(%a: tensor<4x4xf32>, %w: tensor<4x4xf32>, %v1: tensor<4xf32>, %v2: tensor<4xf32>) -> tensor<4x4xf32> {
  %b1 = rfuse.broadcast_in_dim %v1, dims = [1] : (tensor<4xf32>) -> tensor<4x4xf32>
  %b2 = rfuse.broadcast_in_dim %v2, dims = [1] : (tensor<4xf32>) -> tensor<4x4xf32>
  %s = rfuse.add %b1, %b2 : tensor<4x4xf32>
  %mm = rfuse.matmul %a, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = rfuse.add %mm, %s : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
