// rfuse-fuse-elementwise: pointwise ops, casts, broadcasts and transposes that share one iteration
// space are grouped into `rfuse.fusion pointwise` regions.
// RUN: rfuse-opt %s --rfuse-fuse-elementwise | FileCheck %s
// The result verifies and round-trips (a second rfuse-opt parses and verifies it).
// RUN: rfuse-opt %s --rfuse-fuse-elementwise | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s
// max-ops bounds the size of a region.
// RUN: rfuse-opt %s --rfuse-fuse-elementwise=max-ops=2 | FileCheck %s --check-prefix=MAX2
// RUN: rfuse-opt %s --rfuse-fuse-elementwise=max-ops=2 | rfuse-opt > /dev/null
// The testing-only option that deliberately miscompiles rfuse.sub (the property tests rely on it
// to show that they catch a wrong transformation); pinned so that it is not removed silently.
// RUN: rfuse-opt %s --rfuse-fuse-elementwise=test-flip-sub-operands=true | FileCheck %s --check-prefix=FLIP
//
// Fusion does not change what is computed: the reference interpreter gives identical outputs
// before and after (rfuse-run interprets fusion regions), and the flipped sub is caught.
// RUN: rfuse-run %s --entry chain --random --seed 3 > %t.ref
// RUN: rfuse-opt %s --rfuse-fuse-elementwise > %t.fused.mlir
// RUN: rfuse-run %t.fused.mlir --entry chain --random --seed 3 > %t.fused
// RUN: diff %t.ref %t.fused
// RUN: rfuse-run %s --entry sub_operands --random --seed 3 > %t.sub.ref
// RUN: rfuse-run %t.fused.mlir --entry sub_operands --random --seed 3 > %t.sub.fused
// RUN: diff %t.sub.ref %t.sub.fused
// RUN: rfuse-opt %s --rfuse-fuse-elementwise=test-flip-sub-operands=true > %t.flip.mlir
// RUN: rfuse-run %t.flip.mlir --entry sub_operands --random --seed 3 > %t.sub.flip
// RUN: not diff %t.sub.ref %t.sub.flip

// A chain of pointwise ops becomes one region; the inputs are the chain's external operands.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion pointwise(%[[X]], %[[Y]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[S:.+]] = rfuse.add %[[A]], %[[B]] : tensor<4x8xf32>
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[S]] : tensor<4x8xf32>
// CHECK-NEXT: %[[M:.+]] = rfuse.mul %[[E]], %[[A]] : tensor<4x8xf32>
// CHECK-NEXT: %[[T:.+]] = rfuse.tanh %[[M]] : tensor<4x8xf32>
// CHECK-NEXT: rfuse.yield %[[T]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<4x8xf32>
func.func @chain(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = rfuse.add %x, %y : tensor<4x8xf32>
  %e = rfuse.exp %a : tensor<4x8xf32>
  %m = rfuse.mul %e, %x : tensor<4x8xf32>
  %t = rfuse.tanh %m : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// max-ops=2 splits a chain of four into two regions of two; the second reads the first's result.
// MAX2-LABEL: func.func @chain4
// MAX2-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>)
// MAX2-NEXT: %[[R0:.+]] = rfuse.fusion pointwise(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32> {
// MAX2-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>):
// MAX2-NEXT: %[[E:.+]] = rfuse.exp %[[A]]
// MAX2-NEXT: %[[N:.+]] = rfuse.neg %[[E]]
// MAX2-NEXT: rfuse.yield %[[N]] : tensor<4xf32>
// MAX2-NEXT: }
// MAX2-NEXT: %[[R1:.+]] = rfuse.fusion pointwise(%[[R0]]) : (tensor<4xf32>) -> tensor<4xf32> {
// MAX2-NEXT: ^bb0(%[[B:.+]]: tensor<4xf32>):
// MAX2-NEXT: %[[T:.+]] = rfuse.tanh %[[B]]
// MAX2-NEXT: %[[AB:.+]] = rfuse.abs %[[T]]
// MAX2-NEXT: rfuse.yield %[[AB]] : tensor<4xf32>
// MAX2-NEXT: }
// MAX2-NEXT: return %[[R1]] : tensor<4xf32>
// Unbounded (the default), the same chain is one region of four ops.
// CHECK-LABEL: func.func @chain4
// CHECK-NEXT: rfuse.fusion pointwise
// CHECK-NEXT: ^bb0
// CHECK-NEXT: rfuse.exp
// CHECK-NEXT: rfuse.neg
// CHECK-NEXT: rfuse.tanh
// CHECK-NEXT: rfuse.abs
// CHECK-NEXT: rfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @chain4(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = rfuse.exp %x : tensor<4xf32>
  %b = rfuse.neg %a : tensor<4xf32>
  %c = rfuse.tanh %b : tensor<4xf32>
  %d = rfuse.abs %c : tensor<4xf32>
  return %d : tensor<4xf32>
}

// A broadcast and a transpose reading region inputs join the region (index maps on the inputs).
// CHECK-LABEL: func.func @index_maps
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[V:[a-z0-9]+]]: tensor<8xf32>, %[[W:[a-z0-9]+]]: tensor<8x4xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion pointwise(%[[V]], %[[W]], %[[X]]) : (tensor<8xf32>, tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[PV:.+]]: tensor<8xf32>, %[[PW:.+]]: tensor<8x4xf32>, %[[PX:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[B:.+]] = rfuse.broadcast_in_dim %[[PV]], dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[T:.+]] = rfuse.transpose %[[PW]], perm = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[A:.+]] = rfuse.add %[[PX]], %[[B]] : tensor<4x8xf32>
// CHECK-NEXT: %[[M:.+]] = rfuse.mul %[[A]], %[[T]] : tensor<4x8xf32>
// CHECK-NEXT: rfuse.yield %[[M]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<4x8xf32>
func.func @index_maps(%x: tensor<4x8xf32>, %v: tensor<8xf32>, %w: tensor<8x4xf32>) -> tensor<4x8xf32> {
  %b = rfuse.broadcast_in_dim %v, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %t = rfuse.transpose %w, perm = [1, 0] : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %a = rfuse.add %x, %b : tensor<4x8xf32>
  %m = rfuse.mul %a, %t : tensor<4x8xf32>
  return %m : tensor<4x8xf32>
}

// Splat constants are cloned into the region instead of being passed in; a dense (non-splat)
// constant is an input like any other value. A rank-0 splat that is broadcast is cloned too.
// CHECK-LABEL: func.func @constants
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x4xf32>)
// CHECK: %[[D:.+]] = rfuse.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00], [5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00]]> : tensor<2x4xf32>
// CHECK: %[[R:.+]] = rfuse.fusion pointwise(%[[X]], %[[D]]) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT: ^bb0(%[[PX:.+]]: tensor<2x4xf32>, %[[PD:.+]]: tensor<2x4xf32>):
// CHECK-NEXT: %[[TWO:.+]] = rfuse.constant dense<2.000000e+00> : tensor<2x4xf32>
// CHECK-NEXT: %[[M:.+]] = rfuse.mul %[[PX]], %[[TWO]] : tensor<2x4xf32>
// CHECK-NEXT: %[[A:.+]] = rfuse.add %[[M]], %[[PD]] : tensor<2x4xf32>
// CHECK-NEXT: %[[THREE:.+]] = rfuse.constant dense<3.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[B:.+]] = rfuse.broadcast_in_dim %[[THREE]], dims = [] : (tensor<f32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.sub %[[A]], %[[B]] : tensor<2x4xf32>
// CHECK-NEXT: rfuse.yield %[[S]] : tensor<2x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<2x4xf32>
func.func @constants(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = rfuse.constant dense<2.0> : tensor<2x4xf32>
  %d = rfuse.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %three = rfuse.constant dense<3.0> : tensor<f32>
  %m = rfuse.mul %x, %two : tensor<2x4xf32>
  %a = rfuse.add %m, %d : tensor<2x4xf32>
  %b = rfuse.broadcast_in_dim %three, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
  %s = rfuse.sub %a, %b : tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// Multi-output: an intermediate used outside the region is yielded as an extra result (in the
// order the values are defined), and every outside use reads the matching result. Nothing is
// recomputed outside.
// CHECK-LABEL: func.func @multi_output
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[R:.+]]:2 = rfuse.fusion pointwise(%[[X]]) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>):
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[A]] : tensor<4xf32>
// CHECK-NEXT: %[[N:.+]] = rfuse.neg %[[E]] : tensor<4xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.sqrt %[[N]] : tensor<4xf32>
// CHECK-NEXT: rfuse.yield %[[E]], %[[S]] : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NOT: rfuse.exp
// CHECK-NEXT: return %[[R]]#1, %[[R]]#0 : tensor<4xf32>, tensor<4xf32>
func.func @multi_output(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = rfuse.exp %x : tensor<4xf32>
  %n = rfuse.neg %e : tensor<4xf32>
  %s = rfuse.sqrt %n : tensor<4xf32>
  return %s, %e : tensor<4xf32>, tensor<4xf32>
}

// An intermediate read by a non-fusible op that sits between region members: it is a result of
// the region and the reduction is placed after the region (the block stays in dominance order).
// CHECK-LABEL: func.func @output_to_reduction
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.+]]:2 = rfuse.fusion pointwise(%[[X]]) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[A]] : tensor<4x8xf32>
// CHECK-NEXT: %[[N:.+]] = rfuse.neg %[[E]] : tensor<4x8xf32>
// CHECK-NEXT: rfuse.yield %[[E]], %[[N]] : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[R]]#0, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[S]], %[[R]]#1 : tensor<4xf32>, tensor<4x8xf32>
func.func @output_to_reduction(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %e = rfuse.exp %x : tensor<4x8xf32>
  %s = rfuse.reduce_sum %e, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %n = rfuse.neg %e : tensor<4x8xf32>
  return %s, %n : tensor<4xf32>, tensor<4x8xf32>
}

// Negative: a broadcast whose operand is computed in a region does not join that region (the
// broadcast changes the iteration space); it starts the consumer's region, reading the first
// region's result as an input.
// CHECK-LABEL: func.func @broadcast_of_region_value
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<8xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R0:.+]] = rfuse.fusion pointwise(%[[X]]) : (tensor<8xf32>) -> tensor<8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<8xf32>):
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[A]] : tensor<8xf32>
// CHECK-NEXT: rfuse.yield %[[E]] : tensor<8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[R1:.+]] = rfuse.fusion pointwise(%[[R0]], %[[Y]]) : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[P:.+]]: tensor<8xf32>, %[[Q:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[B:.+]] = rfuse.broadcast_in_dim %[[P]], dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.add %[[B]], %[[Q]] : tensor<4x8xf32>
// CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[S]] : tensor<4x8xf32>
// CHECK-NEXT: rfuse.yield %[[RL]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R1]] : tensor<4x8xf32>
func.func @broadcast_of_region_value(%x: tensor<8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = rfuse.exp %x : tensor<8xf32>
  %b = rfuse.broadcast_in_dim %e, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %a = rfuse.add %b, %y : tensor<4x8xf32>
  %r = rfuse.relu %a : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// Negative: likewise a transpose of a region value, even when the shape does not change
// (4x4 -> 4x4). The transposed value and the untransposed one both come from the first region.
// CHECK-LABEL: func.func @transpose_of_region_value
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x4xf32>)
// CHECK-NEXT: %[[R0:.+]] = rfuse.fusion pointwise(%[[X]]) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x4xf32>):
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[A]] : tensor<4x4xf32>
// CHECK-NEXT: rfuse.yield %[[E]] : tensor<4x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[R1:.+]] = rfuse.fusion pointwise(%[[R0]]) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT: ^bb0(%[[P:.+]]: tensor<4x4xf32>):
// CHECK-NEXT: %[[T:.+]] = rfuse.transpose %[[P]], perm = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.add %[[T]], %[[P]] : tensor<4x4xf32>
// CHECK-NEXT: rfuse.yield %[[S]] : tensor<4x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R1]] : tensor<4x4xf32>
func.func @transpose_of_region_value(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = rfuse.exp %x : tensor<4x4xf32>
  %t = rfuse.transpose %e, perm = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = rfuse.add %t, %e : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// Negative: a value that leaves a candidate region and flows back in through a non-fusible op
// (here a reduction) keeps the two parts apart; otherwise the region could not be placed.
// CHECK-LABEL: func.func @no_cycle_through_reduction
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R0:.+]] = rfuse.fusion pointwise(%[[X]]) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<4x8xf32>):
// CHECK-NEXT: rfuse.exp
// CHECK-NEXT: rfuse.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[R0]], dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[R1:.+]] = rfuse.fusion pointwise(%[[S]], %[[R0]]) : (tensor<4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[P:.+]]: tensor<4xf32>, %[[Q:.+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[B:.+]] = rfuse.broadcast_in_dim %[[P]], dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[D:.+]] = rfuse.div %[[Q]], %[[B]] : tensor<4x8xf32>
// CHECK-NEXT: rfuse.yield %[[D]] : tensor<4x8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R1]] : tensor<4x8xf32>
func.func @no_cycle_through_reduction(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = rfuse.exp %x : tensor<4x8xf32>
  %s = rfuse.reduce_sum %a, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %b = rfuse.broadcast_in_dim %s, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %c = rfuse.div %a, %b : tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// Negative: ops of different shapes make separate regions, one per iteration space.
// CHECK-LABEL: func.func @different_shapes
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[Y:[a-z0-9]+]]: tensor<8xf32>)
// CHECK-NEXT: %[[R0:.+]] = rfuse.fusion pointwise(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<4xf32>):
// CHECK-NEXT: rfuse.exp %{{.+}} : tensor<4xf32>
// CHECK-NEXT: rfuse.neg %{{.+}} : tensor<4xf32>
// CHECK-NEXT: rfuse.yield %{{.+}} : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[R1:.+]] = rfuse.fusion pointwise(%[[Y]]) : (tensor<8xf32>) -> tensor<8xf32> {
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<8xf32>):
// CHECK-NEXT: rfuse.exp %{{.+}} : tensor<8xf32>
// CHECK-NEXT: rfuse.neg %{{.+}} : tensor<8xf32>
// CHECK-NEXT: rfuse.yield %{{.+}} : tensor<8xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R0]], %[[R1]] : tensor<4xf32>, tensor<8xf32>
func.func @different_shapes(%x: tensor<4xf32>, %y: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %a = rfuse.exp %x : tensor<4xf32>
  %b = rfuse.exp %y : tensor<8xf32>
  %c = rfuse.neg %a : tensor<4xf32>
  %d = rfuse.neg %b : tensor<8xf32>
  return %c, %d : tensor<4xf32>, tensor<8xf32>
}

// Negative: a reshape is not elementwise; the ops on either side are separate regions.
// CHECK-LABEL: func.func @reshape_between
// CHECK-NEXT: %[[R0:.+]] = rfuse.fusion pointwise(%{{.+}}) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: }
// CHECK-NEXT: %[[RS:.+]] = rfuse.reshape %[[R0]] : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[R1:.+]] = rfuse.fusion pointwise(%[[RS]]) : (tensor<32xf32>) -> tensor<32xf32>
func.func @reshape_between(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %e = rfuse.exp %x : tensor<4x8xf32>
  %r = rfuse.reshape %e : (tensor<4x8xf32>) -> tensor<32xf32>
  %n = rfuse.neg %r : tensor<32xf32>
  return %n : tensor<32xf32>
}

// Negative: reductions and matmuls are left alone, and nothing is fused around them here.
// CHECK-LABEL: func.func @leaves_reductions_and_matmuls
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[W:[a-z0-9]+]]: tensor<8x4xf32>)
// CHECK-NOT: rfuse.fusion
// CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[X]], dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[MX:.+]] = rfuse.reduce_max %[[X]], dims = [0] {keep_dims = true} : (tensor<4x8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: %[[M:.+]] = rfuse.matmul %[[X]], %[[W]] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[S]], %[[MX]], %[[M]]
func.func @leaves_reductions_and_matmuls(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>)
    -> (tensor<4xf32>, tensor<1x8xf32>, tensor<4x4xf32>) {
  %s = rfuse.reduce_sum %x, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %mx = rfuse.reduce_max %x, dims = [0] {keep_dims = true} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %m = rfuse.matmul %x, %w : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %s, %mx, %m : tensor<4xf32>, tensor<1x8xf32>, tensor<4x4xf32>
}

// Masks, selects and casts are pointwise too: compare, select, cast and not form one region with
// two results of different element types.
// CHECK-LABEL: func.func @masks_and_casts
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[Y:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[R:.+]]:2 = rfuse.fusion pointwise(%[[X]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf16>, tensor<4xi1>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>):
// CHECK-NEXT: %[[C:.+]] = rfuse.compare lt, %[[A]], %[[B]] : tensor<4xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.select %[[C]], %[[A]], %[[B]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: %[[H:.+]] = rfuse.cast %[[S]] : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[N:.+]] = rfuse.not %[[C]] : tensor<4xi1>
// CHECK-NEXT: rfuse.yield %[[H]], %[[N]] : tensor<4xf16>, tensor<4xi1>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1 : tensor<4xf16>, tensor<4xi1>
func.func @masks_and_casts(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf16>, tensor<4xi1>) {
  %c = rfuse.compare lt, %x, %y : tensor<4xf32>
  %s = rfuse.select %c, %x, %y : tensor<4xi1>, tensor<4xf32>
  %h = rfuse.cast %s : tensor<4xf32> to tensor<4xf16>
  %n = rfuse.not %c : tensor<4xi1>
  return %h, %n : tensor<4xf16>, tensor<4xi1>
}

// Ops already inside a fusion region are left alone (no nested region is formed); the ops after
// it form their own region that reads the existing fusion's result.
// CHECK-LABEL: func.func @already_fused
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[F:.+]] = rfuse.fusion pointwise(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>):
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[A]] : tensor<4xf32>
// CHECK-NEXT: rfuse.yield %[[E]] : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[G:.+]] = rfuse.fusion pointwise(%[[F]]) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0(%[[B:.+]]: tensor<4xf32>):
// CHECK-NEXT: %[[N:.+]] = rfuse.neg %[[B]] : tensor<4xf32>
// CHECK-NEXT: %[[AB:.+]] = rfuse.abs %[[N]] : tensor<4xf32>
// CHECK-NEXT: rfuse.yield %[[AB]] : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[G]] : tensor<4xf32>
func.func @already_fused(%x: tensor<4xf32>) -> tensor<4xf32> {
  %f = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = rfuse.exp %a : tensor<4xf32>
    rfuse.yield %e : tensor<4xf32>
  }
  %n = rfuse.neg %f : tensor<4xf32>
  %b = rfuse.abs %n : tensor<4xf32>
  return %b : tensor<4xf32>
}

// sub keeps its operand order; with test-flip-sub-operands=true the operands are swapped.
// CHECK-LABEL: func.func @sub_operands
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[Y:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: rfuse.fusion pointwise(%[[X]], %[[Y]])
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>):
// CHECK-NEXT: %[[S:.+]] = rfuse.sub %[[A]], %[[B]] : tensor<4xf32>
// CHECK-NEXT: rfuse.exp %[[S]]
// FLIP-LABEL: func.func @sub_operands
// FLIP-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[Y:[a-z0-9]+]]: tensor<4xf32>)
// FLIP-NEXT: rfuse.fusion pointwise(%[[X]], %[[Y]])
// FLIP-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>):
// FLIP-NEXT: %[[S:.+]] = rfuse.sub %[[B]], %[[A]] : tensor<4xf32>
// FLIP-NEXT: rfuse.exp %[[S]]
func.func @sub_operands(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %s = rfuse.sub %x, %y : tensor<4xf32>
  %e = rfuse.exp %s : tensor<4xf32>
  return %e : tensor<4xf32>
}

// A declaration has no body: nothing to do, and no crash.
// CHECK-LABEL: func.func private @declaration(tensor<4xf32>) -> tensor<4xf32>
func.func private @declaration(tensor<4xf32>) -> tensor<4xf32>

// A function without pointwise ops is unchanged.
// CHECK-LABEL: func.func @nothing_to_fuse
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]] : tensor<4xf32>
func.func @nothing_to_fuse(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
