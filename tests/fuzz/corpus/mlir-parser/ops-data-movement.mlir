// Round trips of broadcast_in_dim, transpose and reshape, in the custom form and through the
// generic form. transpose infers its result type: the GENERIC prefix pins the inferred types
// without a second parse.

func.func @broadcast_in_dim(%v: tensor<3xf32>, %s: tensor<f32>, %o: tensor<1x3xi32>, %m: tensor<2x1xi1>)
    -> (tensor<4x3xf32>, tensor<3x4xf32>, tensor<2x5xf32>, tensor<4x3xi32>, tensor<2x3x2x7xi1>, tensor<3xf32>) {
  // A vector recycled down the columns: operand dim 0 -> result dim 1.
  // CHECK: rfuse.broadcast_in_dim %[[V]], dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
  %0 = rfuse.broadcast_in_dim %v, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
  // CHECK: rfuse.broadcast_in_dim %[[V]], dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
  %1 = rfuse.broadcast_in_dim %v, dims = [0] : (tensor<3xf32>) -> tensor<3x4xf32>
  // A scalar: no dims.
  // CHECK: rfuse.broadcast_in_dim %[[S]], dims = [] : (tensor<f32>) -> tensor<2x5xf32>
  %2 = rfuse.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<2x5xf32>
  // A size-1 dimension repeated.
  // CHECK: rfuse.broadcast_in_dim %[[O]], dims = [0, 1] : (tensor<1x3xi32>) -> tensor<4x3xi32>
  %3 = rfuse.broadcast_in_dim %o, dims = [0, 1] : (tensor<1x3xi32>) -> tensor<4x3xi32>
  // Non-adjacent dims, with a size-1 dimension expanded.
  // CHECK: rfuse.broadcast_in_dim %[[M]], dims = [0, 3] : (tensor<2x1xi1>) -> tensor<2x3x2x7xi1>
  %4 = rfuse.broadcast_in_dim %m, dims = [0, 3] : (tensor<2x1xi1>) -> tensor<2x3x2x7xi1>
  // The identity broadcast is valid (kept without --canonicalize).
  // CHECK: rfuse.broadcast_in_dim %[[V]], dims = [0] : (tensor<3xf32>) -> tensor<3xf32>
  %5 = rfuse.broadcast_in_dim %v, dims = [0] : (tensor<3xf32>) -> tensor<3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x3xf32>, tensor<3x4xf32>, tensor<2x5xf32>, tensor<4x3xi32>, tensor<2x3x2x7xi1>, tensor<3xf32>
}

// GENERIC-LABEL: sym_name = "transpose"
// GENERIC: "rfuse.transpose"(%{{.*}}) <{perm = array<i64: 1, 0>}> : (tensor<3x4xf32>) -> tensor<4x3xf32>
// GENERIC: "rfuse.transpose"(%{{.*}}) <{perm = array<i64: 2, 0, 1>}> : (tensor<2x3x5xf32>) -> tensor<5x2x3xf32>
// GENERIC: "rfuse.transpose"(%{{.*}}) <{perm = array<i64: 1, 2, 0>}> : (tensor<2x3x5xf32>) -> tensor<3x5x2xf32>
// GENERIC: "rfuse.transpose"(%{{.*}}) <{perm = array<i64: 0, 1, 2>}> : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
// GENERIC: "rfuse.transpose"(%{{.*}}) <{perm = array<i64: 3, 1, 0, 2>}> : (tensor<1x2x3x4xi64>) -> tensor<4x2x1x3xi64>
// GENERIC: "rfuse.transpose"(%{{.*}}) <{perm = array<i64>}> : (tensor<f64>) -> tensor<f64>
func.func @transpose(%x: tensor<3x4xf32>, %y: tensor<2x3x5xf32>, %z: tensor<1x2x3x4xi64>, %s: tensor<f64>)
    -> (tensor<4x3xf32>, tensor<5x2x3xf32>, tensor<3x5x2xf32>, tensor<2x3x5xf32>, tensor<4x2x1x3xi64>, tensor<f64>) {
  // CHECK: rfuse.transpose %[[X]], perm = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %0 = rfuse.transpose %x, perm = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>
  // Result dimension i is operand dimension perm[i].
  // CHECK: rfuse.transpose %[[Y]], perm = [2, 0, 1] : (tensor<2x3x5xf32>) -> tensor<5x2x3xf32>
  %1 = rfuse.transpose %y, perm = [2, 0, 1] : (tensor<2x3x5xf32>) -> tensor<5x2x3xf32>
  // CHECK: rfuse.transpose %[[Y]], perm = [1, 2, 0] : (tensor<2x3x5xf32>) -> tensor<3x5x2xf32>
  %2 = rfuse.transpose %y, perm = [1, 2, 0] : (tensor<2x3x5xf32>) -> tensor<3x5x2xf32>
  // CHECK: rfuse.transpose %[[Y]], perm = [0, 1, 2] : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %3 = rfuse.transpose %y, perm = [0, 1, 2] : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  // CHECK: rfuse.transpose %[[Z]], perm = [3, 1, 0, 2] : (tensor<1x2x3x4xi64>) -> tensor<4x2x1x3xi64>
  %4 = rfuse.transpose %z, perm = [3, 1, 0, 2] : (tensor<1x2x3x4xi64>) -> tensor<4x2x1x3xi64>
  // CHECK: rfuse.transpose %[[S]], perm = [] : (tensor<f64>) -> tensor<f64>
  %5 = rfuse.transpose %s, perm = [] : (tensor<f64>) -> tensor<f64>
  return %0, %1, %2, %3, %4, %5 : tensor<4x3xf32>, tensor<5x2x3xf32>, tensor<3x5x2xf32>, tensor<2x3x5xf32>, tensor<4x2x1x3xi64>, tensor<f64>
}

func.func @reshape(%x: tensor<2x3x4xf32>, %s: tensor<1x1xi32>)
    -> (tensor<6x4xf32>, tensor<24xf32>, tensor<4x1x6xf32>, tensor<i32>, tensor<1x1x1xi32>, tensor<2x3x4xf32>) {
  // CHECK: %[[A:.+]] = rfuse.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %0 = rfuse.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: rfuse.reshape %[[A]] : (tensor<6x4xf32>) -> tensor<24xf32>
  %1 = rfuse.reshape %0 : (tensor<6x4xf32>) -> tensor<24xf32>
  // CHECK: rfuse.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<4x1x6xf32>
  %2 = rfuse.reshape %x : (tensor<2x3x4xf32>) -> tensor<4x1x6xf32>
  // To and from rank 0.
  // CHECK: %[[R0:.+]] = rfuse.reshape %[[S]] : (tensor<1x1xi32>) -> tensor<i32>
  %3 = rfuse.reshape %s : (tensor<1x1xi32>) -> tensor<i32>
  // CHECK: rfuse.reshape %[[R0]] : (tensor<i32>) -> tensor<1x1x1xi32>
  %4 = rfuse.reshape %3 : (tensor<i32>) -> tensor<1x1x1xi32>
  // CHECK: rfuse.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %5 = rfuse.reshape %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<6x4xf32>, tensor<24xf32>, tensor<4x1x6xf32>, tensor<i32>, tensor<1x1x1xi32>, tensor<2x3x4xf32>
}

// Large but representable element counts verify: 2^62 elements (the int64 overflow check of
// reshape only rejects counts that do not fit).
func.func @reshape_large(%x: tensor<4611686018427387904xf32>) -> tensor<2147483648x2147483648xf32> {
  %0 = rfuse.reshape %x : (tensor<4611686018427387904xf32>) -> tensor<2147483648x2147483648xf32>
  return %0 : tensor<2147483648x2147483648xf32>
}
