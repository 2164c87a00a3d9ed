func.func @sorts(%x: tensor<2x3xf32>, %i: tensor<2x3xi64>) -> (tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) {
  %v, %j = rfuse.sort %x, dim = 1 {descending, nan_largest} : tensor<2x3xf32>
  %t = rfuse.take_along %x, %i, dim = 1 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  return %v, %j, %t : tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>
}
