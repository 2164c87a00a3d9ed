// rfuse-autodiff adds @<f>_grad returning f's value and its gradients: each op's
// vector-Jacobian product in reverse order, cotangents of a value used twice summed, broadcasts
// summed back to the operand's shape. The forward ops are kept; @f itself is left alone.
// RUN: rfuse-opt %s --rfuse-autodiff | FileCheck %s
// wrt picks the arguments, in order; recompute-pointwise copies leaf pointwise ops into the
// backward pass.
// RUN: rfuse-opt %s --rfuse-autodiff='function=main wrt=1' | FileCheck %s --check-prefix=WRT
// RUN: rfuse-opt %s --rfuse-autodiff='function=leaf recompute-pointwise=true' | FileCheck %s --check-prefix=RECOMPUTE
// RUN: rfuse-opt %s --rfuse-autodiff='function=leaf' | FileCheck %s --check-prefix=SAVED
// The result verifies and round-trips.
// RUN: rfuse-opt %s --rfuse-autodiff | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s
// Errors name what cannot be differentiated.
// RUN: not rfuse-opt %s --rfuse-autodiff='function=vector' 2>&1 | FileCheck %s --check-prefix=NOTSCALAR
// RUN: not rfuse-opt %s --rfuse-autodiff='function=second_order' 2>&1 | FileCheck %s --check-prefix=NOVJP
// RUN: rfuse-opt %s --rfuse-autodiff='function=conv' | FileCheck %s --check-prefix=CONV
// RUN: not rfuse-opt %s --rfuse-autodiff='function=main wrt=2' 2>&1 | FileCheck %s --check-prefix=RANGE

// loss = sum(tanh(x * w) + x), differentiated by x and w.
func.func @main(%x: tensor<3xf32>, %w: tensor<3xf32>) -> tensor<f32> {
  %p = rfuse.mul %x, %w : tensor<3xf32>
  %t = rfuse.tanh %p : tensor<3xf32>
  %u = rfuse.add %t, %x : tensor<3xf32>
  %s = rfuse.reduce_sum %u, dims = [0] : (tensor<3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
// CHECK-LABEL: func.func @main(
// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<3xf32>, %[[W:[a-z0-9]+]]: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>)
// CHECK: %[[P:.*]] = rfuse.mul %[[X]], %[[W]]
// CHECK: %[[T:.*]] = rfuse.tanh %[[P]]
// CHECK: %[[S:.*]] = rfuse.reduce_sum
// The seed, expanded back over the reduced dim: d loss / d u.
// CHECK: %[[ONE:.*]] = rfuse.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[G1:.*]] = rfuse.reshape %[[ONE]] : (tensor<f32>) -> tensor<1xf32>
// CHECK: %[[GU:.*]] = rfuse.broadcast_in_dim %[[G1]], dims = [0] : (tensor<1xf32>) -> tensor<3xf32>
// tanh: g * (1 - t^2)
// CHECK: %[[TT:.*]] = rfuse.mul %[[T]], %[[T]]
// CHECK: %[[DT:.*]] = rfuse.sub %{{.*}}, %[[TT]]
// CHECK: %[[GP:.*]] = rfuse.mul %[[GU]], %[[DT]]
// mul: d/dx = g * w, d/dw = g * x; x's two uses are summed.
// CHECK: %[[GX1:.*]] = rfuse.mul %[[GP]], %[[W]]
// CHECK: %[[GW:.*]] = rfuse.mul %[[GP]], %[[X]]
// CHECK: %[[GX:.*]] = rfuse.add %[[GU]], %[[GX1]]
// CHECK: return %[[S]], %[[GX]], %[[GW]] : tensor<f32>, tensor<3xf32>, tensor<3xf32>

// WRT-LABEL: func.func @main_grad
// WRT-SAME: -> (tensor<f32>, tensor<3xf32>)

// Broadcasts sum back to the operand's shape.
// RUN: rfuse-opt %s --rfuse-autodiff='function=bias' | FileCheck %s --check-prefix=BIAS
// BIAS-LABEL: func.func @bias_grad
// BIAS: %[[G:.*]] = rfuse.mul %{{.*}}, %arg0 : tensor<2x3xf32>
// BIAS: %[[R:.*]] = rfuse.reduce_sum %[[G]], dims = [0] : (tensor<2x3xf32>) -> tensor<3xf32>
// BIAS: return %{{.*}}, %{{.*}}, %[[R]] : tensor<f32>, tensor<2x3xf32>, tensor<3xf32>
func.func @bias(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<f32> {
  %bb = rfuse.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
  %y = rfuse.mul %x, %bb : tensor<2x3xf32>
  %s = rfuse.reduce_sum %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// sum(exp(x) * w): d/dw = exp(x), a pointwise value of an argument alone.
func.func @leaf(%x: tensor<3xf32>, %w: tensor<3xf32>) -> tensor<f32> {
  %e = rfuse.exp %x : tensor<3xf32>
  %y = rfuse.mul %e, %w : tensor<3xf32>
  %s = rfuse.reduce_sum %y, dims = [0] : (tensor<3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
// A training step: with optimizer=sgd and momentum, a momentum buffer per wrt argument is a new
// trailing argument; the step returns the loss, the updated argument and the updated buffer.
// RUN: rfuse-opt %s --rfuse-autodiff='function=leaf wrt=1 optimizer=sgd lr=0.5 momentum=0.25' | FileCheck %s --check-prefix=SGD
// SGD-LABEL: func.func @leaf_grad
// SGD-SAME: (%[[X:[a-z0-9]+]]: tensor<3xf32>, %[[W:[a-z0-9]+]]: tensor<3xf32>, %[[V:[a-z0-9]+]]: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>)
// SGD: %[[MU:.*]] = rfuse.constant dense<2.500000e-01> : tensor<3xf32>
// SGD: %[[MV:.*]] = rfuse.mul %[[V]], %[[MU]]
// SGD: %[[NV:.*]] = rfuse.add %[[MV]], %{{.*}}
// SGD: %[[LR:.*]] = rfuse.constant dense<5.000000e-01> : tensor<3xf32>
// SGD: %[[STEP:.*]] = rfuse.mul %[[NV]], %[[LR]]
// SGD: %[[NW:.*]] = rfuse.sub %[[W]], %[[STEP]]
// SGD: return %{{.*}}, %[[NW]], %[[NV]]
// Saved: the backward reads the forward exp. Recomputed: it reads a copy made next to its use.
// SAVED-LABEL: func.func @leaf_grad
// SAVED: %[[E:.*]] = rfuse.exp %arg0
// SAVED-NOT: rfuse.exp
// SAVED: rfuse.mul %{{.*}}, %[[E]]
// RECOMPUTE-LABEL: func.func @leaf_grad
// RECOMPUTE: %[[E:.*]] = rfuse.exp %arg0
// RECOMPUTE: %[[E2:.*]] = rfuse.exp %arg0
// RECOMPUTE-NEXT: rfuse.mul %{{.*}}, %[[E2]]

func.func @vector(%x: tensor<3xf32>) -> tensor<3xf32> {
  %e = rfuse.exp %x : tensor<3xf32>
  return %e : tensor<3xf32>
}
// NOTSCALAR: the value to differentiate (result 0 of @vector) is 'tensor<3xf32>', not a one-element float tensor

// A convolution's gradient has no gradient of its own (no second derivatives of library ops).
func.func @second_order(%g: tensor<1x2x2x2xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<f32> {
  %d = rfuse.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x2x2x2xf32>, tensor<2x1x3x3xf32>) -> tensor<1x1x6x6xf32>
  %s = rfuse.reduce_sum %d, dims = [0, 1, 2, 3] : (tensor<1x1x6x6xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
// NOVJP: 'rfuse.conv2d_backward_input' op has no vector-Jacobian product

// RANGE: rfuse-autodiff: argument 2 is out of range (@main takes 2)

// A strided convolution and a pool differentiate into their gradient ops (cuDNN's backward calls
// on the GPU), each with the forward op's attributes.
func.func @conv(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<f32> {
  %y = rfuse.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  %p = rfuse.max_pool2d %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x2x2xf32>
  %s = rfuse.reduce_sum %p, dims = [0, 1, 2, 3] : (tensor<2x4x2x2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
// CONV-LABEL: func.func @conv_grad
// CONV-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x8x8xf32>, %[[W:[a-z0-9]+]]: tensor<4x3x3x3xf32>)
// CONV: %[[Y:.*]] = rfuse.conv2d %[[X]], %[[W]]
// CONV: %[[P:.*]] = rfuse.max_pool2d %[[Y]]
// CONV: %[[GY:.*]] = rfuse.max_pool2d_backward %[[Y]], %[[P]], %{{.*}} {{.*}} -> tensor<2x4x4x4xf32>
// CONV: %[[GX:.*]] = rfuse.conv2d_backward_input %[[GY]], %[[W]] {{.*}}strides = array<i64: 2, 2>{{.*}} -> tensor<2x3x8x8xf32>
// CONV: %[[GW:.*]] = rfuse.conv2d_backward_filter %[[X]], %[[GY]] {{.*}} -> tensor<4x3x3x3xf32>
// CONV: return %{{.*}}, %[[GX]], %[[GW]]

// Results after the first are auxiliary: returned last, after the updated state, and not
// differentiated (a batch norm's batch mean for its running average).
// RUN: rfuse-opt %s --rfuse-autodiff='function=with_aux optimizer=sgd lr=0.5' | FileCheck %s --check-prefix=AUX
func.func @with_aux(%x: tensor<4x3xf32>, %w: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %m = rfuse.reduce_mean %x, dims = [0] : (tensor<4x3xf32>) -> tensor<3xf32>
  %p = rfuse.mul %m, %w : tensor<3xf32>
  %s = rfuse.reduce_sum %p, dims = [0] : (tensor<3xf32>) -> tensor<f32>
  return %s, %m : tensor<f32>, tensor<3xf32>
}
// AUX-LABEL: func.func @with_aux_grad
// AUX-SAME: -> (tensor<f32>, tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>)
// AUX: %[[M:.*]] = rfuse.reduce_mean %arg0
// AUX: return %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>


// The gamma family: lgamma's product is digamma, digamma's trigamma; trigamma has none.
// RUN: rfuse-opt %s --rfuse-autodiff='function=gammas' | FileCheck %s --check-prefix=GAMMA
// RUN: not rfuse-opt %s --rfuse-autodiff='function=tetragamma' 2>&1 | FileCheck %s --check-prefix=TETRA
func.func @gammas(%x: tensor<4xf64>) -> tensor<f64> {
  %l = rfuse.lgamma %x : tensor<4xf64>
  %d = rfuse.digamma %l : tensor<4xf64>
  %s = rfuse.reduce_sum %d, dims = [0] : (tensor<4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}
// GAMMA-LABEL: func.func @gammas_grad
// GAMMA-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf64>)
// GAMMA: %[[L:.*]] = rfuse.lgamma %[[X]]
// GAMMA: %[[T:.*]] = rfuse.trigamma %[[L]]
// GAMMA: %[[G1:.*]] = rfuse.mul %{{.*}}, %[[T]]
// GAMMA: %[[D:.*]] = rfuse.digamma %[[X]]
// GAMMA: rfuse.mul %[[G1]], %[[D]]
func.func @tetragamma(%x: tensor<4xf64>) -> tensor<f64> {
  %t = rfuse.trigamma %x : tensor<4xf64>
  %s = rfuse.reduce_sum %t, dims = [0] : (tensor<4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}
// TETRA: 'rfuse.trigamma' op has no vector-Jacobian product (it needs the tetragamma function)

// solve: x · a = b; with G the solve of the transposed system (tolerance 0), db = G, da = -x^T G.
// RUN: rfuse-opt %s --rfuse-autodiff='function=linear_solve' | FileCheck %s --check-prefix=SOLVE
func.func @linear_solve(%a: tensor<3x3xf64>, %b: tensor<2x3xf64>) -> tensor<f64> {
  %x = rfuse.solve %a, %b tolerance = 2.2204460492503131E-16 : (tensor<3x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  %s = rfuse.reduce_sum %x, dims = [0, 1] : (tensor<2x3xf64>) -> tensor<f64>
  return %s : tensor<f64>
}
// SOLVE-LABEL: func.func @linear_solve_grad
// SOLVE-SAME: (%[[A:[a-z0-9]+]]: tensor<3x3xf64>, %[[B:[a-z0-9]+]]: tensor<2x3xf64>) -> (tensor<f64>, tensor<3x3xf64>, tensor<2x3xf64>)
// SOLVE: %[[X:.*]] = rfuse.solve %[[A]], %[[B]]
// SOLVE: %[[AT:.*]] = rfuse.transpose %[[A]]
// SOLVE: %[[G:.*]] = rfuse.solve %[[AT]], %{{.*}} tolerance = 0.000000e+00
// SOLVE: %[[XG:.*]] = rfuse.matmul %[[X]], %[[G]] {{.*}}transpose_a = true
// SOLVE: %[[DA:.*]] = rfuse.neg %[[XG]]
// SOLVE: return %{{.*}}, %[[DA]], %[[G]]
