// rfuse-split-reductions: a reduction over every dim becomes trailing-dim-first, then the rest;
// a leading-dim reduction with few outputs becomes [k, R/k, C] reduced in two stages; one over a
// leading dim and later ones reduces the later ones first. Means turn into sums scaled once;
// small reductions are left alone.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-split-reductions))' | FileCheck %s
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-split-reductions))' | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s

// CHECK-LABEL: func.func @loss
func.func @loss(%x: tensor<4096x1024xf32>) -> tensor<f32> {
  // CHECK: %[[R:.*]] = rfuse.reduce_sum %arg0, dims = [1] : (tensor<4096x1024xf32>) -> tensor<4096xf32>
  // CHECK: %[[S:.*]] = rfuse.reduce_sum %[[R]], dims = [0] : (tensor<4096xf32>) -> tensor<f32>
  // CHECK: %[[C:.*]] = rfuse.constant dense<2.38418579E-7> : tensor<f32>
  // CHECK: %[[M:.*]] = rfuse.mul %[[S]], %[[C]] : tensor<f32>
  // CHECK: return %[[M]]
  %m = rfuse.reduce_mean %x, dims = [0, 1] : (tensor<4096x1024xf32>) -> tensor<f32>
  return %m : tensor<f32>
}

// CHECK-LABEL: func.func @bias_grad
func.func @bias_grad(%g: tensor<4096x512xf32>) -> tensor<1x512xf32> {
  // 128 x 512 partials (as many as 262144 allows with >= 32 rows each), transposed, reduced by row.
  // CHECK: %[[G:.*]] = rfuse.reshape %arg0 : (tensor<4096x512xf32>) -> tensor<128x32x512xf32>
  // CHECK: %[[P:.*]] = rfuse.reduce_max %[[G]], dims = [1] : (tensor<128x32x512xf32>) -> tensor<128x512xf32>
  // CHECK: %[[T:.*]] = rfuse.transpose %[[P]], perm = [1, 0] : (tensor<128x512xf32>) -> tensor<512x128xf32>
  // CHECK: %[[Q:.*]] = rfuse.reduce_max %[[T]], dims = [1] : (tensor<512x128xf32>) -> tensor<512xf32>
  // CHECK: %[[K:.*]] = rfuse.reshape %[[Q]] : (tensor<512xf32>) -> tensor<1x512xf32>
  // CHECK: return %[[K]]
  %s = rfuse.reduce_max %g, dims = [0] {keep_dims = true} : (tensor<4096x512xf32>) -> tensor<1x512xf32>
  return %s : tensor<1x512xf32>
}

// A bias's gradient read in attention's head layout [B, H, T, D], summed over B and T: T first
// (B x H x D outputs in parallel), then B (32 rows: not split again).
// CHECK-LABEL: func.func @bias_grad_in_heads
func.func @bias_grad_in_heads(%g: tensor<32x8x256x64xf32>) -> tensor<8x64xf32> {
  // CHECK: %[[P:.*]] = rfuse.reduce_sum %arg0, dims = [2] : (tensor<32x8x256x64xf32>) -> tensor<32x8x64xf32>
  // CHECK: %[[S:.*]] = rfuse.reduce_sum %[[P]], dims = [0] : (tensor<32x8x64xf32>) -> tensor<8x64xf32>
  // CHECK: return %[[S]]
  %s = rfuse.reduce_sum %g, dims = [0, 2] : (tensor<32x8x256x64xf32>) -> tensor<8x64xf32>
  return %s : tensor<8x64xf32>
}

// The same over a long leading dim: its second stage is split as a leading-dim reduction.
// CHECK-LABEL: func.func @long_leading_then_later
func.func @long_leading_then_later(%g: tensor<8192x4x64x16xf32>) -> tensor<4x16xf32> {
  // CHECK: %[[P:.*]] = rfuse.reduce_sum %arg0, dims = [2] : (tensor<8192x4x64x16xf32>) -> tensor<8192x4x16xf32>
  // CHECK: rfuse.reshape %[[P]] : (tensor<8192x4x16xf32>) -> tensor<{{[0-9]+}}x{{[0-9]+}}x4x16xf32>
  // CHECK: rfuse.transpose
  // CHECK: return
  %s = rfuse.reduce_sum %g, dims = [0, 2] : (tensor<8192x4x64x16xf32>) -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// A batch norm's statistics in NHWC: 65536 rows, 64 channels -> 2048 groups of 32 rows.
// CHECK-LABEL: func.func @batch_norm_mean
func.func @batch_norm_mean(%x: tensor<256x16x16x64xf32>) -> tensor<1x1x1x64xf32> {
  // CHECK: %[[G:.*]] = rfuse.reshape %arg0 : (tensor<256x16x16x64xf32>) -> tensor<2048x32x64xf32>
  // CHECK: %[[P:.*]] = rfuse.reduce_sum %[[G]], dims = [1] : (tensor<2048x32x64xf32>) -> tensor<2048x64xf32>
  // CHECK: %[[T:.*]] = rfuse.transpose %[[P]], perm = [1, 0] : (tensor<2048x64xf32>) -> tensor<64x2048xf32>
  // CHECK: %[[S:.*]] = rfuse.reduce_sum %[[T]], dims = [1] : (tensor<64x2048xf32>) -> tensor<64xf32>
  // CHECK: rfuse.mul %[[S]]
  %m = rfuse.reduce_mean %x, dims = [0, 1, 2] {keep_dims = true} : (tensor<256x16x16x64xf32>) -> tensor<1x1x1x64xf32>
  return %m : tensor<1x1x1x64xf32>
}

// A layer norm over the rows of an R matrix (tensor dim 0): its input is read again with each
// mean (x - mean, then (x - mean) / sd), so neither reduction is split (one fused kernel keeps
// the input in shared memory); the same shape's plain column sum is split.
// CHECK-LABEL: func.func @layer_norm_columns
func.func @layer_norm_columns(%x: tensor<4096x8192xf32>) -> (tensor<4096x8192xf32>, tensor<8192xf32>) {
  // CHECK: %[[M:.*]] = rfuse.reduce_mean %arg0, dims = [0] : (tensor<4096x8192xf32>) -> tensor<8192xf32>
  // CHECK: rfuse.reduce_mean %{{.*}}, dims = [0] : (tensor<4096x8192xf32>) -> tensor<8192xf32>
  // CHECK: rfuse.reshape %arg0 : (tensor<4096x8192xf32>) -> tensor<32x128x8192xf32>
  %m = rfuse.reduce_mean %x, dims = [0] : (tensor<4096x8192xf32>) -> tensor<8192xf32>
  %mb = rfuse.broadcast_in_dim %m, dims = [1] : (tensor<8192xf32>) -> tensor<4096x8192xf32>
  %xc = rfuse.sub %x, %mb : tensor<4096x8192xf32>
  %sq = rfuse.mul %xc, %xc : tensor<4096x8192xf32>
  %v = rfuse.reduce_mean %sq, dims = [0] : (tensor<4096x8192xf32>) -> tensor<8192xf32>
  %sd = rfuse.sqrt %v : tensor<8192xf32>
  %sdb = rfuse.broadcast_in_dim %sd, dims = [1] : (tensor<8192xf32>) -> tensor<4096x8192xf32>
  %y = rfuse.div %xc, %sdb : tensor<4096x8192xf32>
  %s = rfuse.reduce_sum %x, dims = [0] : (tensor<4096x8192xf32>) -> tensor<8192xf32>
  return %y, %s : tensor<4096x8192xf32>, tensor<8192xf32>
}

// In f64 (not cached by codegen) the same layer norm's mean is split as before.
// CHECK-LABEL: func.func @layer_norm_columns_f64
// CHECK: rfuse.reshape %arg0 : (tensor<4096x8192xf64>) -> tensor<32x128x8192xf64>
func.func @layer_norm_columns_f64(%x: tensor<4096x8192xf64>) -> tensor<4096x8192xf64> {
  %m = rfuse.reduce_mean %x, dims = [0] : (tensor<4096x8192xf64>) -> tensor<8192xf64>
  %mb = rfuse.broadcast_in_dim %m, dims = [1] : (tensor<8192xf64>) -> tensor<4096x8192xf64>
  %xc = rfuse.sub %x, %mb : tensor<4096x8192xf64>
  return %xc : tensor<4096x8192xf64>
}

// CHECK-LABEL: func.func @small
func.func @small(%x: tensor<32x32xf32>, %y: tensor<4096x65536xf32>) -> (tensor<f32>, tensor<65536xf32>) {
  // Too few elements per output, and too many outputs: unchanged.
  // CHECK: rfuse.reduce_sum %arg0, dims = [0, 1] : (tensor<32x32xf32>) -> tensor<f32>
  // CHECK: rfuse.reduce_sum %arg1, dims = [0] : (tensor<4096x65536xf32>) -> tensor<65536xf32>
  %a = rfuse.reduce_sum %x, dims = [0, 1] : (tensor<32x32xf32>) -> tensor<f32>
  %b = rfuse.reduce_sum %y, dims = [0] : (tensor<4096x65536xf32>) -> tensor<65536xf32>
  return %a, %b : tensor<f32>, tensor<65536xf32>
}
