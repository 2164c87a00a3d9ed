// rfuse-bucket-all-reduce: one-operand all-reduces packed, in the order their operands are
// computed, into buckets of at most bucket-bytes, each right after its last operand.
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-bucket-all-reduce{bucket-bytes=1024}))' | FileCheck %s
// RUN: rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-bucket-all-reduce))' | FileCheck %s --check-prefix=ONE
// RUN: not rfuse-opt %s --pass-pipeline='builtin.module(func.func(rfuse-bucket-all-reduce{bucket-bytes=0}))' 2>&1 | FileCheck %s --check-prefix=BAD

// Three gradients of 512, 512 and 256 bytes: with 1 KiB buckets, [%a, %b] then [%c]; the first
// bucket sits right after %b (before %c is computed: it overlaps that work).
// CHECK-LABEL: func.func @grads
// CHECK: %[[A:.*]] = rfuse.exp
// CHECK: %[[B:.*]] = rfuse.tanh
// CHECK-NEXT: %[[AB:.*]]:2 = rfuse.all_reduce %[[A]], %[[B]] reduction = mean : tensor<128xf32>, tensor<128xf32>
// CHECK: %[[C:.*]] = rfuse.sin
// CHECK-NEXT: %[[CR:.*]] = rfuse.all_reduce %[[C]] reduction = mean : tensor<64xf32>
// CHECK-NOT: rfuse.all_reduce
// CHECK: return %[[AB]]#0, %[[AB]]#1, %[[CR]]
// ONE-LABEL: func.func @grads
// ONE: rfuse.sin
// ONE-NEXT: rfuse.all_reduce %{{.*}}, %{{.*}}, %{{.*}} reduction = mean : tensor<128xf32>, tensor<128xf32>, tensor<64xf32>
// ONE-NOT: rfuse.all_reduce
// BAD: bucket-bytes must be positive, not 0
func.func @grads(%x: tensor<128xf32>, %y: tensor<64xf32>) -> (tensor<128xf32>, tensor<128xf32>, tensor<64xf32>) {
  %a = rfuse.exp %x : tensor<128xf32>
  %b = rfuse.tanh %x : tensor<128xf32>
  %c = rfuse.sin %y : tensor<64xf32>
  %ra = rfuse.all_reduce %a reduction = mean : tensor<128xf32>
  %rb = rfuse.all_reduce %b reduction = mean : tensor<128xf32>
  %rc = rfuse.all_reduce %c reduction = mean : tensor<64xf32>
  return %ra, %rb, %rc : tensor<128xf32>, tensor<128xf32>, tensor<64xf32>
}

// A result used before a later operand is ready closes its bucket there; sums and means are
// never merged.
// CHECK-LABEL: func.func @early_use
// CHECK: %[[A:.*]] = rfuse.exp
// CHECK-NEXT: %[[RA:.*]] = rfuse.all_reduce %[[A]] reduction = mean
// CHECK-NEXT: rfuse.mul %[[RA]], %[[RA]]
// CHECK: %[[B:.*]] = rfuse.tanh
// CHECK-DAG: rfuse.all_reduce %[[B]] reduction = mean
// CHECK-DAG: rfuse.all_reduce %[[B]] reduction = sum
// CHECK: return
// ONE-LABEL: func.func @early_use
// ONE-COUNT-3: rfuse.all_reduce
func.func @early_use(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = rfuse.exp %x : tensor<4xf32>
  %ra = rfuse.all_reduce %a reduction = mean : tensor<4xf32>
  %u = rfuse.mul %ra, %ra : tensor<4xf32>
  %b = rfuse.tanh %u : tensor<4xf32>
  %rb = rfuse.all_reduce %b reduction = mean : tensor<4xf32>
  %rs = rfuse.all_reduce %b reduction = sum : tensor<4xf32>
  return %u, %rb, %rs : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
