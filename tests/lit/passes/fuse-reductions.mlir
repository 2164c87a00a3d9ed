// rfuse-fuse-reductions: reductions over one set of dimensions of one shape F are fused with their
// pointwise prologue (on F), the broadcasts that re-expand reduced values over the reduced
// dimensions, and pointwise ops on F or on the reduced shape, into `rfuse.fusion reduction`.
// RUN: rfuse-opt %s --rfuse-fuse-reductions | FileCheck %s
// RUN: rfuse-opt %s --rfuse-fuse-reductions | FileCheck %s --check-prefix=COUNT
// RUN: rfuse-opt %s --rfuse-fuse-reductions | FileCheck %s --check-prefix=REGIONS
// The result verifies and round-trips.
// RUN: rfuse-opt %s --rfuse-fuse-reductions | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s
// Fusion does not change what is computed (reference interpreter, before and after).
// RUN: rfuse-opt %s --rfuse-fuse-reductions > %t.mlir
// RUN: rfuse-run %s --entry softmax --random --seed 2 > %t.softmax.ref
// RUN: rfuse-run %t.mlir --entry softmax --random --seed 2 > %t.softmax
// RUN: diff %t.softmax.ref %t.softmax
// RUN: rfuse-run %s --entry layernorm --random --seed 2 > %t.ln.ref
// RUN: rfuse-run %t.mlir --entry layernorm --random --seed 2 > %t.ln
// RUN: diff %t.ln.ref %t.ln
// RUN: rfuse-run %s --entry col_means_of_squares --random --seed 2 > %t.cs.ref
// RUN: rfuse-run %t.mlir --entry col_means_of_squares --random --seed 2 > %t.cs
// RUN: diff %t.cs.ref %t.cs

// Row softmax: max, subtract, exp, sum, divide: exactly one region, nothing left outside.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion reduction(%[[X]]) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[M:.+]] = rfuse.reduce_max %[[A]], dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[MB:.+]] = rfuse.broadcast_in_dim %[[M]], dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.sub %[[A]], %[[MB]] : tensor<4x8xf32>
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[S]] : tensor<4x8xf32>
// CHECK-NEXT: %[[Z:.+]] = rfuse.reduce_sum %[[E]], dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[ZB:.+]] = rfuse.broadcast_in_dim %[[Z]], dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[D:.+]] = rfuse.div %[[E]], %[[ZB]] : tensor<4x8xf32>
// CHECK-NEXT: rfuse.yield %[[D]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<4x8xf32>
// REGIONS-LABEL: func.func @softmax
// REGIONS-COUNT-1: rfuse.fusion reduction
// REGIONS-NOT: rfuse.fusion
// REGIONS-LABEL: func.func @layernorm
// REGIONS-COUNT-1: rfuse.fusion reduction
// REGIONS-NOT: rfuse.fusion
// REGIONS-LABEL: func.func @col_means_of_squares
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

// Layernorm over rows, with keep_dims reductions: mean, centre, square, mean, + eps, rsqrt (on the
// reduced shape 4x1), normalize, then gamma and beta broadcast from inputs: one region. The eps
// splat is cloned in; gamma and beta are inputs.
// CHECK-LABEL: func.func @layernorm
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[G:[a-z0-9]+]]: tensor<8xf32>, %[[B:[a-z0-9]+]]: tensor<8xf32>)
// CHECK: %[[R:.+]] = rfuse.fusion reduction(%[[X]], %[[G]], %[[B]]) : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[PX:.+]]: tensor<4x8xf32>, %[[PG:.+]]: tensor<8xf32>, %[[PB:.+]]: tensor<8xf32>):
// CHECK-NEXT: %[[MU:.+]] = rfuse.reduce_mean %[[PX]], dims = [1] {keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[MUB:.+]] = rfuse.broadcast_in_dim %[[MU]], dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[D:.+]] = rfuse.sub %[[PX]], %[[MUB]] : tensor<4x8xf32>
// CHECK-NEXT: %[[D2:.+]] = rfuse.mul %[[D]], %[[D]] : tensor<4x8xf32>
// CHECK-NEXT: %[[VAR:.+]] = rfuse.reduce_mean %[[D2]], dims = [1] {keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[EPS:.+]] = rfuse.constant dense<9.99999974E-6> : tensor<4x1xf32>
// CHECK-NEXT: %[[VE:.+]] = rfuse.add %[[VAR]], %[[EPS]] : tensor<4x1xf32>
// CHECK-NEXT: %[[RS:.+]] = rfuse.rsqrt %[[VE]] : tensor<4x1xf32>
// CHECK-NEXT: %[[RSB:.+]] = rfuse.broadcast_in_dim %[[RS]], dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[N:.+]] = rfuse.mul %[[D]], %[[RSB]] : tensor<4x8xf32>
// CHECK-NEXT: %[[GB:.+]] = rfuse.broadcast_in_dim %[[PG]], dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[BB:.+]] = rfuse.broadcast_in_dim %[[PB]], dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[NG:.+]] = rfuse.mul %[[N]], %[[GB]] : tensor<4x8xf32>
// CHECK-NEXT: %[[Y:.+]] = rfuse.add %[[NG]], %[[BB]] : tensor<4x8xf32>
// CHECK-NEXT: rfuse.yield %[[Y]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<4x8xf32>
func.func @layernorm(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %mu = rfuse.reduce_mean %x, dims = [1] {keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mub = rfuse.broadcast_in_dim %mu, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %d = rfuse.sub %x, %mub : tensor<4x8xf32>
  %d2 = rfuse.mul %d, %d : tensor<4x8xf32>
  %var = rfuse.reduce_mean %d2, dims = [1] {keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %eps = rfuse.constant dense<1.0e-5> : tensor<4x1xf32>
  %ve = rfuse.add %var, %eps : tensor<4x1xf32>
  %rs = rfuse.rsqrt %ve : tensor<4x1xf32>
  %rsb = rfuse.broadcast_in_dim %rs, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %n = rfuse.mul %d, %rsb : tensor<4x8xf32>
  %gb = rfuse.broadcast_in_dim %g, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %bb = rfuse.broadcast_in_dim %b, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %ng = rfuse.mul %n, %gb : tensor<4x8xf32>
  %y = rfuse.add %ng, %bb : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// colSums(x^2) / n of a 3x5 R matrix (a row-major tensor<5x3>): the prologue mul on F and the
// epilogue div on the reduced shape join the reduction; the splat n is cloned in.
// CHECK-LABEL: func.func @col_means_of_squares
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<5x3xf32>)
// CHECK: %[[R:.+]] = rfuse.fusion reduction(%[[X]]) : (tensor<5x3xf32>) -> tensor<3xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<5x3xf32>):
// CHECK-NEXT: %[[SQ:.+]] = rfuse.mul %[[A]], %[[A]] : tensor<5x3xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[SQ]], dims = [0] : (tensor<5x3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[N:.+]] = rfuse.constant dense<5.000000e+00> : tensor<3xf32>
// CHECK-NEXT: %[[D:.+]] = rfuse.div %[[S]], %[[N]] : tensor<3xf32>
// CHECK-NEXT: rfuse.yield %[[D]] : tensor<3xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<3xf32>
func.func @col_means_of_squares(%x: tensor<5x3xf32>) -> tensor<3xf32> {
  %sq = rfuse.mul %x, %x : tensor<5x3xf32>
  %s = rfuse.reduce_sum %sq, dims = [0] : (tensor<5x3xf32>) -> tensor<3xf32>
  %n = rfuse.constant dense<5.0> : tensor<3xf32>
  %r = rfuse.div %s, %n : tensor<3xf32>
  return %r : tensor<3xf32>
}

// Negative: two reductions over different dimensions of the same (computed) input are never in
// one region. The shared prologue is not duplicated: the first region yields it and the second
// reads it as an input.
// CHECK-LABEL: func.func @different_dims
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R0:.+]]:2 = rfuse.fusion reduction(%[[X]]) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[A]] : tensor<4x8xf32>
// CHECK-NEXT: %[[RS:.+]] = rfuse.reduce_sum %[[E]], dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: rfuse.yield %[[E]], %[[RS]] : tensor<4x8xf32>, tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[R1:.+]] = rfuse.fusion reduction(%[[R0]]#0) : (tensor<4x8xf32>) -> tensor<8xf32> {
// CHECK-NEXT: ^bb0(%[[B:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[CS:.+]] = rfuse.reduce_sum %[[B]], dims = [0] : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: rfuse.yield %[[CS]] : tensor<8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R0]]#1, %[[R1]] : tensor<4xf32>, tensor<8xf32>
// Exactly two regions and one exp in the whole function.
// COUNT-LABEL: func.func @different_dims
// COUNT-COUNT-1: rfuse.exp
// COUNT-NOT: rfuse.exp
// COUNT-LABEL: func.func @rows_then_columns
// REGIONS-LABEL: func.func @different_dims
// REGIONS-COUNT-2: rfuse.fusion reduction
// REGIONS-NOT: rfuse.fusion
// REGIONS-LABEL: func.func @rows_then_columns
func.func @different_dims(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %e = rfuse.exp %x : tensor<4x8xf32>
  %r = rfuse.reduce_sum %e, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %c = rfuse.reduce_sum %e, dims = [0] : (tensor<4x8xf32>) -> tensor<8xf32>
  return %r, %c : tensor<4xf32>, tensor<8xf32>
}

// Negative: a chain that reduces rows, re-expands, then reduces columns: the column reduction
// (different dims) starts its own region.
// CHECK-LABEL: func.func @rows_then_columns
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R0:.+]] = rfuse.fusion reduction(%[[X]]) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: rfuse.reduce_max %[[A]], dims = [1]
// CHECK-NEXT: rfuse.broadcast_in_dim
// CHECK-NEXT: %[[M:.+]] = rfuse.mul
// CHECK-NEXT: rfuse.yield %[[M]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[R1:.+]] = rfuse.fusion reduction(%[[R0]]) : (tensor<4x8xf32>) -> tensor<8xf32> {
// CHECK-NEXT: ^bb0(%[[B:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: rfuse.reduce_sum %[[B]], dims = [0] : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: rfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R1]] : tensor<8xf32>
func.func @rows_then_columns(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %m = rfuse.reduce_max %x, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %mb = rfuse.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %p = rfuse.mul %x, %mb : tensor<4x8xf32>
  %c = rfuse.reduce_sum %p, dims = [0] : (tensor<4x8xf32>) -> tensor<8xf32>
  return %c : tensor<8xf32>
}

// Negative: a reduced value with two consumers, one fusible (broadcast + div) and one not (a
// matmul): the reduction is computed once, in the region, and yielded for the matmul.
// CHECK-LABEL: func.func @reduction_two_consumers
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[W:[a-z0-9]+]]: tensor<1x4xf32>)
// CHECK-NEXT: %[[R:.+]]:2 = rfuse.fusion reduction(%[[X]]) : (tensor<4x8xf32>) -> (tensor<4x1xf32>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[A]], dims = [1] {keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[B:.+]] = rfuse.broadcast_in_dim %[[S]], dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[D:.+]] = rfuse.div %[[A]], %[[B]] : tensor<4x8xf32>
// CHECK-NEXT: rfuse.yield %[[S]], %[[D]] : tensor<4x1xf32>, tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NOT: rfuse.reduce_sum
// CHECK-NEXT: %[[M:.+]] = rfuse.matmul %[[R]]#0, %[[W]] : (tensor<4x1xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[R]]#1, %[[M]] : tensor<4x8xf32>, tensor<4x4xf32>
// Exactly one reduce_sum in the whole function.
// COUNT-LABEL: func.func @reduction_two_consumers
// COUNT-COUNT-1: rfuse.reduce_sum
// COUNT-NOT: rfuse.reduce_sum
// COUNT-LABEL: func.func @reduction_two_epilogues
func.func @reduction_two_consumers(%x: tensor<4x8xf32>, %w: tensor<1x4xf32>) -> (tensor<4x8xf32>, tensor<4x4xf32>) {
  %s = rfuse.reduce_sum %x, dims = [1] {keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %b = rfuse.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %d = rfuse.div %x, %b : tensor<4x8xf32>
  %m = rfuse.matmul %s, %w : (tensor<4x1xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>
  return %d, %m : tensor<4x8xf32>, tensor<4x4xf32>
}

// A reduced value with two fusible consumers on the reduced shape: both join, one reduction.
// CHECK-LABEL: func.func @reduction_two_epilogues
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.+]]:2 = rfuse.fusion reduction(%[[X]]) : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[A]], dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[S]] : tensor<4xf32>
// CHECK-NEXT: %[[L:.+]] = rfuse.log %[[S]] : tensor<4xf32>
// CHECK-NEXT: rfuse.yield %[[E]], %[[L]] : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1 : tensor<4xf32>, tensor<4xf32>
func.func @reduction_two_epilogues(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %s = rfuse.reduce_sum %x, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %a = rfuse.exp %s : tensor<4xf32>
  %b = rfuse.log %s : tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// Negative: broadcasting a reduced value to a shape other than F (4x3 instead of 4x8) is not a
// re-expansion over the reduced dims: the broadcast and its consumer stay outside, unfused (this
// pass only forms regions that contain a reduction).
// CHECK-LABEL: func.func @broadcast_to_other_shape
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion reduction(%[[X]]) : (tensor<4x8xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[A]], dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: rfuse.yield %[[S]] : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[B:.+]] = rfuse.broadcast_in_dim %[[R]], dims = [0] : (tensor<4xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[B]] : tensor<4x3xf32>
// CHECK-NEXT: return %[[E]] : tensor<4x3xf32>
func.func @broadcast_to_other_shape(%x: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %s = rfuse.reduce_sum %x, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %b = rfuse.broadcast_in_dim %s, dims = [0] : (tensor<4xf32>) -> tensor<4x3xf32>
  %e = rfuse.exp %b : tensor<4x3xf32>
  return %e : tensor<4x3xf32>
}

// Negative: pointwise ops without any reduction are left unfused by this pass.
// CHECK-LABEL: func.func @pointwise_only
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[V:[a-z0-9]+]]: tensor<8xf32>)
// CHECK-NOT: rfuse.fusion
// CHECK-NEXT: %[[B:.+]] = rfuse.broadcast_in_dim %[[V]], dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: %[[A:.+]] = rfuse.add %[[E]], %[[B]] : tensor<4x8xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x8xf32>
func.func @pointwise_only(%x: tensor<4x8xf32>, %v: tensor<8xf32>) -> tensor<4x8xf32> {
  %b = rfuse.broadcast_in_dim %v, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %e = rfuse.exp %x : tensor<4x8xf32>
  %a = rfuse.add %e, %b : tensor<4x8xf32>
  return %a : tensor<4x8xf32>
}

// Negative: matmuls are not part of reduction regions; the reduction of a matmul's result is a
// region of its own that reads the matmul's result.
// CHECK-LABEL: func.func @matmul_then_reduce
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[W:[a-z0-9]+]]: tensor<8x8xf32>)
// CHECK-NEXT: %[[M:.+]] = rfuse.matmul %[[X]], %[[W]] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion reduction(%[[M]]) : (tensor<4x8xf32>) -> tensor<4xf32> {
// CHECK-NOT: rfuse.matmul
// CHECK: return %[[R]] : tensor<4xf32>
func.func @matmul_then_reduce(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4xf32> {
  %m = rfuse.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %e = rfuse.exp %m : tensor<4x8xf32>
  %s = rfuse.reduce_sum %e, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}
