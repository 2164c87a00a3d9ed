func.func @main(%x: tensor<6xf32>, %m: tensor<4x3xf64>) -> (tensor<2xf32>, tensor<8xf32>, tensor<4x2xf64>, tensor<6xf32>) {
  %0 = rfuse.slice %x {start = array<i64: 1>, limit = array<i64: 5>, strides = array<i64: 3>} : (tensor<6xf32>) -> tensor<2xf32>
  %r = rfuse.reverse %x, dims = [0] : tensor<6xf32>
  %p = rfuse.pad %0 {low = array<i64: 1>, high = array<i64: 0>, interior = array<i64: 0>, value = 0.5 : f64} : (tensor<2xf32>) -> tensor<3xf32>
  %1 = rfuse.concat(%p, %r) dim = 0 : (tensor<3xf32>, tensor<6xf32>) -> tensor<9xf32>
  %s = rfuse.slice %1 {start = array<i64: 0>, limit = array<i64: 8>, strides = array<i64: 1>} : (tensor<9xf32>) -> tensor<8xf32>
  %i = rfuse.constant dense<[2, 0]> : tensor<2xi64>
  %2 = rfuse.gather %m, %i, dim = 1 : (tensor<4x3xf64>, tensor<2xi64>) -> tensor<4x2xf64>
  %3 = rfuse.scan %x, dim = 0, kind = sum : tensor<6xf32>
  return %0, %s, %2, %3 : tensor<2xf32>, tensor<8xf32>, tensor<4x2xf64>, tensor<6xf32>
}
