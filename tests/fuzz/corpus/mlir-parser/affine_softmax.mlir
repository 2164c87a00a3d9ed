// softmax(x @ w + b) over the rows of a 4x6 input: an affine layer followed by a numerically
// stable softmax (the row maximum is subtracted before exp).
//
//   rfuse-run examples/affine_softmax.mlir --random --seed 1
//
// Every row of the 4x5 result sums to 1, so the printed sum is 4 (up to rounding).
func.func @main(%x: tensor<4x6xf32>, %w: tensor<6x5xf32>, %b: tensor<5xf32>) -> tensor<4x5xf32> {
  // Affine layer: logits = x @ w + b, the bias broadcast down the rows.
  %xw = rfuse.matmul %x, %w : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  %bb = rfuse.broadcast_in_dim %b, dims = [1] : (tensor<5xf32>) -> tensor<4x5xf32>
  %logits = rfuse.add %xw, %bb : tensor<4x5xf32>
  // Row maximum, broadcast back over the columns.
  %max = rfuse.reduce_max %logits, dims = [1] : (tensor<4x5xf32>) -> tensor<4xf32>
  %maxb = rfuse.broadcast_in_dim %max, dims = [0] : (tensor<4xf32>) -> tensor<4x5xf32>
  %shifted = rfuse.sub %logits, %maxb : tensor<4x5xf32>
  %e = rfuse.exp %shifted : tensor<4x5xf32>
  // Row sums, broadcast back, and the normalization.
  %sum = rfuse.reduce_sum %e, dims = [1] : (tensor<4x5xf32>) -> tensor<4xf32>
  %sumb = rfuse.broadcast_in_dim %sum, dims = [0] : (tensor<4xf32>) -> tensor<4x5xf32>
  %p = rfuse.div %e, %sumb : tensor<4x5xf32>
  return %p : tensor<4x5xf32>
}
