// Round trips of matmul, conv2d, max_pool2d and avg_pool2d, in the custom form and through the
// generic form. All four infer their result type; the verifier rejects a declared type that
// differs from the inferred one, so every result type below is an inferred shape.
// RUN: rfuse-opt %s | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// GENERIC-LABEL: sym_name = "matmul_2d"
// GENERIC: "rfuse.matmul"(%{{.*}}, %{{.*}}) <{transpose_a = false, transpose_b = false}> : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// GENERIC: "rfuse.matmul"(%{{.*}}, %{{.*}}) <{transpose_a = false, transpose_b = true}> : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
// GENERIC: "rfuse.matmul"(%{{.*}}, %{{.*}}) <{transpose_a = true, transpose_b = false}> : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// GENERIC: "rfuse.matmul"(%{{.*}}, %{{.*}}) <{transpose_a = true, transpose_b = true}> : (tensor<16x8xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
// CHECK-LABEL: func.func @matmul_2d
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<8x16xf32>, %[[B:[a-z0-9]+]]: tensor<16x4xf32>, %[[BT:[a-z0-9]+]]: tensor<4x16xf32>, %[[AT:[a-z0-9]+]]: tensor<16x8xf32>)
func.func @matmul_2d(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %bt: tensor<4x16xf32>, %at: tensor<16x8xf32>)
    -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  // CHECK: rfuse.matmul %[[A]], %[[B]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %0 = rfuse.matmul %a, %b : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  // CHECK: rfuse.matmul %[[A]], %[[BT]] {transpose_b = true} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %1 = rfuse.matmul %a, %bt {transpose_b = true} : (tensor<8x16xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  // CHECK: rfuse.matmul %[[AT]], %[[B]] {transpose_a = true} : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %2 = rfuse.matmul %at, %b {transpose_a = true} : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  // CHECK: rfuse.matmul %[[AT]], %[[BT]] {transpose_a = true, transpose_b = true} : (tensor<16x8xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %3 = rfuse.matmul %at, %bt {transpose_a = true, transpose_b = true} : (tensor<16x8xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  // Explicit false flags are the defaults and are elided.
  // CHECK: rfuse.matmul %[[A]], %[[B]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %4 = rfuse.matmul %a, %b {transpose_a = false, transpose_b = false} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %0, %1, %2, %3, %4 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// CHECK-LABEL: func.func @matmul_batched
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<2x8x16xf32>, %[[B:[a-z0-9]+]]: tensor<2x16x4xf32>, %[[BT:[a-z0-9]+]]: tensor<2x4x16xf32>, %[[AT:[a-z0-9]+]]: tensor<2x16x8xf32>)
func.func @matmul_batched(%a: tensor<2x8x16xf32>, %b: tensor<2x16x4xf32>, %bt: tensor<2x4x16xf32>, %at: tensor<2x16x8xf32>)
    -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
  // CHECK: rfuse.matmul %[[A]], %[[B]] : (tensor<2x8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  %0 = rfuse.matmul %a, %b : (tensor<2x8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: rfuse.matmul %[[A]], %[[BT]] {transpose_b = true} : (tensor<2x8x16xf32>, tensor<2x4x16xf32>) -> tensor<2x8x4xf32>
  %1 = rfuse.matmul %a, %bt {transpose_b = true} : (tensor<2x8x16xf32>, tensor<2x4x16xf32>) -> tensor<2x8x4xf32>
  // CHECK: rfuse.matmul %[[AT]], %[[B]] {transpose_a = true} : (tensor<2x16x8xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  %2 = rfuse.matmul %at, %b {transpose_a = true} : (tensor<2x16x8xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: rfuse.matmul %[[AT]], %[[BT]] {transpose_a = true, transpose_b = true} : (tensor<2x16x8xf32>, tensor<2x4x16xf32>) -> tensor<2x8x4xf32>
  %3 = rfuse.matmul %at, %bt {transpose_a = true, transpose_b = true} : (tensor<2x16x8xf32>, tensor<2x4x16xf32>) -> tensor<2x8x4xf32>
  return %0, %1, %2, %3 : tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
}

// A rank-2 operand is broadcast over the other's batch; the result takes that batch.
// CHECK-LABEL: func.func @matmul_broadcast_batch
// CHECK-SAME: (%[[A3:[a-z0-9]+]]: tensor<3x8x16xf32>, %[[B2:[a-z0-9]+]]: tensor<16x4xf32>, %[[A2:[a-z0-9]+]]: tensor<8x16xf32>, %[[B3:[a-z0-9]+]]: tensor<5x16x4xf32>, %[[B3T:[a-z0-9]+]]: tensor<5x4x16xf32>)
func.func @matmul_broadcast_batch(%a3: tensor<3x8x16xf32>, %b2: tensor<16x4xf32>, %a2: tensor<8x16xf32>,
                                  %b3: tensor<5x16x4xf32>, %b3t: tensor<5x4x16xf32>)
    -> (tensor<3x8x4xf32>, tensor<5x8x4xf32>, tensor<5x8x4xf32>) {
  // CHECK: rfuse.matmul %[[A3]], %[[B2]] : (tensor<3x8x16xf32>, tensor<16x4xf32>) -> tensor<3x8x4xf32>
  %0 = rfuse.matmul %a3, %b2 : (tensor<3x8x16xf32>, tensor<16x4xf32>) -> tensor<3x8x4xf32>
  // CHECK: rfuse.matmul %[[A2]], %[[B3]] : (tensor<8x16xf32>, tensor<5x16x4xf32>) -> tensor<5x8x4xf32>
  %1 = rfuse.matmul %a2, %b3 : (tensor<8x16xf32>, tensor<5x16x4xf32>) -> tensor<5x8x4xf32>
  // CHECK: rfuse.matmul %[[A2]], %[[B3T]] {transpose_b = true} : (tensor<8x16xf32>, tensor<5x4x16xf32>) -> tensor<5x8x4xf32>
  %2 = rfuse.matmul %a2, %b3t {transpose_b = true} : (tensor<8x16xf32>, tensor<5x4x16xf32>) -> tensor<5x8x4xf32>
  return %0, %1, %2 : tensor<3x8x4xf32>, tensor<5x8x4xf32>, tensor<5x8x4xf32>
}

// CHECK-LABEL: func.func @matmul_types
func.func @matmul_types(%a: tensor<2x3xi32>, %b: tensor<3x5xi32>, %c: tensor<1x4xf16>, %d: tensor<4x1xf16>,
                        %e: tensor<2x2xf64>)
    -> (tensor<2x5xi32>, tensor<1x1xf16>, tensor<4x4xf16>, tensor<2x2xf64>) {
  // CHECK: rfuse.matmul %{{.*}}, %{{.*}} : (tensor<2x3xi32>, tensor<3x5xi32>) -> tensor<2x5xi32>
  %0 = rfuse.matmul %a, %b : (tensor<2x3xi32>, tensor<3x5xi32>) -> tensor<2x5xi32>
  // Inner and outer products.
  // CHECK: rfuse.matmul %{{.*}}, %{{.*}} : (tensor<1x4xf16>, tensor<4x1xf16>) -> tensor<1x1xf16>
  %1 = rfuse.matmul %c, %d : (tensor<1x4xf16>, tensor<4x1xf16>) -> tensor<1x1xf16>
  // CHECK: rfuse.matmul %{{.*}}, %{{.*}} : (tensor<4x1xf16>, tensor<1x4xf16>) -> tensor<4x4xf16>
  %2 = rfuse.matmul %d, %c : (tensor<4x1xf16>, tensor<1x4xf16>) -> tensor<4x4xf16>
  // CHECK: rfuse.matmul %{{.*}}, %{{.*}} {transpose_a = true, transpose_b = true} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  %3 = rfuse.matmul %e, %e {transpose_a = true, transpose_b = true} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x2xf64>
  return %0, %1, %2, %3 : tensor<2x5xi32>, tensor<1x1xf16>, tensor<4x4xf16>, tensor<2x2xf64>
}

// GENERIC-LABEL: sym_name = "conv2d_nchw"
// GENERIC: "rfuse.conv2d"(%{{.*}}, %{{.*}}) <{dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}> : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
// GENERIC: "rfuse.conv2d"(%{{.*}}, %{{.*}}, %{{.*}}) <{dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}> : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
// CHECK-LABEL: func.func @conv2d_nchw
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x3x8x8xf32>, %[[W:[a-z0-9]+]]: tensor<4x3x3x3xf32>, %[[B:[a-z0-9]+]]: tensor<4xf32>)
func.func @conv2d_nchw(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>)
    -> (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) {
  // Without bias.
  // CHECK: rfuse.conv2d %[[X]], %[[W]] {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
       : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  // With bias.
  // CHECK: rfuse.conv2d %[[X]], %[[W]], %[[B]] {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  %1 = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
       : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
  return %0, %1 : tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>
}

// Stride, symmetric and asymmetric padding, dilation, groups (grouped and depthwise), NCHW.
// CHECK-LABEL: func.func @conv2d_nchw_params
func.func @conv2d_nchw_params(%x: tensor<2x3x9x9xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<8xf32>,
                              %x2: tensor<1x1x5x6xf64>, %w2: tensor<2x1x2x3xf64>,
                              %x3: tensor<1x2x10x10xf32>, %w3: tensor<3x2x3x3xf32>,
                              %x4: tensor<1x4x6x6xf16>, %w4: tensor<6x2x3x3xf16>, %b4: tensor<6xf16>,
                              %w5: tensor<4x1x3x3xf16>)
    -> (tensor<2x8x5x5xf32>, tensor<1x2x5x9xf64>, tensor<1x3x6x4xf32>, tensor<1x6x4x4xf16>, tensor<1x4x4x4xf16>) {
  // stride 2, padding 1: (9 + 2 - 3) / 2 + 1 = 5.
  // CHECK: rfuse.conv2d %{{.*}}, %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<2x8x5x5xf32>
  %0 = rfuse.conv2d %x, %w, %b {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>,
         dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
       : (tensor<2x3x9x9xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<2x8x5x5xf32>
  // padding [top, bottom, left, right] = [0, 1, 2, 3], 2x3 kernel: OH = 5 + 1 - 2 + 1 = 5,
  // OW = 6 + 5 - 3 + 1 = 9.
  // CHECK: rfuse.conv2d %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 1, 2, 3>, strides = array<i64: 1, 1>} : (tensor<1x1x5x6xf64>, tensor<2x1x2x3xf64>) -> tensor<1x2x5x9xf64>
  %1 = rfuse.conv2d %x2, %w2 {strides = array<i64: 1, 1>, padding = array<i64: 0, 1, 2, 3>,
         dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
       : (tensor<1x1x5x6xf64>, tensor<2x1x2x3xf64>) -> tensor<1x2x5x9xf64>
  // dilation [2, 1], strides [1, 2]: effective kernel 5x3; OH = 10 - 5 + 1 = 6, OW = (10 - 3) / 2 + 1 = 4.
  // CHECK: rfuse.conv2d %{{.*}}, %{{.*}} {dilation = array<i64: 2, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 2>} : (tensor<1x2x10x10xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x6x4xf32>
  %2 = rfuse.conv2d %x3, %w3 {strides = array<i64: 1, 2>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 2, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
       : (tensor<1x2x10x10xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x6x4xf32>
  // groups 2: 4 input channels, 2 per group; 6 output channels.
  // CHECK: rfuse.conv2d %{{.*}}, %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 2 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x6x6xf16>, tensor<6x2x3x3xf16>, tensor<6xf16>) -> tensor<1x6x4x4xf16>
  %3 = rfuse.conv2d %x4, %w4, %b4 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 1, 1>, groups = 2 : i64, layout = #rfuse.layout<NCHW>}
       : (tensor<1x4x6x6xf16>, tensor<6x2x3x3xf16>, tensor<6xf16>) -> tensor<1x6x4x4xf16>
  // Depthwise: groups = channels.
  // CHECK: rfuse.conv2d %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 4 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x6x6xf16>, tensor<4x1x3x3xf16>) -> tensor<1x4x4x4xf16>
  %4 = rfuse.conv2d %x4, %w5 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 1, 1>, groups = 4 : i64, layout = #rfuse.layout<NCHW>}
       : (tensor<1x4x6x6xf16>, tensor<4x1x3x3xf16>) -> tensor<1x4x4x4xf16>
  return %0, %1, %2, %3, %4 : tensor<2x8x5x5xf32>, tensor<1x2x5x9xf64>, tensor<1x3x6x4xf32>, tensor<1x6x4x4xf16>, tensor<1x4x4x4xf16>
}

// NHWC: input [N, H, W, C], filter [O, KH, KW, C/groups], result [N, OH, OW, O].
// GENERIC-LABEL: sym_name = "conv2d_nhwc"
// GENERIC: "rfuse.conv2d"(%{{.*}}, %{{.*}}) <{dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}> : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x6x6x4xf32>
// CHECK-LABEL: func.func @conv2d_nhwc
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x8x8x3xf32>, %[[W:[a-z0-9]+]]: tensor<4x3x3x3xf32>, %[[X2:[a-z0-9]+]]: tensor<2x9x9x4xf32>, %[[W2:[a-z0-9]+]]: tensor<6x3x3x2xf32>, %[[B2:[a-z0-9]+]]: tensor<6xf32>, %[[X3:[a-z0-9]+]]: tensor<1x10x7x2xf32>, %[[W3:[a-z0-9]+]]: tensor<5x3x2x2xf32>)
func.func @conv2d_nhwc(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x3x3xf32>,
                       %x2: tensor<2x9x9x4xf32>, %w2: tensor<6x3x3x2xf32>, %b2: tensor<6xf32>,
                       %x3: tensor<1x10x7x2xf32>, %w3: tensor<5x3x2x2xf32>)
    -> (tensor<1x6x6x4xf32>, tensor<2x5x5x6xf32>, tensor<1x4x6x5xf32>) {
  // CHECK: rfuse.conv2d %[[X]], %[[W]] {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x6x6x4xf32>
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>}
       : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x6x6x4xf32>
  // Bias, stride 2, padding 1, 2 groups.
  // CHECK: rfuse.conv2d %[[X2]], %[[W2]], %[[B2]] {dilation = array<i64: 1, 1>, groups = 2 : i64, layout = #rfuse.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x9x9x4xf32>, tensor<6x3x3x2xf32>, tensor<6xf32>) -> tensor<2x5x5x6xf32>
  %1 = rfuse.conv2d %x2, %w2, %b2 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>,
         dilation = array<i64: 1, 1>, groups = 2 : i64, layout = #rfuse.layout<NHWC>}
       : (tensor<2x9x9x4xf32>, tensor<6x3x3x2xf32>, tensor<6xf32>) -> tensor<2x5x5x6xf32>
  // Non-square kernel 3x2 with dilation [3, 1], stride [1, 1], padding [0, 0, 0, 0]:
  // OH = 10 - 7 + 1 = 4, OW = 7 - 2 + 1 = 6.
  // CHECK: rfuse.conv2d %[[X3]], %[[W3]] {dilation = array<i64: 3, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x10x7x2xf32>, tensor<5x3x2x2xf32>) -> tensor<1x4x6x5xf32>
  %2 = rfuse.conv2d %x3, %w3 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 3, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>}
       : (tensor<1x10x7x2xf32>, tensor<5x3x2x2xf32>) -> tensor<1x4x6x5xf32>
  return %0, %1, %2 : tensor<1x6x6x4xf32>, tensor<2x5x5x6xf32>, tensor<1x4x6x5xf32>
}

// GENERIC-LABEL: sym_name = "max_pool2d"
// GENERIC: "rfuse.max_pool2d"(%{{.*}}) <{kernel = array<i64: 2, 2>, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>}> : (tensor<1x8x26x26xf32>) -> tensor<1x8x13x13xf32>
// CHECK-LABEL: func.func @max_pool2d
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x8x26x26xf32>, %[[Y:[a-z0-9]+]]: tensor<1x7x7x4xf32>, %[[Z:[a-z0-9]+]]: tensor<1x5x7x2xbf16>)
func.func @max_pool2d(%x: tensor<1x8x26x26xf32>, %y: tensor<1x7x7x4xf32>, %z: tensor<1x5x7x2xbf16>)
    -> (tensor<1x8x13x13xf32>, tensor<1x4x4x4xf32>, tensor<1x4x3x2xbf16>) {
  // CHECK: rfuse.max_pool2d %[[X]] {kernel = array<i64: 2, 2>, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x8x26x26xf32>) -> tensor<1x8x13x13xf32>
  %0 = rfuse.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>}
       : (tensor<1x8x26x26xf32>) -> tensor<1x8x13x13xf32>
  // NHWC, 3x3 window, stride 2, padding 1: (7 + 2 - 3) / 2 + 1 = 4.
  // CHECK: rfuse.max_pool2d %[[Y]] {kernel = array<i64: 3, 3>, layout = #rfuse.layout<NHWC>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x7x7x4xf32>) -> tensor<1x4x4x4xf32>
  %1 = rfuse.max_pool2d %y {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,
         padding = array<i64: 1, 1, 1, 1>, layout = #rfuse.layout<NHWC>}
       : (tensor<1x7x7x4xf32>) -> tensor<1x4x4x4xf32>
  // Non-square window and strides: OH = 5 - 2 + 1 = 4, OW = (7 - 3) / 2 + 1 = 3.
  // CHECK: rfuse.max_pool2d %[[Z]] {kernel = array<i64: 2, 3>, layout = #rfuse.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 2>} : (tensor<1x5x7x2xbf16>) -> tensor<1x4x3x2xbf16>
  %2 = rfuse.max_pool2d %z {kernel = array<i64: 2, 3>, strides = array<i64: 1, 2>,
         padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NHWC>}
       : (tensor<1x5x7x2xbf16>) -> tensor<1x4x3x2xbf16>
  return %0, %1, %2 : tensor<1x8x13x13xf32>, tensor<1x4x4x4xf32>, tensor<1x4x3x2xbf16>
}

// count_include_pad defaults to true (elided when printed); false is printed.
// GENERIC-LABEL: sym_name = "avg_pool2d"
// GENERIC: "rfuse.avg_pool2d"(%{{.*}}) <{count_include_pad = true, kernel = array<i64: 2, 2>, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>}> : (tensor<2x3x6x6xf32>) -> tensor<2x3x3x3xf32>
// GENERIC: "rfuse.avg_pool2d"(%{{.*}}) <{count_include_pad = false, kernel = array<i64: 2, 2>, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 0, 1, 0>, strides = array<i64: 1, 1>}> : (tensor<1x1x4x5xf64>) -> tensor<1x1x4x5xf64>
// CHECK-LABEL: func.func @avg_pool2d
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x6x6xf32>, %[[Y:[a-z0-9]+]]: tensor<1x1x4x5xf64>, %[[Z:[a-z0-9]+]]: tensor<1x6x6x3xf32>)
func.func @avg_pool2d(%x: tensor<2x3x6x6xf32>, %y: tensor<1x1x4x5xf64>, %z: tensor<1x6x6x3xf32>)
    -> (tensor<2x3x3x3xf32>, tensor<1x1x4x5xf64>, tensor<1x1x4x5xf64>, tensor<1x2x2x3xf32>) {
  // CHECK: rfuse.avg_pool2d %[[X]] {kernel = array<i64: 2, 2>, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x3x6x6xf32>) -> tensor<2x3x3x3xf32>
  %0 = rfuse.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>}
       : (tensor<2x3x6x6xf32>) -> tensor<2x3x3x3xf32>
  // padding [1, 0, 1, 0], stride 1: OH = 4 + 1 - 2 + 1 = 4, OW = 5 + 1 - 2 + 1 = 5.
  // CHECK: rfuse.avg_pool2d %[[Y]] {count_include_pad = false, kernel = array<i64: 2, 2>, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 0, 1, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x4x5xf64>) -> tensor<1x1x4x5xf64>
  %1 = rfuse.avg_pool2d %y {count_include_pad = false, kernel = array<i64: 2, 2>,
         strides = array<i64: 1, 1>, padding = array<i64: 1, 0, 1, 0>, layout = #rfuse.layout<NCHW>}
       : (tensor<1x1x4x5xf64>) -> tensor<1x1x4x5xf64>
  // CHECK: rfuse.avg_pool2d %[[Y]] {kernel = array<i64: 2, 2>, layout = #rfuse.layout<NCHW>, padding = array<i64: 1, 0, 1, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x4x5xf64>) -> tensor<1x1x4x5xf64>
  %2 = rfuse.avg_pool2d %y {count_include_pad = true, kernel = array<i64: 2, 2>,
         strides = array<i64: 1, 1>, padding = array<i64: 1, 0, 1, 0>, layout = #rfuse.layout<NCHW>}
       : (tensor<1x1x4x5xf64>) -> tensor<1x1x4x5xf64>
  // NHWC, 3x3 window, stride 3: 6 / 3 = 2.
  // CHECK: rfuse.avg_pool2d %[[Z]] {count_include_pad = false, kernel = array<i64: 3, 3>, layout = #rfuse.layout<NHWC>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 3, 3>} : (tensor<1x6x6x3xf32>) -> tensor<1x2x2x3xf32>
  %3 = rfuse.avg_pool2d %z {count_include_pad = false, kernel = array<i64: 3, 3>,
         strides = array<i64: 3, 3>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NHWC>}
       : (tensor<1x6x6x3xf32>) -> tensor<1x2x2x3xf32>
  return %0, %1, %2, %3 : tensor<2x3x3x3xf32>, tensor<1x1x4x5xf64>, tensor<1x1x4x5xf64>, tensor<1x2x2x3xf32>
}

// The smallest filter, 1x1 (pointwise convolution), is valid in both layouts (the verifier only
// rejects filters with a zero spatial size).
// CHECK-LABEL: func.func @conv2d_1x1
func.func @conv2d_1x1(%x: tensor<1x3x5x7xf32>, %w: tensor<4x3x1x1xf32>,
                      %y: tensor<1x5x7x3xf32>, %v: tensor<4x1x1x3xf32>)
    -> (tensor<1x4x5x7xf32>, tensor<1x5x7x4xf32>) {
  // CHECK: rfuse.conv2d {{.*}} : (tensor<1x3x5x7xf32>, tensor<4x3x1x1xf32>) -> tensor<1x4x5x7xf32>
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
       : (tensor<1x3x5x7xf32>, tensor<4x3x1x1xf32>) -> tensor<1x4x5x7xf32>
  // CHECK: rfuse.conv2d {{.*}} : (tensor<1x5x7x3xf32>, tensor<4x1x1x3xf32>) -> tensor<1x5x7x4xf32>
  %1 = rfuse.conv2d %y, %v {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>}
       : (tensor<1x5x7x3xf32>, tensor<4x1x1x3xf32>) -> tensor<1x5x7x4xf32>
  return %0, %1 : tensor<1x4x5x7xf32>, tensor<1x5x7x4xf32>
}

// solve: x · a = b (R's solve(A, B) on a = A^T, b = B^T), with R's tolerance.
// CHECK-LABEL: func.func @solve
// CHECK: rfuse.solve %{{.*}}, %{{.*}} tolerance = 2.2204460492503131E-16 : (tensor<3x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
// GENERIC-LABEL: sym_name = "solve"
// GENERIC: "rfuse.solve"(%{{.*}}, %{{.*}}) <{tolerance = 2.2204460492503131E-16 : f64}> : (tensor<3x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
func.func @solve(%a: tensor<3x3xf64>, %b: tensor<2x3xf64>) -> tensor<2x3xf64> {
  %x = rfuse.solve %a, %b tolerance = 2.2204460492503131E-16 : (tensor<3x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  return %x : tensor<2x3xf64>
}

// cholesky and log_determinant: R's chol() and determinant() (LAPACK on the host).
// CHECK-LABEL: func.func @factorizations
// CHECK: rfuse.cholesky %{{.*}} : tensor<3x3xf64>
// CHECK: rfuse.log_determinant %{{.*}} : (tensor<3x3xf32>) -> tensor<2xf32>
// GENERIC-LABEL: sym_name = "factorizations"
// GENERIC: "rfuse.cholesky"(%{{.*}}) : (tensor<3x3xf64>) -> tensor<3x3xf64>
func.func @factorizations(%a: tensor<3x3xf64>, %b: tensor<3x3xf32>) -> (tensor<3x3xf64>, tensor<2xf32>) {
  %u = rfuse.cholesky %a : tensor<3x3xf64>
  %d = rfuse.log_determinant %b : (tensor<3x3xf32>) -> tensor<2xf32>
  return %u, %d : tensor<3x3xf64>, tensor<2xf32>
}
