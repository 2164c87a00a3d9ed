// rfuse-channels-last: convolutions and pooling reading R's layout (a transpose into NCHW) run in
// NHWC, and the layout transposes move down through pointwise ops, broadcasts of per-channel
// values and reductions until they cancel; NCHW programs that take NCHW tensors stay as they are.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-channels-last,cse))' -split-input-file | FileCheck %s

// A conv + batch-norm-like + relu + pool, as R traces it: R's array [W, H, C, N] transposed to
// NCHW and back around each library op. After the pass: one transpose of the input to NHWC, the
// filter to OHWI, everything else in NHWC (the reductions over N, H, W and the per-channel
// broadcast along C), one transpose back to R's layout at the end.
// CHECK-LABEL: func.func @conv_bn_relu_pool
// CHECK:      %[[X:.*]] = rfuse.transpose %arg0, perm = [3, 1, 0, 2] : (tensor<5x5x3x2xf32>) -> tensor<2x5x5x3xf32>
// CHECK:      %[[W:.*]] = rfuse.transpose %arg1, perm = [0, 2, 3, 1] : (tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf32>
// CHECK:      %[[C:.*]] = rfuse.conv2d %[[X]], %[[W]] {{.*}}layout = #rfuse.layout<NHWC>{{.*}} -> tensor<2x5x5x4xf32>
// CHECK-NEXT: %[[M:.*]] = rfuse.reduce_mean %[[C]], dims = [0, 1, 2] : (tensor<2x5x5x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = rfuse.broadcast_in_dim %[[M]], dims = [3] : (tensor<4xf32>) -> tensor<2x5x5x4xf32>
// CHECK-NEXT: %[[S:.*]] = rfuse.sub %[[C]], %[[B]] : tensor<2x5x5x4xf32>
// CHECK-NEXT: %[[P:.*]] = rfuse.mul %[[S]], %{{.*}} : tensor<2x5x5x4xf32>
// CHECK-NEXT: %[[R:.*]] = rfuse.relu %[[P]] : tensor<2x5x5x4xf32>
// CHECK-NEXT: %[[Q:.*]] = rfuse.max_pool2d %[[R]] {{.*}}layout = #rfuse.layout<NHWC>{{.*}} -> tensor<2x5x5x4xf32>
// CHECK-NEXT: %[[T:.*]] = rfuse.transpose %[[Q]], perm = [2, 1, 3, 0] : (tensor<2x5x5x4xf32>) -> tensor<5x5x4x2xf32>
// CHECK-NEXT: return %[[T]], %[[M]]
// CHECK-NOT:  rfuse.transpose
func.func @conv_bn_relu_pool(%arg0: tensor<5x5x3x2xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<5x5x4x2xf32>, tensor<4xf32>) {
  %0 = rfuse.transpose %arg0, perm = [3, 2, 1, 0] : (tensor<5x5x3x2xf32>) -> tensor<2x3x5x5xf32>
  %1 = rfuse.conv2d %0, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x5x5xf32>
  %2 = rfuse.transpose %1, perm = [3, 2, 1, 0] : (tensor<2x4x5x5xf32>) -> tensor<5x5x4x2xf32>
  %3 = rfuse.reduce_mean %2, dims = [0, 1, 3] : (tensor<5x5x4x2xf32>) -> tensor<4xf32>
  %4 = rfuse.broadcast_in_dim %3, dims = [2] : (tensor<4xf32>) -> tensor<5x5x4x2xf32>
  %5 = rfuse.sub %2, %4 : tensor<5x5x4x2xf32>
  %c = rfuse.constant dense<2.0> : tensor<5x5x4x2xf32>
  %6 = rfuse.mul %5, %c : tensor<5x5x4x2xf32>
  %7 = rfuse.relu %6 : tensor<5x5x4x2xf32>
  %8 = rfuse.transpose %7, perm = [3, 2, 1, 0] : (tensor<5x5x4x2xf32>) -> tensor<2x4x5x5xf32>
  %9 = rfuse.max_pool2d %8 {kernel = array<i64: 1, 1>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
  %10 = rfuse.transpose %9, perm = [3, 2, 1, 0] : (tensor<2x4x5x5xf32>) -> tensor<5x5x4x2xf32>
  return %10, %3 : tensor<5x5x4x2xf32>, tensor<4xf32>
}

// -----

// The gradients of a convolution (what rfuse-autodiff emits) move the same way: a backward-input
// and a backward-filter call reading transposed values run in NHWC; the filter gradient goes back
// to OIHW with one transpose. A reduction that keeps its dimensions keeps the transpose after it;
// one that leaves two dimensions out of order gets a transpose of its result.
// CHECK-LABEL: func.func @conv_grads
// CHECK-DAG:  rfuse.conv2d_backward_input {{.*}}layout = #rfuse.layout<NHWC>{{.*}} -> tensor<2x5x5x3xf32>
// CHECK-DAG:  %[[F:.*]] = rfuse.conv2d_backward_filter {{.*}}layout = #rfuse.layout<NHWC>{{.*}} -> tensor<4x3x3x3xf32>
// CHECK-DAG:  rfuse.transpose %[[F]], perm = [0, 3, 1, 2] : (tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xf32>
// CHECK-DAG:  %[[K:.*]] = rfuse.reduce_sum %{{.*}}, dims = [2] {keep_dims = true} : (tensor<2x5x5x3xf32>) -> tensor<2x5x1x3xf32>
// CHECK-DAG:  rfuse.transpose %[[K]], perm = [2, 1, 3, 0]
// CHECK-DAG:  %[[L:.*]] = rfuse.reduce_max %{{.*}}, dims = [1] : (tensor<2x5x5x3xf32>) -> tensor<2x5x3xf32>
// CHECK-DAG:  rfuse.transpose %[[L]], perm = [1, 2, 0] : (tensor<2x5x3xf32>) -> tensor<5x3x2xf32>
func.func @conv_grads(%x: tensor<5x5x3x2xf32>, %g: tensor<5x5x4x2xf32>, %w: tensor<4x3x3x3xf32>)
    -> (tensor<5x5x3x2xf32>, tensor<4x3x3x3xf32>, tensor<1x5x3x2xf32>, tensor<5x3x2xf32>) {
  %xt = rfuse.transpose %x, perm = [3, 2, 1, 0] : (tensor<5x5x3x2xf32>) -> tensor<2x3x5x5xf32>
  %gt = rfuse.transpose %g, perm = [3, 2, 1, 0] : (tensor<5x5x4x2xf32>) -> tensor<2x4x5x5xf32>
  %dx = rfuse.conv2d_backward_input %gt, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x5x5xf32>
  %dw = rfuse.conv2d_backward_filter %xt, %gt {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<4x3x3x3xf32>
  %r = rfuse.transpose %dx, perm = [3, 2, 1, 0] : (tensor<2x3x5x5xf32>) -> tensor<5x5x3x2xf32>
  %e = rfuse.exp %r : tensor<5x5x3x2xf32>
  %k = rfuse.reduce_sum %e, dims = [0] {keep_dims = true} : (tensor<5x5x3x2xf32>) -> tensor<1x5x3x2xf32>
  %m = rfuse.reduce_max %r, dims = [1] : (tensor<5x5x3x2xf32>) -> tensor<5x3x2xf32>
  return %r, %dw, %k, %m : tensor<5x5x3x2xf32>, tensor<4x3x3x3xf32>, tensor<1x5x3x2xf32>, tensor<5x3x2xf32>
}

// -----

// A program that takes NCHW tensors as they are keeps them (no transposes added), and a
// program without convolutions is not touched at all (its 2-d transposes stay where they are).
// CHECK-LABEL: func.func @nchw_inputs
// CHECK-NOT:  rfuse.transpose
// CHECK:      rfuse.conv2d {{.*}}layout = #rfuse.layout<NCHW>
// CHECK-LABEL: func.func @no_conv
// CHECK:      %[[T:.*]] = rfuse.transpose %arg0
// CHECK-NEXT: rfuse.exp %[[T]]
func.func @nchw_inputs(%x: tensor<2x3x5x5xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x5x5xf32> {
  %0 = rfuse.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x5x5xf32>
  return %0 : tensor<2x4x5x5xf32>
}
func.func @no_conv(%x: tensor<3x4xf32>) -> tensor<4x3xf32> {
  %0 = rfuse.transpose %x, perm = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %1 = rfuse.exp %0 : tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}

// -----

// float64 stays NCHW: cuDNN has no NHWC double convolutions.
// CHECK-LABEL: func.func @f64_stays
// CHECK:      rfuse.conv2d {{.*}}layout = #rfuse.layout<NCHW>
func.func @f64_stays(%x: tensor<5x5x3x2xf64>, %w: tensor<4x3x3x3xf64>) -> tensor<2x4x5x5xf64> {
  %0 = rfuse.transpose %x, perm = [3, 2, 1, 0] : (tensor<5x5x3x2xf64>) -> tensor<2x3x5x5xf64>
  %1 = rfuse.conv2d %0, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x5x5xf64>, tensor<4x3x3x3xf64>) -> tensor<2x4x5x5xf64>
  return %1 : tensor<2x4x5x5xf64>
}

// -----

// A batch norm's backward as autodiff leaves it: the per-channel statistic kept as [1, 1, C, 1]
// in R's layout and scaled by a constant before it meets the transposed image. The scaled
// broadcast is rebuilt in NHWC (its unit dims dropped), so the whole chain and its reduction
// run in NHWC and only the input's and the filter's transposes are left.
// CHECK-LABEL: func.func @bn_backward_keepdims
// CHECK:      rfuse.transpose %arg0
// CHECK:      rfuse.transpose %arg2
// CHECK-NOT:  rfuse.transpose
// CHECK:      rfuse.reshape %arg1 : (tensor<1x1x4x1xf32>) -> tensor<4xf32>
// CHECK:      rfuse.broadcast_in_dim %{{.*}}, dims = [3] : (tensor<4xf32>) -> tensor<2x5x5x4xf32>
// CHECK:      rfuse.reduce_sum %{{.*}}, dims = [0, 1, 2] : (tensor<2x5x5x4xf32>) -> tensor<4xf32>
// CHECK-NOT:  rfuse.transpose
func.func @bn_backward_keepdims(%x: tensor<5x5x3x2xf32>, %s: tensor<1x1x4x1xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<4xf32> {
  %0 = rfuse.transpose %x, perm = [3, 2, 1, 0] : (tensor<5x5x3x2xf32>) -> tensor<2x3x5x5xf32>
  %1 = rfuse.conv2d %0, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x5x5xf32>
  %2 = rfuse.transpose %1, perm = [3, 2, 1, 0] : (tensor<2x4x5x5xf32>) -> tensor<5x5x4x2xf32>
  %b = rfuse.broadcast_in_dim %s, dims = [0, 1, 2, 3] : (tensor<1x1x4x1xf32>) -> tensor<5x5x4x2xf32>
  %c = rfuse.constant dense<0.5> : tensor<5x5x4x2xf32>
  %3 = rfuse.mul %b, %c : tensor<5x5x4x2xf32>
  %4 = rfuse.mul %3, %2 : tensor<5x5x4x2xf32>
  %5 = rfuse.reduce_sum %4, dims = [0, 1, 3] : (tensor<5x5x4x2xf32>) -> tensor<4xf32>
  return %5 : tensor<4xf32>
}
