// rfuse-sink-transposes: transposes of any rank move down through pointwise ops and reductions
// until they meet and cancel. Attention's softmax, traced on R's layout, is a reduction over the
// strided leading dim of transposed scores, transposed back for the next product; after the pass
// it is a softmax over the scores' last (contiguous) dim with no transpose left. A transpose that
// would only move down a pointwise chain to the result stays where it is.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-sink-transposes))' | FileCheck %s

// CHECK-LABEL: func.func @softmax_of_transposed_scores
// CHECK-NEXT:  %[[C:.*]] = rfuse.constant dense<8.000000e+00> : tensor<6x5x4xf32>
// CHECK-NEXT:  %[[S:.*]] = rfuse.div %arg0, %[[C]] : tensor<6x5x4xf32>
// CHECK-NEXT:  %[[M:.*]] = rfuse.reduce_max %[[S]], dims = [2] {keep_dims = true} : (tensor<6x5x4xf32>) -> tensor<6x5x1xf32>
// CHECK-NEXT:  %[[MB:.*]] = rfuse.broadcast_in_dim %[[M]], dims = [0, 1, 2] : (tensor<6x5x1xf32>) -> tensor<6x5x4xf32>
// CHECK-NEXT:  %[[Z:.*]] = rfuse.sub %[[S]], %[[MB]] : tensor<6x5x4xf32>
// CHECK-NEXT:  %[[E:.*]] = rfuse.exp %[[Z]] : tensor<6x5x4xf32>
// CHECK-NEXT:  %[[T:.*]] = rfuse.reduce_sum %[[E]], dims = [2] {keep_dims = true} : (tensor<6x5x4xf32>) -> tensor<6x5x1xf32>
// CHECK-NEXT:  %[[TB:.*]] = rfuse.broadcast_in_dim %[[T]], dims = [0, 1, 2] : (tensor<6x5x1xf32>) -> tensor<6x5x4xf32>
// CHECK-NEXT:  %[[P:.*]] = rfuse.div %[[E]], %[[TB]] : tensor<6x5x4xf32>
// CHECK-NEXT:  return %[[P]] : tensor<6x5x4xf32>
func.func @softmax_of_transposed_scores(%scores: tensor<6x5x4xf32>) -> tensor<6x5x4xf32> {
  %r = rfuse.transpose %scores, perm = [2, 1, 0] : (tensor<6x5x4xf32>) -> tensor<4x5x6xf32>
  %c = rfuse.constant dense<8.0> : tensor<4x5x6xf32>
  %s = rfuse.div %r, %c : tensor<4x5x6xf32>
  %m = rfuse.reduce_max %s, dims = [0] {keep_dims = true} : (tensor<4x5x6xf32>) -> tensor<1x5x6xf32>
  %m2 = rfuse.reshape %m : (tensor<1x5x6xf32>) -> tensor<5x6xf32>
  %mb = rfuse.broadcast_in_dim %m2, dims = [1, 2] : (tensor<5x6xf32>) -> tensor<4x5x6xf32>
  %z = rfuse.sub %s, %mb : tensor<4x5x6xf32>
  %e = rfuse.exp %z : tensor<4x5x6xf32>
  %t = rfuse.reduce_sum %e, dims = [0] {keep_dims = true} : (tensor<4x5x6xf32>) -> tensor<1x5x6xf32>
  %t2 = rfuse.reshape %t : (tensor<1x5x6xf32>) -> tensor<5x6xf32>
  %tb = rfuse.broadcast_in_dim %t2, dims = [1, 2] : (tensor<5x6xf32>) -> tensor<4x5x6xf32>
  %p = rfuse.div %e, %tb : tensor<4x5x6xf32>
  %back = rfuse.transpose %p, perm = [2, 1, 0] : (tensor<4x5x6xf32>) -> tensor<6x5x4xf32>
  return %back : tensor<6x5x4xf32>
}

// A column sum of a transposed matrix is a row sum of the matrix (no transpose of the result:
// one kept dim).
// CHECK-LABEL: func.func @sum_of_transpose
// CHECK-NEXT:  %[[R:.*]] = rfuse.reduce_sum %arg0, dims = [1] : (tensor<3x7xf32>) -> tensor<3xf32>
// CHECK-NEXT:  return %[[R]]
func.func @sum_of_transpose(%x: tensor<3x7xf32>) -> tensor<3xf32> {
  %t = rfuse.transpose %x, perm = [1, 0] : (tensor<3x7xf32>) -> tensor<7x3xf32>
  %r = rfuse.reduce_sum %t, dims = [0] : (tensor<7x3xf32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}

// t(x) * 2 + y: the transpose reaches no reduction or transpose, so it stays on the input,
// where the one fused kernel reads it as an index map.
// CHECK-LABEL: func.func @pointwise_chain_keeps_its_transpose
// CHECK:       %[[T:.*]] = rfuse.transpose %arg0, perm = [1, 0]
// CHECK-NEXT:  %[[M:.*]] = rfuse.mul %[[T]]
// CHECK-NEXT:  rfuse.add %[[M]], %arg1
func.func @pointwise_chain_keeps_its_transpose(%x: tensor<5x7xf32>, %y: tensor<7x5xf32>) -> tensor<7x5xf32> {
  %t = rfuse.transpose %x, perm = [1, 0] : (tensor<5x7xf32>) -> tensor<7x5xf32>
  %c = rfuse.constant dense<2.0> : tensor<7x5xf32>
  %m = rfuse.mul %t, %c : tensor<7x5xf32>
  %a = rfuse.add %m, %y : tensor<7x5xf32>
  return %a : tensor<7x5xf32>
}

