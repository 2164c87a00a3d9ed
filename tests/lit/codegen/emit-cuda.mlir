// rfuse-emit-cuda: the GPU execution plan's choices and each kernel's CUDA C++, for every kernel
// kind: pointwise with a broadcast, row and column reductions, a matmul epilogue (cuBLASLt's own,
// and a generated one), a convolution epilogue, pooling, and f16 / bf16 storage.
// RUN: rfuse-opt %s -split-input-file --rfuse-pipeline=default --rfuse-emit-cuda | FileCheck %s
// RUN: rfuse-opt %s -split-input-file --rfuse-pipeline=default '--rfuse-emit-cuda=arch=sm_86 sms=84' | FileCheck %s --check-prefix=SM86

// CHECK-LABEL: func.func @pointwise_broadcast
// CHECK: call @pointwise_broadcast_k0_pointwise{{.*}}rfuse.plan = "cuda pointwise grid 1024 block 256 vector 4"
// CHECK: func.func private @pointwise_broadcast_k0_pointwise{{.*}}rfuse.cuda_source = "// rfuse pointwise kernel pointwise_broadcast_k0_pointwise: 1048576 elements, vector width 4
// CHECK-SAME: extern \22C\22 __global__ void pointwise_broadcast_k0_pointwise(const float* __restrict__ in0, const float* __restrict__ in1, float* __restrict__ out0)
// CHECK-SAME: float4
// CHECK-SAME: rf_tanh
// SM86: rfuse.plan = "cuda pointwise grid 1024 block 256 vector 4"
func.func @pointwise_broadcast(%x: tensor<1024x1024xf32>, %b: tensor<1024xf32>) -> tensor<1024x1024xf32> {
  %bb = rfuse.broadcast_in_dim %b, dims = [1] : (tensor<1024xf32>) -> tensor<1024x1024xf32>
  %s = rfuse.add %x, %bb : tensor<1024x1024xf32>
  %t = rfuse.tanh %s : tensor<1024x1024xf32>
  return %t : tensor<1024x1024xf32>
}

// -----

// Trailing-dim (row) reduction: a block per row; leading-dim (column): tiles of 32 columns.
// CHECK-LABEL: func.func @row_softmax
// CHECK: rfuse.plan = "cuda reduction, a block per row grid 512 block 64"
// CHECK: rfuse.cuda_source = "// rfuse reduction kernel row_softmax_k0_reduction: a block per row, 512 x 1024
// CHECK-SAME: rf_block_reduce
func.func @row_softmax(%x: tensor<512x1024xf32>) -> tensor<512x1024xf32> {
  %m = rfuse.reduce_max %x, dims = [1] : (tensor<512x1024xf32>) -> tensor<512xf32>
  %mb = rfuse.broadcast_in_dim %m, dims = [0] : (tensor<512xf32>) -> tensor<512x1024xf32>
  %d = rfuse.sub %x, %mb : tensor<512x1024xf32>
  %e = rfuse.exp %d : tensor<512x1024xf32>
  %s = rfuse.reduce_sum %e, dims = [1] : (tensor<512x1024xf32>) -> tensor<512xf32>
  %sb = rfuse.broadcast_in_dim %s, dims = [0] : (tensor<512xf32>) -> tensor<512x1024xf32>
  %p = rfuse.div %e, %sb : tensor<512x1024xf32>
  return %p : tensor<512x1024xf32>
}

// -----

// CHECK-LABEL: func.func @column_sums
// CHECK: rfuse.plan = "cuda reduction, tiles of 32 columns grid 2 block 256"
// CHECK: rfuse.cuda_source = "// rfuse reduction kernel column_sums_k0_reduction: tiles of 32 outputs, 64 x 16
// CHECK-SAME: rf_tile_reduce
// SM86: rfuse.plan = "cuda reduction, tiles of 32 columns grid 2 block 256"
func.func @column_sums(%x: tensor<16x64xf32>) -> tensor<64xf32> {
  %e = rfuse.exp %x : tensor<16x64xf32>
  %s = rfuse.reduce_sum %e, dims = [0] : (tensor<16x64xf32>) -> tensor<64xf32>
  return %s : tensor<64xf32>
}

// -----

// A softmax over an R matrix's rows read in three passes (max, sum, outputs), the input loaded
// once into shared memory and reduced per column of the tile. On sm_90: tiles of 32 columns
// (whole 128-byte lines), 512 threads, three blocks per SM (256 x 32 floats: one block holds the
// tile, no cluster). On sm_86: a tile of 8 columns a block of 1024 threads (256 x 8 floats).
// CHECK-LABEL: func.func @column_softmax_cached
// CHECK: rfuse.plan = "cuda reduction, tiles of 32 columns cached in shared memory grid 128 block 512"
// CHECK: rfuse.cuda_source = "// rfuse reduction kernel column_softmax_cached_k0_reduction: tiles of 32 outputs cached in shared memory, 4096 x 256
// CHECK-SAME: __launch_bounds__(512, 3)
// CHECK-SAME: extern __shared__ double rf_cache_smem[];
// CHECK-SAME: xin0[jl * 32] = in0[(j * 4096LL + row)];
// CHECK-SAME: rf_tile_columns_reduce<1, 32, float>
// CHECK-SAME: rf_tile_columns_reduce<0, 32, float>
// CHECK-NOT: rf_cluster_columns_reduce
// SM86: rfuse.plan = "cuda reduction, tiles of 8 columns cached in shared memory grid 512 block 1024"
// SM86: __launch_bounds__(1024, 1)
// SM86-SAME: xin0[jl * 8] = in0[(j * 4096LL + row)];
// SM86-SAME: rf_tile_columns_reduce<1, 8, float>
func.func @column_softmax_cached(%x: tensor<256x4096xf32>) -> tensor<256x4096xf32> {
  %m = rfuse.reduce_max %x, dims = [0] : (tensor<256x4096xf32>) -> tensor<4096xf32>
  %mb = rfuse.broadcast_in_dim %m, dims = [1] : (tensor<4096xf32>) -> tensor<256x4096xf32>
  %e = rfuse.exp %x : tensor<256x4096xf32>
  %d = rfuse.sub %x, %mb : tensor<256x4096xf32>
  %ed = rfuse.exp %d : tensor<256x4096xf32>
  %s = rfuse.reduce_sum %ed, dims = [0] : (tensor<256x4096xf32>) -> tensor<4096xf32>
  %sb = rfuse.broadcast_in_dim %s, dims = [1] : (tensor<4096xf32>) -> tensor<256x4096xf32>
  %y = rfuse.div %ed, %sb : tensor<256x4096xf32>
  return %y : tensor<256x4096xf32>
}

// -----

// The same softmax over 2048 rows: 2048 x 32 floats do not fit one block's 64 KiB, so on sm_90
// a cluster of 4 blocks shares each tile, block `rank` holding rows 512 * rank .. + 511, and
// their partial maxima and sums combine through distributed shared memory.
// CHECK-LABEL: func.func @column_softmax_cluster
// CHECK: rfuse.plan = "cuda reduction, tiles of 32 columns cached in shared memory, clusters of 4 blocks grid 512 block 512"
// CHECK: split over a cluster of 4 blocks
// CHECK-SAME: mapa.u64
// CHECK-SAME: __cluster_dims__(4, 1, 1) __launch_bounds__(512, 3)
// CHECK-SAME: const long long j0 = (long long)rank * 512LL;
// CHECK-SAME: rf_cluster_columns_reduce<1, 4, float>(acc0, reinterpret_cast<float*>(rf_cluster_slots) + (parity * 2 + 0) * 32)
// CHECK-SAME: rf_cluster_columns_reduce<0, 4, float>(acc1, reinterpret_cast<float*>(rf_cluster_slots) + (parity * 2 + 1) * 32)
// CHECK-SAME: rf_cluster_sync();\0A}
// SM86-LABEL: func.func @column_softmax_cluster
// SM86: rfuse.plan = "cuda reduction, tiles of 8 columns cached in shared memory grid 512 block 1024"
// SM86-NOT: __cluster_dims__
func.func @column_softmax_cluster(%x: tensor<2048x4096xf32>) -> tensor<2048x4096xf32> {
  %m = rfuse.reduce_max %x, dims = [0] : (tensor<2048x4096xf32>) -> tensor<4096xf32>
  %mb = rfuse.broadcast_in_dim %m, dims = [1] : (tensor<4096xf32>) -> tensor<2048x4096xf32>
  %d = rfuse.sub %x, %mb : tensor<2048x4096xf32>
  %ed = rfuse.exp %d : tensor<2048x4096xf32>
  %s = rfuse.reduce_sum %ed, dims = [0] : (tensor<2048x4096xf32>) -> tensor<4096xf32>
  %sb = rfuse.broadcast_in_dim %s, dims = [1] : (tensor<4096xf32>) -> tensor<2048x4096xf32>
  %y = rfuse.div %ed, %sb : tensor<2048x4096xf32>
  return %y : tensor<2048x4096xf32>
}

// -----

// bias + ReLU is cuBLASLt's own epilogue (no kernel); erf GELU needs a generated one.
// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK: rfuse.plan = "cublaslt matmul 1x64x32x128 f32 + bias, relu"
// CHECK-NOT: rfuse.cuda_source
// CHECK-LABEL: func.func @matmul_gelu
// CHECK: rfuse.plan = "cublaslt matmul 1x64x32x128 f32 + generated epilogue (grid 2 block 256 vector 4)"
// CHECK: rfuse.cuda_source = "// rfuse pointwise kernel matmul_gelu_k0_matmul_epilogue_epilogue: 2048 elements
// CHECK-SAME: rf_gelu_erf(
func.func @matmul_bias_relu(%a: tensor<64x128xf32>, %b: tensor<128x32xf32>, %c: tensor<32xf32>) -> tensor<64x32xf32> {
  %m = rfuse.matmul %a, %b : (tensor<64x128xf32>, tensor<128x32xf32>) -> tensor<64x32xf32>
  %cb = rfuse.broadcast_in_dim %c, dims = [1] : (tensor<32xf32>) -> tensor<64x32xf32>
  %s = rfuse.add %m, %cb : tensor<64x32xf32>
  %r = rfuse.relu %s : tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}
func.func @matmul_gelu(%a: tensor<64x128xf32>, %b: tensor<128x32xf32>) -> tensor<64x32xf32> {
  %m = rfuse.matmul %a, %b : (tensor<64x128xf32>, tensor<128x32xf32>) -> tensor<64x32xf32>
  %g = rfuse.gelu %m : tensor<64x32xf32>
  return %g : tensor<64x32xf32>
}

// -----

// A convolution through cuDNN (bias by cuDNN) and its ReLU in a generated epilogue; pooling.
// CHECK-LABEL: func.func @conv_relu_pool
// CHECK: rfuse.plan = "cudnn conv forward 2x1x10x10 -> 4 k3x3 s1 g1 nchw f32 + bias + generated epilogue (grid 1 block 256 vector 4)"
// CHECK: rfuse.plan = "cudnn max pool 2x4x8x8 k2x2 s2 f32"
// CHECK: rfuse.cuda_source = "// rfuse pointwise kernel conv_relu_pool_k0_conv_epilogue_epilogue: 512 elements
// CHECK-SAME: rf_relu(
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

// f16 and bf16 are stored as such and computed in f32.
// CHECK-LABEL: func.func @half_storage
// CHECK: rfuse.cuda_source = "// rfuse pointwise kernel half_storage_k0_pointwise
// CHECK-SAME: const __half* __restrict__ in0, const __nv_bfloat16* __restrict__ in1
// CHECK-SAME: __half2float(in0[idx])
// CHECK-SAME: __bfloat162float(in1[idx])
// CHECK-SAME: out0[idx] = __float2bfloat16_rn(
func.func @half_storage(%x: tensor<256xf16>, %y: tensor<256xbf16>) -> tensor<256xbf16> {
  %a = rfuse.cast %x : tensor<256xf16> to tensor<256xf32>
  %b = rfuse.cast %y : tensor<256xbf16> to tensor<256xf32>
  %s = rfuse.mul %a, %b : tensor<256xf32>
  %c = rfuse.cast %s : tensor<256xf32> to tensor<256xbf16>
  return %c : tensor<256xbf16>
}

// -----

// Indexing fused into a pointwise kernel: the input is read at the mapped positions (a strided
// slice's start + i * stride; a concatenation's part chosen by position, clamped reads).
// CHECK-LABEL: func.func @indexing
// CHECK: call @indexing_k0_pointwise{{.*}}rfuse.plan = "cuda pointwise
// CHECK: rfuse.cuda_source = "// rfuse pointwise kernel indexing_k0_pointwise: 6 elements, vector width 4
// CHECK-SAME: ops: slice slice concat tanh
// CHECK-SAME: rf_clampi
// CHECK-SAME: ((idx < 4LL) ? in0[(1LL + (rf_clampi((idx - 0LL), 0LL, 3LL) * 2LL))] : in0[(0LL + rf_clampi((idx - 4LL), 0LL, 1LL))])
func.func @indexing(%x: tensor<8xf32>) -> tensor<6xf32> {
  %a = rfuse.slice %x {start = array<i64: 1>, limit = array<i64: 8>, strides = array<i64: 2>} : (tensor<8xf32>) -> tensor<4xf32>
  %b = rfuse.slice %x {start = array<i64: 0>, limit = array<i64: 2>, strides = array<i64: 1>} : (tensor<8xf32>) -> tensor<2xf32>
  %c = rfuse.concat(%a, %b) dim = 0 : (tensor<4xf32>, tensor<2xf32>) -> tensor<6xf32>
  %t = rfuse.tanh %c : tensor<6xf32>
  return %t : tensor<6xf32>
}

// -----

// A cumulative sum: a scan kernel, a thread per line (here 4 lines of 64 along dim 0, inner 4),
// f32 accumulated in double.
// (A lone op's source is not attached to the IR; the NVRTC unit test compiles it.)
// CHECK-LABEL: func.func @scan
// CHECK: rfuse.scan {{.*}}rfuse.plan = "cuda scan, a thread per line grid 1 block 256 vector 1"
func.func @scan(%x: tensor<64x4xf32>) -> tensor<64x4xf32> {
  %c = rfuse.scan %x, dim = 0, kind = sum : tensor<64x4xf32>
  return %c : tensor<64x4xf32>
}
