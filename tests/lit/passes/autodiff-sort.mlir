// rfuse-autodiff through rfuse.sort: each cotangent goes back where its value came from, a
// take_along by the inverse permutation (the order that sorts the indices).
// RUN: rfuse-opt %s --rfuse-autodiff='function=loss' | FileCheck %s
// RUN: rfuse-opt %s --rfuse-autodiff='function=loss' | rfuse-run - --entry loss_grad --random --seed 5 | FileCheck %s --check-prefix=VALUES
// RUN: rfuse-opt %s --rfuse-autodiff='function=loss' | rfuse-run - --entry loss_grad --random --seed 5 --device cpu-jit | FileCheck %s --check-prefix=VALUES

// loss = sum(sort(x) * [1, 10, 100, 1000]): d loss / d x[k] is the weight of the place x[k]
// sorts to, so the gradient of any x without ties is a permutation of the weights.
// CHECK-LABEL: func.func @loss_grad
// CHECK: rfuse.sort %{{.*}}, dim = 0 : tensor<4xf64>
// CHECK: %{{.*}}, %[[INV:.*]] = rfuse.sort %{{.*}}, dim = 0 : tensor<4xi64>
// CHECK: rfuse.take_along %{{.*}}, %[[INV]], dim = 0 : (tensor<4xf64>, tensor<4xi64>) -> tensor<4xf64>
// VALUES: output 1: tensor<4xf64> shape [4] sum 1111
// VALUES-NEXT: first: {{(1|10|100|1000) (1|10|100|1000) (1|10|100|1000) (1|10|100|1000)$}}
func.func @loss(%x: tensor<4xf64>) -> tensor<f64> {
  %v, %i = rfuse.sort %x, dim = 0 : tensor<4xf64>
  %w = rfuse.constant dense<[1.0, 10.0, 100.0, 1000.0]> : tensor<4xf64>
  %p = rfuse.mul %v, %w : tensor<4xf64>
  %s = rfuse.reduce_sum %p, dims = [0] : (tensor<4xf64>) -> tensor<f64>
  return %s : tensor<f64>
}
