// rfuse-autodiff's lr-input: the learning rate is the last argument (after the momentum
// buffers), broadcast into the update; no constant learning rate remains, so a schedule runs the
// same program.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-autodiff{function=lr_input wrt=0 optimizer=sgd momentum=0.9 lr=0.5 lr-input=true})' | FileCheck %s
// CHECK-LABEL: func.func @lr_input_grad
// CHECK-SAME: (%[[P:.*]]: tensor<4xf32>, %[[V:.*]]: tensor<4xf32>, %[[LR:.*]]: tensor<1xf32>)
// CHECK: rfuse.reshape %[[LR]]
// CHECK-NOT: 5.000000e-01
// CHECK: return
func.func @lr_input(%p: tensor<4xf32>) -> tensor<1xf32> {
  %s = rfuse.mul %p, %p : tensor<4xf32>
  %r = rfuse.reduce_sum %s, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  %o = rfuse.reshape %r : (tensor<f32>) -> tensor<1xf32>
  return %o : tensor<1xf32>
}
