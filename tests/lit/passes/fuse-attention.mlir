// rfuse-fuse-attention: softmax(q k^T / c) v of bfloat16 products, written op by op (the product
// widened to f32, each row's maximum subtracted, the probabilities rounded back), becomes one
// rfuse.attention; in R's layout too (transposes between the ops). What the GPU kernel does not
// take, or what reads the scores or probabilities elsewhere, stays as it is.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-fuse-attention),canonicalize)' | FileCheck %s
// And its gradient: one rfuse.attention_backward, from the forward's row log-sum-exp and
// delta = sum(g * out) over the head dim.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(inline,func.func(rfuse-fuse-attention),rfuse-autodiff{function=attention_loss wrt=0,1,2},canonicalize)' | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @attention
// CHECK-SAME:  (%[[Q:.*]]: tensor<2x24x16xbf16>, %[[K:.*]]: tensor<2x40x16xbf16>, %[[V:.*]]: tensor<2x40x16xbf16>)
// CHECK-NEXT:  %[[O:.*]], %{{.*}} = rfuse.attention %[[Q]], %[[K]], %[[V]] scale = 2.500000e-01 : (tensor<2x24x16xbf16>, tensor<2x40x16xbf16>, tensor<2x40x16xbf16>) -> (tensor<2x24x16xbf16>, tensor<2x24xf32>)
// CHECK-NOT:   rfuse.matmul
// CHECK:       return %[[O]]
func.func @attention(%q: tensor<2x24x16xbf16>, %k: tensor<2x40x16xbf16>, %v: tensor<2x40x16xbf16>) -> tensor<2x24x16xbf16> {
  %s = rfuse.matmul %q, %k {transpose_b = true} : (tensor<2x24x16xbf16>, tensor<2x40x16xbf16>) -> tensor<2x24x40xbf16>
  %w = rfuse.cast %s : tensor<2x24x40xbf16> to tensor<2x24x40xf32>
  %c = rfuse.constant dense<4.0> : tensor<2x24x40xf32>
  %z = rfuse.div %w, %c : tensor<2x24x40xf32>
  %m = rfuse.reduce_max %z, dims = [2] {keep_dims = true} : (tensor<2x24x40xf32>) -> tensor<2x24x1xf32>
  %ms = rfuse.stop_gradient %m : tensor<2x24x1xf32>
  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (tensor<2x24x1xf32>) -> tensor<2x24x40xf32>
  %zm = rfuse.sub %z, %mb : tensor<2x24x40xf32>
  %e = rfuse.exp %zm : tensor<2x24x40xf32>
  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (tensor<2x24x40xf32>) -> tensor<2x24x1xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<2x24x1xf32>) -> tensor<2x24x40xf32>
  %p = rfuse.div %e, %sb : tensor<2x24x40xf32>
  %pn = rfuse.cast %p : tensor<2x24x40xf32> to tensor<2x24x40xbf16>
  %o = rfuse.matmul %pn, %v : (tensor<2x24x40xbf16>, tensor<2x40x16xbf16>) -> tensor<2x24x16xbf16>
  return %o : tensor<2x24x16xbf16>
}

// R's layout: the scores transposed to [S, L, B] for a softmax over dim 0 and back, k given as
// k^T [B, D, S] (a transpose made for the op), the scale a product by a broadcast constant, no
// maximum subtracted.
// CHECK-LABEL: func.func @attention_r_layout
// CHECK-SAME:  (%[[Q:.*]]: tensor<3x8x32xf16>, %[[KT:.*]]: tensor<3x32x8xf16>, %[[V:.*]]: tensor<3x8x32xf16>)
// CHECK-NEXT:  %[[K:.*]] = rfuse.transpose %[[KT]], perm = [0, 2, 1]
// CHECK-NEXT:  %[[O:.*]], %{{.*}} = rfuse.attention %[[Q]], %[[K]], %[[V]] scale = 1.250000e-01
// CHECK-NEXT:  return %[[O]]
func.func @attention_r_layout(%q: tensor<3x8x32xf16>, %kt: tensor<3x32x8xf16>, %v: tensor<3x8x32xf16>) -> tensor<3x8x32xf16> {
  %s = rfuse.matmul %q, %kt : (tensor<3x8x32xf16>, tensor<3x32x8xf16>) -> tensor<3x8x8xf16>
  %st = rfuse.transpose %s, perm = [2, 1, 0] : (tensor<3x8x8xf16>) -> tensor<8x8x3xf16>
  %w = rfuse.cast %st : tensor<8x8x3xf16> to tensor<8x8x3xf32>
  %c = rfuse.constant dense<0.125> : tensor<1xf32>
  %cb = rfuse.broadcast_in_dim %c, dims = [2] : (tensor<1xf32>) -> tensor<8x8x3xf32>
  %z = rfuse.mul %cb, %w : tensor<8x8x3xf32>
  %e = rfuse.exp %z : tensor<8x8x3xf32>
  %sum = rfuse.reduce_sum %e, dims = [0] : (tensor<8x8x3xf32>) -> tensor<8x3xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [1, 2] : (tensor<8x3xf32>) -> tensor<8x8x3xf32>
  %p = rfuse.div %e, %sb : tensor<8x8x3xf32>
  %pt = rfuse.transpose %p, perm = [2, 1, 0] : (tensor<8x8x3xf32>) -> tensor<3x8x8xf32>
  %pn = rfuse.cast %pt : tensor<3x8x8xf32> to tensor<3x8x8xf16>
  %o = rfuse.matmul %pn, %v : (tensor<3x8x8xf16>, tensor<3x8x32xf16>) -> tensor<3x8x32xf16>
  return %o : tensor<3x8x32xf16>
}

// Not fused: f32 products; probabilities also returned (torch's need_weights); a head dim of 24
// (not a multiple of 16); a softmax over the queries instead of the keys; scores through an
// integer cast.
// CHECK-LABEL: func.func @not_attention
// CHECK-NOT:   rfuse.attention
// CHECK:       return
func.func @not_attention(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>,
                         %qn: tensor<2x8x16xbf16>, %kn: tensor<2x8x16xbf16>, %vn: tensor<2x8x16xbf16>,
                         %q24: tensor<2x8x24xbf16>, %k24: tensor<2x8x24xbf16>, %v24: tensor<2x8x24xbf16>)
    -> (tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<2x8x8xf32>, tensor<2x8x24xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) {
  %s = rfuse.matmul %q, %k {transpose_b = true} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  %e = rfuse.exp %s : tensor<2x8x8xf32>
  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p = rfuse.div %e, %sb : tensor<2x8x8xf32>
  %o = rfuse.matmul %p, %v : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>

  %s2 = rfuse.matmul %qn, %kn {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %w2 = rfuse.cast %s2 : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %e2 = rfuse.exp %w2 : tensor<2x8x8xf32>
  %sum2 = rfuse.reduce_sum %e2, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb2 = rfuse.broadcast_in_dim %sum2, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p2 = rfuse.div %e2, %sb2 : tensor<2x8x8xf32>
  %pn2 = rfuse.cast %p2 : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o2 = rfuse.matmul %pn2, %vn : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>

  %s3 = rfuse.matmul %q24, %k24 {transpose_b = true} : (tensor<2x8x24xbf16>, tensor<2x8x24xbf16>) -> tensor<2x8x8xbf16>
  %w3 = rfuse.cast %s3 : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %e3 = rfuse.exp %w3 : tensor<2x8x8xf32>
  %sum3 = rfuse.reduce_sum %e3, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb3 = rfuse.broadcast_in_dim %sum3, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p3 = rfuse.div %e3, %sb3 : tensor<2x8x8xf32>
  %pn3 = rfuse.cast %p3 : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o3 = rfuse.matmul %pn3, %v24 : (tensor<2x8x8xbf16>, tensor<2x8x24xbf16>) -> tensor<2x8x24xbf16>

  %s4 = rfuse.matmul %qn, %kn {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %w4 = rfuse.cast %s4 : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %e4 = rfuse.exp %w4 : tensor<2x8x8xf32>
  %sum4 = rfuse.reduce_sum %e4, dims = [1] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x1x8xf32>
  %sb4 = rfuse.broadcast_in_dim %sum4, dims = [0, 1, 2] : (tensor<2x1x8xf32>) -> tensor<2x8x8xf32>
  %p4 = rfuse.div %e4, %sb4 : tensor<2x8x8xf32>
  %pn4 = rfuse.cast %p4 : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o4 = rfuse.matmul %pn4, %vn : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %s5 = rfuse.matmul %qn, %kn {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %i5 = rfuse.cast %s5 : tensor<2x8x8xbf16> to tensor<2x8x8xi32>
  %w5 = rfuse.cast %i5 : tensor<2x8x8xi32> to tensor<2x8x8xf32>
  %e5 = rfuse.exp %w5 : tensor<2x8x8xf32>
  %sum5 = rfuse.reduce_sum %e5, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb5 = rfuse.broadcast_in_dim %sum5, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p5 = rfuse.div %e5, %sb5 : tensor<2x8x8xf32>
  %pn5 = rfuse.cast %p5 : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o5 = rfuse.matmul %pn5, %vn : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o, %o2, %p2, %o3, %o4, %o5 : tensor<2x8x16xf32>, tensor<2x8x16xbf16>, tensor<2x8x8xf32>, tensor<2x8x24xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>
}

// The gradient: the forward's op, delta from the widened cotangent and output, one backward op
// whose three results are the gradients.
// GRAD-LABEL: func.func @attention_loss_grad
// GRAD:       %[[O:.*]], %[[LSE:.*]] = rfuse.attention %arg0, %arg1, %arg2 scale = 2.500000e-01
// GRAD:       %[[D:.*]] = rfuse.reduce_sum %{{.*}}, dims = [2] : (tensor<2x24x16xf32>) -> tensor<2x24xf32>
// GRAD:       %[[GQ:.*]], %[[GK:.*]], %[[GV:.*]] = rfuse.attention_backward %arg0, %arg1, %arg2, %{{.*}}, %[[LSE]], %[[D]] scale = 2.500000e-01
// GRAD-NOT:   rfuse.exp
// GRAD:       return %{{.*}}, %[[GQ]], %[[GK]], %[[GV]]
func.func @attention_loss(%q: tensor<2x24x16xbf16>, %k: tensor<2x40x16xbf16>, %v: tensor<2x40x16xbf16>) -> tensor<1xf32> {
  %o = call @attention(%q, %k, %v) : (tensor<2x24x16xbf16>, tensor<2x40x16xbf16>, tensor<2x40x16xbf16>) -> tensor<2x24x16xbf16>
  %w = rfuse.cast %o : tensor<2x24x16xbf16> to tensor<2x24x16xf32>
  %sq = rfuse.mul %w, %w : tensor<2x24x16xf32>
  %l = rfuse.reduce_sum %sq, dims = [0, 1, 2] : (tensor<2x24x16xf32>) -> tensor<f32>
  %r = rfuse.reshape %l : (tensor<f32>) -> tensor<1xf32>
  return %r : tensor<1xf32>
}
