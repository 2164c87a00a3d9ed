// Round trips of the gradient ops of the library calls (what conv2d's and the pools' VJPs emit).

func.func @conv_gradients(%x: tensor<8x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, %g: tensor<8x16x16x16xf32>)
    -> (tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>) {
  %dx = rfuse.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<8x16x16x16xf32>, tensor<16x3x3x3xf32>) -> tensor<8x3x32x32xf32>
  %dw = rfuse.conv2d_backward_filter %x, %g {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<8x3x32x32xf32>, tensor<8x16x16x16xf32>) -> tensor<16x3x3x3xf32>
  return %dx, %dw : tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>
}

func.func @pool_gradients(%x: tensor<2x8x8x4xf32>, %y: tensor<2x4x4x4xf32>, %g: tensor<2x4x4x4xf32>)
    -> (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>) {
  %a = rfuse.max_pool2d_backward %x, %y, %g {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, layout = #rfuse.layout<NHWC>} : (tensor<2x8x8x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x8x8x4xf32>
  %b = rfuse.avg_pool2d_backward %g {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NHWC>, count_include_pad = false} : (tensor<2x4x4x4xf32>) -> tensor<2x8x8x4xf32>
  return %a, %b : tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>
}
