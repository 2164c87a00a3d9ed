// rfuse.custom_vjp (torch's autograd_function): rfuse-autodiff calls the op's backward function
// on its residuals and its output's cotangent instead of differentiating the forward function;
// rfuse-expand-custom-vjp then makes the op a call of its forward function, which the inliner
// inlines (and the two functions, no longer named, go).
// RUN: rfuse-opt %s --rfuse-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: rfuse-opt %s --rfuse-autodiff --rfuse-expand-custom-vjp --inline | FileCheck %s --check-prefix=EXPANDED
// RUN: rfuse-opt %s --rfuse-autodiff | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s --check-prefix=GRAD

// GRAD-LABEL: func.func @main_grad
// GRAD: %[[R:.*]]:2 = rfuse.custom_vjp @exp_fwd, @exp_bwd(%arg0) {num_outputs = 1 : i64}
// The loss's cotangent, broadcast back over the sum, then the user's backward on the residual.
// GRAD: %[[G:.*]] = rfuse.broadcast_in_dim
// GRAD: %[[D:.*]] = call @exp_bwd(%[[R]]#1, %[[G]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// The integer argument gets no gradient.
// GRAD: return %{{.*}}, %[[D]] : tensor<1xf32>, tensor<4xf32>

// EXPANDED-NOT: custom_vjp
// EXPANDED-NOT: @exp_fwd
// EXPANDED-NOT: @exp_bwd
// EXPANDED-LABEL: func.func @main_grad
// EXPANDED-DAG: %[[TWO:.*]] = rfuse.constant dense<2.000000e+00> : tensor<4xf32>
// EXPANDED-DAG: %[[E:.*]] = rfuse.exp %arg0 : tensor<4xf32>
// The backward's 2 * e * g with g = 1: what the user wrote, not exp's own derivative e.
// EXPANDED: %[[D:.*]] = rfuse.mul %[[E]], %[[TWO]] : tensor<4xf32>
// EXPANDED: return %{{.*}}, %[[D]]

func.func private @exp_fwd(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = rfuse.exp %x : tensor<4xf32>
  return %e, %e : tensor<4xf32>, tensor<4xf32>
}
func.func private @exp_bwd(%saved: tensor<4xf32>, %g: tensor<4xf32>) -> tensor<4xf32> {
  %two = rfuse.constant dense<2.0> : tensor<4xf32>
  %m = rfuse.mul %g, %saved : tensor<4xf32>
  %r = rfuse.mul %m, %two : tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @main(%x: tensor<4xf32>, %n: tensor<4xi32>) -> tensor<1xf32> {
  %r:2 = rfuse.custom_vjp @exp_fwd, @exp_bwd (%x) {num_outputs = 1 : i64} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %s = rfuse.reduce_sum %r#0, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  %l = rfuse.reshape %s : (tensor<f32>) -> tensor<1xf32>
  return %l : tensor<1xf32>
}
