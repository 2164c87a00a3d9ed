// rfuse-autodiff's gradient-all-reduce (data-parallel training). A gradient program and Adam
// average each gradient before using it; SGD, linear in the gradient, averages the updated
// parameters instead (the same trajectory; the update stays with the gradient), its momentum
// buffers not at all. Without the option there is no collective.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{function=loss gradient-all-reduce=mean})' | FileCheck %s --check-prefix=GRAD
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{function=loss optimizer=adam gradient-all-reduce=mean})' | FileCheck %s --check-prefix=ADAM
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{function=loss optimizer=sgd momentum=0.9 lr=0.5 gradient-all-reduce=mean})' | FileCheck %s --check-prefix=SGD
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{function=loss optimizer=sgd lr=0.5})' | FileCheck %s --check-prefix=NONE
// RUN: not rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{function=loss gradient-all-reduce=max})' 2>&1 | FileCheck %s --check-prefix=BAD
// GRAD-LABEL: func.func @loss_grad
// GRAD-COUNT-2: rfuse.all_reduce %{{.*}} reduction = mean : tensor<4xf32>
// GRAD: return
// ADAM-LABEL: func.func @loss_grad
// ADAM: %[[G:.*]] = rfuse.all_reduce %{{.*}} reduction = mean : tensor<4xf32>
// ADAM: rfuse.mul %[[G]]
// SGD-LABEL: func.func @loss_grad
// SGD-SAME: (%[[W:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>, %[[VW:.*]]: tensor<4xf32>, %[[VB:.*]]: tensor<4xf32>)
// SGD: %[[NW:.*]] = rfuse.sub %[[W]]
// SGD: %[[NB:.*]] = rfuse.sub %[[B]]
// SGD: %[[RW:.*]] = rfuse.all_reduce %[[NW]] reduction = mean
// SGD: %[[RB:.*]] = rfuse.all_reduce %[[NB]] reduction = mean
// SGD-NOT: rfuse.all_reduce
// SGD: return %{{.*}}, %[[RW]], %[[RB]], %{{.*}}, %{{.*}} :
// NONE-NOT: rfuse.all_reduce
// BAD: gradient-all-reduce is none, mean or sum, not 'max'
func.func @loss(%w: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<1xf32> {
  %p = rfuse.mul %w, %b : tensor<4xf32>
  %s = rfuse.reduce_sum %p, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  %o = rfuse.reshape %s : (tensor<f32>) -> tensor<1xf32>
  return %o : tensor<1xf32>
}
