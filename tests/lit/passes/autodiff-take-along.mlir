// rfuse-autodiff through rfuse.take_along (torch_gather) and rfuse.scatter_add: each is the
// other's gradient. A position taken twice gets both cotangents; one never taken gets 0.
// (The loss is linear: its gradient does not depend on the random inputs.)
// RUN: rfuse-opt %s --rfuse-autodiff='function=loss' | FileCheck %s
// RUN: rfuse-opt %s --rfuse-autodiff='function=loss' | rfuse-run - --entry loss_grad --random --seed 5 | FileCheck %s --check-prefix=VALUES
// RUN: rfuse-opt %s --rfuse-autodiff='function=loss' | rfuse-run - --entry loss_grad --random --seed 5 --device cpu-jit | FileCheck %s --check-prefix=VALUES

// loss = sum(take_along(x, [[0, 0, 2]]) * [1, 10, 100]) + sum(scatter_add(y, [[1, 1]]) * [1, 2, 3]):
// d/dx = [11, 0, 100]; d/dy = [2, 2].
// CHECK-LABEL: func.func @loss_grad
// CHECK-DAG: rfuse.scatter_add %{{.*}}, %{{.*}}, dim = 1 : (tensor<1x3xf64>, tensor<1x3xi64>) -> tensor<1x3xf64>
// CHECK-DAG: rfuse.take_along %{{.*}}, %{{.*}}, dim = 1 : (tensor<1x3xf64>, tensor<1x2xi64>) -> tensor<1x2xf64>
// VALUES: output 1: tensor<1x3xf64> shape [1, 3]
// VALUES-NEXT: first: 11 0 100
// VALUES: output 2: tensor<1x2xf64> shape [1, 2]
// VALUES-NEXT: first: 2 2
func.func @loss(%x: tensor<1x3xf64>, %y: tensor<1x2xf64>) -> tensor<f64> {
  %i = rfuse.constant dense<[[0, 0, 2]]> : tensor<1x3xi64>
  %t = rfuse.take_along %x, %i, dim = 1 : (tensor<1x3xf64>, tensor<1x3xi64>) -> tensor<1x3xf64>
  %w = rfuse.constant dense<[[1.0, 10.0, 100.0]]> : tensor<1x3xf64>
  %p = rfuse.mul %t, %w : tensor<1x3xf64>
  %j = rfuse.constant dense<[[1, 1]]> : tensor<1x2xi64>
  %s = rfuse.scatter_add %y, %j, dim = 1 : (tensor<1x2xf64>, tensor<1x2xi64>) -> tensor<1x3xf64>
  %v = rfuse.constant dense<[[1.0, 2.0, 3.0]]> : tensor<1x3xf64>
  %q = rfuse.mul %s, %v : tensor<1x3xf64>
  %a = rfuse.reduce_sum %p, dims = [0, 1] : (tensor<1x3xf64>) -> tensor<f64>
  %b = rfuse.reduce_sum %q, dims = [0, 1] : (tensor<1x3xf64>) -> tensor<f64>
  %l = rfuse.add %a, %b : tensor<f64>
  return %l : tensor<f64>
}
