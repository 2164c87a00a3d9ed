// rfuse-softmax-vjp: exp(z) / sum(exp(z)) becomes an rfuse.custom_vjp whose forward computes the
// same ops and keeps p, and whose backward is p * (g - sum(g * p)). A division that is not a
// softmax (e read elsewhere, or the sum spread over other dims) stays as it is.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-softmax-vjp)' | FileCheck %s
// And the gradient through it: no exp in the backward, p read once.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-softmax-vjp,rfuse-autodiff{function=softmax_loss wrt=0},rfuse-expand-custom-vjp,inline,canonicalize)' | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @softmax_rows
// CHECK-SAME:  (%[[X:.*]]: tensor<4x6xf32>)
// CHECK:       %[[Z:.*]] = rfuse.sub %[[X]]
// CHECK-NEXT:  %[[P:.*]]:2 = rfuse.custom_vjp @softmax_forward, @softmax_backward(%[[Z]]) {num_outputs = 1 : i64} : (tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>)
// CHECK-NEXT:  return %[[P]]#0
func.func @softmax_rows(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %m = rfuse.reduce_max %x, dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %ms = rfuse.stop_gradient %m : tensor<4x1xf32>
  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %z = rfuse.sub %x, %mb : tensor<4x6xf32>
  %e = rfuse.exp %z : tensor<4x6xf32>
  %s = rfuse.reduce_sum %e, dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %sb = rfuse.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %p = rfuse.div %e, %sb : tensor<4x6xf32>
  return %p : tensor<4x6xf32>
}

// Not softmaxes: e also returned; the sum (over dim 1) spread over dim 0.
// CHECK-LABEL: func.func @not_softmaxes
// CHECK-NOT:   rfuse.custom_vjp
// CHECK:       return
func.func @not_softmaxes(%z: tensor<4x6xf32>, %w: tensor<4x4xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x4xf32>) {
  %e = rfuse.exp %z : tensor<4x6xf32>
  %s = rfuse.reduce_sum %e, dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %sb = rfuse.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %p = rfuse.div %e, %sb : tensor<4x6xf32>
  %e2 = rfuse.exp %w : tensor<4x4xf32>
  %s2 = rfuse.reduce_sum %e2, dims = [1] : (tensor<4x4xf32>) -> tensor<4xf32>
  %sb2 = rfuse.broadcast_in_dim %s2, dims = [1] : (tensor<4xf32>) -> tensor<4x4xf32>
  %q = rfuse.div %e2, %sb2 : tensor<4x4xf32>
  return %p, %e, %q : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x4xf32>
}

// The forward recomputes the same ops; the backward reads p and the cotangent.
// CHECK-LABEL: func.func private @softmax_forward
// CHECK-NEXT:  rfuse.exp
// CHECK-NEXT:  rfuse.reduce_sum
// CHECK-NEXT:  rfuse.broadcast_in_dim
// CHECK-NEXT:  %[[FP:.*]] = rfuse.div
// CHECK-NEXT:  return %[[FP]], %[[FP]]
// CHECK-LABEL: func.func private @softmax_backward
// CHECK-SAME:  (%[[BP:.*]]: tensor<4x6xf32>, %[[G:.*]]: tensor<4x6xf32>)
// CHECK-NEXT:  %[[GP:.*]] = rfuse.mul %[[G]], %[[BP]]
// CHECK-NEXT:  %[[R:.*]] = rfuse.reduce_sum %[[GP]], dims = [1] {keep_dims = true}
// CHECK-NEXT:  %[[RB:.*]] = rfuse.broadcast_in_dim %[[R]]
// CHECK-NEXT:  %[[D:.*]] = rfuse.sub %[[G]], %[[RB]]
// CHECK-NEXT:  %[[DZ:.*]] = rfuse.mul %[[BP]], %[[D]]
// CHECK-NEXT:  return %[[DZ]]

// A loss of a softmax: its gradient program computes exp once (the forward's), and the
// backward's row sum is of g * p.
func.func @softmax_loss(%x: tensor<4x6xf32>, %w: tensor<4x6xf32>) -> tensor<1xf32> {
  %e = rfuse.exp %x : tensor<4x6xf32>
  %s = rfuse.reduce_sum %e, dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %sb = rfuse.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %p = rfuse.div %e, %sb : tensor<4x6xf32>
  %pw = rfuse.mul %p, %w : tensor<4x6xf32>
  %l = rfuse.reduce_sum %pw, dims = [0, 1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<1x1xf32>
  %r = rfuse.reshape %l : (tensor<1x1xf32>) -> tensor<1xf32>
  return %r : tensor<1xf32>
}

// GRAD-LABEL: func.func @softmax_loss_grad
// GRAD-COUNT-1: rfuse.exp
// GRAD-NOT:    rfuse.exp
// GRAD:        return
