// rfuse-autocast: float32 products run in the low dtype between casts; everything else stays
// float32; float64 is left alone; scope=marked takes only ops with a rfuse.autocast attribute.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-autocast{scope=all dtype=bf16}))' | FileCheck %s --check-prefix=ALL
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-autocast{scope=all dtype=f16}))' | FileCheck %s --check-prefix=HALF
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-autocast))' | FileCheck %s --check-prefix=MARKED
// RUN: not rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-autocast{scope=all dtype=f8}))' 2>&1 | FileCheck %s --check-prefix=BAD

// ALL-LABEL: func.func @linear
// ALL: %[[X:.*]] = rfuse.cast %arg0 : tensor<8x16xf32> to tensor<8x16xbf16>
// ALL: %[[W:.*]] = rfuse.cast %arg1 : tensor<16x4xf32> to tensor<16x4xbf16>
// ALL: %[[M:.*]] = rfuse.matmul %[[X]], %[[W]] : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>
// ALL: %[[B:.*]] = rfuse.cast %[[M]] : tensor<8x4xbf16> to tensor<8x4xf32>
// ALL: rfuse.reduce_sum %[[B]]
// ALL-SAME: -> tensor<f32>
// HALF-LABEL: func.func @linear
// HALF: rfuse.matmul {{.*}} -> tensor<8x4xf16>
// MARKED-LABEL: func.func @linear
// MARKED-NOT: rfuse.cast
// MARKED: rfuse.matmul %arg0, %arg1 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
func.func @linear(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> tensor<f32> {
  %m = rfuse.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %s = rfuse.reduce_sum %m, dims = [0, 1] : (tensor<8x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// A square's operand is cast once.
// ALL-LABEL: func.func @gram
// ALL: %[[X:.*]] = rfuse.cast %arg0 : tensor<8x8xf32> to tensor<8x8xbf16>
// ALL-NOT: rfuse.cast %arg0
// ALL: rfuse.matmul %[[X]], %[[X]] {transpose_a = true}
func.func @gram(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %m = rfuse.matmul %x, %x {transpose_a = true} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %m : tensor<8x8xf32>
}

// Only the marked convolution moves (in its own dtype); its bias is cast too.
// MARKED-LABEL: func.func @convs
// MARKED: rfuse.cast %arg2 : tensor<8xf32> to tensor<8xf16>
// MARKED: %[[C:.*]] = rfuse.conv2d {{.*}} -> tensor<2x8x6x6xf16>
// MARKED-NOT: rfuse.autocast
// MARKED: rfuse.cast %[[C]] : tensor<2x8x6x6xf16> to tensor<2x8x6x6xf32>
// MARKED: rfuse.conv2d %arg0, %arg1, %arg2 {{.*}} -> tensor<2x8x6x6xf32>
func.func @convs(%x: tensor<2x3x8x8xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<8xf32>) -> (tensor<2x8x6x6xf32>, tensor<2x8x6x6xf32>) {
  %a = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, rfuse.autocast = "f16"} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<2x8x6x6xf32>
  %c = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<2x8x6x6xf32>
  return %a, %c : tensor<2x8x6x6xf32>, tensor<2x8x6x6xf32>
}

// Float64 stays exact.
// ALL-LABEL: func.func @exact
// ALL-NOT: rfuse.cast
// ALL: rfuse.matmul %arg0, %arg1 : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>
func.func @exact(%x: tensor<4x4xf64>, %w: tensor<4x4xf64>) -> tensor<4x4xf64> {
  %m = rfuse.matmul %x, %w : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>
  return %m : tensor<4x4xf64>
}

// BAD: rfuse-autocast: dtype must be bf16 or f16, not 'f8'
