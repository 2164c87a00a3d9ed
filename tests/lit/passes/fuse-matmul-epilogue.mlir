// rfuse-fuse-matmul-epilogue: one `rfuse.fusion matmul_epilogue` (conv_epilogue) region per matmul
// (conv2d), holding the contraction and the pointwise ops on its result's shape that follow it:
// bias adds (broadcasts of region inputs), activations, residual adds. No prologue.
// RUN: rfuse-opt %s --rfuse-fuse-matmul-epilogue | FileCheck %s
// The result verifies and round-trips.
// RUN: rfuse-opt %s --rfuse-fuse-matmul-epilogue | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s
// Fusion does not change what is computed (reference interpreter, before and after).
// RUN: rfuse-opt %s --rfuse-fuse-matmul-epilogue > %t.mlir
// RUN: rfuse-run %s --entry bias_relu --random --seed 4 > %t.a.ref
// RUN: rfuse-run %t.mlir --entry bias_relu --random --seed 4 > %t.a
// RUN: diff %t.a.ref %t.a
// RUN: rfuse-run %s --entry conv_relu --random --seed 4 > %t.b.ref
// RUN: rfuse-run %t.mlir --entry conv_relu --random --seed 4 > %t.b
// RUN: diff %t.b.ref %t.b
// RUN: rfuse-run %s --entry matmul_relu_matmul --random --seed 4 > %t.c.ref
// RUN: rfuse-run %t.mlir --entry matmul_relu_matmul --random --seed 4 > %t.c
// RUN: diff %t.c.ref %t.c
// RUN: rfuse-run %s --entry splat_operand --random --seed 4 > %t.d.ref
// RUN: rfuse-run %t.mlir --entry splat_operand --random --seed 4 > %t.d
// RUN: diff %t.d.ref %t.d
// RUN: rfuse-run %s --entry lstm_cell --random --seed 4 > %t.e.ref
// RUN: rfuse-run %t.mlir --entry lstm_cell --random --seed 4 > %t.e
// RUN: diff %t.e.ref %t.e

// matmul + bias (broadcast inside the region) + add + relu: one region.
// CHECK-LABEL: func.func @bias_relu
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<8x16xf32>, %[[W:[a-z0-9]+]]: tensor<16x4xf32>, %[[B:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion matmul_epilogue(%[[A]], %[[W]], %[[B]]) : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32> {
// CHECK-NEXT: ^bb0(%[[P:.+]]: tensor<8x16xf32>, %[[Q:.+]]: tensor<16x4xf32>, %[[C:.+]]: tensor<4xf32>):
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul %[[P]], %[[Q]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[BB:.+]] = rfuse.broadcast_in_dim %[[C]], dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.add %[[MM]], %[[BB]] : tensor<8x4xf32>
// CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[S]] : tensor<8x4xf32>
// CHECK-NEXT: rfuse.yield %[[RL]] : tensor<8x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<8x4xf32>
func.func @bias_relu(%a: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  %mm = rfuse.matmul %a, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %bb = rfuse.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
  %s = rfuse.add %mm, %bb : tensor<8x4xf32>
  %r = rfuse.relu %s : tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// A residual add (an external tensor of the result's shape) joins after the activation; the
// transpose flags of the matmul are kept.
// CHECK-LABEL: func.func @residual
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<16x8xf32>, %[[W:[a-z0-9]+]]: tensor<4x16xf32>, %[[RES:[a-z0-9]+]]: tensor<8x4xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion matmul_epilogue(%[[A]], %[[W]], %[[RES]]) : (tensor<16x8xf32>, tensor<4x16xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
// CHECK-NEXT: ^bb0(%[[P:.+]]: tensor<16x8xf32>, %[[Q:.+]]: tensor<4x16xf32>, %[[PR:.+]]: tensor<8x4xf32>):
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul %[[P]], %[[Q]] {transpose_a = true, transpose_b = true} : (tensor<16x8xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[G:.+]] = rfuse.gelu %[[MM]] approximate = tanh : tensor<8x4xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.add %[[G]], %[[PR]] : tensor<8x4xf32>
// CHECK-NEXT: rfuse.yield %[[S]] : tensor<8x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<8x4xf32>
func.func @residual(%a: tensor<16x8xf32>, %w: tensor<4x16xf32>, %res: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %mm = rfuse.matmul %a, %w {transpose_a = true, transpose_b = true} : (tensor<16x8xf32>, tensor<4x16xf32>) -> tensor<8x4xf32>
  %g = rfuse.gelu %mm approximate = tanh : tensor<8x4xf32>
  %s = rfuse.add %g, %res : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// A batched matmul: the epilogue runs on the batched result shape.
// CHECK-LABEL: func.func @batched
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion matmul_epilogue(%{{.+}}, %{{.+}}) : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul
// CHECK-NEXT: %[[T:.+]] = rfuse.tanh %[[MM]] : tensor<2x8x4xf32>
// CHECK-NEXT: rfuse.yield %[[T]] : tensor<2x8x4xf32>
func.func @batched(%a: tensor<2x8x16xf32>, %w: tensor<16x4xf32>) -> tensor<2x8x4xf32> {
  %mm = rfuse.matmul %a, %w : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  %t = rfuse.tanh %mm : tensor<2x8x4xf32>
  return %t : tensor<2x8x4xf32>
}

// conv2d (with its own bias operand) + relu: one conv_epilogue region.
// CHECK-LABEL: func.func @conv_relu
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x1x6x6xf32>, %[[W:[a-z0-9]+]]: tensor<2x1x3x3xf32>, %[[B:[a-z0-9]+]]: tensor<2xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion conv_epilogue(%[[X]], %[[W]], %[[B]]) : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> {
// CHECK-NEXT: ^bb0(%[[I:.+]]: tensor<1x1x6x6xf32>, %[[F:.+]]: tensor<2x1x3x3xf32>, %[[C:.+]]: tensor<2xf32>):
// CHECK-NEXT: %[[Y:.+]] = rfuse.conv2d %[[I]], %[[F]], %[[C]] {{.*}}layout = #rfuse.layout<NCHW>{{.*}} : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[Y]] : tensor<1x2x4x4xf32>
// CHECK-NEXT: rfuse.yield %[[RL]] : tensor<1x2x4x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<1x2x4x4xf32>
func.func @conv_relu(%x: tensor<1x1x6x6xf32>, %w: tensor<2x1x3x3xf32>, %b: tensor<2xf32>) -> tensor<1x2x4x4xf32> {
  %y = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
       : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  %r = rfuse.relu %y : tensor<1x2x4x4xf32>
  return %r : tensor<1x2x4x4xf32>
}

// NHWC conv2d with a broadcast bias and relu: conv_epilogue. Pooling is never fused: the pool and
// the op after it (on the pooled shape) stay outside.
// CHECK-LABEL: func.func @conv_bias_relu_pool
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x6x6x1xf32>, %[[W:[a-z0-9]+]]: tensor<2x3x3x1xf32>, %[[B:[a-z0-9]+]]: tensor<2xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion conv_epilogue(%[[X]], %[[W]], %[[B]]) : (tensor<1x6x6x1xf32>, tensor<2x3x3x1xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32> {
// CHECK-NEXT: ^bb0(%[[I:.+]]: tensor<1x6x6x1xf32>, %[[F:.+]]: tensor<2x3x3x1xf32>, %[[C:.+]]: tensor<2xf32>):
// CHECK-NEXT: %[[Y:.+]] = rfuse.conv2d %[[I]], %[[F]] {{.*}}layout = #rfuse.layout<NHWC>{{.*}} : (tensor<1x6x6x1xf32>, tensor<2x3x3x1xf32>) -> tensor<1x4x4x2xf32>
// CHECK-NEXT: %[[BB:.+]] = rfuse.broadcast_in_dim %[[C]], dims = [3] : (tensor<2xf32>) -> tensor<1x4x4x2xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.add %[[Y]], %[[BB]] : tensor<1x4x4x2xf32>
// CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[S]] : tensor<1x4x4x2xf32>
// CHECK-NEXT: rfuse.yield %[[RL]] : tensor<1x4x4x2xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[P:.+]] = rfuse.max_pool2d %[[R]] {{.*}} : (tensor<1x4x4x2xf32>) -> tensor<1x2x2x2xf32>
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[P]] : tensor<1x2x2x2xf32>
// CHECK-NEXT: return %[[E]] : tensor<1x2x2x2xf32>
func.func @conv_bias_relu_pool(%x: tensor<1x6x6x1xf32>, %w: tensor<2x3x3x1xf32>, %b: tensor<2xf32>) -> tensor<1x2x2x2xf32> {
  %y = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
         dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>}
       : (tensor<1x6x6x1xf32>, tensor<2x3x3x1xf32>) -> tensor<1x4x4x2xf32>
  %bb = rfuse.broadcast_in_dim %b, dims = [3] : (tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %s = rfuse.add %y, %bb : tensor<1x4x4x2xf32>
  %r = rfuse.relu %s : tensor<1x4x4x2xf32>
  %p = rfuse.max_pool2d %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NHWC>}
       : (tensor<1x4x4x2xf32>) -> tensor<1x2x2x2xf32>
  %e = rfuse.exp %p : tensor<1x2x2x2xf32>
  return %e : tensor<1x2x2x2xf32>
}

// The contraction's result used outside the region (by a reduction) is an extra result.
// CHECK-LABEL: func.func @result_used_outside
// CHECK-NEXT: %[[R:.+]]:2 = rfuse.fusion matmul_epilogue(%{{.+}}, %{{.+}}) : (tensor<8x16xf32>, tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul
// CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[MM]] : tensor<8x4xf32>
// CHECK-NEXT: rfuse.yield %[[MM]], %[[RL]] : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[R]]#0, dims = [1] : (tensor<8x4xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[R]]#1, %[[S]] : tensor<8x4xf32>, tensor<8xf32>
func.func @result_used_outside(%a: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8xf32>) {
  %mm = rfuse.matmul %a, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %r = rfuse.relu %mm : tensor<8x4xf32>
  %s = rfuse.reduce_sum %mm, dims = [1] : (tensor<8x4xf32>) -> tensor<8xf32>
  return %r, %s : tensor<8x4xf32>, tensor<8xf32>
}

// Negative: a pointwise op on the matmul's input (a prologue) stays outside, even when its shape
// is the result's shape (4x4 here); the matmul reads its result as a region input.
// CHECK-LABEL: func.func @prologue_stays_outside
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<4x4xf32>, %[[W:[a-z0-9]+]]: tensor<4x4xf32>)
// CHECK-NEXT: %[[T:.+]] = rfuse.tanh %[[A]] : tensor<4x4xf32>
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion matmul_epilogue(%[[T]], %[[W]]) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT: ^bb0(%[[P:.+]]: tensor<4x4xf32>, %[[Q:.+]]: tensor<4x4xf32>):
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul %[[P]], %[[Q]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[MM]] : tensor<4x4xf32>
// CHECK-NEXT: rfuse.yield %[[RL]] : tensor<4x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<4x4xf32>
func.func @prologue_stays_outside(%a: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %t = rfuse.tanh %a : tensor<4x4xf32>
  %mm = rfuse.matmul %t, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = rfuse.relu %mm : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// Negative: matmul -> relu -> matmul gives two regions (one contraction each); the relu belongs to
// the first, the second matmul reads the first region's result.
// CHECK-LABEL: func.func @matmul_relu_matmul
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<8x16xf32>, %[[W1:[a-z0-9]+]]: tensor<16x4xf32>, %[[W2:[a-z0-9]+]]: tensor<4x4xf32>)
// CHECK-NEXT: %[[R0:.+]] = rfuse.fusion matmul_epilogue(%[[A]], %[[W1]]) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32> {
// CHECK-NEXT: ^bb0(%[[P:.+]]: tensor<8x16xf32>, %[[Q:.+]]: tensor<16x4xf32>):
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul %[[P]], %[[Q]]
// CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[MM]] : tensor<8x4xf32>
// CHECK-NEXT: rfuse.yield %[[RL]] : tensor<8x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[R1:.+]] = rfuse.fusion matmul_epilogue(%[[R0]], %[[W2]]) : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32> {
// CHECK-NEXT: ^bb0(%[[U:.+]]: tensor<8x4xf32>, %[[V:.+]]: tensor<4x4xf32>):
// CHECK-NEXT: %[[M2:.+]] = rfuse.matmul %[[U]], %[[V]] : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: rfuse.yield %[[M2]] : tensor<8x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R1]] : tensor<8x4xf32>
func.func @matmul_relu_matmul(%a: tensor<8x16xf32>, %w1: tensor<16x4xf32>, %w2: tensor<4x4xf32>) -> tensor<8x4xf32> {
  %mm = rfuse.matmul %a, %w1 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %r = rfuse.relu %mm : tensor<8x4xf32>
  %m2 = rfuse.matmul %r, %w2 : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  return %m2 : tensor<8x4xf32>
}

// Negative: a pointwise op whose operands are all external (here a mul of two arguments) does not
// join, even though its result feeds the epilogue: it stays outside and becomes an input.
// CHECK-LABEL: func.func @unrelated_pointwise
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<8x16xf32>, %[[W:[a-z0-9]+]]: tensor<16x4xf32>, %[[P:[a-z0-9]+]]: tensor<8x4xf32>, %[[Q:[a-z0-9]+]]: tensor<8x4xf32>)
// CHECK-NEXT: %[[U:.+]] = rfuse.mul %[[P]], %[[Q]] : tensor<8x4xf32>
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion matmul_epilogue(%[[A]], %[[W]], %[[U]]) : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<8x16xf32>, %{{.+}}: tensor<16x4xf32>, %[[PU:.+]]: tensor<8x4xf32>):
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul
// CHECK-NEXT: %[[S:.+]] = rfuse.add %[[MM]], %[[PU]] : tensor<8x4xf32>
// CHECK-NEXT: rfuse.yield %[[S]] : tensor<8x4xf32>
// CHECK-NEXT: }
// CHECK-NOT: rfuse.mul
// CHECK-NEXT: return %[[R]] : tensor<8x4xf32>
func.func @unrelated_pointwise(%a: tensor<8x16xf32>, %w: tensor<16x4xf32>, %p: tensor<8x4xf32>, %q: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %mm = rfuse.matmul %a, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %u = rfuse.mul %p, %q : tensor<8x4xf32>
  %s = rfuse.add %mm, %u : tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// Negative: a transpose of the contraction's result is not an epilogue op (it reads a region
// value through an index map); it and the op after it stay outside.
// CHECK-LABEL: func.func @transpose_of_result
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion matmul_epilogue(%{{.+}}, %{{.+}}) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul
// CHECK-NEXT: rfuse.yield %[[MM]] : tensor<4x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[T:.+]] = rfuse.transpose %[[R]], perm = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[T]] : tensor<4x4xf32>
// CHECK-NEXT: return %[[RL]] : tensor<4x4xf32>
func.func @transpose_of_result(%a: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %mm = rfuse.matmul %a, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = rfuse.transpose %mm, perm = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = rfuse.relu %t : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// An LSTM step: the product's four gate slices (read in place), a slice of the step's input
// projection and the cell state: one region whose epilogue runs over the [4, 8] state, not the
// [4, 32] product (which the library still writes whole).
// CHECK-LABEL: func.func @lstm_cell
// CHECK-NEXT: %[[R:.+]]:2 = rfuse.fusion matmul_epilogue(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) : (tensor<4x8xf32>, tensor<8x32xf32>, tensor<4x64xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK: rfuse.matmul
// CHECK-COUNT-4: rfuse.slice %{{.+}} : (tensor<4x32xf32>) -> tensor<4x8xf32>
// CHECK: rfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
func.func @lstm_cell(%h: tensor<4x8xf32>, %u: tensor<8x32xf32>, %xp: tensor<4x64xf32>, %c: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %g = rfuse.matmul %h, %u : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
  %gi = rfuse.slice %g {start = array<i64: 0, 0>, limit = array<i64: 4, 8>, strides = array<i64: 1, 1>} : (tensor<4x32xf32>) -> tensor<4x8xf32>
  %gf = rfuse.slice %g {start = array<i64: 0, 8>, limit = array<i64: 4, 16>, strides = array<i64: 1, 1>} : (tensor<4x32xf32>) -> tensor<4x8xf32>
  %gg = rfuse.slice %g {start = array<i64: 0, 16>, limit = array<i64: 4, 24>, strides = array<i64: 1, 1>} : (tensor<4x32xf32>) -> tensor<4x8xf32>
  %go = rfuse.slice %g {start = array<i64: 0, 24>, limit = array<i64: 4, 32>, strides = array<i64: 1, 1>} : (tensor<4x32xf32>) -> tensor<4x8xf32>
  %xi = rfuse.slice %xp {start = array<i64: 0, 32>, limit = array<i64: 4, 40>, strides = array<i64: 1, 1>} : (tensor<4x64xf32>) -> tensor<4x8xf32>
  %ai = rfuse.add %gi, %xi : tensor<4x8xf32>
  %i = rfuse.sigmoid %ai : tensor<4x8xf32>
  %f = rfuse.sigmoid %gf : tensor<4x8xf32>
  %gt = rfuse.tanh %gg : tensor<4x8xf32>
  %o = rfuse.sigmoid %go : tensor<4x8xf32>
  %fc = rfuse.mul %f, %c : tensor<4x8xf32>
  %ig = rfuse.mul %i, %gt : tensor<4x8xf32>
  %cn = rfuse.add %fc, %ig : tensor<4x8xf32>
  %tc = rfuse.tanh %cn : tensor<4x8xf32>
  %hn = rfuse.mul %o, %tc : tensor<4x8xf32>
  return %cn, %hn : tensor<4x8xf32>, tensor<4x8xf32>
}

// A lone matmul still becomes a region (one kernel per contraction).
// CHECK-LABEL: func.func @lone_matmul
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<8x16xf32>, %[[W:[a-z0-9]+]]: tensor<16x4xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion matmul_epilogue(%[[A]], %[[W]]) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32> {
// CHECK-NEXT: ^bb0(%[[P:.+]]: tensor<8x16xf32>, %[[Q:.+]]: tensor<16x4xf32>):
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul %[[P]], %[[Q]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: rfuse.yield %[[MM]] : tensor<8x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<8x4xf32>
func.func @lone_matmul(%a: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %mm = rfuse.matmul %a, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %mm : tensor<8x4xf32>
}

// Negative: without a matmul or conv2d, pointwise ops and reductions are left alone.
// CHECK-LABEL: func.func @no_contraction
// CHECK-NOT: rfuse.fusion
// CHECK: rfuse.exp
// CHECK-NEXT: rfuse.reduce_sum
// CHECK-NEXT: return
func.func @no_contraction(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %e = rfuse.exp %x : tensor<4x8xf32>
  %s = rfuse.reduce_sum %e, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// A convolution's epilogue also takes values that only feed it: an SGD-momentum update of a
// filter gradient (momentum * buffer) fuses whole, where a matmul's would stay outside.
// CHECK-LABEL: func.func @filter_gradient_momentum
// CHECK: rfuse.fusion conv_epilogue
// CHECK-NEXT: ^bb0
// CHECK-NEXT: rfuse.conv2d_backward_filter
// CHECK: rfuse.mul
// CHECK: rfuse.add
// CHECK: rfuse.sub
// CHECK: rfuse.yield
// CHECK-NOT: rfuse.mul
// CHECK: return
func.func @filter_gradient_momentum(%x: tensor<2x3x9x8xf32>, %w: tensor<4x3x3x3xf32>, %g: tensor<2x4x5x4xf32>, %b: tensor<4x3x3x3xf32>) -> (tensor<4x3x3x3xf32>, tensor<4x3x3x3xf32>) {
  %dw = rfuse.conv2d_backward_filter %x, %g {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<2x3x9x8xf32>, tensor<2x4x5x4xf32>) -> tensor<4x3x3x3xf32>
  %c = rfuse.constant dense<0.9> : tensor<4x3x3x3xf32>
  %m = rfuse.mul %b, %c : tensor<4x3x3x3xf32>
  %b2 = rfuse.add %m, %dw : tensor<4x3x3x3xf32>
  %l = rfuse.constant dense<0.1> : tensor<4x3x3x3xf32>
  %s = rfuse.mul %b2, %l : tensor<4x3x3x3xf32>
  %w2 = rfuse.sub %w, %s : tensor<4x3x3x3xf32>
  return %w2, %b2 : tensor<4x3x3x3xf32>, tensor<4x3x3x3xf32>
}

// A splat operand of the matmul is an input of the region (the library call reads its operands
// from memory); a splat of the epilogue is cloned in.
// CHECK-LABEL: func.func @splat_operand
// CHECK: %[[Z:.+]] = rfuse.constant dense<0.000000e+00> : tensor<4x2xf32>
// CHECK: rfuse.fusion matmul_epilogue(%{{.+}}, %[[Z]])
// CHECK: ^bb0(%[[P:.+]]: tensor<3x4xf32>, %[[Q:.+]]: tensor<4x2xf32>):
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul %[[P]], %[[Q]]
// CHECK-NEXT: rfuse.constant dense<2.000000e+00> : tensor<3x2xf32>
func.func @splat_operand(%a: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %z = rfuse.constant dense<0.0> : tensor<4x2xf32>
  %m = rfuse.matmul %a, %z : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %two = rfuse.constant dense<2.0> : tensor<3x2xf32>
  %r = rfuse.add %m, %two : tensor<3x2xf32>
  return %r : tensor<3x2xf32>
}
