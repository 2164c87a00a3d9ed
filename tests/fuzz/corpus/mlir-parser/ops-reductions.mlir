// Round trips of reduce_sum, reduce_mean, reduce_max and reduce_min, with and without keep_dims,
// in the custom form and through the generic form. The result types are inferred and checked by
// the verifier against the declared ones; GENERIC pins keep_dims' stored value.

// GENERIC-LABEL: sym_name = "reduce_sum"
// GENERIC: "rfuse.reduce_sum"(%{{.*}}) <{dims = array<i64: 0>, keep_dims = false}> : (tensor<4x3xf32>) -> tensor<3xf32>
// GENERIC: "rfuse.reduce_sum"(%{{.*}}) <{dims = array<i64: 1>, keep_dims = true}> : (tensor<4x3xf32>) -> tensor<4x1xf32>
func.func @reduce_sum(%x: tensor<4x3xf32>, %y: tensor<2x3x5xi32>)
    -> (tensor<3xf32>, tensor<4x1xf32>, tensor<f32>, tensor<1x1xf32>, tensor<3xi32>, tensor<1x3x1xi32>, tensor<2x3x5xi32>) {
  // R's colSums / rowSums of a row-major tensor.
  // CHECK: rfuse.reduce_sum %[[X]], dims = [0] : (tensor<4x3xf32>) -> tensor<3xf32>
  %0 = rfuse.reduce_sum %x, dims = [0] : (tensor<4x3xf32>) -> tensor<3xf32>
  // CHECK: rfuse.reduce_sum %[[X]], dims = [1] {keep_dims = true} : (tensor<4x3xf32>) -> tensor<4x1xf32>
  %1 = rfuse.reduce_sum %x, dims = [1] {keep_dims = true} : (tensor<4x3xf32>) -> tensor<4x1xf32>
  // All dimensions, in any order.
  // CHECK: rfuse.reduce_sum %[[X]], dims = [1, 0] : (tensor<4x3xf32>) -> tensor<f32>
  %2 = rfuse.reduce_sum %x, dims = [1, 0] : (tensor<4x3xf32>) -> tensor<f32>
  // CHECK: rfuse.reduce_sum %[[X]], dims = [0, 1] {keep_dims = true} : (tensor<4x3xf32>) -> tensor<1x1xf32>
  %3 = rfuse.reduce_sum %x, dims = [0, 1] {keep_dims = true} : (tensor<4x3xf32>) -> tensor<1x1xf32>
  // Non-adjacent dimensions of a rank-3 integer tensor.
  // CHECK: rfuse.reduce_sum %[[Y]], dims = [0, 2] : (tensor<2x3x5xi32>) -> tensor<3xi32>
  %4 = rfuse.reduce_sum %y, dims = [0, 2] : (tensor<2x3x5xi32>) -> tensor<3xi32>
  // CHECK: rfuse.reduce_sum %[[Y]], dims = [2, 0] {keep_dims = true} : (tensor<2x3x5xi32>) -> tensor<1x3x1xi32>
  %5 = rfuse.reduce_sum %y, dims = [2, 0] {keep_dims = true} : (tensor<2x3x5xi32>) -> tensor<1x3x1xi32>
  // No dimensions: the identity. An explicit keep_dims = false is the default and is elided.
  // CHECK: rfuse.reduce_sum %[[Y]], dims = [] : (tensor<2x3x5xi32>) -> tensor<2x3x5xi32>
  %6 = rfuse.reduce_sum %y, dims = [] {keep_dims = false} : (tensor<2x3x5xi32>) -> tensor<2x3x5xi32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<3xf32>, tensor<4x1xf32>, tensor<f32>, tensor<1x1xf32>, tensor<3xi32>, tensor<1x3x1xi32>, tensor<2x3x5xi32>
}

func.func @reduce_mean(%x: tensor<2x3x5xf64>, %h: tensor<8xf16>)
    -> (tensor<2x5xf64>, tensor<2x1x5xf64>, tensor<f16>, tensor<1xf16>) {
  // CHECK: rfuse.reduce_mean %[[X]], dims = [1] : (tensor<2x3x5xf64>) -> tensor<2x5xf64>
  %0 = rfuse.reduce_mean %x, dims = [1] : (tensor<2x3x5xf64>) -> tensor<2x5xf64>
  // CHECK: rfuse.reduce_mean %[[X]], dims = [1] {keep_dims = true} : (tensor<2x3x5xf64>) -> tensor<2x1x5xf64>
  %1 = rfuse.reduce_mean %x, dims = [1] {keep_dims = true} : (tensor<2x3x5xf64>) -> tensor<2x1x5xf64>
  // CHECK: rfuse.reduce_mean %[[H]], dims = [0] : (tensor<8xf16>) -> tensor<f16>
  %2 = rfuse.reduce_mean %h, dims = [0] : (tensor<8xf16>) -> tensor<f16>
  // CHECK: rfuse.reduce_mean %[[H]], dims = [0] {keep_dims = true} : (tensor<8xf16>) -> tensor<1xf16>
  %3 = rfuse.reduce_mean %h, dims = [0] {keep_dims = true} : (tensor<8xf16>) -> tensor<1xf16>
  return %0, %1, %2, %3 : tensor<2x5xf64>, tensor<2x1x5xf64>, tensor<f16>, tensor<1xf16>
}

func.func @reduce_max(%x: tensor<4x6xf32>, %i: tensor<3x7xi64>)
    -> (tensor<4xf32>, tensor<4x1xf32>, tensor<7xi64>, tensor<1x7xi64>) {
  // CHECK: rfuse.reduce_max %[[X]], dims = [1] : (tensor<4x6xf32>) -> tensor<4xf32>
  %0 = rfuse.reduce_max %x, dims = [1] : (tensor<4x6xf32>) -> tensor<4xf32>
  // CHECK: rfuse.reduce_max %[[X]], dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %1 = rfuse.reduce_max %x, dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  // CHECK: rfuse.reduce_max %[[I]], dims = [0] : (tensor<3x7xi64>) -> tensor<7xi64>
  %2 = rfuse.reduce_max %i, dims = [0] : (tensor<3x7xi64>) -> tensor<7xi64>
  // CHECK: rfuse.reduce_max %[[I]], dims = [0] {keep_dims = true} : (tensor<3x7xi64>) -> tensor<1x7xi64>
  %3 = rfuse.reduce_max %i, dims = [0] {keep_dims = true} : (tensor<3x7xi64>) -> tensor<1x7xi64>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4x1xf32>, tensor<7xi64>, tensor<1x7xi64>
}

func.func @reduce_min(%x: tensor<2x3x4x5xbf16>, %i: tensor<9xi32>)
    -> (tensor<2x5xbf16>, tensor<2x1x1x5xbf16>, tensor<i32>, tensor<1xi32>) {
  // CHECK: rfuse.reduce_min %[[X]], dims = [1, 2] : (tensor<2x3x4x5xbf16>) -> tensor<2x5xbf16>
  %0 = rfuse.reduce_min %x, dims = [1, 2] : (tensor<2x3x4x5xbf16>) -> tensor<2x5xbf16>
  // CHECK: rfuse.reduce_min %[[X]], dims = [1, 2] {keep_dims = true} : (tensor<2x3x4x5xbf16>) -> tensor<2x1x1x5xbf16>
  %1 = rfuse.reduce_min %x, dims = [1, 2] {keep_dims = true} : (tensor<2x3x4x5xbf16>) -> tensor<2x1x1x5xbf16>
  // CHECK: rfuse.reduce_min %[[I]], dims = [0] : (tensor<9xi32>) -> tensor<i32>
  %2 = rfuse.reduce_min %i, dims = [0] : (tensor<9xi32>) -> tensor<i32>
  // CHECK: rfuse.reduce_min %[[I]], dims = [0] {keep_dims = true} : (tensor<9xi32>) -> tensor<1xi32>
  %3 = rfuse.reduce_min %i, dims = [0] {keep_dims = true} : (tensor<9xi32>) -> tensor<1xi32>
  return %0, %1, %2, %3 : tensor<2x5xbf16>, tensor<2x1x1x5xbf16>, tensor<i32>, tensor<1xi32>
}
