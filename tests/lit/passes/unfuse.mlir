// rfuse-unfuse dissolves every rfuse.fusion into its ops, mapping the region's arguments to the
// fusion's inputs and the fusion's results to the yielded values.
// RUN: rfuse-opt %s --rfuse-unfuse | FileCheck %s
// The result verifies and round-trips.
// RUN: rfuse-opt %s --rfuse-unfuse | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s
// The fusions-dissolved statistic. Statistics are only recorded when LLVM was built with them
// (see `llvm-stats` in lit.cfg.py); otherwise the report is printed but empty.
// RUN: %if llvm-stats %{ rfuse-opt %s --rfuse-unfuse -mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS %} \
// RUN: %else %{ rfuse-opt %s --rfuse-unfuse -mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=NOSTATS %}

// Six fusions are dissolved in this file: 1 + 1 + 1 + 2 (nested) + 1 (no inputs).
// STATS: Pass statistics report
// STATS: Unfuse
// STATS-NEXT: (S) 6 fusions-dissolved - Number of fusion regions dissolved
// NOSTATS: Pass statistics report
// NOSTATS-NOT: fusions-dissolved

// CHECK-LABEL: func.func @two_ops
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[Y:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NOT: rfuse.fusion
// CHECK-NEXT: %[[N:.+]] = rfuse.neg %[[X]] : tensor<4xf32>
// Operand order is kept: the region's %a, %b become %y, %x (the inputs are swapped).
// CHECK-NEXT: %[[S:.+]] = rfuse.sub %[[Y]], %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[S]] : tensor<4xf32>
// CHECK-NEXT: %[[M:.+]] = rfuse.mul %[[E]], %[[N]] : tensor<4xf32>
// CHECK-NEXT: return %[[M]] : tensor<4xf32>
func.func @two_ops(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %n = rfuse.neg %x : tensor<4xf32>
  %r = rfuse.fusion pointwise (%y, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %s = rfuse.sub %a, %b : tensor<4xf32>
    %e = rfuse.exp %s : tensor<4xf32>
    rfuse.yield %e : tensor<4xf32>
  }
  %m = rfuse.mul %r, %n : tensor<4xf32>
  return %m : tensor<4xf32>
}

// Multi-result: each result is replaced by its yielded value, including a yielded input.
// CHECK-LABEL: func.func @multi_result
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x6xf32>, %[[B:[a-z0-9]+]]: tensor<6xf32>)
// CHECK-NOT: rfuse.fusion
// CHECK-NEXT: %[[BB:.+]] = rfuse.broadcast_in_dim %[[B]], dims = [1] : (tensor<6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: %[[A:.+]] = rfuse.add %[[X]], %[[BB]] : tensor<4x6xf32>
// CHECK-NEXT: %[[MX:.+]] = rfuse.reduce_max %[[A]], dims = [1] : (tensor<4x6xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[SM:.+]] = rfuse.reduce_sum %[[A]], dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[L:.+]] = rfuse.log %[[SM]] : tensor<4x1xf32>
// CHECK-NEXT: return %[[L]], %[[MX]], %[[B]], %[[A]] : tensor<4x1xf32>, tensor<4xf32>, tensor<6xf32>, tensor<4x6xf32>
func.func @multi_result(%x: tensor<4x6xf32>, %b: tensor<6xf32>)
    -> (tensor<4x1xf32>, tensor<4xf32>, tensor<6xf32>, tensor<4x6xf32>) {
  %r:4 = rfuse.fusion reduction (%x, %b)
      : (tensor<4x6xf32>, tensor<6xf32>) -> (tensor<4xf32>, tensor<4x1xf32>, tensor<6xf32>, tensor<4x6xf32>) {
  ^bb0(%p: tensor<4x6xf32>, %q: tensor<6xf32>):
    %bb = rfuse.broadcast_in_dim %q, dims = [1] : (tensor<6xf32>) -> tensor<4x6xf32>
    %a = rfuse.add %p, %bb : tensor<4x6xf32>
    %mx = rfuse.reduce_max %a, dims = [1] : (tensor<4x6xf32>) -> tensor<4xf32>
    %sm = rfuse.reduce_sum %a, dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
    rfuse.yield %mx, %sm, %q, %a : tensor<4xf32>, tensor<4x1xf32>, tensor<6xf32>, tensor<4x6xf32>
  }
  %l = rfuse.log %r#1 : tensor<4x1xf32>
  return %l, %r#0, %r#2, %r#3 : tensor<4x1xf32>, tensor<4xf32>, tensor<6xf32>, tensor<4x6xf32>
}

// A fusion whose input is the result of another fusion: both dissolve, in order.
// CHECK-LABEL: func.func @chained
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<8x16xf32>, %[[W:[a-z0-9]+]]: tensor<16x4xf32>)
// CHECK-NOT: rfuse.fusion
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul %[[A]], %[[W]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[G:.+]] = rfuse.gelu %[[MM]] approximate = tanh : tensor<8x4xf32>
// CHECK-NEXT: %[[T:.+]] = rfuse.tanh %[[G]] : tensor<8x4xf32>
// CHECK-NEXT: return %[[T]] : tensor<8x4xf32>
func.func @chained(%a: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %0 = rfuse.fusion matmul_epilogue (%a, %w) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%p: tensor<8x16xf32>, %q: tensor<16x4xf32>):
    %mm = rfuse.matmul %p, %q : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %g = rfuse.gelu %mm approximate = tanh : tensor<8x4xf32>
    rfuse.yield %g : tensor<8x4xf32>
  }
  %1 = rfuse.fusion pointwise (%0) : (tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%p: tensor<8x4xf32>):
    %t = rfuse.tanh %p : tensor<8x4xf32>
    rfuse.yield %t : tensor<8x4xf32>
  }
  return %1 : tensor<8x4xf32>
}

// A fusion nested in another dissolves too; the inner one's inputs map through the outer's.
// CHECK-LABEL: func.func @nested
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<3xf32>, %[[Y:[a-z0-9]+]]: tensor<3xf32>)
// CHECK-NOT: rfuse.fusion
// CHECK-NEXT: %[[AD:.+]] = rfuse.add %[[X]], %[[Y]] : tensor<3xf32>
// CHECK-NEXT: %[[SQ:.+]] = rfuse.sqrt %[[AD]] : tensor<3xf32>
// CHECK-NEXT: %[[MU:.+]] = rfuse.mul %[[SQ]], %[[Y]] : tensor<3xf32>
// CHECK-NEXT: return %[[MU]] : tensor<3xf32>
func.func @nested(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
  %0 = rfuse.fusion pointwise (%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%a: tensor<3xf32>, %b: tensor<3xf32>):
    %ad = rfuse.add %a, %b : tensor<3xf32>
    %in = rfuse.fusion pointwise (%ad) : (tensor<3xf32>) -> tensor<3xf32> {
    ^bb0(%c: tensor<3xf32>):
      %sq = rfuse.sqrt %c : tensor<3xf32>
      rfuse.yield %sq : tensor<3xf32>
    }
    %mu = rfuse.mul %in, %b : tensor<3xf32>
    rfuse.yield %mu : tensor<3xf32>
  }
  return %0 : tensor<3xf32>
}

// A fusion without inputs (only a constant inside).
// CHECK-LABEL: func.func @no_inputs
// CHECK-NOT: rfuse.fusion
// CHECK-NEXT: %[[C:.+]] = rfuse.constant dense<2.500000e+00> : tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
func.func @no_inputs() -> tensor<2xf32> {
  %0 = rfuse.fusion pointwise () : () -> tensor<2xf32> {
    %c = rfuse.constant dense<2.5> : tensor<2xf32>
    rfuse.yield %c : tensor<2xf32>
  }
  return %0 : tensor<2xf32>
}

// Negative: a function without fusion is left exactly as it was.
// CHECK-LABEL: func.func @no_fusion
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[T:.+]] = rfuse.transpose %[[X]], perm = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[T]] : tensor<3x2xf32>
// CHECK-NEXT: %[[C:.+]] = rfuse.cast %[[E]] : tensor<3x2xf32> to tensor<3x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<3x2xf32>
func.func @no_fusion(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %t = rfuse.transpose %x, perm = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %e = rfuse.exp %t : tensor<3x2xf32>
  // A foldable op stays: the pass does not fold.
  %c = rfuse.cast %e : tensor<3x2xf32> to tensor<3x2xf32>
  return %c : tensor<3x2xf32>
}
