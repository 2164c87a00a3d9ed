// rfuse-move-reshapes: reshapes of computed values move down through pointwise ops, casts and
// reductions (the ops then run in the reshape's input shape, where they fuse with what computed
// it), and out from between two transposes, which then compose into one. Reshapes of arguments
// stay: nothing fuses across them.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-move-reshapes))' | FileCheck %s

// A linear layer on [batch, seq, features]: the product on the flattened rows, reshaped back,
// then bias, GELU and a residual on an argument. All of it runs on the product's shape (the
// bias broadcast over the flattened rows, the argument viewed so), one reshape at the end.
// CHECK-LABEL: func.func @linear_on_sequences
// CHECK-NEXT:  %[[M:.*]] = rfuse.matmul %arg0, %arg1
// CHECK-NEXT:  %[[B:.*]] = rfuse.broadcast_in_dim %arg2, dims = [1] : (tensor<12xf32>) -> tensor<6x12xf32>
// CHECK-NEXT:  %[[A:.*]] = rfuse.add %[[M]], %[[B]] : tensor<6x12xf32>
// CHECK-NEXT:  %[[G:.*]] = rfuse.gelu %[[A]] : tensor<6x12xf32>
// CHECK-NEXT:  %[[R:.*]] = rfuse.reshape %arg3 : (tensor<2x3x12xf32>) -> tensor<6x12xf32>
// CHECK-NEXT:  %[[S:.*]] = rfuse.add %[[G]], %[[R]] : tensor<6x12xf32>
// CHECK-NEXT:  %[[O:.*]] = rfuse.reshape %[[S]] : (tensor<6x12xf32>) -> tensor<2x3x12xf32>
// CHECK-NEXT:  return %[[O]]
func.func @linear_on_sequences(%x: tensor<6x8xf32>, %w: tensor<8x12xf32>, %b: tensor<12xf32>, %res: tensor<2x3x12xf32>) -> tensor<2x3x12xf32> {
  %m = rfuse.matmul %x, %w : (tensor<6x8xf32>, tensor<8x12xf32>) -> tensor<6x12xf32>
  %h = rfuse.reshape %m : (tensor<6x12xf32>) -> tensor<2x3x12xf32>
  %bb = rfuse.broadcast_in_dim %b, dims = [2] : (tensor<12xf32>) -> tensor<2x3x12xf32>
  %a = rfuse.add %h, %bb : tensor<2x3x12xf32>
  %g = rfuse.gelu %a : tensor<2x3x12xf32>
  %s = rfuse.add %g, %res : tensor<2x3x12xf32>
  return %s : tensor<2x3x12xf32>
}

// Attention's heads split from R's layout (features, seq, batch): to torch's order, features
// split into 3 heads of 4, heads before positions, then a cast for a bfloat16 product. The
// split moves above the first transpose, the two transposes compose into one, and the cast
// runs before the last reshape (so the transpose and the cast are one kernel).
// CHECK-LABEL: func.func @head_split
// CHECK-NEXT:  %[[X:.*]] = rfuse.tanh
// CHECK-NEXT:  %[[R:.*]] = rfuse.reshape %[[X]] : (tensor<12x5x2xf32>) -> tensor<3x4x5x2xf32>
// CHECK-NEXT:  %[[T:.*]] = rfuse.transpose %[[R]], perm = [3, 0, 2, 1] : (tensor<3x4x5x2xf32>) -> tensor<2x3x5x4xf32>
// CHECK-NEXT:  %[[C:.*]] = rfuse.cast %[[T]] : tensor<2x3x5x4xf32> to tensor<2x3x5x4xbf16>
// CHECK-NEXT:  %[[O:.*]] = rfuse.reshape %[[C]] : (tensor<2x3x5x4xbf16>) -> tensor<6x5x4xbf16>
// CHECK-NEXT:  return %[[O]]
func.func @head_split(%x0: tensor<12x5x2xf32>) -> tensor<6x5x4xbf16> {
  %x = rfuse.tanh %x0 : tensor<12x5x2xf32>
  %t = rfuse.transpose %x, perm = [2, 1, 0] : (tensor<12x5x2xf32>) -> tensor<2x5x12xf32>
  %r = rfuse.reshape %t : (tensor<2x5x12xf32>) -> tensor<2x5x3x4xf32>
  %h = rfuse.transpose %r, perm = [0, 2, 1, 3] : (tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %f = rfuse.reshape %h : (tensor<2x3x5x4xf32>) -> tensor<6x5x4xf32>
  %c = rfuse.cast %f : tensor<6x5x4xf32> to tensor<6x5x4xbf16>
  return %c : tensor<6x5x4xbf16>
}

// The heads merged back into R's layout: the merge of (heads, features) cannot go above the
// first transpose (they are not adjacent there), so it goes below the second, and the two
// transposes compose.
// CHECK-LABEL: func.func @head_merge
// CHECK-NEXT:  %[[R:.*]] = rfuse.reshape %arg0 : (tensor<6x5x4xf32>) -> tensor<2x3x5x4xf32>
// CHECK-NEXT:  %[[T:.*]] = rfuse.transpose %[[R]], perm = [1, 3, 2, 0] : (tensor<2x3x5x4xf32>) -> tensor<3x4x5x2xf32>
// CHECK-NEXT:  %[[O:.*]] = rfuse.reshape %[[T]] : (tensor<3x4x5x2xf32>) -> tensor<12x5x2xf32>
// CHECK-NEXT:  return %[[O]]
func.func @head_merge(%x: tensor<6x5x4xf32>) -> tensor<12x5x2xf32> {
  %r = rfuse.reshape %x : (tensor<6x5x4xf32>) -> tensor<2x3x5x4xf32>
  %t = rfuse.transpose %r, perm = [0, 2, 1, 3] : (tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32>
  %m = rfuse.reshape %t : (tensor<2x5x3x4xf32>) -> tensor<2x5x12xf32>
  %o = rfuse.transpose %m, perm = [2, 1, 0] : (tensor<2x5x12xf32>) -> tensor<12x5x2xf32>
  return %o : tensor<12x5x2xf32>
}

// A bias's gradient: a sum over the reshaped rows of a product is a sum over the product's rows
// (the reduced dims are whole runs of the reshape).
// CHECK-LABEL: func.func @sum_over_reshaped_rows
// CHECK-NEXT:  %[[M:.*]] = rfuse.matmul
// CHECK-NEXT:  %[[S:.*]] = rfuse.reduce_sum %[[M]], dims = [0] : (tensor<6x12xf32>) -> tensor<12xf32>
// CHECK-NEXT:  return %[[S]]
func.func @sum_over_reshaped_rows(%x: tensor<6x8xf32>, %w: tensor<8x12xf32>) -> tensor<12xf32> {
  %m = rfuse.matmul %x, %w : (tensor<6x8xf32>, tensor<8x12xf32>) -> tensor<6x12xf32>
  %h = rfuse.reshape %m : (tensor<6x12xf32>) -> tensor<2x3x12xf32>
  %s = rfuse.reduce_sum %h, dims = [0, 1] : (tensor<2x3x12xf32>) -> tensor<12xf32>
  return %s : tensor<12xf32>
}

// What stays: a reshape of an argument (a view nothing fuses across), a sum over part of a
// run (the 3 of 6 rows), and a broadcast that fills part of a run (per position, not per row).
// CHECK-LABEL: func.func @what_stays
// CHECK-NEXT:  rfuse.reshape %arg0
// CHECK-NEXT:  rfuse.exp
// CHECK-NEXT:  rfuse.matmul
// CHECK-NEXT:  %[[H:.*]] = rfuse.reshape
// CHECK-NEXT:  rfuse.reduce_sum %[[H]], dims = [1]
// CHECK-NEXT:  rfuse.broadcast_in_dim %arg3, dims = [1]
// CHECK-NEXT:  rfuse.mul %[[H]]
// CHECK-NEXT:  return
func.func @what_stays(%a: tensor<6xf32>, %x: tensor<6x8xf32>, %w: tensor<8x12xf32>, %p: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x12xf32>, tensor<2x3x12xf32>) {
  %v = rfuse.reshape %a : (tensor<6xf32>) -> tensor<2x3xf32>
  %e = rfuse.exp %v : tensor<2x3xf32>
  %m = rfuse.matmul %x, %w : (tensor<6x8xf32>, tensor<8x12xf32>) -> tensor<6x12xf32>
  %h = rfuse.reshape %m : (tensor<6x12xf32>) -> tensor<2x3x12xf32>
  %s = rfuse.reduce_sum %h, dims = [1] : (tensor<2x3x12xf32>) -> tensor<2x12xf32>
  %pb = rfuse.broadcast_in_dim %p, dims = [1] : (tensor<3xf32>) -> tensor<2x3x12xf32>
  %q = rfuse.mul %h, %pb : tensor<2x3x12xf32>
  return %e, %s, %q : tensor<2x3xf32>, tensor<2x12xf32>, tensor<2x3x12xf32>
}
