// rfuse-lower-kernels-to-cpu: the CPU execution plan's choices and each step's lowered functions
// of (begin, end, memrefs...), for every kernel kind: pointwise with a broadcast (linalg), row and
// column reductions (scf loop nests), a matmul epilogue and a convolution epilogue (BLAS, then a
// compiled epilogue), pooling (the interpreter's loops), and f16 / bf16 (memory only: computed in f32).
// RUN: rfuse-opt %s -split-input-file --rfuse-pipeline=default --rfuse-lower-kernels-to-cpu | FileCheck %s
// RUN: rfuse-opt %s -split-input-file --rfuse-pipeline=default '--rfuse-lower-kernels-to-cpu=stage=llvm' | FileCheck %s --check-prefix=LLVM
// RUN: not rfuse-opt %s -split-input-file '--rfuse-lower-kernels-to-cpu=stage=ptx' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: stage must be linalg or llvm, not 'ptx'

// CHECK-LABEL: func.func @pointwise_broadcast
// CHECK: call @pointwise_broadcast_k0_pointwise{{.*}}rfuse.plan = "compiled pointwise"
// CHECK: module @pointwise_broadcast_k0_pointwise_cpu
// CHECK: func.func @rfuse_cpu_kernel(%{{.*}}: index, %{{.*}}: index, %{{.*}}: memref<32xf64>, %{{.*}}: memref<64x32xf64>, %{{.*}}: memref<64x32xf64>) attributes {llvm.emit_c_interface}
// CHECK: memref.subview
// CHECK: linalg.generic
// CHECK: math.tanh
// LLVM: module @pointwise_broadcast_k0_pointwise_cpu
// LLVM: llvm.func @rfuse_cpu_kernel
// LLVM: llvm.func @_mlir_ciface_rfuse_cpu_kernel
func.func @pointwise_broadcast(%x: tensor<64x32xf64>, %b: tensor<32xf64>) -> tensor<64x32xf64> {
  %bb = rfuse.broadcast_in_dim %b, dims = [1] : (tensor<32xf64>) -> tensor<64x32xf64>
  %s = rfuse.add %x, %bb : tensor<64x32xf64>
  %t = rfuse.tanh %s : tensor<64x32xf64>
  return %t : tensor<64x32xf64>
}

// -----

// A row per outer index, the accumulator carried by scf.for (f32 sums accumulate in f64).
// CHECK-LABEL: func.func @row_sums
// CHECK: rfuse.plan = "compiled reduction"
// CHECK: module @row_sums_k0_reduction_cpu
// CHECK: scf.for
// CHECK: iter_args(%{{.*}} = %{{.*}}) -> (f64)
// CHECK: arith.addf {{.*}} fastmath<reassoc> : f64
// CHECK: arith.truncf
func.func @row_sums(%x: tensor<8x128xf32>) -> tensor<8xf32> {
  %e = rfuse.exp %x : tensor<8x128xf32>
  %s = rfuse.reduce_sum %e, dims = [1] : (tensor<8x128xf32>) -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// -----

// Leading-dim reduction (R's rowSums of a matrix): column tiles, partials in stack scratch.
// CHECK-LABEL: func.func @column_sums
// CHECK: rfuse.plan = "compiled reduction"
// CHECK: module @column_sums_k0_reduction_cpu
// CHECK: memref.alloca
// CHECK: scf.for
// CHECK: scf.for
func.func @column_sums(%x: tensor<16x64xf64>) -> tensor<64xf64> {
  %s = rfuse.reduce_sum %x, dims = [0] : (tensor<16x64xf64>) -> tensor<64xf64>
  return %s : tensor<64xf64>
}

// -----

// A column softmax: exp(x) is computed once, in the sum's pass, written to the output there and
// read back by the division pass (one math.exp in the kernel, a store of it to the output
// memref %OUT, then a load from %OUT feeding the divf).
// CHECK-LABEL: func.func @column_softmax
// CHECK: module @column_softmax_k0_reduction_cpu
// CHECK: func.func @rfuse_cpu_kernel(%{{.*}}: index, %{{.*}}: index, %[[IN:.*]]: memref<2048xf32>, %[[OUT:.*]]: memref<2048xf32>)
// CHECK: %[[E:.*]] = math.exp
// CHECK-NOT: math.exp
// CHECK: memref.store %[[E]], %[[OUT]]
// CHECK-NOT: math.exp
// CHECK: %[[R:.*]] = memref.load %[[OUT]]
// CHECK-NOT: math.exp
// CHECK: arith.divf %[[R]]
// CHECK-NOT: math.exp
// CHECK: return
func.func @column_softmax(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %e = rfuse.exp %x : tensor<16x128xf32>
  %s = rfuse.reduce_sum %e, dims = [0] : (tensor<16x128xf32>) -> tensor<128xf32>
  %b = rfuse.broadcast_in_dim %s, dims = [1] : (tensor<128xf32>) -> tensor<16x128xf32>
  %y = rfuse.div %e, %b : tensor<16x128xf32>
  return %y : tensor<16x128xf32>
}

// -----

// A cheap operand (x * x) is computed again in the output pass, not stored: two muls, no store
// to the output before the last pass.
// CHECK-LABEL: func.func @column_cheap_operand
// CHECK: module @column_cheap_operand_k0_reduction_cpu
// CHECK: arith.mulf
// CHECK: arith.mulf
// CHECK: return
func.func @column_cheap_operand(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %q = rfuse.mul %x, %x : tensor<16x128xf32>
  %s = rfuse.reduce_sum %q, dims = [0] : (tensor<16x128xf32>) -> tensor<128xf32>
  %b = rfuse.broadcast_in_dim %s, dims = [1] : (tensor<128xf32>) -> tensor<16x128xf32>
  %y = rfuse.div %q, %b : tensor<16x128xf32>
  return %y : tensor<16x128xf32>
}

// -----

// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK: rfuse.plan = "BLAS + compiled epilogue"
// CHECK: module @matmul_bias_relu_k0_matmul_epilogue_cpu
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: arith.cmpf olt
// CHECK: arith.select
func.func @matmul_bias_relu(%a: tensor<64x128xf64>, %b: tensor<128x32xf64>, %c: tensor<32xf64>) -> tensor<64x32xf64> {
  %m = rfuse.matmul %a, %b : (tensor<64x128xf64>, tensor<128x32xf64>) -> tensor<64x32xf64>
  %cb = rfuse.broadcast_in_dim %c, dims = [1] : (tensor<32xf64>) -> tensor<64x32xf64>
  %s = rfuse.add %m, %cb : tensor<64x32xf64>
  %r = rfuse.relu %s : tensor<64x32xf64>
  return %r : tensor<64x32xf64>
}

// -----

// CHECK-LABEL: func.func @conv_relu_pool
// CHECK: rfuse.plan = "im2col + BLAS + compiled epilogue"
// CHECK: rfuse.plan = "pooling loops (f64)"
// CHECK: module @conv_relu_pool_k0_conv_epilogue_cpu
// CHECK-NOT: module @conv_relu_pool_1_max_pool2d_cpu
func.func @conv_relu_pool(%x: tensor<2x1x10x10xf32>, %w: tensor<4x1x3x3xf32>, %b: tensor<4xf32>) -> tensor<2x4x4x4xf32> {
  %conv = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
            dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
          : (tensor<2x1x10x10xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %act = rfuse.relu %conv : tensor<2x4x8x8xf32>
  %pool = rfuse.max_pool2d %act {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
            padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>}
          : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  return %pool : tensor<2x4x4x4xf32>
}

// -----

// f16 / bf16 are memory on the CPU: loaded and extended to f32, computed there, each op's
// narrow result rounded (truncf, extf), stored narrow.
// CHECK-LABEL: func.func @half_storage
// CHECK: rfuse.plan = "compiled pointwise"
// CHECK: module @half_storage_k0_pointwise_cpu
// CHECK: func.func @rfuse_cpu_kernel(%{{.*}}: index, %{{.*}}: index, %{{.*}}: memref<256xf16>, %{{.*}}: memref<256xbf16>, %{{.*}}: memref<256xbf16>)
// CHECK: linalg.generic
// CHECK: ^bb0(%[[H:.*]]: f16, %[[B:.*]]: bf16, %{{.*}}: bf16):
// CHECK-DAG: arith.extf %[[H]] : f16 to f32
// CHECK-DAG: arith.extf %[[B]] : bf16 to f32
// CHECK: arith.mulf {{.*}} : f32
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: linalg.yield {{.*}} : bf16
// LLVM: module @half_storage_k0_pointwise_cpu
// LLVM: llvm.fptrunc {{.*}} : f32 to bf16
func.func @half_storage(%x: tensor<256xf16>, %y: tensor<256xbf16>) -> tensor<256xbf16> {
  %a = rfuse.cast %x : tensor<256xf16> to tensor<256xf32>
  %b = rfuse.cast %y : tensor<256xbf16> to tensor<256xf32>
  %s = rfuse.mul %a, %b : tensor<256xf32>
  %c = rfuse.cast %s : tensor<256xf32> to tensor<256xbf16>
  return %c : tensor<256xbf16>
}

// -----

// Indexing fused into a pointwise kernel: the body computes each position (linalg.index, plus
// the call's first index along the split dim) and loads the input there.
// CHECK-LABEL: func.func @indexing
// CHECK: call @indexing_k0_pointwise{{.*}}rfuse.plan = "compiled pointwise"
// CHECK: func.func @rfuse_cpu_kernel(%[[B:[a-z0-9]+]]: index, %{{.*}}: index, %[[X:[a-z0-9]+]]: memref<8xf32>, %{{.*}}: memref<6xf32>)
// CHECK: linalg.generic
// CHECK: linalg.index 0
// CHECK: arith.addi %{{.*}}, %[[B]]
// CHECK: memref.load %[[X]]
// CHECK: arith.select
// CHECK: math.tanh
func.func @indexing(%x: tensor<8xf32>) -> tensor<6xf32> {
  %a = rfuse.slice %x {start = array<i64: 1>, limit = array<i64: 8>, strides = array<i64: 2>} : (tensor<8xf32>) -> tensor<4xf32>
  %b = rfuse.slice %x {start = array<i64: 0>, limit = array<i64: 2>, strides = array<i64: 1>} : (tensor<8xf32>) -> tensor<2xf32>
  %c = rfuse.concat(%a, %b) dim = 0 : (tensor<4xf32>, tensor<2xf32>) -> tensor<6xf32>
  %t = rfuse.tanh %c : tensor<6xf32>
  return %t : tensor<6xf32>
}

// -----

// A cumulative maximum: scf loops over the lines of the [outer, len, inner] view, the running
// value carried along the scanned dim.
// CHECK-LABEL: func.func @scan
// CHECK: rfuse.plan = "compiled scan"
// CHECK: func.func @rfuse_cpu_kernel(%{{.*}}: index, %{{.*}}: index, %{{.*}}: memref<8x5x3xf64>, %{{.*}}: memref<8x5x3xf64>)
// CHECK: scf.for
// CHECK: scf.for {{.*}} iter_args
// CHECK: arith.maximumf
// CHECK: memref.store
func.func @scan(%x: tensor<8x5x3xf64>) -> tensor<8x5x3xf64> {
  %c = rfuse.scan %x, dim = 1, kind = max : tensor<8x5x3xf64>
  return %c : tensor<8x5x3xf64>
}
