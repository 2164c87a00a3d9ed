// A small CNN block on a batch of two 1-channel 10x10 images (NCHW): a 3x3 convolution to 4
// channels with bias, relu, and 2x2 max pooling with stride 2.
//
//   rfuse-run examples/cnn_block.mlir --random --seed 1
//
// conv: 10 - 3 + 1 = 8, so [2, 4, 8, 8]; pool: 8 / 2 = 4, so the result is [2, 4, 4, 4]. After
// relu every value is >= 0, so the printed sum equals the printed abs_sum.
func.func @main(%x: tensor<2x1x10x10xf32>, %w: tensor<4x1x3x3xf32>, %b: tensor<4xf32>) -> tensor<2x4x4x4xf32> {
  %conv = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
            dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
          : (tensor<2x1x10x10xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %act = rfuse.relu %conv : tensor<2x4x8x8xf32>
  %pool = rfuse.max_pool2d %act {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
            padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>}
          : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  return %pool : tensor<2x4x4x4xf32>
}
