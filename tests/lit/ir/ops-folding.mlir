// The folders: x * 1 -> x (and the other exact identities of add, sub, div), a same-type cast /
// reshape / broadcast_in_dim -> its input, the identity transpose, chains of transposes, reshapes
// and broadcasts, and a splat constant broadcast, transposed or reshaped -> a splat constant.
// Negative cases check that nothing else folds.
// RUN: rfuse-opt %s --canonicalize | FileCheck %s
// The folded IR still round-trips.
// RUN: rfuse-opt %s --canonicalize | rfuse-opt --mlir-print-op-generic | rfuse-opt | FileCheck %s

// CHECK-LABEL: func.func @mul_by_one
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[I:[a-z0-9]+]]: tensor<4xi32>, %[[H:[a-z0-9]+]]: tensor<5xf16>)
// CHECK-NOT: rfuse.mul
// CHECK-NOT: rfuse.constant
// CHECK: return %[[X]], %[[X]], %[[I]], %[[H]] : tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xi32>, tensor<5xf16>
func.func @mul_by_one(%x: tensor<2x3xf32>, %i: tensor<4xi32>, %h: tensor<5xf16>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xi32>, tensor<5xf16>) {
  %one = rfuse.constant dense<1.0> : tensor<2x3xf32>
  %0 = rfuse.mul %x, %one : tensor<2x3xf32>
  // 1 * x folds too.
  %1 = rfuse.mul %one, %x : tensor<2x3xf32>
  %ione = rfuse.constant dense<1> : tensor<4xi32>
  %2 = rfuse.mul %i, %ione : tensor<4xi32>
  // A dense literal of equal values is a splat.
  %hone = rfuse.constant dense<[1.0, 1.0, 1.0, 1.0, 1.0]> : tensor<5xf16>
  %3 = rfuse.mul %hone, %h : tensor<5xf16>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xi32>, tensor<5xf16>
}

// A scalar 1 broadcast to the operand's shape folds to a splat, then the mul folds.
// CHECK-LABEL: func.func @mul_by_broadcast_one
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]] : tensor<2x3xf32>
func.func @mul_by_broadcast_one(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %one = rfuse.constant dense<1.0> : tensor<f32>
  %b = rfuse.broadcast_in_dim %one, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
  %0 = rfuse.mul %x, %b : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// Not by one: kept.
// CHECK-LABEL: func.func @mul_not_one
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<3xf32>, %[[Y:[a-z0-9]+]]: tensor<3xf32>)
// CHECK-DAG: %[[TWO:.+]] = rfuse.constant dense<2.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[MIXED:.+]] = rfuse.constant dense<[1.000000e+00, 2.000000e+00, 1.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[NEG:.+]] = rfuse.constant dense<-1.000000e+00> : tensor<3xf32>
// CHECK: %[[M0:.+]] = rfuse.mul %[[X]], %[[TWO]] : tensor<3xf32>
// CHECK-NEXT: %[[M1:.+]] = rfuse.mul %[[X]], %[[MIXED]] : tensor<3xf32>
// CHECK-NEXT: %[[M2:.+]] = rfuse.mul %[[NEG]], %[[X]] : tensor<3xf32>
// CHECK-NEXT: %[[M3:.+]] = rfuse.mul %[[X]], %[[Y]] : tensor<3xf32>
// CHECK-NEXT: return %[[M0]], %[[M1]], %[[M2]], %[[M3]]
func.func @mul_not_one(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %two = rfuse.constant dense<2.0> : tensor<3xf32>
  %0 = rfuse.mul %x, %two : tensor<3xf32>
  %mixed = rfuse.constant dense<[1.0, 2.0, 1.0]> : tensor<3xf32>
  %1 = rfuse.mul %x, %mixed : tensor<3xf32>
  %neg = rfuse.constant dense<-1.0> : tensor<3xf32>
  %2 = rfuse.mul %neg, %x : tensor<3xf32>
  %3 = rfuse.mul %x, %y : tensor<3xf32>
  return %0, %1, %2, %3 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// Identities of add, sub and div fold; exact in IEEE arithmetic, so only the signed zero that is
// an identity folds: x + (-0.0), -0.0 + x, x - (+0.0), x / 1 (and for integers x + 0, 0 + x, x - 0).
// CHECK-LABEL: func.func @additive_identities
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<3xf32>, %[[I:[a-z0-9]+]]: tensor<3xi32>)
// CHECK-NOT: rfuse.add
// CHECK-NOT: rfuse.sub
// CHECK-NOT: rfuse.div
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[I]], %[[I]], %[[I]]
func.func @additive_identities(%x: tensor<3xf32>, %i: tensor<3xi32>)
    -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>) {
  %nz = rfuse.constant dense<-0.0> : tensor<3xf32>
  %pz = rfuse.constant dense<0.0> : tensor<3xf32>
  %one = rfuse.constant dense<1.0> : tensor<3xf32>
  %iz = rfuse.constant dense<0> : tensor<3xi32>
  %0 = rfuse.add %x, %nz : tensor<3xf32>
  %1 = rfuse.add %nz, %x : tensor<3xf32>
  %2 = rfuse.sub %x, %pz : tensor<3xf32>
  %3 = rfuse.div %x, %one : tensor<3xf32>
  %4 = rfuse.add %i, %iz : tensor<3xi32>
  %5 = rfuse.add %iz, %i : tensor<3xi32>
  %6 = rfuse.sub %i, %iz : tensor<3xi32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>
}

// Not identities, kept: x + (+0.0) (turns -0.0 into +0.0), x - (-0.0), 0 - x, 1 / x, x + 1,
// and ops without folders (pow, max, min) by one.
// CHECK-LABEL: func.func @not_identities
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<3xf32>, %[[I:[a-z0-9]+]]: tensor<3xi32>)
// CHECK-DAG: %[[PZ:.+]] = rfuse.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[NZ:.+]] = rfuse.constant dense<-0.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[ONE:.+]] = rfuse.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[IZ:.+]] = rfuse.constant dense<0> : tensor<3xi32>
// CHECK: %[[A0:.+]] = rfuse.add %[[X]], %[[PZ]] : tensor<3xf32>
// CHECK-NEXT: %[[A1:.+]] = rfuse.add %[[PZ]], %[[X]] : tensor<3xf32>
// CHECK-NEXT: %[[S0:.+]] = rfuse.sub %[[X]], %[[NZ]] : tensor<3xf32>
// CHECK-NEXT: %[[S1:.+]] = rfuse.sub %[[IZ]], %[[I]] : tensor<3xi32>
// CHECK-NEXT: %[[D0:.+]] = rfuse.div %[[ONE]], %[[X]] : tensor<3xf32>
// CHECK-NEXT: %[[A2:.+]] = rfuse.add %[[X]], %[[ONE]] : tensor<3xf32>
// CHECK-NEXT: %[[P0:.+]] = rfuse.pow %[[X]], %[[ONE]] : tensor<3xf32>
// CHECK-NEXT: %[[M0:.+]] = rfuse.max %[[X]], %[[ONE]] : tensor<3xf32>
// CHECK-NEXT: return %[[A0]], %[[A1]], %[[S0]], %[[S1]], %[[D0]], %[[A2]], %[[P0]], %[[M0]]
func.func @not_identities(%x: tensor<3xf32>, %i: tensor<3xi32>)
    -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xi32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %pz = rfuse.constant dense<0.0> : tensor<3xf32>
  %nz = rfuse.constant dense<-0.0> : tensor<3xf32>
  %one = rfuse.constant dense<1.0> : tensor<3xf32>
  %iz = rfuse.constant dense<0> : tensor<3xi32>
  %0 = rfuse.add %x, %pz : tensor<3xf32>
  %1 = rfuse.add %pz, %x : tensor<3xf32>
  %2 = rfuse.sub %x, %nz : tensor<3xf32>
  %3 = rfuse.sub %iz, %i : tensor<3xi32>
  %4 = rfuse.div %one, %x : tensor<3xf32>
  %5 = rfuse.add %x, %one : tensor<3xf32>
  %6 = rfuse.pow %x, %one : tensor<3xf32>
  %7 = rfuse.max %x, %one : tensor<3xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xi32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// transpose: the identity permutation folds away; a transpose of a transpose composes into one
// (result dim i is x dim p1[p2[i]]) or vanishes when the composition is the identity.
// CHECK-LABEL: func.func @transpose_folds
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x5xf32>)
// CHECK-NEXT: %[[U:.+]] = rfuse.transpose %[[X]], perm = [1, 2, 0] : (tensor<2x3x5xf32>) -> tensor<3x5x2xf32>
// CHECK-NEXT: %[[T:.+]] = rfuse.transpose %[[X]], perm = [2, 0, 1] : (tensor<2x3x5xf32>) -> tensor<5x2x3xf32>
// CHECK-NEXT: return %[[X]], %[[T]], %[[X]], %[[U]] : tensor<2x3x5xf32>, tensor<5x2x3xf32>, tensor<2x3x5xf32>, tensor<3x5x2xf32>
func.func @transpose_folds(%x: tensor<2x3x5xf32>)
    -> (tensor<2x3x5xf32>, tensor<5x2x3xf32>, tensor<2x3x5xf32>, tensor<3x5x2xf32>) {
  %0 = rfuse.transpose %x, perm = [0, 1, 2] : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %t1 = rfuse.transpose %x, perm = [1, 2, 0] : (tensor<2x3x5xf32>) -> tensor<3x5x2xf32>
  %1 = rfuse.transpose %t1, perm = [1, 2, 0] : (tensor<3x5x2xf32>) -> tensor<5x2x3xf32>
  %2 = rfuse.transpose %1, perm = [1, 2, 0] : (tensor<5x2x3xf32>) -> tensor<2x3x5xf32>
  return %0, %1, %2, %t1 : tensor<2x3x5xf32>, tensor<5x2x3xf32>, tensor<2x3x5xf32>, tensor<3x5x2xf32>
}

// reshape of a reshape reshapes the original; back to the original type it folds away.
// CHECK-LABEL: func.func @reshape_chains
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[R:.+]] = rfuse.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: return %[[R]], %[[X]] : tensor<4x6xf32>, tensor<2x3x4xf32>
func.func @reshape_chains(%x: tensor<2x3x4xf32>) -> (tensor<4x6xf32>, tensor<2x3x4xf32>) {
  %0 = rfuse.reshape %x : (tensor<2x3x4xf32>) -> tensor<24xf32>
  %1 = rfuse.reshape %0 : (tensor<24xf32>) -> tensor<6x4xf32>
  %2 = rfuse.reshape %1 : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %3 = rfuse.reshape %1 : (tensor<6x4xf32>) -> tensor<2x3x4xf32>
  return %2, %3 : tensor<4x6xf32>, tensor<2x3x4xf32>
}

// broadcast_in_dim of a broadcast_in_dim composes the dims (x dim i -> d2[d1[i]]).
// CHECK-LABEL: func.func @broadcast_chains
// CHECK-SAME: (%[[V:[a-z0-9]+]]: tensor<3xf32>, %[[O:[a-z0-9]+]]: tensor<1x3xf32>)
// CHECK-NEXT: %[[B:.+]] = rfuse.broadcast_in_dim %[[V]], dims = [2] : (tensor<3xf32>) -> tensor<5x2x3xf32>
// CHECK-NEXT: %[[C:.+]] = rfuse.broadcast_in_dim %[[O]], dims = [1, 3] : (tensor<1x3xf32>) -> tensor<7x4x2x3xf32>
// CHECK-NEXT: return %[[B]], %[[C]] : tensor<5x2x3xf32>, tensor<7x4x2x3xf32>
func.func @broadcast_chains(%v: tensor<3xf32>, %o: tensor<1x3xf32>) -> (tensor<5x2x3xf32>, tensor<7x4x2x3xf32>) {
  %b1 = rfuse.broadcast_in_dim %v, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
  %0 = rfuse.broadcast_in_dim %b1, dims = [1, 2] : (tensor<2x3xf32>) -> tensor<5x2x3xf32>
  %c1 = rfuse.broadcast_in_dim %o, dims = [0, 1] : (tensor<1x3xf32>) -> tensor<4x3xf32>
  %1 = rfuse.broadcast_in_dim %c1, dims = [1, 3] : (tensor<4x3xf32>) -> tensor<7x4x2x3xf32>
  return %0, %1 : tensor<5x2x3xf32>, tensor<7x4x2x3xf32>
}

// CHECK-LABEL: func.func @same_type_identities
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[M:[a-z0-9]+]]: tensor<4xi1>)
// CHECK-NOT: rfuse.
// CHECK: return %[[X]], %[[X]], %[[X]], %[[M]], %[[X]] : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xi1>, tensor<2x3xf32>
func.func @same_type_identities(%x: tensor<2x3xf32>, %m: tensor<4xi1>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xi1>, tensor<2x3xf32>) {
  %0 = rfuse.cast %x : tensor<2x3xf32> to tensor<2x3xf32>
  %1 = rfuse.reshape %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = rfuse.broadcast_in_dim %x, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = rfuse.cast %m : tensor<4xi1> to tensor<4xi1>
  // Chains fold all the way.
  %4 = rfuse.cast %x : tensor<2x3xf32> to tensor<2x3xf32>
  %5 = rfuse.reshape %4 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = rfuse.broadcast_in_dim %5, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %6 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<4xi1>, tensor<2x3xf32>
}

// Type-changing cast, reshape and broadcast are kept.
// CHECK-LABEL: func.func @type_changing_kept
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[V:[a-z0-9]+]]: tensor<3xf32>)
// CHECK: %[[C:.+]] = rfuse.cast %[[X]] : tensor<2x3xf32> to tensor<2x3xf64>
// CHECK-NEXT: %[[R:.+]] = rfuse.reshape %[[X]] : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[R1:.+]] = rfuse.reshape %[[X]] : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT: %[[B:.+]] = rfuse.broadcast_in_dim %[[V]], dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[C]], %[[R]], %[[R1]], %[[B]]
func.func @type_changing_kept(%x: tensor<2x3xf32>, %v: tensor<3xf32>)
    -> (tensor<2x3xf64>, tensor<3x2xf32>, tensor<6xf32>, tensor<2x3xf32>) {
  %0 = rfuse.cast %x : tensor<2x3xf32> to tensor<2x3xf64>
  %1 = rfuse.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = rfuse.reshape %x : (tensor<2x3xf32>) -> tensor<6xf32>
  %3 = rfuse.broadcast_in_dim %v, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3 : tensor<2x3xf64>, tensor<3x2xf32>, tensor<6xf32>, tensor<2x3xf32>
}

// A broadcast of a splat constant becomes a splat constant of the result type; a broadcast of a
// non-splat constant is kept.
// CHECK-LABEL: func.func @broadcast_constant
// CHECK-DAG: %[[S:.+]] = rfuse.constant dense<3.000000e+00> : tensor<4x2x3xf32>
// CHECK-DAG: %[[SI:.+]] = rfuse.constant dense<7> : tensor<5x1xi64>
// CHECK-DAG: %[[T:.+]] = rfuse.constant dense<true> : tensor<2x2xi1>
// CHECK-DAG: %[[D:.+]] = rfuse.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: %[[B:.+]] = rfuse.broadcast_in_dim %[[D]], dims = [0] : (tensor<2xf32>) -> tensor<2x3xf32>
// CHECK-NOT: rfuse.broadcast_in_dim
// CHECK: return %[[S]], %[[SI]], %[[T]], %[[B]] : tensor<4x2x3xf32>, tensor<5x1xi64>, tensor<2x2xi1>, tensor<2x3xf32>
func.func @broadcast_constant() -> (tensor<4x2x3xf32>, tensor<5x1xi64>, tensor<2x2xi1>, tensor<2x3xf32>) {
  %s = rfuse.constant dense<3.0> : tensor<f32>
  %0 = rfuse.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4x2x3xf32>
  %si = rfuse.constant dense<7> : tensor<1xi64>
  %1 = rfuse.broadcast_in_dim %si, dims = [1] : (tensor<1xi64>) -> tensor<5x1xi64>
  %t = rfuse.constant dense<true> : tensor<1x2xi1>
  %2 = rfuse.broadcast_in_dim %t, dims = [0, 1] : (tensor<1x2xi1>) -> tensor<2x2xi1>
  %d = rfuse.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %3 = rfuse.broadcast_in_dim %d, dims = [0] : (tensor<2xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3 : tensor<4x2x3xf32>, tensor<5x1xi64>, tensor<2x2xi1>, tensor<2x3xf32>
}

// Folding happens inside fusion regions too.
// CHECK-LABEL: func.func @fold_in_fusion
// CHECK: rfuse.fusion pointwise(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>):
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[A]] : tensor<4xf32>
// CHECK-NEXT: rfuse.yield %[[E]] : tensor<4xf32>
// CHECK-NEXT: }
func.func @fold_in_fusion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %one = rfuse.constant dense<1.0> : tensor<4xf32>
    %m = rfuse.mul %a, %one : tensor<4xf32>
    %c = rfuse.cast %m : tensor<4xf32> to tensor<4xf32>
    %e = rfuse.exp %c : tensor<4xf32>
    rfuse.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// Powers with a small whole exponent become products: x ^ 2 in every float type (R computes it
// as x * x), x ^ 3 and x ^ 4 in f32 only; f64 keeps pow for those (as R's R_pow), and other
// exponents stay pow.
// CHECK-LABEL: func.func @pow_small_integers
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[D:[a-z0-9]+]]: tensor<4xf64>)
// CHECK-NOT: rfuse.pow %[[X]], %{{.+}} : tensor<4xf32>
// CHECK: %[[X2:.+]] = rfuse.mul %[[X]], %[[X]] : tensor<4xf32>
// CHECK: %[[S3:.+]] = rfuse.mul %[[X]], %[[X]] : tensor<4xf32>
// CHECK: %[[X3:.+]] = rfuse.mul %[[S3]], %[[X]] : tensor<4xf32>
// CHECK: %[[S4:.+]] = rfuse.mul %[[X]], %[[X]] : tensor<4xf32>
// CHECK: %[[X4:.+]] = rfuse.mul %[[S4]], %[[S4]] : tensor<4xf32>
// CHECK: %[[D2:.+]] = rfuse.mul %[[D]], %[[D]] : tensor<4xf64>
// CHECK: %[[D3:.+]] = rfuse.pow %[[D]], %{{.+}} : tensor<4xf64>
// CHECK: %[[H:.+]] = rfuse.pow %[[X]], %{{.+}} : tensor<4xf32>
// CHECK: return %[[X2]], %[[X3]], %[[X4]], %[[D2]], %[[D3]], %[[H]]
func.func @pow_small_integers(%x: tensor<4xf32>, %d: tensor<4xf64>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf64>, tensor<4xf64>, tensor<4xf32>) {
  %two = rfuse.constant dense<2.0> : tensor<4xf32>
  %three = rfuse.constant dense<3.0> : tensor<f32>
  %threeb = rfuse.broadcast_in_dim %three, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %four = rfuse.constant dense<4.0> : tensor<4xf32>
  %half = rfuse.constant dense<2.5> : tensor<4xf32>
  %dtwo = rfuse.constant dense<2.0> : tensor<4xf64>
  %dthree = rfuse.constant dense<3.0> : tensor<4xf64>
  %0 = rfuse.pow %x, %two : tensor<4xf32>
  %1 = rfuse.pow %x, %threeb : tensor<4xf32>
  %2 = rfuse.pow %x, %four : tensor<4xf32>
  %3 = rfuse.pow %d, %dtwo : tensor<4xf64>
  %4 = rfuse.pow %d, %dthree : tensor<4xf64>
  %5 = rfuse.pow %x, %half : tensor<4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf64>, tensor<4xf64>, tensor<4xf32>
}

// A splat constant transposed or reshaped is the splat of the new shape (no kernel runs for a
// zero initial state moved into another layout).
// CHECK-LABEL: func.func @splat_moves
// CHECK-NEXT: %[[T:.+]] = rfuse.constant dense<0.000000e+00> : tensor<8x16xf32>
// CHECK-NEXT: %[[R:.+]] = rfuse.constant dense<2.500000e+00> : tensor<4x32xf32>
// CHECK-NEXT: return %[[T]], %[[R]]
func.func @splat_moves() -> (tensor<8x16xf32>, tensor<4x32xf32>) {
  %z = rfuse.constant dense<0.0> : tensor<16x8xf32>
  %t = rfuse.transpose %z, perm = [1, 0] : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %c = rfuse.constant dense<2.5> : tensor<16x8xf32>
  %r = rfuse.reshape %c : (tensor<16x8xf32>) -> tensor<4x32xf32>
  return %t, %r : tensor<8x16xf32>, tensor<4x32xf32>
}
