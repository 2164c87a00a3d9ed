// Round trips of the constant, pointwise unary/binary, compare, select and cast ops, in the
// custom form and through the generic form.
// RUN: rfuse-opt %s | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: rfuse.exp %{{.*}} : tensor<4x8xf32>
  %0 = rfuse.exp %x : tensor<4x8xf32>
  // CHECK: rfuse.gelu %{{.*}} approximate = tanh : tensor<4x8xf32>
  %1 = rfuse.gelu %0 approximate = tanh : tensor<4x8xf32>
  // CHECK: rfuse.gelu %{{.*}} : tensor<4x8xf32>
  %2 = rfuse.gelu %1 : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @constants
func.func @constants() -> (tensor<f32>, tensor<2x2xf64>, tensor<3xi32>, tensor<2xi1>, tensor<4x8xbf16>) {
  // CHECK: rfuse.constant dense<2.000000e+00> : tensor<f32>
  %0 = rfuse.constant dense<2.0> : tensor<f32>
  // CHECK: rfuse.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf64>
  %1 = rfuse.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf64>
  // CHECK: rfuse.constant dense<[1, -2, 3]> : tensor<3xi32>
  %2 = rfuse.constant dense<[1, -2, 3]> : tensor<3xi32>
  // CHECK: rfuse.constant dense<[true, false]> : tensor<2xi1>
  %3 = rfuse.constant dense<[true, false]> : tensor<2xi1>
  // CHECK: rfuse.constant dense<5.000000e-01> : tensor<4x8xbf16>
  %4 = rfuse.constant dense<0.5> : tensor<4x8xbf16>
  return %0, %1, %2, %3, %4 : tensor<f32>, tensor<2x2xf64>, tensor<3xi32>, tensor<2xi1>, tensor<4x8xbf16>
}

// Every float unary op; operands chain so that the order is pinned too.
// CHECK-LABEL: func.func @unary_float
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
func.func @unary_float(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[E:.+]] = rfuse.exp %[[X]] : tensor<4x8xf32>
  %0 = rfuse.exp %x : tensor<4x8xf32>
  // CHECK: %[[L:.+]] = rfuse.log %[[E]] : tensor<4x8xf32>
  %1 = rfuse.log %0 : tensor<4x8xf32>
  // CHECK: %[[S:.+]] = rfuse.sqrt %[[L]] : tensor<4x8xf32>
  %2 = rfuse.sqrt %1 : tensor<4x8xf32>
  // CHECK: %[[R:.+]] = rfuse.rsqrt %[[S]] : tensor<4x8xf32>
  %3 = rfuse.rsqrt %2 : tensor<4x8xf32>
  // CHECK: %[[T:.+]] = rfuse.tanh %[[R]] : tensor<4x8xf32>
  %4 = rfuse.tanh %3 : tensor<4x8xf32>
  // CHECK: %[[SG:.+]] = rfuse.sigmoid %[[T]] : tensor<4x8xf32>
  %5 = rfuse.sigmoid %4 : tensor<4x8xf32>
  // CHECK: %[[SN:.+]] = rfuse.sin %[[SG]] : tensor<4x8xf32>
  %6 = rfuse.sin %5 : tensor<4x8xf32>
  // CHECK: %[[C:.+]] = rfuse.cos %[[SN]] : tensor<4x8xf32>
  %7 = rfuse.cos %6 : tensor<4x8xf32>
  // The default approximation (none) is elided; tanh is printed; an explicit `none` is elided.
  // CHECK: %[[G0:.+]] = rfuse.gelu %[[C]] : tensor<4x8xf32>
  %8 = rfuse.gelu %7 : tensor<4x8xf32>
  // CHECK: %[[G1:.+]] = rfuse.gelu %[[G0]] approximate = tanh : tensor<4x8xf32>
  %9 = rfuse.gelu %8 approximate = tanh : tensor<4x8xf32>
  // CHECK: %[[G2:.+]] = rfuse.gelu %[[G1]] : tensor<4x8xf32>
  %10 = rfuse.gelu %9 approximate = none : tensor<4x8xf32>
  // CHECK: %[[RL:.+]] = rfuse.relu %[[G2]] : tensor<4x8xf32>
  %11 = rfuse.relu %10 : tensor<4x8xf32>
  // CHECK: %[[N:.+]] = rfuse.neg %[[RL]] : tensor<4x8xf32>
  %12 = rfuse.neg %11 : tensor<4x8xf32>
  // CHECK: %[[A:.+]] = rfuse.abs %[[N]] : tensor<4x8xf32>
  %13 = rfuse.abs %12 : tensor<4x8xf32>
  // CHECK: %[[F:.+]] = rfuse.floor %[[A]] : tensor<4x8xf32>
  %14 = rfuse.floor %13 : tensor<4x8xf32>
  // CHECK: %[[E:.+]] = rfuse.erfc %[[F]] : tensor<4x8xf32>
  %15 = rfuse.erfc %14 : tensor<4x8xf32>
  // CHECK: %[[R:.+]] = rfuse.round_even %[[E]] : tensor<4x8xf32>
  %16 = rfuse.round_even %15 : tensor<4x8xf32>
  // CHECK: %[[T:.+]] = rfuse.tan %[[R]] : tensor<4x8xf32>
  %17 = rfuse.tan %16 : tensor<4x8xf32>
  // CHECK: %[[AT:.+]] = rfuse.atan %[[T]] : tensor<4x8xf32>
  %18 = rfuse.atan %17 : tensor<4x8xf32>
  // CHECK: %[[AS:.+]] = rfuse.asin %[[AT]] : tensor<4x8xf32>
  %19 = rfuse.asin %18 : tensor<4x8xf32>
  // CHECK: %[[AC:.+]] = rfuse.acos %[[AS]] : tensor<4x8xf32>
  %20 = rfuse.acos %19 : tensor<4x8xf32>
  // CHECK: %[[A2:.+]] = rfuse.atan2 %[[AC]], %[[F]] : tensor<4x8xf32>
  %21 = rfuse.atan2 %20, %14 : tensor<4x8xf32>
  // CHECK: %[[TG:.+]] = rfuse.tgamma %[[A2]] : tensor<4x8xf32>
  %22 = rfuse.tgamma %21 : tensor<4x8xf32>
  // CHECK: %[[LG:.+]] = rfuse.lgamma %[[TG]] : tensor<4x8xf32>
  %23 = rfuse.lgamma %22 : tensor<4x8xf32>
  // CHECK: %[[Q:.+]] = rfuse.qnorm %[[LG]] : tensor<4x8xf32>
  %24 = rfuse.qnorm %23 : tensor<4x8xf32>
  // CHECK: %[[DG:.+]] = rfuse.digamma %[[Q]] : tensor<4x8xf32>
  %25 = rfuse.digamma %24 : tensor<4x8xf32>
  // CHECK: %[[TRG:.+]] = rfuse.trigamma %[[DG]] : tensor<4x8xf32>
  %26 = rfuse.trigamma %25 : tensor<4x8xf32>
  // CHECK: return %[[TRG]] : tensor<4x8xf32>
  return %26 : tensor<4x8xf32>
}

// The float element types other than f32, and rank 0.
// CHECK-LABEL: func.func @unary_float_types
func.func @unary_float_types(%h: tensor<3xf16>, %b: tensor<2x2xbf16>, %d: tensor<5xf64>, %s: tensor<f32>)
    -> (tensor<3xf16>, tensor<2x2xbf16>, tensor<5xf64>, tensor<f32>) {
  // CHECK: rfuse.tanh %{{.*}} : tensor<3xf16>
  %0 = rfuse.tanh %h : tensor<3xf16>
  // CHECK: rfuse.sigmoid %{{.*}} : tensor<2x2xbf16>
  %1 = rfuse.sigmoid %b : tensor<2x2xbf16>
  // CHECK: rfuse.gelu %{{.*}} approximate = tanh : tensor<5xf64>
  %2 = rfuse.gelu %d approximate = tanh : tensor<5xf64>
  // CHECK: rfuse.rsqrt %{{.*}} : tensor<f32>
  %3 = rfuse.rsqrt %s : tensor<f32>
  return %0, %1, %2, %3 : tensor<3xf16>, tensor<2x2xbf16>, tensor<5xf64>, tensor<f32>
}

// neg, abs and relu also accept integers.
// CHECK-LABEL: func.func @unary_integer
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<6xi32>, %[[Y:[a-z0-9]+]]: tensor<2x3xi64>)
func.func @unary_integer(%x: tensor<6xi32>, %y: tensor<2x3xi64>) -> (tensor<6xi32>, tensor<2x3xi64>) {
  // CHECK: %[[N:.+]] = rfuse.neg %[[X]] : tensor<6xi32>
  %0 = rfuse.neg %x : tensor<6xi32>
  // CHECK: %[[A:.+]] = rfuse.abs %[[N]] : tensor<6xi32>
  %1 = rfuse.abs %0 : tensor<6xi32>
  // CHECK: %[[R:.+]] = rfuse.relu %[[Y]] : tensor<2x3xi64>
  %2 = rfuse.relu %y : tensor<2x3xi64>
  // CHECK: return %[[A]], %[[R]] : tensor<6xi32>, tensor<2x3xi64>
  return %1, %2 : tensor<6xi32>, tensor<2x3xi64>
}

// CHECK-LABEL: func.func @not
// CHECK-SAME: (%[[M:[a-z0-9]+]]: tensor<4xi1>)
func.func @not(%m: tensor<4xi1>) -> tensor<4xi1> {
  // CHECK: %[[N:.+]] = rfuse.not %[[M]] : tensor<4xi1>
  %0 = rfuse.not %m : tensor<4xi1>
  // CHECK: return %[[N]] : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// Operand order (lhs, rhs) is pinned: it matters for sub, div and pow.
// CHECK-LABEL: func.func @binary_float
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>)
func.func @binary_float(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[ADD:.+]] = rfuse.add %[[X]], %[[Y]] : tensor<4x8xf32>
  %0 = rfuse.add %x, %y : tensor<4x8xf32>
  // CHECK: %[[SUB:.+]] = rfuse.sub %[[ADD]], %[[X]] : tensor<4x8xf32>
  %1 = rfuse.sub %0, %x : tensor<4x8xf32>
  // CHECK: %[[MUL:.+]] = rfuse.mul %[[Y]], %[[SUB]] : tensor<4x8xf32>
  %2 = rfuse.mul %y, %1 : tensor<4x8xf32>
  // CHECK: %[[DIV:.+]] = rfuse.div %[[MUL]], %[[Y]] : tensor<4x8xf32>
  %3 = rfuse.div %2, %y : tensor<4x8xf32>
  // CHECK: %[[POW:.+]] = rfuse.pow %[[X]], %[[DIV]] : tensor<4x8xf32>
  %4 = rfuse.pow %x, %3 : tensor<4x8xf32>
  // CHECK: %[[MAX:.+]] = rfuse.max %[[POW]], %[[X]] : tensor<4x8xf32>
  %5 = rfuse.max %4, %x : tensor<4x8xf32>
  // CHECK: %[[MIN:.+]] = rfuse.min %[[Y]], %[[MAX]] : tensor<4x8xf32>
  %6 = rfuse.min %y, %5 : tensor<4x8xf32>
  // CHECK: return %[[MIN]] : tensor<4x8xf32>
  return %6 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @binary_other_types
func.func @binary_other_types(%a: tensor<3xi64>, %b: tensor<3xi64>, %h: tensor<2x2xf16>, %d: tensor<f64>)
    -> (tensor<3xi64>, tensor<2x2xf16>, tensor<f64>) {
  // CHECK: rfuse.add %{{.*}}, %{{.*}} : tensor<3xi64>
  %0 = rfuse.add %a, %b : tensor<3xi64>
  // CHECK: rfuse.sub %{{.*}}, %{{.*}} : tensor<3xi64>
  %1 = rfuse.sub %0, %b : tensor<3xi64>
  // CHECK: rfuse.mul %{{.*}}, %{{.*}} : tensor<3xi64>
  %2 = rfuse.mul %1, %a : tensor<3xi64>
  // CHECK: rfuse.max %{{.*}}, %{{.*}} : tensor<3xi64>
  %3 = rfuse.max %2, %a : tensor<3xi64>
  // CHECK: rfuse.min %{{.*}}, %{{.*}} : tensor<3xi64>
  %4 = rfuse.min %3, %b : tensor<3xi64>
  // CHECK: rfuse.div %{{.*}}, %{{.*}} : tensor<2x2xf16>
  %5 = rfuse.div %h, %h : tensor<2x2xf16>
  // CHECK: rfuse.pow %{{.*}}, %{{.*}} : tensor<f64>
  %6 = rfuse.pow %d, %d : tensor<f64>
  return %4, %5, %6 : tensor<3xi64>, tensor<2x2xf16>, tensor<f64>
}

// CHECK-LABEL: func.func @logical
// CHECK-SAME: (%[[P:[a-z0-9]+]]: tensor<2x5xi1>, %[[Q:[a-z0-9]+]]: tensor<2x5xi1>)
func.func @logical(%p: tensor<2x5xi1>, %q: tensor<2x5xi1>) -> tensor<2x5xi1> {
  // CHECK: %[[AND:.+]] = rfuse.and %[[P]], %[[Q]] : tensor<2x5xi1>
  %0 = rfuse.and %p, %q : tensor<2x5xi1>
  // CHECK: %[[OR:.+]] = rfuse.or %[[AND]], %[[P]] : tensor<2x5xi1>
  %1 = rfuse.or %0, %p : tensor<2x5xi1>
  // CHECK: return %[[OR]] : tensor<2x5xi1>
  return %1 : tensor<2x5xi1>
}

// Every predicate. The custom form prints only the operand type, so the inferred i1 result type
// is pinned in the generic form (GENERIC) and through the function's return.
// GENERIC-LABEL: sym_name = "compare_predicates"
// GENERIC: "rfuse.compare"(%{{.*}}, %{{.*}}) <{predicate = #rfuse<cmp_predicate eq>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// GENERIC: "rfuse.compare"(%{{.*}}, %{{.*}}) <{predicate = #rfuse<cmp_predicate ne>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// GENERIC: "rfuse.compare"(%{{.*}}, %{{.*}}) <{predicate = #rfuse<cmp_predicate lt>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// GENERIC: "rfuse.compare"(%{{.*}}, %{{.*}}) <{predicate = #rfuse<cmp_predicate le>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// GENERIC: "rfuse.compare"(%{{.*}}, %{{.*}}) <{predicate = #rfuse<cmp_predicate gt>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// GENERIC: "rfuse.compare"(%{{.*}}, %{{.*}}) <{predicate = #rfuse<cmp_predicate ge>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
// CHECK-LABEL: func.func @compare_predicates
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[Y:[a-z0-9]+]]: tensor<4xf32>)
func.func @compare_predicates(%x: tensor<4xf32>, %y: tensor<4xf32>)
    -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  // CHECK: %[[EQ:.+]] = rfuse.compare eq, %[[X]], %[[Y]] : tensor<4xf32>
  %0 = rfuse.compare eq, %x, %y : tensor<4xf32>
  // CHECK: %[[NE:.+]] = rfuse.compare ne, %[[X]], %[[Y]] : tensor<4xf32>
  %1 = rfuse.compare ne, %x, %y : tensor<4xf32>
  // CHECK: %[[LT:.+]] = rfuse.compare lt, %[[Y]], %[[X]] : tensor<4xf32>
  %2 = rfuse.compare lt, %y, %x : tensor<4xf32>
  // CHECK: %[[LE:.+]] = rfuse.compare le, %[[X]], %[[Y]] : tensor<4xf32>
  %3 = rfuse.compare le, %x, %y : tensor<4xf32>
  // CHECK: %[[GT:.+]] = rfuse.compare gt, %[[X]], %[[Y]] : tensor<4xf32>
  %4 = rfuse.compare gt, %x, %y : tensor<4xf32>
  // CHECK: %[[GE:.+]] = rfuse.compare ge, %[[X]], %[[Y]] : tensor<4xf32>
  %5 = rfuse.compare ge, %x, %y : tensor<4xf32>
  // CHECK: return %[[EQ]], %[[NE]], %[[LT]], %[[LE]], %[[GT]], %[[GE]] : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
  return %0, %1, %2, %3, %4, %5 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// Integer and mask comparisons; the inferred mask type feeds rfuse.not and rfuse.select, whose
// printed types pin it.
// GENERIC-LABEL: sym_name = "compare_types"
// GENERIC: "rfuse.compare"(%{{.*}}, %{{.*}}) <{predicate = #rfuse<cmp_predicate le>}> : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi1>
// CHECK-LABEL: func.func @compare_types
func.func @compare_types(%a: tensor<2x3xi32>, %m: tensor<2x3xi1>) -> tensor<2x3xi32> {
  // CHECK: %[[C:.+]] = rfuse.compare le, %{{.*}}, %{{.*}} : tensor<2x3xi32>
  %0 = rfuse.compare le, %a, %a : tensor<2x3xi32>
  // CHECK: %[[D:.+]] = rfuse.compare ne, %{{.*}}, %[[C]] : tensor<2x3xi1>
  %1 = rfuse.compare ne, %m, %0 : tensor<2x3xi1>
  // CHECK: %[[N:.+]] = rfuse.not %[[D]] : tensor<2x3xi1>
  %2 = rfuse.not %1 : tensor<2x3xi1>
  // CHECK: rfuse.select %[[N]], %{{.*}}, %{{.*}} : tensor<2x3xi1>, tensor<2x3xi32>
  %3 = rfuse.select %2, %a, %a : tensor<2x3xi1>, tensor<2x3xi32>
  return %3 : tensor<2x3xi32>
}

// CHECK-LABEL: func.func @select
// CHECK-SAME: (%[[C:[a-z0-9]+]]: tensor<4xi1>, %[[X:[a-z0-9]+]]: tensor<4xf32>, %[[Y:[a-z0-9]+]]: tensor<4xf32>)
func.func @select(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
  // CHECK: %[[S:.+]] = rfuse.select %[[C]], %[[X]], %[[Y]] : tensor<4xi1>, tensor<4xf32>
  %0 = rfuse.select %c, %x, %y : tensor<4xi1>, tensor<4xf32>
  // CHECK: %[[M:.+]] = rfuse.select %[[C]], %[[C]], %[[C]] : tensor<4xi1>, tensor<4xi1>
  %1 = rfuse.select %c, %c, %c : tensor<4xi1>, tensor<4xi1>
  // CHECK: return %[[S]], %[[M]] : tensor<4xf32>, tensor<4xi1>
  return %0, %1 : tensor<4xf32>, tensor<4xi1>
}

// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[M:[a-z0-9]+]]: tensor<4xi1>)
func.func @cast(%x: tensor<4xf32>, %m: tensor<4xi1>)
    -> (tensor<4xf16>, tensor<4xi32>, tensor<4xi1>, tensor<4xf64>, tensor<4xbf16>, tensor<4xf32>) {
  // CHECK: rfuse.cast %[[X]] : tensor<4xf32> to tensor<4xf16>
  %0 = rfuse.cast %x : tensor<4xf32> to tensor<4xf16>
  // CHECK: rfuse.cast %[[X]] : tensor<4xf32> to tensor<4xi32>
  %1 = rfuse.cast %x : tensor<4xf32> to tensor<4xi32>
  // CHECK: rfuse.cast %{{.*}} : tensor<4xi32> to tensor<4xi1>
  %2 = rfuse.cast %1 : tensor<4xi32> to tensor<4xi1>
  // CHECK: rfuse.cast %[[M]] : tensor<4xi1> to tensor<4xf64>
  %3 = rfuse.cast %m : tensor<4xi1> to tensor<4xf64>
  // CHECK: rfuse.cast %{{.*}} : tensor<4xf16> to tensor<4xbf16>
  %4 = rfuse.cast %0 : tensor<4xf16> to tensor<4xbf16>
  // A same-type cast is valid (and kept without --canonicalize).
  // CHECK: rfuse.cast %[[X]] : tensor<4xf32> to tensor<4xf32>
  %5 = rfuse.cast %x : tensor<4xf32> to tensor<4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4xf16>, tensor<4xi32>, tensor<4xi1>, tensor<4xf64>, tensor<4xbf16>, tensor<4xf32>
}
