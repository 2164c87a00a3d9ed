// rfuse.stop_gradient (torch's detach(), a softmax's maximum): rfuse-autodiff sends its operand
// no cotangent, and rfuse-drop-stop-gradients, first in every pipeline, replaces it by its
// operand. d/dx sum(x * detach(x)) = detach(x) = x: one product, not 2x.
// RUN: rfuse-opt %s --rfuse-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: rfuse-opt %s --rfuse-autodiff --rfuse-drop-stop-gradients | FileCheck %s --check-prefix=DROP

// GRAD-LABEL: func.func @main_grad
// GRAD:       %[[D:.*]] = rfuse.stop_gradient %arg0 : tensor<4xf32>
// GRAD:       %[[P:.*]] = rfuse.mul %arg0, %[[D]]
// GRAD:       rfuse.reduce_sum %[[P]]
// The cotangent of x is the broadcast seed times detach(x), once: no second term through %[[D]].
// GRAD:       %[[G:.*]] = rfuse.mul %{{.*}}, %[[D]] : tensor<4xf32>
// GRAD-NOT:   rfuse.add
// GRAD:       return %{{.*}}, %[[G]]

// DROP-NOT:   rfuse.stop_gradient
// DROP-LABEL: func.func @main_grad
// DROP:       rfuse.mul %arg0, %arg0
func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %d = rfuse.stop_gradient %x : tensor<4xf32>
  %p = rfuse.mul %x, %d : tensor<4xf32>
  %s = rfuse.reduce_sum %p, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
