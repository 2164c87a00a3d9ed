// rfuse-autodiff's gradient-all-reduce: each gradient is averaged over the ranks before the
// optimizer reads it (data-parallel training); without it there is no collective.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{function=loss optimizer=sgd lr=0.5 gradient-all-reduce=mean})' | FileCheck %s
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{function=loss optimizer=sgd lr=0.5})' | FileCheck %s --check-prefix=NONE
// RUN: not rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{function=loss gradient-all-reduce=max})' 2>&1 | FileCheck %s --check-prefix=BAD
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: (%[[W:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK-DAG: %[[GW:.*]] = rfuse.all_reduce %{{.*}} reduction = mean : tensor<4xf32>
// CHECK-DAG: %[[GB:.*]] = rfuse.all_reduce %{{.*}} reduction = mean : tensor<4xf32>
// CHECK: rfuse.mul %[[GW]]
// CHECK: rfuse.sub %[[W]]
// CHECK: return
// NONE-NOT: rfuse.all_reduce
// BAD: gradient-all-reduce is none, mean or sum, not 'max'
func.func @loss(%w: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<1xf32> {
  %p = rfuse.mul %w, %b : tensor<4xf32>
  %s = rfuse.reduce_sum %p, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  %o = rfuse.reshape %s : (tensor<f32>) -> tensor<1xf32>
  return %o : tensor<1xf32>
}
