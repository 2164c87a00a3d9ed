// One split per verifier, type-inference and type-constraint error of the rfuse dialect.
// RUN: rfuse-opt %s -split-input-file -verify-diagnostics
//
// Ops with inferred result types (InferTypeOpAdaptor) report the shape rule's message and then
// "failed to infer returned types" at the same op; both are expected.

// exp takes float tensors only.
func.func @f(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{'rfuse.exp' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<2x3xi32>'}}
  %0 = rfuse.exp %x : tensor<2x3xi32>
  return
}

// -----

// Dynamic shapes are rejected.
func.func @f(%x: tensor<?x3xf32>) {
  // expected-error @+1 {{'rfuse.exp' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<?x3xf32>'}}
  %0 = rfuse.exp %x : tensor<?x3xf32>
  return
}

// -----

// Dynamic shapes are rejected by shape-inferring ops too (before inference runs).
func.func @f(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{'rfuse.reduce_sum' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?x4xf32>'}}
  %0 = rfuse.reduce_sum %x, dims = [0] : (tensor<?x4xf32>) -> tensor<4xf32>
  return
}

// -----

// Unranked tensors are rejected.
func.func @f(%x: tensor<*xf32>) {
  // expected-error @+1 {{'rfuse.transpose' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 1-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<*xf32>'}}
  %0 = rfuse.transpose %x, perm = [1, 0] : (tensor<*xf32>) -> tensor<3x2xf32>
  return
}

// -----

// i8 is not an rfuse element type.
func.func @f(%x: tensor<4xi8>) {
  // expected-error @+1 {{'rfuse.add' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi8>'}}
  %0 = rfuse.add %x, %x : tensor<4xi8>
  return
}

// -----

// A constant of an unsupported element type.
func.func @f() {
  // expected-error @+1 {{'rfuse.constant' op result #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 1-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xi8>'}}
  %0 = rfuse.constant dense<1> : tensor<2xi8>
  return
}

// -----

// A vector constant is not a tensor.
func.func @f() {
  // expected-error @+1 {{'rfuse.constant' op result #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 1-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'vector<2xf32>'}}
  %0 = rfuse.constant dense<1.0> : vector<2xf32>
  return
}

// -----

// neg takes numbers, not masks.
func.func @f(%x: tensor<4xi1>) {
  // expected-error @+1 {{'rfuse.neg' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = rfuse.neg %x : tensor<4xi1>
  return
}

// -----

// relu takes numbers, not masks.
func.func @f(%x: tensor<4xi1>) {
  // expected-error @+1 {{'rfuse.relu' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = rfuse.relu %x : tensor<4xi1>
  return
}

// -----

// not takes masks only.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'rfuse.not' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = rfuse.not %x : tensor<4xf32>
  return
}

// -----

// and takes masks only.
func.func @f(%x: tensor<4xi32>) {
  // expected-error @+1 {{'rfuse.and' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xi32>'}}
  %0 = rfuse.and %x, %x : tensor<4xi32>
  return
}

// -----

// or takes masks only.
func.func @f(%x: tensor<4xf16>) {
  // expected-error @+1 {{'rfuse.or' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xf16>'}}
  %0 = rfuse.or %x, %x : tensor<4xf16>
  return
}

// -----

// div takes float tensors only.
func.func @f(%x: tensor<4xi32>) {
  // expected-error @+1 {{'rfuse.div' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = rfuse.div %x, %x : tensor<4xi32>
  return
}

// -----

// pow takes float tensors only.
func.func @f(%x: tensor<4xi64>) {
  // expected-error @+1 {{'rfuse.pow' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi64>'}}
  %0 = rfuse.pow %x, %x : tensor<4xi64>
  return
}

// -----

// gelu takes float tensors only.
func.func @f(%x: tensor<4xi32>) {
  // expected-error @+1 {{'rfuse.gelu' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = rfuse.gelu %x : tensor<4xi32>
  return
}

// -----

// reduce_mean takes float tensors only.
func.func @f(%x: tensor<4xi32>) {
  // expected-error @+1 {{'rfuse.reduce_mean' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = rfuse.reduce_mean %x, dims = [0] : (tensor<4xi32>) -> tensor<i32>
  return
}

// -----

// matmul takes numbers, not masks.
func.func @f(%x: tensor<2x2xi1>) {
  // expected-error @+1 {{'rfuse.matmul' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x2xi1>'}}
  %0 = rfuse.matmul %x, %x : (tensor<2x2xi1>, tensor<2x2xi1>) -> tensor<2x2xi1>
  return
}

// -----

// conv2d takes float tensors only.
func.func @f(%x: tensor<1x1x4x4xi32>, %w: tensor<1x1x3x3xi32>) {
  // expected-error @+1 {{'rfuse.conv2d' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<1x1x4x4xi32>'}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xi32>, tensor<1x1x3x3xi32>) -> tensor<1x1x2x2xi32>
  return
}

// -----

// max_pool2d takes float tensors only.
func.func @f(%x: tensor<1x1x4x4xi64>) {
  // expected-error @+1 {{'rfuse.max_pool2d' op operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<1x1x4x4xi64>'}}
  %0 = rfuse.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xi64>) -> tensor<1x1x2x2xi64>
  return
}

// -----

// Pointwise binary ops need one type for operands and result.
func.func @f(%x: tensor<4xf32>, %y: tensor<4xf64>) {
  // expected-error @+1 {{'rfuse.add' op requires the same type for all operands and results}}
  %0 = "rfuse.add"(%x, %y) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return
}

// -----

// Pointwise unary ops need one type for operand and result.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'rfuse.exp' op requires the same type for all operands and results}}
  %0 = "rfuse.exp"(%x) : (tensor<4xf32>) -> tensor<2x2xf32>
  return
}

// -----

// compare needs operands of one type.
func.func @f(%x: tensor<4xf32>, %y: tensor<4xf64>) {
  // expected-error @+1 {{'rfuse.compare' op requires all operands to have the same type}}
  %0 = "rfuse.compare"(%x, %y) <{predicate = #rfuse<cmp_predicate lt>}> : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xi1>
  return
}

// -----

// compare's result is an i1 mask of the operands' shape.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'rfuse.compare' op result #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = "rfuse.compare"(%x, %x) <{predicate = #rfuse<cmp_predicate lt>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// compare's result shape is inferred from the operands.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+2 {{'rfuse.compare' op inferred type(s) 'tensor<4xi1>' are incompatible with return type(s) of operation 'tensor<2x2xi1>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "rfuse.compare"(%x, %x) <{predicate = #rfuse<cmp_predicate lt>}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<2x2xi1>
  return
}

// -----

// An unknown compare predicate.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::rfuse::CmpPredicate to be one of: eq, ne, lt, le, gt, ge}}
  // expected-error @+1 {{failed to parse Rfuse_CmpPredicateAttr parameter}}
  %0 = rfuse.compare foo, %x, %x : tensor<4xf32>
}

// -----

// An unknown gelu approximation.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::rfuse::GeluApproximation to be one of: none, tanh}}
  // expected-error @+1 {{failed to parse Rfuse_GeluApproxAttr parameter}}
  %0 = rfuse.gelu %x approximate = erf : tensor<4xf32>
}

// -----

// select's condition is a mask.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'rfuse.select' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = rfuse.select %x, %x, %x : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// select's two values and its result have one type.
func.func @f(%m: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf64>) {
  // expected-error @+1 {{'rfuse.select' op failed to verify that all of {on_true, on_false, result} have same type}}
  %0 = "rfuse.select"(%m, %x, %y) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return
}

// -----

// select's condition has the values' shape.
func.func @f(%m: tensor<4xi1>, %x: tensor<2x2xf32>) {
  // expected-error @+1 {{'rfuse.select' op condition shape [4] does not match the value shape [2, 2]}}
  %0 = rfuse.select %m, %x, %x : tensor<4xi1>, tensor<2x2xf32>
  return
}

// -----

// cast keeps the shape.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'rfuse.cast' op result shape [3, 2] differs from the input shape [2, 3]}}
  %0 = rfuse.cast %x : tensor<2x3xf32> to tensor<3x2xf16>
  return
}

// -----

// cast keeps the rank, even with one element.
func.func @f(%x: tensor<1xi32>) {
  // expected-error @+1 {{'rfuse.cast' op result shape [] differs from the input shape [1]}}
  %0 = rfuse.cast %x : tensor<1xi32> to tensor<i32>
  return
}

// -----

// A constant whose declared type differs from its value's.
func.func @f() {
  // expected-error @+2 {{'rfuse.constant' op inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "rfuse.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  return
}

// -----

// A constant's value must be an elements attribute (rejected when the properties are built).
func.func @f() {
  // expected-error @+1 {{invalid properties {value = 1.000000e+00 : f32} for op rfuse.constant: Invalid attribute `value` in property conversion}}
  %0 = "rfuse.constant"() <{value = 1.0 : f32}> : () -> tensor<f32>
  return
}

// -----

// A sparse constant: rfuse.constant needs a dense elements attribute.
func.func @f() {
  // expected-error @+1 {{'rfuse.constant' op value must be a dense elements attribute (sparse and resource constants are not supported)}}
  %0 = rfuse.constant sparse<[[0]], [1.0]> : tensor<2xf32>
  return
}

// -----

// A dense_resource constant: an elements attribute, but not a dense one.
func.func @f() {
  // expected-error @+1 {{'rfuse.constant' op value must be a dense elements attribute (sparse and resource constants are not supported)}}
  %0 = rfuse.constant dense_resource<blob1> : tensor<2xf32>
  return
}
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x040000000000803F00000040"
    }
  }
#-}

// -----

// transpose: perm has the wrong length.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'rfuse.transpose' op perm has 1 entries but the operand has rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.transpose %x, perm = [1] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

// transpose: perm entry out of range.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'rfuse.transpose' op perm entry 2 is out of range for an operand of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.transpose %x, perm = [2, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

// transpose: negative perm entry.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'rfuse.transpose' op perm entry -1 is out of range for an operand of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.transpose %x, perm = [-1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

// transpose: duplicate perm entry.
func.func @f(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{'rfuse.transpose' op perm entry 1 appears twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.transpose %x, perm = [1, 0, 1] : (tensor<2x3x4xf32>) -> tensor<3x2x3xf32>
  return
}

// -----

// transpose: a declared result type that is not the inferred one.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'rfuse.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.transpose %x, perm = [1, 0] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// transpose keeps the element type.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'rfuse.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<3x2xf64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.transpose %x, perm = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf64>
  return
}

// -----

// broadcast_in_dim: dims count differs from the operand rank.
func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'rfuse.broadcast_in_dim' op dims has 2 entries but the operand has rank 1}}
  %0 = rfuse.broadcast_in_dim %x, dims = [0, 1] : (tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

// broadcast_in_dim: dims entry out of range.
func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'rfuse.broadcast_in_dim' op dims[0] = 2 is out of range for a result of rank 2}}
  %0 = rfuse.broadcast_in_dim %x, dims = [2] : (tensor<3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// broadcast_in_dim: negative dims entry.
func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'rfuse.broadcast_in_dim' op dims[0] = -1 is out of range for a result of rank 2}}
  %0 = rfuse.broadcast_in_dim %x, dims = [-1] : (tensor<3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// broadcast_in_dim: to a lower rank.
func.func @f(%x: tensor<3x3xf32>) {
  // expected-error @+1 {{'rfuse.broadcast_in_dim' op dims[1] = 1 is out of range for a result of rank 1}}
  %0 = rfuse.broadcast_in_dim %x, dims = [0, 1] : (tensor<3x3xf32>) -> tensor<3xf32>
  return
}

// -----

// broadcast_in_dim: dims not increasing.
func.func @f(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'rfuse.broadcast_in_dim' op dims must be strictly increasing, got [1, 0]}}
  %0 = rfuse.broadcast_in_dim %x, dims = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

// broadcast_in_dim: repeated dims are not strictly increasing.
func.func @f(%x: tensor<3x3xf32>) {
  // expected-error @+1 {{'rfuse.broadcast_in_dim' op dims must be strictly increasing, got [1, 1]}}
  %0 = rfuse.broadcast_in_dim %x, dims = [1, 1] : (tensor<3x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// broadcast_in_dim: a size that is neither 1 nor the result's.
func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'rfuse.broadcast_in_dim' op operand dimension 0 (size 3) cannot be broadcast to result dimension 0 (size 4)}}
  %0 = rfuse.broadcast_in_dim %x, dims = [0] : (tensor<3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// broadcast_in_dim: element type changes.
func.func @f(%x: tensor<3xf32>) {
  // expected-error @+1 {{'rfuse.broadcast_in_dim' op result element type 'f64' differs from the operand's 'f32'}}
  %0 = rfuse.broadcast_in_dim %x, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf64>
  return
}

// -----

// reshape: element counts differ.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'rfuse.reshape' op cannot reshape [2, 3] (6 elements) to [4, 2] (8 elements)}}
  %0 = rfuse.reshape %x : (tensor<2x3xf32>) -> tensor<4x2xf32>
  return
}

// -----

// reshape: to a scalar from more than one element.
func.func @f(%x: tensor<2xi32>) {
  // expected-error @+1 {{'rfuse.reshape' op cannot reshape [2] (2 elements) to [] (1 elements)}}
  %0 = rfuse.reshape %x : (tensor<2xi32>) -> tensor<i32>
  return
}

// -----

// reshape: element type changes.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'rfuse.reshape' op result element type 'i32' differs from the operand's 'f32'}}
  %0 = rfuse.reshape %x : (tensor<2x3xf32>) -> tensor<6xi32>
  return
}

// -----

// reshape: a result shape whose element count overflows int64 (2^32 * 2^32).
func.func @f(%x: tensor<2xf32>) {
  // expected-error @+1 {{'rfuse.reshape' op result shape [4294967296, 4294967296] has more than 2^63 - 1 elements}}
  %0 = rfuse.reshape %x : (tensor<2xf32>) -> tensor<4294967296x4294967296xf32>
  return
}

// -----

// reshape: an operand shape whose element count overflows int64 (2^32 * 2^32 * 2), which would
// otherwise wrap around to 0 and "match" an empty result.
func.func @f(%x: tensor<4294967296x4294967296x2xf32>) {
  // expected-error @+1 {{'rfuse.reshape' op operand shape [4294967296, 4294967296, 2] has more than 2^63 - 1 elements}}
  %0 = rfuse.reshape %x : (tensor<4294967296x4294967296x2xf32>) -> tensor<0xf32>
  return
}

// -----

// reduce_sum: dimension out of range.
func.func @f(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'rfuse.reduce_sum' op reduction dimension 2 is out of range for an operand of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.reduce_sum %x, dims = [2] : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

// reduce_mean: negative dimension.
func.func @f(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'rfuse.reduce_mean' op reduction dimension -1 is out of range for an operand of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.reduce_mean %x, dims = [-1] : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

// reduce_max: duplicate dimension.
func.func @f(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'rfuse.reduce_max' op reduction dimension 1 appears twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.reduce_max %x, dims = [1, 1] : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

// reduce_min: a rank-0 operand has no dimension to reduce.
func.func @f(%x: tensor<i32>) {
  // expected-error @+2 {{'rfuse.reduce_min' op reduction dimension 0 is out of range for an operand of rank 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.reduce_min %x, dims = [0] : (tensor<i32>) -> tensor<i32>
  return
}

// -----

// reduce_sum: keep_dims changes the inferred type.
func.func @f(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{'rfuse.reduce_sum' op inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.reduce_sum %x, dims = [1] {keep_dims = true} : (tensor<4x3xf32>) -> tensor<4xf32>
  return
}

// -----

// reduce_max: without keep_dims the dimension goes.
func.func @f(%x: tensor<4x3xi32>) {
  // expected-error @+2 {{'rfuse.reduce_max' op inferred type(s) 'tensor<3xi32>' are incompatible with return type(s) of operation 'tensor<1x3xi32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.reduce_max %x, dims = [0] : (tensor<4x3xi32>) -> tensor<1x3xi32>
  return
}

// -----

// matmul: non-conformable.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{'rfuse.matmul' op non-conformable arguments: lhs [2, 3] has 3 columns but rhs [4, 5] has 4 rows}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// matmul: non-conformable with transpose_a.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+2 {{'rfuse.matmul' op non-conformable arguments: lhs [2, 3] (transposed) has 2 columns but rhs [3, 5] has 3 rows}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b {transpose_a = true} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

// matmul: non-conformable with transpose_b.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+2 {{'rfuse.matmul' op non-conformable arguments: lhs [2, 3] has 3 columns but rhs [3, 5] (transposed) has 5 rows}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b {transpose_b = true} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x3xf32>
  return
}

// -----

// matmul: batch sizes differ.
func.func @f(%a: tensor<2x4x3xf32>, %b: tensor<3x3x5xf32>) {
  // expected-error @+2 {{'rfuse.matmul' op batch sizes differ: lhs 2, rhs 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b : (tensor<2x4x3xf32>, tensor<3x3x5xf32>) -> tensor<2x4x5xf32>
  return
}

// -----

// matmul: lhs of rank 1.
func.func @f(%a: tensor<3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+2 {{'rfuse.matmul' op lhs must have rank 2 or 3, got shape [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b : (tensor<3xf32>, tensor<3x5xf32>) -> tensor<5xf32>
  return
}

// -----

// matmul: lhs of rank 4.
func.func @f(%a: tensor<1x2x4x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+2 {{'rfuse.matmul' op lhs must have rank 2 or 3, got shape [1, 2, 4, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b : (tensor<1x2x4x3xf32>, tensor<3x5xf32>) -> tensor<1x2x4x5xf32>
  return
}

// -----

// matmul: rhs of rank 0.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<f32>) {
  // expected-error @+2 {{'rfuse.matmul' op rhs must have rank 2 or 3, got shape []}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return
}

// -----

// matmul: rhs of rank 4.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<1x2x3x5xf32>) {
  // expected-error @+2 {{'rfuse.matmul' op rhs must have rank 2 or 3, got shape [1, 2, 3, 5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b : (tensor<2x3xf32>, tensor<1x2x3x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// matmul: element types differ.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x5xf16>) {
  // expected-error @+2 {{'rfuse.matmul' op element types differ: lhs 'f32', rhs 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b : (tensor<2x3xf32>, tensor<3x5xf16>) -> tensor<2x5xf32>
  return
}

// -----

// matmul: a declared result type that is not the inferred one.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+2 {{'rfuse.matmul' op inferred type(s) 'tensor<2x5xf32>' are incompatible with return type(s) of operation 'tensor<5x2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.matmul %a, %b : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<5x2xf32>
  return
}

// -----

// conv2d: input of rank 3 (NCHW).
func.func @f(%x: tensor<3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op input must have rank 4 (NCHW), got shape [3, 8, 8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: input of rank 5 (NHWC).
func.func @f(%x: tensor<1x1x8x8x3xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op input must have rank 4 (NHWC), got shape [1, 1, 8, 8, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>} : (tensor<1x1x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x6x6x4xf32>
  return
}

// -----

// conv2d: filter of rank 3 (OIHW).
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op filter must have rank 4 (OIHW), got shape [4, 3, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: filter of rank 5 (OHWI).
func.func @f(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x3x3x1xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op filter must have rank 4 (OHWI), got shape [4, 3, 3, 3, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>} : (tensor<1x8x8x3xf32>, tensor<4x3x3x3x1xf32>) -> tensor<1x6x6x4xf32>
  return
}

// -----

// conv2d: strides count.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op strides must have 2 values, got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: zero stride.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op strides values must be >= 1, got [0, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 0, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: dilation count.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op dilation must have 2 values, got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: negative dilation.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op dilation values must be >= 1, got [1, -2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, -2>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: padding count.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op padding must have 4 values [top, bottom, left, right], got 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: negative padding.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op padding must be non-negative, got [0, -1, 0, 0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, -1, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: zero groups.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op groups must be >= 1, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 0 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: a filter of zero height (NCHW: OIHW).
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x0x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op filter spatial size must be at least 1x1, got 0x3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x0x3xf32>) -> tensor<1x4x9x6xf32>
  return
}

// -----

// conv2d: a filter of zero width (NHWC: OHWI).
func.func @f(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x0x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op filter spatial size must be at least 1x1, got 3x0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NHWC>} : (tensor<1x8x8x3xf32>, tensor<4x3x0x3xf32>) -> tensor<1x6x9x4xf32>
  return
}

// -----

// conv2d: input channels not divisible by groups.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x1x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op input channels (3) and output channels (4) must be divisible by groups (2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: output channels not divisible by groups (NHWC).
func.func @f(%x: tensor<1x8x8x4xf32>, %w: tensor<3x3x3x2xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op input channels (4) and output channels (3) must be divisible by groups (2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64, layout = #rfuse.layout<NHWC>} : (tensor<1x8x8x4xf32>, tensor<3x3x3x2xf32>) -> tensor<1x6x6x3xf32>
  return
}

// -----

// conv2d: filter channels differ from the input's.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op filter expects 2 input channels per group, but the input has 3 channels in 1 group(s)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: filter channels per group with groups.
func.func @f(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op filter expects 4 input channels per group, but the input has 4 channels in 2 group(s)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: bias of the wrong size.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op bias must have shape [4], got [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: bias of the wrong rank.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<1x4xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op bias must have shape [4], got [1, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<1x4xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: kernel larger than the input.
func.func @f(%x: tensor<1x3x4x4xf32>, %w: tensor<4x3x5x5xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op the dilated kernel (5x5) is larger than the padded input (4x4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x4x4xf32>, tensor<4x3x5x5xf32>) -> tensor<1x4x1x1xf32>
  return
}

// -----

// conv2d: dilated kernel larger than the padded input.
func.func @f(%x: tensor<1x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op the dilated kernel (7x3) is larger than the padded input (6x8)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 1, 1>, dilation = array<i64: 3, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  return
}

// -----

// conv2d: filter element type differs.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf16>) {
  // expected-error @+2 {{'rfuse.conv2d' op filter element type 'f16' differs from the input's 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: bias element type differs.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf64>) {
  // expected-error @+2 {{'rfuse.conv2d' op bias element type 'f64' differs from the input's 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf64>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: an NHWC result type for an NCHW conv.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'rfuse.conv2d' op inferred type(s) 'tensor<1x4x6x6xf32>' are incompatible with return type(s) of operation 'tensor<1x6x6x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x6x6x4xf32>
  return
}

// -----

// conv2d: a required attribute is missing.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'rfuse.conv2d' op requires attribute 'groups'}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, layout = #rfuse.layout<NCHW>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// conv2d: an unknown layout.
func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{expected ::rfuse::Layout to be one of: NCHW, NHWC}}
  // expected-error @+1 {{failed to parse Rfuse_LayoutAttr parameter}}
  %0 = rfuse.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<CHWN>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
}

// -----

// max_pool2d: input of rank 3.
func.func @f(%x: tensor<8x26x26xf32>) {
  // expected-error @+2 {{'rfuse.max_pool2d' op input must have rank 4 (NCHW), got shape [8, 26, 26]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<8x26x26xf32>) -> tensor<8x13x13xf32>
  return
}

// -----

// avg_pool2d: input of rank 5 (NHWC).
func.func @f(%x: tensor<1x2x26x26x8xf32>) {
  // expected-error @+2 {{'rfuse.avg_pool2d' op input must have rank 4 (NHWC), got shape [1, 2, 26, 26, 8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NHWC>} : (tensor<1x2x26x26x8xf32>) -> tensor<1x13x13x8xf32>
  return
}

// -----

// max_pool2d: kernel count.
func.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{'rfuse.max_pool2d' op kernel must have 2 values, got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.max_pool2d %x {kernel = array<i64: 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  return
}

// -----

// avg_pool2d: zero kernel.
func.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{'rfuse.avg_pool2d' op kernel values must be >= 1, got [0, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.avg_pool2d %x {kernel = array<i64: 0, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  return
}

// -----

// max_pool2d: strides count.
func.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{'rfuse.max_pool2d' op strides must have 2 values, got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  return
}

// -----

// avg_pool2d: zero stride.
func.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{'rfuse.avg_pool2d' op strides values must be >= 1, got [2, 0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 0>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  return
}

// -----

// max_pool2d: padding count.
func.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{'rfuse.max_pool2d' op padding must have 4 values [top, bottom, left, right], got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  return
}

// -----

// avg_pool2d: negative padding.
func.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{'rfuse.avg_pool2d' op padding must be non-negative, got [0, 0, -1, 0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, -1, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  return
}

// -----

// max_pool2d: padding as large as the kernel.
func.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{'rfuse.max_pool2d' op padding [0, 0, 2, 0] must be smaller than the kernel [2, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 2, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

// avg_pool2d: bottom padding as large as the kernel.
func.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{'rfuse.avg_pool2d' op padding [0, 3, 0, 0] must be smaller than the kernel [3, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.avg_pool2d %x {kernel = array<i64: 3, 1>, strides = array<i64: 1, 1>, padding = array<i64: 0, 3, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

// max_pool2d: kernel larger than the input.
func.func @f(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{'rfuse.max_pool2d' op the kernel [5, 5] is larger than the padded input (4x4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.max_pool2d %x {kernel = array<i64: 5, 5>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

// avg_pool2d: kernel larger than the padded input (NHWC).
func.func @f(%x: tensor<1x4x4x1xf32>) {
  // expected-error @+2 {{'rfuse.avg_pool2d' op the kernel [2, 6] is larger than the padded input (5x5)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.avg_pool2d %x {kernel = array<i64: 2, 6>, strides = array<i64: 2, 2>, padding = array<i64: 1, 0, 1, 0>, layout = #rfuse.layout<NHWC>} : (tensor<1x4x4x1xf32>) -> tensor<1x1x1x1xf32>
  return
}

// -----

// max_pool2d: a declared result type that is not the inferred one.
func.func @f(%x: tensor<1x8x26x26xf32>) {
  // expected-error @+2 {{'rfuse.max_pool2d' op inferred type(s) 'tensor<1x8x13x13xf32>' are incompatible with return type(s) of operation 'tensor<1x8x12x12xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x8x26x26xf32>) -> tensor<1x8x12x12xf32>
  return
}

// -----

// fusion: the body's argument count differs from the input count.
func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op body has 1 arguments but the op has 2 inputs}}
  %0 = rfuse.fusion pointwise (%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    rfuse.yield %a : tensor<4xf32>
  }
  return
}

// -----

// fusion: a body argument's type differs from its input's.
func.func @f(%x: tensor<4xf32>, %y: tensor<4xi32>) {
  // expected-error @+1 {{'rfuse.fusion' op body argument #1 has type 'tensor<4xf32>' but input #1 has type 'tensor<4xi32>'}}
  %0 = rfuse.fusion pointwise (%x, %y) : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    rfuse.yield %a : tensor<4xf32>
  }
  return
}

// -----

// fusion: the yield count differs from the result count (the body is a valid reduction body).
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op body yields 1 values but the op has 2 results}}
  %0:2 = rfuse.fusion reduction (%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
  ^bb0(%a: tensor<4xf32>):
    %s = rfuse.reduce_sum %a, dims = [0] : (tensor<4xf32>) -> tensor<f32>
    rfuse.yield %a : tensor<4xf32>
  }
  return
}

// -----

// fusion: yielding nothing from a fusion with a result.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op body yields 0 values but the op has 1 results}}
  %0 = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    rfuse.yield
  }
  return
}

// -----

// fusion: a yielded value's type differs from its result's (the body is a valid matmul epilogue).
func.func @f(%x: tensor<4x6xf32>, %w: tensor<6x6xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op yielded value #1 has type 'tensor<4x6xf32>' but result #1 has type 'tensor<4xf32>'}}
  %0:2 = rfuse.fusion matmul_epilogue (%x, %w) : (tensor<4x6xf32>, tensor<6x6xf32>) -> (tensor<4x6xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x6xf32>, %b: tensor<6x6xf32>):
    %m = rfuse.matmul %a, %b : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32>
    %r = rfuse.relu %m : tensor<4x6xf32>
    rfuse.yield %r, %m : tensor<4x6xf32>, tensor<4x6xf32>
  }
  return
}

// -----

// fusion: the body's argument types are checked in the generic form too.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op body argument #0 has type 'tensor<4xf64>' but input #0 has type 'tensor<4xf32>'}}
  %0 = "rfuse.fusion"(%x) <{kind = #rfuse<fusion_kind pointwise>}> ({
  ^bb0(%a: tensor<4xf64>):
    "rfuse.yield"(%a) : (tensor<4xf64>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// fusion: the region is isolated from above.
func.func @f(%x: tensor<4xf32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{'rfuse.yield' op using value defined outside the region}}
    rfuse.yield %x : tensor<4xf32>
  }
  return
}

// -----

// fusion: an empty body.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op expects a non-empty block}}
  %0 = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  }
  return
}

// -----

// fusion: a body without terminator.
func.func @f(%x: tensor<4xf32>) {
  %0 = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{block with no terminator}}
    %e = rfuse.exp %a : tensor<4xf32>
  }
  return
}

// -----

// fusion: an unknown kind.
func.func @f(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::rfuse::FusionKind to be one of: pointwise, reduction, matmul_epilogue, conv_epilogue}}
  // expected-error @+1 {{failed to parse Rfuse_FusionKindAttr parameter}}
  %0 = rfuse.fusion elementwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    rfuse.yield %a : tensor<4xf32>
  }
  return
}

// -----

// fusion kinds: the verifier holds the body to the kind. A pointwise region holds no reduction.
func.func @f(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a pointwise region cannot contain reductions, matmul or conv2d}}
  %0 = rfuse.fusion pointwise (%x) : (tensor<4x6xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4x6xf32>):
    %e = rfuse.exp %a : tensor<4x6xf32>
    %s = rfuse.reduce_sum %e, dims = [1] : (tensor<4x6xf32>) -> tensor<4xf32>
    rfuse.yield %s : tensor<4xf32>
  }
  return
}

// -----

// fusion kinds: a pointwise region holds no matmul.
func.func @f(%x: tensor<4x6xf32>, %w: tensor<6x6xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a pointwise region cannot contain reductions, matmul or conv2d}}
  %0 = rfuse.fusion pointwise (%x, %w) : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32> {
  ^bb0(%a: tensor<4x6xf32>, %b: tensor<6x6xf32>):
    %m = rfuse.matmul %a, %b : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32>
    %r = rfuse.relu %m : tensor<4x6xf32>
    rfuse.yield %r : tensor<4x6xf32>
  }
  return
}

// -----

// fusion kinds: a pointwise region holds no conv2d.
func.func @f(%x: tensor<1x1x6x6xf32>, %w: tensor<2x1x3x3xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a pointwise region cannot contain reductions, matmul or conv2d}}
  %0 = rfuse.fusion pointwise (%x, %w) : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32> {
  ^bb0(%i: tensor<1x1x6x6xf32>, %f: tensor<2x1x3x3xf32>):
    %y = rfuse.conv2d %i, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32>
    rfuse.yield %y : tensor<1x2x4x4xf32>
  }
  return
}

// -----

// fusion kinds: a reduction region needs a reduction.
func.func @f(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a reduction region needs at least one reduction and no matmul or conv2d}}
  %0 = rfuse.fusion reduction (%x) : (tensor<4x6xf32>) -> tensor<4x6xf32> {
  ^bb0(%a: tensor<4x6xf32>):
    %e = rfuse.exp %a : tensor<4x6xf32>
    rfuse.yield %e : tensor<4x6xf32>
  }
  return
}

// -----

// fusion kinds: a reduction region holds no matmul, even next to a reduction.
func.func @f(%x: tensor<4x6xf32>, %w: tensor<6x6xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a reduction region needs at least one reduction and no matmul or conv2d}}
  %0 = rfuse.fusion reduction (%x, %w) : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4x6xf32>, %b: tensor<6x6xf32>):
    %m = rfuse.matmul %a, %b : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32>
    %s = rfuse.reduce_sum %m, dims = [1] : (tensor<4x6xf32>) -> tensor<4xf32>
    rfuse.yield %s : tensor<4xf32>
  }
  return
}

// -----

// fusion kinds: a reduction region holds no conv2d, even next to a reduction.
func.func @f(%x: tensor<1x1x6x6xf32>, %w: tensor<2x1x3x3xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a reduction region needs at least one reduction and no matmul or conv2d}}
  %0 = rfuse.fusion reduction (%x, %w) : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2xf32> {
  ^bb0(%i: tensor<1x1x6x6xf32>, %f: tensor<2x1x3x3xf32>):
    %y = rfuse.conv2d %i, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32>
    %m = rfuse.reduce_mean %y, dims = [2, 3] : (tensor<1x2x4x4xf32>) -> tensor<1x2xf32>
    rfuse.yield %m : tensor<1x2xf32>
  }
  return
}

// -----

// fusion kinds: a matmul_epilogue region without a matmul.
func.func @f(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a matmul_epilogue region needs exactly one matmul and no conv2d or reduction, found 0 matmul(s)}}
  %0 = rfuse.fusion matmul_epilogue (%x) : (tensor<4x6xf32>) -> tensor<4x6xf32> {
  ^bb0(%a: tensor<4x6xf32>):
    %r = rfuse.relu %a : tensor<4x6xf32>
    rfuse.yield %r : tensor<4x6xf32>
  }
  return
}

// -----

// fusion kinds: a matmul_epilogue region with two matmuls.
func.func @f(%x: tensor<4x6xf32>, %w: tensor<6x6xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a matmul_epilogue region needs exactly one matmul and no conv2d or reduction, found 2 matmul(s)}}
  %0 = rfuse.fusion matmul_epilogue (%x, %w) : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32> {
  ^bb0(%a: tensor<4x6xf32>, %b: tensor<6x6xf32>):
    %m = rfuse.matmul %a, %b : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32>
    %r = rfuse.relu %m : tensor<4x6xf32>
    %n = rfuse.matmul %r, %b : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32>
    rfuse.yield %n : tensor<4x6xf32>
  }
  return
}

// -----

// fusion kinds: a matmul_epilogue region with a reduction (one matmul is not enough).
func.func @f(%x: tensor<4x6xf32>, %w: tensor<6x6xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a matmul_epilogue region needs exactly one matmul and no conv2d or reduction, found 1 matmul(s)}}
  %0 = rfuse.fusion matmul_epilogue (%x, %w) : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4x6xf32>, %b: tensor<6x6xf32>):
    %m = rfuse.matmul %a, %b : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32>
    %s = rfuse.reduce_max %m, dims = [1] : (tensor<4x6xf32>) -> tensor<4xf32>
    rfuse.yield %s : tensor<4xf32>
  }
  return
}

// -----

// fusion kinds: a matmul_epilogue region with a conv2d.
func.func @f(%x: tensor<1x1x6x6xf32>, %w: tensor<2x1x3x3xf32>, %v: tensor<4x4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a matmul_epilogue region needs exactly one matmul and no conv2d or reduction, found 1 matmul(s)}}
  %0:2 = rfuse.fusion matmul_epilogue (%x, %w, %v) : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>, tensor<4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<4x4xf32>) {
  ^bb0(%i: tensor<1x1x6x6xf32>, %f: tensor<2x1x3x3xf32>, %b: tensor<4x4xf32>):
    %y = rfuse.conv2d %i, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32>
    %m = rfuse.matmul %b, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    rfuse.yield %y, %m : tensor<1x2x4x4xf32>, tensor<4x4xf32>
  }
  return
}

// -----

// fusion kinds: a conv_epilogue region without a conv2d.
func.func @f(%x: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a conv_epilogue region needs exactly one conv2d and no matmul or reduction, found 0 conv2d(s)}}
  %0 = rfuse.fusion conv_epilogue (%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  ^bb0(%a: tensor<1x2x4x4xf32>):
    %r = rfuse.relu %a : tensor<1x2x4x4xf32>
    rfuse.yield %r : tensor<1x2x4x4xf32>
  }
  return
}

// -----

// fusion kinds: a conv_epilogue region with two conv2d.
func.func @f(%x: tensor<1x1x6x6xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a conv_epilogue region needs exactly one conv2d and no matmul or reduction, found 2 conv2d(s)}}
  %0 = rfuse.fusion conv_epilogue (%x, %w) : (tensor<1x1x6x6xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> {
  ^bb0(%i: tensor<1x1x6x6xf32>, %f: tensor<1x1x3x3xf32>):
    %y = rfuse.conv2d %i, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x6x6xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32>
    %z = rfuse.conv2d %y, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
    rfuse.yield %z : tensor<1x1x2x2xf32>
  }
  return
}

// -----

// fusion kinds: a conv_epilogue region with a matmul.
func.func @f(%x: tensor<1x1x6x6xf32>, %w: tensor<2x1x3x3xf32>, %v: tensor<4x4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a conv_epilogue region needs exactly one conv2d and no matmul or reduction, found 1 conv2d(s)}}
  %0:2 = rfuse.fusion conv_epilogue (%x, %w, %v) : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>, tensor<4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<4x4xf32>) {
  ^bb0(%i: tensor<1x1x6x6xf32>, %f: tensor<2x1x3x3xf32>, %b: tensor<4x4xf32>):
    %y = rfuse.conv2d %i, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32>
    %m = rfuse.matmul %b, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    rfuse.yield %y, %m : tensor<1x2x4x4xf32>, tensor<4x4xf32>
  }
  return
}

// -----

// fusion kinds: a conv_epilogue region with a reduction.
func.func @f(%x: tensor<1x1x6x6xf32>, %w: tensor<2x1x3x3xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a conv_epilogue region needs exactly one conv2d and no matmul or reduction, found 1 conv2d(s)}}
  %0 = rfuse.fusion conv_epilogue (%x, %w) : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2xf32> {
  ^bb0(%i: tensor<1x1x6x6xf32>, %f: tensor<2x1x3x3xf32>):
    %y = rfuse.conv2d %i, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32>
    %m = rfuse.reduce_mean %y, dims = [2, 3] : (tensor<1x2x4x4xf32>) -> tensor<1x2xf32>
    rfuse.yield %m : tensor<1x2xf32>
  }
  return
}

// -----

// fusion kinds: pooling belongs in no region; pointwise.
func.func @f(%x: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a pointwise region cannot contain pooling}}
  %0 = rfuse.fusion pointwise (%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  ^bb0(%a: tensor<1x2x4x4xf32>):
    %r = rfuse.relu %a : tensor<1x2x4x4xf32>
    %p = rfuse.max_pool2d %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
    rfuse.yield %p : tensor<1x2x2x2xf32>
  }
  return
}

// -----

// fusion kinds: pooling belongs in no region; reduction (avg_pool2d, next to a reduction).
func.func @f(%x: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a reduction region cannot contain pooling}}
  %0 = rfuse.fusion reduction (%x) : (tensor<1x2x4x4xf32>) -> tensor<1x2xf32> {
  ^bb0(%a: tensor<1x2x4x4xf32>):
    %p = rfuse.avg_pool2d %a {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
    %s = rfuse.reduce_sum %p, dims = [2, 3] : (tensor<1x2x2x2xf32>) -> tensor<1x2xf32>
    rfuse.yield %s : tensor<1x2xf32>
  }
  return
}

// -----

// fusion kinds: pooling belongs in no region; matmul_epilogue.
func.func @f(%x: tensor<4x4xf32>, %y: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a matmul_epilogue region cannot contain pooling}}
  %0:2 = rfuse.fusion matmul_epilogue (%x, %y) : (tensor<4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<4x4xf32>, tensor<1x2x2x2xf32>) {
  ^bb0(%a: tensor<4x4xf32>, %b: tensor<1x2x4x4xf32>):
    %m = rfuse.matmul %a, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %p = rfuse.max_pool2d %b {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
    rfuse.yield %m, %p : tensor<4x4xf32>, tensor<1x2x2x2xf32>
  }
  return
}

// -----

// fusion kinds: pooling belongs in no region; conv_epilogue (conv + relu + pool is two kernels).
func.func @f(%x: tensor<1x1x6x6xf32>, %w: tensor<2x1x3x3xf32>) {
  // expected-error @+1 {{'rfuse.fusion' op a conv_epilogue region cannot contain pooling}}
  %0 = rfuse.fusion conv_epilogue (%x, %w) : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x2x2xf32> {
  ^bb0(%i: tensor<1x1x6x6xf32>, %f: tensor<2x1x3x3xf32>):
    %y = rfuse.conv2d %i, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32>
    %r = rfuse.relu %y : tensor<1x2x4x4xf32>
    %p = rfuse.max_pool2d %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
    rfuse.yield %p : tensor<1x2x2x2xf32>
  }
  return
}

// -----

// yield only terminates a fusion.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'rfuse.yield' op expects parent op 'rfuse.fusion'}}
  rfuse.yield %x : tensor<4xf32>
}

// -----

// A convolution gradient's operands must describe a forward convolution: here the forward
// output of a 6x6 input, 3x3 filter and stride 2 is 2x2, not 3x3.
func.func @f(%g: tensor<1x2x3x3xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<1x1x6x6xf32> {
  // expected-error @+1 {{'rfuse.conv2d_backward_input' op grad_output has shape 'tensor<1x2x3x3xf32>' but the forward convolution's output has 'tensor<1x2x2x2xf32>'}}
  %d = rfuse.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x2x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<1x1x6x6xf32>
  return %d : tensor<1x1x6x6xf32>
}

// -----

func.func @f(%x: tensor<1x3x6x6xf32>, %g: tensor<1x2x4x4xf32>) -> tensor<2x2x3x3xf32> {
  // expected-error @+1 {{'rfuse.conv2d_backward_filter' op describes no valid forward convolution}}
  %d = rfuse.conv2d_backward_filter %x, %g {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>} : (tensor<1x3x6x6xf32>, tensor<1x2x4x4xf32>) -> tensor<2x2x3x3xf32>
  return %d : tensor<2x2x3x3xf32>
}

// -----

func.func @f(%x: tensor<1x1x4x4xf32>, %y: tensor<1x1x2x2xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf64> {
  // expected-error @+1 {{'rfuse.max_pool2d_backward' op result must have the input's type}}
  %d = rfuse.max_pool2d_backward %x, %y, %g {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf64>
  return %d : tensor<1x1x4x4xf64>
}

// -----

func.func @f(%g: tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error @+1 {{'rfuse.avg_pool2d_backward' op grad_output's shape differs from the forward pooling's output}}
  %d = rfuse.avg_pool2d_backward %g {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, layout = #rfuse.layout<NCHW>} : (tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32>
  return %d : tensor<1x1x4x4xf32>
}

// -----

// slice: a range outside the operand.
func.func @f(%x: tensor<6xf32>) {
  // expected-error @+2 {{'rfuse.slice' op dimension 0: the range [2, 7) does not lie within [0, 6]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.slice %x {start = array<i64: 2>, limit = array<i64: 7>, strides = array<i64: 1>} : (tensor<6xf32>) -> tensor<5xf32>
  return
}

// -----

// slice: a zero stride.
func.func @f(%x: tensor<6xf32>) {
  // expected-error @+2 {{'rfuse.slice' op strides must be >= 1, got [0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.slice %x {start = array<i64: 0>, limit = array<i64: 6>, strides = array<i64: 0>} : (tensor<6xf32>) -> tensor<6xf32>
  return
}

// -----

// slice: the declared result type differs from the inferred one.
func.func @f(%x: tensor<6xf32>) {
  // expected-error @+2 {{'rfuse.slice' op inferred type(s) 'tensor<3xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.slice %x {start = array<i64: 0>, limit = array<i64: 6>, strides = array<i64: 2>} : (tensor<6xf32>) -> tensor<4xf32>
  return
}

// -----

// reverse: a dim out of range.
func.func @f(%x: tensor<6xf32>) {
  // expected-error @+1 {{'rfuse.reverse' op reversed dimension 1 is out of range for an operand of rank 1}}
  %0 = rfuse.reverse %x, dims = [1] : tensor<6xf32>
  return
}

// -----

// pad: negative padding.
func.func @f(%x: tensor<6xf32>) {
  // expected-error @+2 {{'rfuse.pad' op padding must be non-negative, got low [-1], high [0], interior [0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.pad %x {low = array<i64: -1>, high = array<i64: 0>, interior = array<i64: 0>, value = 0.0 : f64} : (tensor<6xf32>) -> tensor<5xf32>
  return
}

// -----

// concat: operands that differ outside the concatenated dim.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{'rfuse.concat' op operand 1 has shape [2, 4], which differs from operand 0's [2, 3] outside dim 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = rfuse.concat(%a, %b) dim = 0 : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

// concat: element types differ.
func.func @f(%a: tensor<2xf32>, %b: tensor<2xf64>) {
  // expected-error @+1 {{'rfuse.concat' op requires the same element type for all operands}}
  %0 = rfuse.concat(%a, %b) dim = 0 : (tensor<2xf32>, tensor<2xf64>) -> tensor<4xf32>
  return
}

// -----

// gather: a constant index out of range.
func.func @f(%x: tensor<6xf32>) {
  %i = rfuse.constant dense<[1, 6]> : tensor<2xi64>
  // expected-error @+1 {{'rfuse.gather' op index 6 is out of range [0, 6) of dim 0}}
  %0 = rfuse.gather %x, %i, dim = 0 : (tensor<6xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

// gather: float indices.
func.func @f(%x: tensor<6xf32>, %i: tensor<2xf32>) {
  // expected-error @+1 {{'rfuse.gather' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xf32>'}}
  %0 = rfuse.gather %x, %i, dim = 0 : (tensor<6xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

// sort: a dim out of range.
func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'rfuse.sort' op dim 2 is out of range for an operand of rank 2}}
  %v, %i = rfuse.sort %x, dim = 2 : tensor<2x3xf32>
  return
}

// -----

// sort: a mask has no order.
func.func @f(%x: tensor<3xi1>) {
  // expected-error @+1 {{'rfuse.sort' op operand #0 must be statically shaped tensor of}}
  %v, %i = rfuse.sort %x, dim = 0 : tensor<3xi1>
  return
}

// -----

// take_along: indices of another rank.
func.func @f(%x: tensor<2x3xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'rfuse.take_along' op indices 'tensor<3xi64>' must have the input's rank 2}}
  %0 = rfuse.take_along %x, %i, dim = 1 : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

// take_along: indices that differ from the input in a dim other than `dim`.
func.func @f(%x: tensor<2x3xf32>, %i: tensor<4x3xi64>) {
  // expected-error @+1 {{'rfuse.take_along' op indices 'tensor<4x3xi64>' must match the input 'tensor<2x3xf32>' in every dim but 1}}
  %0 = rfuse.take_along %x, %i, dim = 1 : (tensor<2x3xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  return
}

// -----

// take_along: a result not of the indices' shape.
func.func @f(%x: tensor<2x3xf32>, %i: tensor<2x5xi64>) {
  // expected-error @+1 {{'rfuse.take_along' op result 'tensor<2x3xf32>' must have the indices' shape and the input's element type}}
  %0 = rfuse.take_along %x, %i, dim = 1 : (tensor<2x3xf32>, tensor<2x5xi64>) -> tensor<2x3xf32>
  return
}

// -----

// scatter_add: positions of another shape than the source's.
func.func @f(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>) {
  // expected-error @+1 {{'rfuse.scatter_add' op indices 'tensor<2x2xi64>' must have the source's shape 'tensor<2x3xf32>'}}
  %0 = rfuse.scatter_add %x, %i, dim = 1 : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x4xf32>
  return
}

// -----

// scatter_add: a result that differs from the source in a dim other than `dim`.
func.func @f(%x: tensor<2x3xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{'rfuse.scatter_add' op result 'tensor<5x4xf32>' must match the source 'tensor<2x3xf32>' in every dim but 1}}
  %0 = rfuse.scatter_add %x, %i, dim = 1 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<5x4xf32>
  return
}

// -----

// scatter_add: a dim the source does not have.
func.func @f(%x: tensor<2x3xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{'rfuse.scatter_add' op dim 2 is out of range for an operand of rank 2}}
  %0 = rfuse.scatter_add %x, %i, dim = 2 : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  return
}

// -----

// solve: a must be square.
func.func @f(%a: tensor<3x2xf64>, %b: tensor<1x3xf64>) {
  // expected-error @+1 {{'rfuse.solve' op 'a' must be a square matrix, not 'tensor<3x2xf64>'}}
  %0 = rfuse.solve %a, %b tolerance = 0.0 : (tensor<3x2xf64>, tensor<1x3xf64>) -> tensor<1x3xf64>
  return
}

// -----

// solve: b must be [k, n].
func.func @f(%a: tensor<3x3xf64>, %b: tensor<3x2xf64>) {
  // expected-error @+1 {{'rfuse.solve' op 'b' 'tensor<3x2xf64>' must be [k, 3] to solve with 'tensor<3x3xf64>'}}
  %0 = rfuse.solve %a, %b tolerance = 0.0 : (tensor<3x3xf64>, tensor<3x2xf64>) -> tensor<3x2xf64>
  return
}

// -----

// solve: one element type, the result b's type.
func.func @f(%a: tensor<3x3xf64>, %b: tensor<2x3xf32>) {
  // expected-error @+1 {{'rfuse.solve' op 'a', 'b' and the result must share one element type, the result 'b''s type}}
  %0 = rfuse.solve %a, %b tolerance = 0.0 : (tensor<3x3xf64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

// cholesky: a square matrix.
func.func @f(%a: tensor<3x2xf64>) {
  // expected-error @+1 {{'rfuse.cholesky' op needs a square matrix, not 'tensor<3x2xf64>'}}
  %0 = rfuse.cholesky %a : tensor<3x2xf64>
  return
}

// -----

// log_determinant: [2] in the input's element type.
func.func @f(%a: tensor<3x3xf64>) {
  // expected-error @+1 {{'rfuse.log_determinant' op returns [2] (log modulus, sign) in the input's element type, not 'tensor<3xf64>'}}
  %0 = rfuse.log_determinant %a : (tensor<3x3xf64>) -> tensor<3xf64>
  return
}

// -----

// all_reduce: at least one operand.
func.func @f() {
  // expected-error @+1 {{'rfuse.all_reduce' op needs at least one operand}}
  "rfuse.all_reduce"() {reduction = #rfuse<collective_reduction sum>} : () -> ()
  return
}

// -----

func.func private @vjp_f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func private @vjp_b(%g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %g, %g : tensor<4xf32>, tensor<4xf32>
}
func.func @custom_vjp_backward_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{backward @vjp_b has type '(tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)'; it must take the residuals and the outputs' cotangents and return the float inputs' cotangents}}
  %r = rfuse.custom_vjp @vjp_f, @vjp_b (%x) {num_outputs = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @custom_vjp_missing(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{names no function @nowhere as its forward}}
  %r = rfuse.custom_vjp @nowhere, @nowhere_b (%x) {num_outputs = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @custom_vjp_outputs(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{num_outputs is 2; it must be in 1..1}}
  %r = rfuse.custom_vjp @a, @b (%x) {num_outputs = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @random_uniform_seed(%k: tensor<3xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{seed must be tensor<2xi32> (the generator's key)}}
  %u = rfuse.random_uniform %k : tensor<3xi32> -> tensor<4xf32>
  return %u : tensor<4xf32>
}

// -----

func.func @recurrent_without_cell(%x: tensor<3x2x4xf32>, %h: tensor<2x5xf32>, %wih: tensor<20x4xf32>, %whh: tensor<20x5xf32>, %b: tensor<20xf32>) {
  // expected-error @+1 {{'rfuse.recurrent' op an LSTM needs a cell state c0}}
  %y, %hn = rfuse.recurrent %x, %h weights %wih, %whh, %b, %b mode = lstm : (tensor<3x2x4xf32>, tensor<2x5xf32>, tensor<20x4xf32>, tensor<20x5xf32>, tensor<20xf32>, tensor<20xf32>) -> (tensor<3x2x5xf32>, tensor<2x5xf32>)
  return
}

// -----

func.func @recurrent_gate_rows(%x: tensor<3x2x4xf32>, %h: tensor<2x5xf32>, %wih: tensor<20x4xf32>, %whh: tensor<20x5xf32>, %b: tensor<20xf32>) {
  // expected-error @+1 {{'rfuse.recurrent' op needs w_ih [15, 4], w_hh [15, 5] and biases [15] (3 gates of 5)}}
  %y, %hn = rfuse.recurrent %x, %h weights %wih, %whh, %b, %b mode = gru : (tensor<3x2x4xf32>, tensor<2x5xf32>, tensor<20x4xf32>, tensor<20x5xf32>, tensor<20xf32>, tensor<20xf32>) -> (tensor<3x2x5xf32>, tensor<2x5xf32>)
  return
}
