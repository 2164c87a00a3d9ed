// The named pipelines (Pipelines.cpp): every pipeline inlines, canonicalizes and CSEs; `default`
// then fuses matmul epilogues, reductions and the remaining pointwise ops and outlines the regions
// into kernels; `elementwise-only` only fuses pointwise ops; `no-fusion` stops after the cleanup.
//
// RUN: rfuse-opt %s --rfuse-pipeline=default | FileCheck %s --check-prefix=DEFAULT
// The registered spelling --rfuse-pipeline-NAME is the same pipeline, also inside --pass-pipeline.
// RUN: rfuse-opt %s --rfuse-pipeline-default | FileCheck %s --check-prefix=DEFAULT
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(rfuse-pipeline-default)' | FileCheck %s --check-prefix=DEFAULT
// RUN: rfuse-opt %s --rfuse-pipeline=default | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s --check-prefix=DEFAULT
// RUN: rfuse-opt %s --rfuse-pipeline=no-fusion | FileCheck %s --check-prefix=NOFUSION
// RUN: rfuse-opt %s --rfuse-pipeline-no-fusion | FileCheck %s --check-prefix=NOFUSION
// RUN: rfuse-opt %s --rfuse-pipeline=elementwise-only | FileCheck %s --check-prefix=ELEMENTWISE
// RUN: rfuse-opt %s --rfuse-pipeline=elementwise-only | rfuse-opt > /dev/null
//
// The compiled module computes what the source computes (reference interpreter).
// RUN: rfuse-opt %s --rfuse-pipeline=default > %t.default.mlir
// RUN: rfuse-opt %s --rfuse-pipeline=elementwise-only > %t.ew.mlir
// RUN: rfuse-run %s --entry softmax --random --seed 6 > %t.softmax.ref
// RUN: rfuse-run %t.default.mlir --entry softmax --random --seed 6 > %t.softmax.default
// RUN: rfuse-run %t.ew.mlir --entry softmax --random --seed 6 > %t.softmax.ew
// RUN: diff %t.softmax.ref %t.softmax.default
// RUN: diff %t.softmax.ref %t.softmax.ew
// RUN: rfuse-run %s --entry mlp --random --seed 6 > %t.mlp.ref
// RUN: rfuse-run %t.default.mlir --entry mlp --random --seed 6 > %t.mlp.default
// RUN: diff %t.mlp.ref %t.mlp.default
// RUN: rfuse-run %s --entry chain --random --seed 6 > %t.chain.ref
// RUN: rfuse-run %t.default.mlir --entry chain --random --seed 6 > %t.chain.default
// RUN: diff %t.chain.ref %t.chain.default
//
// --rfuse-cost-report prints the cost model of every host function after every pass, to stderr
// (threading is disabled so that the lines come in a fixed order).
// RUN: rfuse-opt %s --rfuse-pipeline=default --rfuse-cost-report --mlir-disable-threading -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST
// RUN: rfuse-opt %s --rfuse-pipeline=default --mlir-disable-threading -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOCOST --allow-empty
//
// An unknown pipeline name is an error.
// RUN: not rfuse-opt %s --rfuse-pipeline=bogus 2>&1 | FileCheck %s --check-prefix=ERRNAME
// RUN: not rfuse-opt %s -rfuse-pipeline=bogus 2>&1 | FileCheck %s --check-prefix=ERRNAME
// ERRNAME: rfuse-opt: unknown pipeline 'bogus'; available: default elementwise-only no-fusion
// ERRNAME-NOT: func.func
// RUN: not rfuse-opt %s --rfuse-pipeline-bogus 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: rfuse-pipeline-bogus
// ERR-NOT: func.func
// The single-dash spelling works like the double-dash one.
// RUN: rfuse-opt %s -rfuse-pipeline=no-fusion | FileCheck %s --check-prefix=SINGLE
// SINGLE-NOT: rfuse.fusion
// SINGLE: rfuse.reduce_max

// Cost model: kernels = fusion regions / kernel calls + unfused compute ops; bytes = for each
// kernel, its distinct tensor operands and results. Softmax on 4x8 f32: 7 ops and 1600 bytes
// before fusion, one kernel reading and writing 128 bytes each after.
// COST: rfuse-cost: cse @softmax: kernels=7 bytes=1600
// rfuse-channels-last (and the CSE after it) leave programs without convolutions alone,
// rfuse-move-reshapes programs without reshapes, rfuse-sink-transposes programs without
// transposes, rfuse-sink-slices programs without slices,
// and rfuse-split-reductions these small reductions.
// COST: rfuse-cost: rfuse-channels-last @softmax: kernels=7 bytes=1600
// COST-NEXT: rfuse-cost: rfuse-move-reshapes @softmax: kernels=7 bytes=1600
// COST-NEXT: rfuse-cost: rfuse-sink-transposes @softmax: kernels=7 bytes=1600
// COST-NEXT: rfuse-cost: cse @softmax: kernels=7 bytes=1600
// COST-NEXT: rfuse-cost: rfuse-sink-slices @softmax: kernels=7 bytes=1600
// COST-NEXT: rfuse-cost: rfuse-split-reductions @softmax: kernels=7 bytes=1600
// COST-NEXT: rfuse-cost: rfuse-fuse-matmul-epilogue @softmax: kernels=7 bytes=1600
// COST-NEXT: rfuse-cost: rfuse-fuse-reductions @softmax: kernels=1 bytes=256
// COST-NEXT: rfuse-cost: rfuse-fuse-elementwise @softmax: kernels=1 bytes=256
// The MLP: 5 ops (11520 bytes), then two matmul_epilogue regions (5376 bytes).
// COST-NEXT: rfuse-cost: rfuse-channels-last @mlp: kernels=5 bytes=11520
// COST-NEXT: rfuse-cost: rfuse-move-reshapes @mlp: kernels=5 bytes=11520
// COST-NEXT: rfuse-cost: rfuse-sink-transposes @mlp: kernels=5 bytes=11520
// COST-NEXT: rfuse-cost: cse @mlp: kernels=5 bytes=11520
// COST-NEXT: rfuse-cost: rfuse-sink-slices @mlp: kernels=5 bytes=11520
// COST-NEXT: rfuse-cost: rfuse-split-reductions @mlp: kernels=5 bytes=11520
// COST-NEXT: rfuse-cost: rfuse-fuse-matmul-epilogue @mlp: kernels=2 bytes=5376
// COST-NEXT: rfuse-cost: rfuse-fuse-reductions @mlp: kernels=2 bytes=5376
// COST-NEXT: rfuse-cost: rfuse-fuse-elementwise @mlp: kernels=2 bytes=5376
// The pointwise chain: 3 ops (the constant is free), then one region.
// COST-NEXT: rfuse-cost: rfuse-channels-last @chain: kernels=3 bytes=112
// COST-NEXT: rfuse-cost: rfuse-move-reshapes @chain: kernels=3 bytes=112
// COST-NEXT: rfuse-cost: rfuse-sink-transposes @chain: kernels=3 bytes=112
// COST-NEXT: rfuse-cost: cse @chain: kernels=3 bytes=112
// COST-NEXT: rfuse-cost: rfuse-sink-slices @chain: kernels=3 bytes=112
// COST-NEXT: rfuse-cost: rfuse-split-reductions @chain: kernels=3 bytes=112
// COST-NEXT: rfuse-cost: rfuse-fuse-matmul-epilogue @chain: kernels=3 bytes=112
// COST-NEXT: rfuse-cost: rfuse-fuse-reductions @chain: kernels=3 bytes=112
// COST-NEXT: rfuse-cost: rfuse-fuse-elementwise @chain: kernels=1 bytes=48
// After outlining, a call of a kernel function counts as one kernel.
// COST-NEXT: rfuse-cost: rfuse-outline-kernels @softmax: kernels=1 bytes=256
// COST-NEXT: rfuse-cost: rfuse-outline-kernels @mlp: kernels=2 bytes=5376
// COST-NEXT: rfuse-cost: rfuse-outline-kernels @chain: kernels=1 bytes=48
// COST-NEXT: rfuse-cost: canonicalize @softmax: kernels=1 bytes=256
// COST-NEXT: rfuse-cost: canonicalize @mlp: kernels=2 bytes=5376
// COST-NEXT: rfuse-cost: canonicalize @chain: kernels=1 bytes=48
// Kernel functions themselves are not reported.
// COST-NOT: rfuse-cost: {{.*}}_k{{[0-9]+}}_
// NOCOST-NOT: rfuse-cost

// Row softmax: one reduction kernel (default); under elementwise-only the two reductions stay in
// the host and the pointwise ops around them form two pointwise kernels.
// DEFAULT-LABEL: func.func @softmax
// DEFAULT-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// DEFAULT-NEXT: %[[R:.+]] = call @softmax_k0_reduction(%[[X]]) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// DEFAULT-NEXT: return %[[R]] : tensor<4x8xf32>
// DEFAULT-NEXT: }
// DEFAULT-DAG: func.func private @softmax_k0_reduction(%{{.+}}: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {rfuse.kernel = #rfuse<fusion_kind reduction>}
// NOFUSION-LABEL: func.func @softmax
// NOFUSION-NOT: rfuse.fusion
// NOFUSION-NOT: call
// NOFUSION: rfuse.reduce_max
// NOFUSION-NEXT: rfuse.broadcast_in_dim
// NOFUSION-NEXT: rfuse.sub
// NOFUSION-NEXT: rfuse.exp
// NOFUSION-NEXT: rfuse.reduce_sum
// NOFUSION-NEXT: rfuse.broadcast_in_dim
// NOFUSION-NEXT: rfuse.div
// NOFUSION-NEXT: return
// ELEMENTWISE-LABEL: func.func @softmax
// ELEMENTWISE-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// ELEMENTWISE-NEXT: %[[M:.+]] = rfuse.reduce_max %[[X]], dims = [1]
// ELEMENTWISE-NEXT: %[[E:.+]] = call @softmax_k0_pointwise(%[[M]], %[[X]]) : (tensor<4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// ELEMENTWISE-NEXT: %[[Z:.+]] = rfuse.reduce_sum %[[E]], dims = [1]
// ELEMENTWISE-NEXT: %[[R:.+]] = call @softmax_k1_pointwise(%[[Z]], %[[E]]) : (tensor<4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// ELEMENTWISE-NEXT: return %[[R]] : tensor<4x8xf32>
// ELEMENTWISE-NOT: fusion_kind reduction
// ELEMENTWISE-NOT: fusion_kind matmul_epilogue
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = rfuse.reduce_max %x, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %mb = rfuse.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %s = rfuse.sub %x, %mb : tensor<4x8xf32>
  %e = rfuse.exp %s : tensor<4x8xf32>
  %z = rfuse.reduce_sum %e, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %zb = rfuse.broadcast_in_dim %z, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %r = rfuse.div %e, %zb : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// MLP: matmul + bias + gelu, then a second matmul: two matmul_epilogue kernels, the first with the
// bias and gelu. Under elementwise-only the matmuls stay in the host and the bias + gelu is one
// pointwise kernel.
// DEFAULT-LABEL: func.func @mlp
// DEFAULT-SAME: (%[[X:[a-z0-9]+]]: tensor<8x16xf32>, %[[W1:[a-z0-9]+]]: tensor<16x32xf32>, %[[B1:[a-z0-9]+]]: tensor<32xf32>, %[[W2:[a-z0-9]+]]: tensor<32x4xf32>)
// DEFAULT-NEXT: %[[H:.+]] = call @mlp_k0_matmul_epilogue(%[[X]], %[[W1]], %[[B1]]) : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
// DEFAULT-NEXT: %[[O:.+]] = call @mlp_k1_matmul_epilogue(%[[H]], %[[W2]]) : (tensor<8x32xf32>, tensor<32x4xf32>) -> tensor<8x4xf32>
// DEFAULT-NEXT: return %[[O]] : tensor<8x4xf32>
// DEFAULT-NEXT: }
// DEFAULT-DAG: func.func private @mlp_k0_matmul_epilogue({{.*}}) -> tensor<8x32xf32> attributes {rfuse.kernel = #rfuse<fusion_kind matmul_epilogue>}
// DEFAULT-DAG: func.func private @mlp_k1_matmul_epilogue({{.*}}) -> tensor<8x4xf32> attributes {rfuse.kernel = #rfuse<fusion_kind matmul_epilogue>}
// NOFUSION-LABEL: func.func @mlp
// NOFUSION-NOT: rfuse.fusion
// NOFUSION-NOT: call
// NOFUSION: rfuse.matmul
// NOFUSION-NEXT: rfuse.broadcast_in_dim
// NOFUSION-NEXT: rfuse.add
// NOFUSION-NEXT: rfuse.gelu
// NOFUSION-NEXT: rfuse.matmul
// NOFUSION-NEXT: return
// ELEMENTWISE-LABEL: func.func @mlp
// ELEMENTWISE-SAME: (%[[X:[a-z0-9]+]]: tensor<8x16xf32>, %[[W1:[a-z0-9]+]]: tensor<16x32xf32>, %[[B1:[a-z0-9]+]]: tensor<32xf32>, %[[W2:[a-z0-9]+]]: tensor<32x4xf32>)
// ELEMENTWISE-NEXT: %[[H:.+]] = rfuse.matmul %[[X]], %[[W1]]
// ELEMENTWISE-NEXT: %[[G:.+]] = call @mlp_k0_pointwise(%[[B1]], %[[H]]) : (tensor<32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
// ELEMENTWISE-NEXT: %[[O:.+]] = rfuse.matmul %[[G]], %[[W2]]
// ELEMENTWISE-NEXT: return %[[O]] : tensor<8x4xf32>
// ELEMENTWISE-NOT: fusion_kind reduction
// ELEMENTWISE-NOT: fusion_kind matmul_epilogue
func.func @mlp(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %b1: tensor<32xf32>, %w2: tensor<32x4xf32>) -> tensor<8x4xf32> {
  %h = rfuse.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %bb = rfuse.broadcast_in_dim %b1, dims = [1] : (tensor<32xf32>) -> tensor<8x32xf32>
  %hb = rfuse.add %h, %bb : tensor<8x32xf32>
  %g = rfuse.gelu %hb : tensor<8x32xf32>
  %o = rfuse.matmul %g, %w2 : (tensor<8x32xf32>, tensor<32x4xf32>) -> tensor<8x4xf32>
  return %o : tensor<8x4xf32>
}

// A pointwise chain with a splat constant: one pointwise kernel holding the constant; the host
// keeps no constant (the final canonicalization drops it).
// DEFAULT-LABEL: func.func @chain
// DEFAULT-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[Y:[a-z0-9]+]]: tensor<4xf32>)
// DEFAULT-NEXT: %[[R:.+]] = call @chain_k0_pointwise(%[[X]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// DEFAULT-NEXT: return %[[R]] : tensor<4xf32>
// DEFAULT-NEXT: }
// DEFAULT-LABEL: func.func private @chain_k0_pointwise
// DEFAULT-SAME: (%[[A:[a-z0-9]+]]: tensor<4xf32>, %[[B:[a-z0-9]+]]: tensor<4xf32>) -> tensor<4xf32> attributes {rfuse.kernel = #rfuse<fusion_kind pointwise>} {
// DEFAULT-NEXT: %[[C:.+]] = rfuse.constant dense<2.000000e+00> : tensor<4xf32>
// DEFAULT-NEXT: %[[M:.+]] = rfuse.mul %[[A]], %[[C]] : tensor<4xf32>
// DEFAULT-NEXT: %[[S:.+]] = rfuse.add %[[M]], %[[B]] : tensor<4xf32>
// DEFAULT-NEXT: %[[T:.+]] = rfuse.tanh %[[S]] : tensor<4xf32>
// DEFAULT-NEXT: return %[[T]] : tensor<4xf32>
// DEFAULT-NOT: rfuse.fusion
// NOFUSION-LABEL: func.func @chain
// NOFUSION-NOT: rfuse.fusion
// NOFUSION-NOT: call
// NOFUSION: rfuse.mul
// NOFUSION-NEXT: rfuse.add
// NOFUSION-NEXT: rfuse.tanh
// NOFUSION-NEXT: return
// NOFUSION-NOT: rfuse.kernel
// ELEMENTWISE-LABEL: func.func @chain
// ELEMENTWISE-NEXT: call @chain_k0_pointwise(
// ELEMENTWISE-NEXT: return
func.func @chain(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %c = rfuse.constant dense<2.0> : tensor<4xf32>
  %a = rfuse.mul %x, %c : tensor<4xf32>
  %b = rfuse.add %a, %y : tensor<4xf32>
  %t = rfuse.tanh %b : tensor<4xf32>
  return %t : tensor<4xf32>
}
