// --inline on rfuse IR: the rfuse dialect's inliner interface makes its ops legal to inline, so a
// traced helper function called from a host is inlined at every call and, when private and no
// longer used, removed. Inlining into a fusion region is legal too.
// RUN: rfuse-opt %s --inline | FileCheck %s
// The result verifies and round-trips.
// RUN: rfuse-opt %s --inline | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s
// Inlining does not change what is computed.
// RUN: rfuse-opt %s --inline > %t.mlir
// RUN: rfuse-run %s --entry twice --random --seed 5 > %t.ref
// RUN: rfuse-run %t.mlir --entry twice --random --seed 5 > %t.out
// RUN: diff %t.ref %t.out

// A private helper called twice: both calls are inlined (with the right operand mapping: the
// second call passes the first's result and %x, in that order) and the helper is removed.
// CHECK-NOT: func.func private @helper
// CHECK-LABEL: func.func @twice
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[Y:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[S0:.+]] = rfuse.sub %[[X]], %[[Y]] : tensor<4xf32>
// CHECK-NEXT: %[[E0:.+]] = rfuse.exp %[[S0]] : tensor<4xf32>
// CHECK-NEXT: %[[S1:.+]] = rfuse.sub %[[E0]], %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[E1:.+]] = rfuse.exp %[[S1]] : tensor<4xf32>
// CHECK-NEXT: return %[[E1]] : tensor<4xf32>
func.func private @helper(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %s = rfuse.sub %x, %y : tensor<4xf32>
  %e = rfuse.exp %s : tensor<4xf32>
  return %e : tensor<4xf32>
}
func.func @twice(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @helper(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = call @helper(%a, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// A public helper is inlined into its caller but kept (it may be called from outside).
// CHECK-LABEL: func.func @public_helper
// CHECK-NEXT: rfuse.neg
// CHECK-NEXT: return
// CHECK-LABEL: func.func @calls_public
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[N:.+]] = rfuse.neg %[[X]] : tensor<4xf32>
// CHECK-NEXT: return %[[N]] : tensor<4xf32>
func.func @public_helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %n = rfuse.neg %x : tensor<4xf32>
  return %n : tensor<4xf32>
}
func.func @calls_public(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @public_helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// A helper whose body holds a fusion region: the fusion is inlined whole.
// CHECK-NOT: func.func private @with_fusion
// CHECK-LABEL: func.func @calls_fusion
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion pointwise(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>):
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[A]] : tensor<4xf32>
// CHECK-NEXT: rfuse.yield %[[E]] : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func private @with_fusion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = rfuse.exp %a : tensor<4xf32>
    rfuse.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
func.func @calls_fusion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = call @with_fusion(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// A call inside a fusion region is inlined into the region (the region stays isolated: the
// inlined ops only use the block argument).
// CHECK-NOT: func.func private @leaf
// CHECK-LABEL: func.func @call_in_fusion
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.fusion pointwise(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>):
// CHECK-NEXT: %[[T:.+]] = rfuse.tanh %[[A]] : tensor<4xf32>
// CHECK-NEXT: rfuse.yield %[[T]] : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func private @leaf(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = rfuse.tanh %x : tensor<4xf32>
  return %e : tensor<4xf32>
}
func.func @call_in_fusion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = func.call @leaf(%a) : (tensor<4xf32>) -> tensor<4xf32>
    rfuse.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// Negative: a call of a declaration (no body) stays, and the declaration stays.
// CHECK-LABEL: func.func private @external(tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func @calls_external
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[C:.+]] = call @external(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4xf32>
func.func private @external(tensor<4xf32>) -> tensor<4xf32>
func.func @calls_external(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = call @external(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}
