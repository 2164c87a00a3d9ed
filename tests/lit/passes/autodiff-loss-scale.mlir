// rfuse-autodiff's loss-scale (float16 mixed precision's dynamic loss scaling): the scale and its
// growth count are the last two arguments (after the momentum buffers and the learning rate);
// the backward pass starts from the scale, the gradient is divided by it, a finiteness flag
// (sum(g * 0) == 0) selects between the update and the old parameter and buffer, and the new
// scale (x2 after the growth interval, /2 after a step that is not finite) and count come last.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{wrt=1 optimizer=sgd momentum=0.9 lr-input=true loss-scale=true loss-scale-growth-interval=4})' | FileCheck %s
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{wrt=1 optimizer=adam loss-scale=true})' | FileCheck %s --check-prefix=ADAM
// RUN: not rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{wrt=1 loss-scale=true})' 2>&1 | FileCheck %s --check-prefix=NONE

// CHECK-LABEL: func.func @main_grad
// CHECK-SAME: (%arg0: tensor<4x3xf32>, %arg1: tensor<3x2xf32>, %arg2: tensor<3x2xf32>, %arg3: tensor<1xf32>, %arg4: tensor<1xf32>, %arg5: tensor<1xf32>)
// CHECK-SAME: -> (tensor<f32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<1xf32>, tensor<1xf32>)
// CHECK:      %[[S:.*]] = rfuse.reshape %arg4 : (tensor<1xf32>) -> tensor<f32>
// CHECK:      %[[SEED:.*]] = rfuse.broadcast_in_dim %[[S]], dims = []
// CHECK:      %[[G:.*]] = rfuse.matmul %arg0, %{{.*}} {transpose_a = true}
// CHECK:      %[[INV:.*]] = rfuse.div %{{.*}}, %[[S]] : tensor<f32>
// CHECK:      %[[U:.*]] = rfuse.mul %[[G]], %{{.*}} : tensor<3x2xf32>
// CHECK:      %[[Z:.*]] = rfuse.reduce_sum %{{.*}}, dims = [0, 1]
// CHECK:      %[[OK:.*]] = rfuse.compare  eq, %[[Z]], %{{.*}} : tensor<f32>
// CHECK:      %[[V:.*]] = rfuse.add %{{.*}}, %[[U]] : tensor<3x2xf32>
// CHECK:      %[[W:.*]] = rfuse.sub %arg1, %{{.*}} : tensor<3x2xf32>
// CHECK:      rfuse.select %{{.*}}, %[[W]], %arg1 : tensor<3x2xi1>, tensor<3x2xf32>
// CHECK:      rfuse.select %{{.*}}, %[[V]], %arg2 : tensor<3x2xi1>, tensor<3x2xf32>
// CHECK:      rfuse.reshape %arg5 : (tensor<1xf32>) -> tensor<f32>
// CHECK:      rfuse.constant dense<4.000000e+00>
// CHECK:      %[[FULL:.*]] = rfuse.compare  ge
// CHECK:      %[[KEPT:.*]] = rfuse.select %[[FULL]], %{{.*}}, %[[S]] : tensor<i1>, tensor<f32>
// CHECK:      rfuse.select %[[OK]], %[[KEPT]], %{{.*}} : tensor<i1>, tensor<f32>
// CHECK:      return
// Adam: its step-number argument (%arg4) is the count of steps taken; t is one more; the new
// count (+1 only when finite) is the last result, after the scale and its growth count.
// ADAM-LABEL: func.func @main_grad
// ADAM-SAME: (%arg0: tensor<4x3xf32>, %arg1: tensor<3x2xf32>, %arg2: tensor<3x2xf32>, %arg3: tensor<3x2xf32>, %arg4: tensor<1xf32>, %arg5: tensor<1xf32>, %arg6: tensor<1xf32>)
// ADAM-SAME: -> (tensor<f32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>)
// ADAM:      %[[C:.*]] = rfuse.reshape %arg4 : (tensor<1xf32>) -> tensor<f32>
// ADAM:      rfuse.add %[[C]], %{{.*}} : tensor<f32>
// ADAM:      rfuse.select %{{.*}} : tensor<3x2xi1>, tensor<3x2xf32>
// ADAM:      %[[TAKEN:.*]] = rfuse.add %[[C]], %{{.*}} : tensor<f32>
// ADAM:      %[[COUNT:.*]] = rfuse.select %{{.*}}, %[[TAKEN]], %[[C]] : tensor<i1>, tensor<f32>
// ADAM:      %[[LAST:.*]] = rfuse.reshape %[[COUNT]] : (tensor<f32>) -> tensor<1xf32>
// ADAM:      return {{.*}}, %[[LAST]] :
// NONE: rfuse-autodiff: loss-scale needs an optimizer (sgd, adam, adamw), not 'none'
func.func @main(%x: tensor<4x3xf32>, %w: tensor<3x2xf32>) -> tensor<f32> {
  %m = rfuse.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %s = rfuse.reduce_sum %m, dims = [0, 1] : (tensor<4x2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
