// rfuse-fuse-attention: softmax(q k^T / c) v of bfloat16 products, written op by op (the product
// widened to f32, each row's maximum subtracted, the probabilities rounded back), becomes one
// rfuse.attention; in R's layout too (transposes between the ops). What the GPU kernel does not
// take, or what reads the scores or probabilities elsewhere, stays as it is.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-fuse-attention),canonicalize)' | FileCheck %s
// And its gradient: one rfuse.attention_backward, from the forward's row log-sum-exp and
// delta = sum(g * out) over the head dim.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(inline,func.func(rfuse-fuse-attention),rfuse-autodiff{function=attention_loss wrt=0,1,2},canonicalize)' | FileCheck %s --check-prefix=GRAD
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(inline,func.func(rfuse-fuse-attention),rfuse-autodiff{function=masked_loss wrt=0,1,2},canonicalize)' | FileCheck %s --check-prefix=MGRAD

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

// Dropout on the probabilities as nnf_dropout traces it, in R's layout: the draws [S, L, B]
// (flat index b + 3 l + 24 s), kept where at least the threshold, times 1 / (1 - p). The op takes
// the seed, threshold, scale and the draws' strides along [B, L, S]; the draws are gone.
// CHECK-LABEL: func.func @attention_dropout
// CHECK-SAME:  (%[[Q:.*]]: tensor<3x8x32xf16>, %[[KT:.*]]: tensor<3x32x8xf16>, %[[V:.*]]: tensor<3x8x32xf16>, %[[SEED:.*]]: tensor<2xi32>)
// CHECK-NEXT:  %[[K:.*]] = rfuse.transpose %[[KT]], perm = [0, 2, 1]
// CHECK-NEXT:  %[[O:.*]], %{{.*}} = rfuse.attention %[[Q]], %[[K]], %[[V]] dropout %[[SEED]] scale = 1.250000e-01 {dropout_scale = 1.1111111640930176 : f64, dropout_strides = array<i64: 1, 3, 24>, dropout_threshold = 0.10000002384185791 : f64}
// CHECK-NOT:   rfuse.random_uniform
// CHECK-NEXT:  return %[[O]]
func.func @attention_dropout(%q: tensor<3x8x32xf16>, %kt: tensor<3x32x8xf16>, %v: tensor<3x8x32xf16>, %seed: tensor<2xi32>) -> tensor<3x8x32xf16> {
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
  %u = rfuse.random_uniform %seed : tensor<2xi32> -> tensor<8x8x3xf32>
  %t = rfuse.constant dense<0.100000024> : tensor<1xf32>
  %tb = rfuse.broadcast_in_dim %t, dims = [2] : (tensor<1xf32>) -> tensor<8x8x3xf32>
  %keep = rfuse.compare ge, %u, %tb : tensor<8x8x3xf32>
  %kf = rfuse.cast %keep : tensor<8x8x3xi1> to tensor<8x8x3xf32>
  %k1 = rfuse.constant dense<1.11111116> : tensor<1xf32>
  %k1b = rfuse.broadcast_in_dim %k1, dims = [2] : (tensor<1xf32>) -> tensor<8x8x3xf32>
  %factor = rfuse.mul %kf, %k1b : tensor<8x8x3xf32>
  %pd = rfuse.mul %p, %factor : tensor<8x8x3xf32>
  %pt = rfuse.transpose %pd, perm = [2, 1, 0] : (tensor<8x8x3xf32>) -> tensor<3x8x8xf32>
  %pn = rfuse.cast %pt : tensor<3x8x8xf32> to tensor<3x8x8xf16>
  %o = rfuse.matmul %pn, %v : (tensor<3x8x8xf16>, tensor<3x8x32xf16>) -> tensor<3x8x32xf16>
  return %o : tensor<3x8x32xf16>
}

// Dropout whose draws something else reads too (here returned): the pattern is not taken.
// CHECK-LABEL: func.func @dropout_draws_read_elsewhere
// CHECK-NOT:   rfuse.attention
// CHECK:       return
func.func @dropout_draws_read_elsewhere(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xbf16>, %v: tensor<2x8x16xbf16>, %seed: tensor<2xi32>) -> (tensor<2x8x16xbf16>, tensor<2x8x8xf32>) {
  %s = rfuse.matmul %q, %k {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %w = rfuse.cast %s : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %e = rfuse.exp %w : tensor<2x8x8xf32>
  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p = rfuse.div %e, %sb : tensor<2x8x8xf32>
  %u = rfuse.random_uniform %seed : tensor<2xi32> -> tensor<2x8x8xf32>
  %t = rfuse.constant dense<0.5> : tensor<2x8x8xf32>
  %keep = rfuse.compare ge, %u, %t : tensor<2x8x8xf32>
  %kf = rfuse.cast %keep : tensor<2x8x8xi1> to tensor<2x8x8xf32>
  %pd = rfuse.mul %p, %kf : tensor<2x8x8xf32>
  %pn = rfuse.cast %pd : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o = rfuse.matmul %pn, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o, %u : tensor<2x8x16xbf16>, tensor<2x8x8xf32>
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

// Masks (torch's attn_mask, key_padding_mask, is_causal): masked_fill(scores, mask, -inf) after
// the scale. A constant mask that masks every score above the diagonal becomes `causal` (the
// kernel skips those tiles), and no mask operand when nothing else is masked.
// CHECK-LABEL: func.func @causal
// CHECK-NOT:   rfuse.select
// CHECK:       rfuse.attention %arg0, %arg1, %arg2 scale = 2.500000e-01 causal :
// CHECK-SAME:  (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) ->
// CHECK-NOT:   rfuse.select
func.func @causal(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xbf16>, %v: tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16> {
  %s = rfuse.matmul %q, %k {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %w = rfuse.cast %s : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %c = rfuse.constant dense<4.0> : tensor<2x8x8xf32>
  %z0 = rfuse.div %w, %c : tensor<2x8x8xf32>
  %m = rfuse.constant dense<[[[false, true, true, true, true, true, true, true], [false, false, true, true, true, true, true, true], [false, false, false, true, true, true, true, true], [false, false, false, false, true, true, true, true], [false, false, false, false, false, true, true, true], [false, false, false, false, false, false, true, true], [false, false, false, false, false, false, false, true], [false, false, false, false, false, false, false, false]], [[false, true, true, true, true, true, true, true], [false, false, true, true, true, true, true, true], [false, false, false, true, true, true, true, true], [false, false, false, false, true, true, true, true], [false, false, false, false, false, true, true, true], [false, false, false, false, false, false, true, true], [false, false, false, false, false, false, false, true], [false, false, false, false, false, false, false, false]]]> : tensor<2x8x8xi1>
  %ninf = rfuse.constant dense<0xFF800000> : tensor<2x8x8xf32>
  %z = rfuse.select %m, %ninf, %z0 : tensor<2x8x8xi1>, tensor<2x8x8xf32>
  %mx = rfuse.reduce_max %z, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %ms = rfuse.stop_gradient %mx : tensor<2x8x1xf32>
  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %zm = rfuse.sub %z, %mb : tensor<2x8x8xf32>
  %e = rfuse.exp %zm : tensor<2x8x8xf32>
  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p = rfuse.div %e, %sb : tensor<2x8x8xf32>
  %pn = rfuse.cast %p : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o = rfuse.matmul %pn, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o : tensor<2x8x16xbf16>
}

// A float mask of 0 and -inf added to the scores (nn_transformer's square subsequent mask, here
// [L, S] spread over the batch) is a mask too.
// CHECK-LABEL: func.func @causal_float_mask
// CHECK:       rfuse.attention %arg0, %arg1, %arg2 scale = 2.500000e-01 causal :
// CHECK-NOT:   rfuse.add
func.func @causal_float_mask(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xbf16>, %v: tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16> {
  %s = rfuse.matmul %q, %k {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %w = rfuse.cast %s : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %c = rfuse.constant dense<4.0> : tensor<2x8x8xf32>
  %z0 = rfuse.div %w, %c : tensor<2x8x8xf32>
  %f = rfuse.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<8x8xf32>
  %fb = rfuse.broadcast_in_dim %f, dims = [1, 2] : (tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %z = rfuse.add %z0, %fb : tensor<2x8x8xf32>
  %mx = rfuse.reduce_max %z, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %ms = rfuse.stop_gradient %mx : tensor<2x8x1xf32>
  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %zm = rfuse.sub %z, %mb : tensor<2x8x8xf32>
  %e = rfuse.exp %zm : tensor<2x8x8xf32>
  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p = rfuse.div %e, %sb : tensor<2x8x8xf32>
  %pn = rfuse.cast %p : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o = rfuse.matmul %pn, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o : tensor<2x8x16xbf16>
}

// R's layout (the scores transposed to [S, L, B]), a causal attn_mask and a key_padding_mask
// (batch 1's keys 6 and 7) as one constant: `causal` and a [B, 1, S] mask for the padding.
// CHECK-LABEL: func.func @causal_and_padding_r_layout
// CHECK:       %[[PAD:.*]] = rfuse.constant dense<{{\[\[\[}}false, false, false, false, false, false, false, false]], {{\[\[}}false, false, false, false, false, false, true, true]]]> : tensor<2x1x8xi1>
// CHECK:       rfuse.attention %arg0, %{{.*}}, %arg2 mask %[[PAD]] scale = 2.500000e-01 causal
func.func @causal_and_padding_r_layout(%q: tensor<2x8x16xbf16>, %kt: tensor<2x16x8xbf16>, %v: tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16> {
  %s = rfuse.matmul %q, %kt : (tensor<2x8x16xbf16>, tensor<2x16x8xbf16>) -> tensor<2x8x8xbf16>
  %st = rfuse.transpose %s, perm = [2, 1, 0] : (tensor<2x8x8xbf16>) -> tensor<8x8x2xbf16>
  %w = rfuse.cast %st : tensor<8x8x2xbf16> to tensor<8x8x2xf32>
  %c = rfuse.constant dense<4.0> : tensor<1xf32>
  %cb = rfuse.broadcast_in_dim %c, dims = [2] : (tensor<1xf32>) -> tensor<8x8x2xf32>
  %z0 = rfuse.div %w, %cb : tensor<8x8x2xf32>
  %m = rfuse.constant dense<[[[false, false], [false, false], [false, false], [false, false], [false, false], [false, false], [false, false], [false, false]], [[true, true], [false, false], [false, false], [false, false], [false, false], [false, false], [false, false], [false, false]], [[true, true], [true, true], [false, false], [false, false], [false, false], [false, false], [false, false], [false, false]], [[true, true], [true, true], [true, true], [false, false], [false, false], [false, false], [false, false], [false, false]], [[true, true], [true, true], [true, true], [true, true], [false, false], [false, false], [false, false], [false, false]], [[true, true], [true, true], [true, true], [true, true], [true, true], [false, false], [false, false], [false, false]], [[true, true], [true, true], [true, true], [true, true], [true, true], [true, true], [false, true], [false, true]], [[true, true], [true, true], [true, true], [true, true], [true, true], [true, true], [true, true], [false, true]]]> : tensor<8x8x2xi1>
  %ninf = rfuse.constant dense<0xFF800000> : tensor<1xf32>
  %nb = rfuse.broadcast_in_dim %ninf, dims = [2] : (tensor<1xf32>) -> tensor<8x8x2xf32>
  %z = rfuse.select %m, %nb, %z0 : tensor<8x8x2xi1>, tensor<8x8x2xf32>
  %mx = rfuse.reduce_max %z, dims = [0] {keep_dims = true} : (tensor<8x8x2xf32>) -> tensor<1x8x2xf32>
  %ms = rfuse.stop_gradient %mx : tensor<1x8x2xf32>
  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (tensor<1x8x2xf32>) -> tensor<8x8x2xf32>
  %zm = rfuse.sub %z, %mb : tensor<8x8x2xf32>
  %e = rfuse.exp %zm : tensor<8x8x2xf32>
  %sum = rfuse.reduce_sum %e, dims = [0] {keep_dims = true} : (tensor<8x8x2xf32>) -> tensor<1x8x2xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<1x8x2xf32>) -> tensor<8x8x2xf32>
  %p = rfuse.div %e, %sb : tensor<8x8x2xf32>
  %pt = rfuse.transpose %p, perm = [2, 1, 0] : (tensor<8x8x2xf32>) -> tensor<2x8x8xf32>
  %pn = rfuse.cast %pt : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o = rfuse.matmul %pn, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o : tensor<2x8x16xbf16>
}

// Masks known at run time: moved to [B, L, S], negated where they mark what is kept
// (select(keep, x, -inf)), or-ed together. A finite fill (masked_fill(scores, mask, -1e9) before
// a scale of 1/4) is the op's mask_value, scaled.
// CHECK-LABEL: func.func @runtime_masks
// CHECK-SAME:  (%{{.*}}: tensor<2x8x16xbf16>, %{{.*}}: tensor<2x8x16xbf16>, %{{.*}}: tensor<2x8x16xbf16>, %[[M:.*]]: tensor<2x8x8xi1>, %[[KEEP:.*]]: tensor<2x8x8xi1>)
// CHECK:       %[[NOT:.*]] = rfuse.not %[[KEEP]]
// CHECK:       %[[OR:.*]] = rfuse.or %[[NOT]], %[[M]]
// CHECK:       rfuse.attention %arg0, %arg1, %arg2 mask %[[OR]] scale = 2.500000e-01 {mask_value = -2.500000e+08 : f64}
func.func @runtime_masks(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xbf16>, %v: tensor<2x8x16xbf16>, %m: tensor<2x8x8xi1>, %keep: tensor<2x8x8xi1>) -> tensor<2x8x16xbf16> {
  %s = rfuse.matmul %q, %k {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %w = rfuse.cast %s : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %big = rfuse.constant dense<-1.0e9> : tensor<2x8x8xf32>
  %z1 = rfuse.select %m, %big, %w : tensor<2x8x8xi1>, tensor<2x8x8xf32>
  %z2 = rfuse.select %keep, %z1, %big : tensor<2x8x8xi1>, tensor<2x8x8xf32>
  %c = rfuse.constant dense<4.0> : tensor<2x8x8xf32>
  %z = rfuse.div %z2, %c : tensor<2x8x8xf32>
  %mx = rfuse.reduce_max %z, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %ms = rfuse.stop_gradient %mx : tensor<2x8x1xf32>
  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %zm = rfuse.sub %z, %mb : tensor<2x8x8xf32>
  %e = rfuse.exp %zm : tensor<2x8x8xf32>
  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p = rfuse.div %e, %sb : tensor<2x8x8xf32>
  %pn = rfuse.cast %p : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o = rfuse.matmul %pn, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o : tensor<2x8x16xbf16>
}

// Not fused: an added constant other than 0 / -inf (a bias, not a mask); masks filling
// different values; a negative scale after the mask (its -inf would become +inf).
// CHECK-LABEL: func.func @biased
// CHECK-NOT:   rfuse.attention
// CHECK:       return
func.func @biased(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xbf16>, %v: tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16> {
  %s = rfuse.matmul %q, %k {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %w = rfuse.cast %s : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %c = rfuse.constant dense<4.0> : tensor<2x8x8xf32>
  %z0 = rfuse.div %w, %c : tensor<2x8x8xf32>
  %f = rfuse.constant dense<0.5> : tensor<2x8x8xf32>
  %z = rfuse.add %z0, %f : tensor<2x8x8xf32>
  %mx = rfuse.reduce_max %z, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %ms = rfuse.stop_gradient %mx : tensor<2x8x1xf32>
  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %zm = rfuse.sub %z, %mb : tensor<2x8x8xf32>
  %e = rfuse.exp %zm : tensor<2x8x8xf32>
  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p = rfuse.div %e, %sb : tensor<2x8x8xf32>
  %pn = rfuse.cast %p : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o = rfuse.matmul %pn, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o : tensor<2x8x16xbf16>
}
// CHECK-LABEL: func.func @two_fills
// CHECK-NOT:   rfuse.attention
// CHECK:       return
func.func @two_fills(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xbf16>, %v: tensor<2x8x16xbf16>, %m: tensor<2x8x8xi1>, %m2: tensor<2x8x8xi1>) -> tensor<2x8x16xbf16> {
  %s = rfuse.matmul %q, %k {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %w = rfuse.cast %s : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %c = rfuse.constant dense<4.0> : tensor<2x8x8xf32>
  %z0 = rfuse.div %w, %c : tensor<2x8x8xf32>
  %ninf = rfuse.constant dense<0xFF800000> : tensor<2x8x8xf32>
  %big = rfuse.constant dense<-1.0e9> : tensor<2x8x8xf32>
  %z1 = rfuse.select %m, %ninf, %z0 : tensor<2x8x8xi1>, tensor<2x8x8xf32>
  %z = rfuse.select %m2, %big, %z1 : tensor<2x8x8xi1>, tensor<2x8x8xf32>
  %mx = rfuse.reduce_max %z, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %ms = rfuse.stop_gradient %mx : tensor<2x8x1xf32>
  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %zm = rfuse.sub %z, %mb : tensor<2x8x8xf32>
  %e = rfuse.exp %zm : tensor<2x8x8xf32>
  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p = rfuse.div %e, %sb : tensor<2x8x8xf32>
  %pn = rfuse.cast %p : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o = rfuse.matmul %pn, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o : tensor<2x8x16xbf16>
}
// CHECK-LABEL: func.func @negative_scale
// CHECK-NOT:   rfuse.attention
// CHECK:       return
func.func @negative_scale(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xbf16>, %v: tensor<2x8x16xbf16>, %m: tensor<2x8x8xi1>) -> tensor<2x8x16xbf16> {
  %s = rfuse.matmul %q, %k {transpose_b = true} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x8xbf16>
  %w = rfuse.cast %s : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %ninf = rfuse.constant dense<0xFF800000> : tensor<2x8x8xf32>
  %z1 = rfuse.select %m, %ninf, %w : tensor<2x8x8xi1>, tensor<2x8x8xf32>
  %c = rfuse.constant dense<-4.0> : tensor<2x8x8xf32>
  %z = rfuse.div %z1, %c : tensor<2x8x8xf32>
  %mx = rfuse.reduce_max %z, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %ms = rfuse.stop_gradient %mx : tensor<2x8x1xf32>
  %mb = rfuse.broadcast_in_dim %ms, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %zm = rfuse.sub %z, %mb : tensor<2x8x8xf32>
  %e = rfuse.exp %zm : tensor<2x8x8xf32>
  %sum = rfuse.reduce_sum %e, dims = [2] {keep_dims = true} : (tensor<2x8x8xf32>) -> tensor<2x8x1xf32>
  %sb = rfuse.broadcast_in_dim %sum, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
  %p = rfuse.div %e, %sb : tensor<2x8x8xf32>
  %pn = rfuse.cast %p : tensor<2x8x8xf32> to tensor<2x8x8xbf16>
  %o = rfuse.matmul %pn, %v : (tensor<2x8x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  return %o : tensor<2x8x16xbf16>
}

// The masked gradient: the backward op takes the forward's mask and causal.
// MGRAD-LABEL: func.func @masked_loss_grad
// MGRAD:       %[[O:.*]], %[[LSE:.*]] = rfuse.attention %arg0, %{{.*}}, %arg2 mask %[[PAD:.*]] scale = 2.500000e-01 causal
// MGRAD:       rfuse.attention_backward %arg0, %{{.*}}, %arg2, %{{.*}}, %[[LSE]], %{{.*}} mask %[[PAD]] scale = 2.500000e-01 causal
// MGRAD-NOT:   rfuse.exp
// MGRAD:       return
func.func @masked_loss(%q: tensor<2x8x16xbf16>, %kt: tensor<2x16x8xbf16>, %v: tensor<2x8x16xbf16>) -> tensor<1xf32> {
  %o = call @causal_and_padding_r_layout(%q, %kt, %v) : (tensor<2x8x16xbf16>, tensor<2x16x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
  %w = rfuse.cast %o : tensor<2x8x16xbf16> to tensor<2x8x16xf32>
  %sq = rfuse.mul %w, %w : tensor<2x8x16xf32>
  %l = rfuse.reduce_sum %sq, dims = [0, 1, 2] : (tensor<2x8x16xf32>) -> tensor<f32>
  %r = rfuse.reshape %l : (tensor<f32>) -> tensor<1xf32>
  return %r : tensor<1xf32>
}
