// Round trips of rfuse.fusion (every kind, multi-result) and rfuse.yield, in the custom form and
// through the generic form.

// GENERIC-LABEL: sym_name = "pointwise"
// GENERIC: "rfuse.fusion"(%{{.*}}, %{{.*}}) <{kind = #rfuse<fusion_kind pointwise>}> ({
// GENERIC: "rfuse.yield"(%{{.*}}) : (tensor<4xf32>) -> ()
// GENERIC-NEXT: }) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @pointwise(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // Note: the kind is printed as `pointwise(` (no space before the parenthesis).
  // CHECK: %[[R:.+]] = rfuse.fusion pointwise(%[[X]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>):
  // CHECK-NEXT: %[[S:.+]] = rfuse.add %[[A]], %[[B]] : tensor<4xf32>
  // CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[S]] : tensor<4xf32>
  // CHECK-NEXT: rfuse.yield %[[E]] : tensor<4xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[R]] : tensor<4xf32>
  %r = rfuse.fusion pointwise (%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %s = rfuse.add %a, %b : tensor<4xf32>
    %e = rfuse.exp %s : tensor<4xf32>
    rfuse.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// A reduction fusion with two results of different types (multi-result yield).
// GENERIC-LABEL: sym_name = "reduction_multi_result"
// GENERIC: "rfuse.fusion"(%{{.*}}) <{kind = #rfuse<fusion_kind reduction>}> ({
// GENERIC: "rfuse.yield"(%{{.*}}, %{{.*}}) : (tensor<4xf32>, tensor<4x1xf32>) -> ()
// GENERIC-NEXT: }) : (tensor<4x6xf32>) -> (tensor<4xf32>, tensor<4x1xf32>)
func.func @reduction_multi_result(%x: tensor<4x6xf32>) -> (tensor<4xf32>, tensor<4x1xf32>) {
  // CHECK: %[[R:.+]]:2 = rfuse.fusion reduction(%[[X]]) : (tensor<4x6xf32>) -> (tensor<4xf32>, tensor<4x1xf32>) {
  // CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<4x6xf32>):
  // CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[A]] : tensor<4x6xf32>
  // CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[E]], dims = [1] : (tensor<4x6xf32>) -> tensor<4xf32>
  // CHECK-NEXT: %[[M:.+]] = rfuse.reduce_max %[[A]], dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  // CHECK-NEXT: rfuse.yield %[[S]], %[[M]] : tensor<4xf32>, tensor<4x1xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[R]]#0, %[[R]]#1 : tensor<4xf32>, tensor<4x1xf32>
  %r:2 = rfuse.fusion reduction (%x) : (tensor<4x6xf32>) -> (tensor<4xf32>, tensor<4x1xf32>) {
  ^bb0(%a: tensor<4x6xf32>):
    %e = rfuse.exp %a : tensor<4x6xf32>
    %s = rfuse.reduce_sum %e, dims = [1] : (tensor<4x6xf32>) -> tensor<4xf32>
    %m = rfuse.reduce_max %a, dims = [1] {keep_dims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
    rfuse.yield %s, %m : tensor<4xf32>, tensor<4x1xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4x1xf32>
}

// A matmul with a bias + gelu epilogue; the bias is broadcast inside the region.
func.func @matmul_epilogue(%a: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  // CHECK: %[[R:.+]] = rfuse.fusion matmul_epilogue(%[[A]], %[[W]], %[[B]]) : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32> {
  // CHECK-NEXT: ^bb0(%[[P:.+]]: tensor<8x16xf32>, %[[Q:.+]]: tensor<16x4xf32>, %[[C:.+]]: tensor<4xf32>):
  // CHECK-NEXT: %[[MM:.+]] = rfuse.matmul %[[P]], %[[Q]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  // CHECK-NEXT: %[[BB:.+]] = rfuse.broadcast_in_dim %[[C]], dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
  // CHECK-NEXT: %[[S:.+]] = rfuse.add %[[MM]], %[[BB]] : tensor<8x4xf32>
  // CHECK-NEXT: %[[G:.+]] = rfuse.gelu %[[S]] approximate = tanh : tensor<8x4xf32>
  // CHECK-NEXT: rfuse.yield %[[G]] : tensor<8x4xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[R]] : tensor<8x4xf32>
  %r = rfuse.fusion matmul_epilogue (%a, %w, %b)
      : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32> {
  ^bb0(%p: tensor<8x16xf32>, %q: tensor<16x4xf32>, %c: tensor<4xf32>):
    %mm = rfuse.matmul %p, %q : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %bb = rfuse.broadcast_in_dim %c, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
    %s = rfuse.add %mm, %bb : tensor<8x4xf32>
    %g = rfuse.gelu %s approximate = tanh : tensor<8x4xf32>
    rfuse.yield %g : tensor<8x4xf32>
  }
  return %r : tensor<8x4xf32>
}

// A conv with bias and relu; also yields the pre-activation (two results of one type).
func.func @conv_epilogue(%x: tensor<1x1x6x6xf32>, %w: tensor<2x1x3x3xf32>, %b: tensor<2xf32>)
    -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  // CHECK: %[[R:.+]]:2 = rfuse.fusion conv_epilogue(%[[X]], %[[W]], %[[B]]) : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  // CHECK-NEXT: ^bb0(%[[I:.+]]: tensor<1x1x6x6xf32>, %[[F:.+]]: tensor<2x1x3x3xf32>, %[[C:.+]]: tensor<2xf32>):
  // CHECK-NEXT: %[[Y:.+]] = rfuse.conv2d %[[I]], %[[F]], %[[C]] {dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  // CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[Y]] : tensor<1x2x4x4xf32>
  // CHECK-NEXT: rfuse.yield %[[RL]], %[[Y]] : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[R]]#0, %[[R]]#1 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %r:2 = rfuse.fusion conv_epilogue (%x, %w, %b)
      : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  ^bb0(%i: tensor<1x1x6x6xf32>, %f: tensor<2x1x3x3xf32>, %c: tensor<2xf32>):
    %y = rfuse.conv2d %i, %f, %c {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
           dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
         : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
    %rl = rfuse.relu %y : tensor<1x2x4x4xf32>
    rfuse.yield %rl, %y : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  }
  return %r#0, %r#1 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// Edge cases: a fusion without inputs (a constant inside), one that yields its block argument,
// one whose inputs repeat a value, and fusions used one after the other.
func.func @edge_cases(%x: tensor<2x3xi1>) -> (tensor<f32>, tensor<2x3xi1>, tensor<2x3xi1>) {
  // CHECK: %[[C:.+]] = rfuse.fusion pointwise() : () -> tensor<f32> {
  // CHECK-NEXT: %[[K:.+]] = rfuse.constant dense<1.500000e+00> : tensor<f32>
  // CHECK-NEXT: rfuse.yield %[[K]] : tensor<f32>
  // CHECK-NEXT: }
  %c = rfuse.fusion pointwise () : () -> tensor<f32> {
    %k = rfuse.constant dense<1.5> : tensor<f32>
    rfuse.yield %k : tensor<f32>
  }
  // CHECK: %[[P:.+]] = rfuse.fusion pointwise(%[[X]]) : (tensor<2x3xi1>) -> tensor<2x3xi1> {
  // CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<2x3xi1>):
  // CHECK-NEXT: rfuse.yield %[[A]] : tensor<2x3xi1>
  // CHECK-NEXT: }
  %p = rfuse.fusion pointwise (%x) : (tensor<2x3xi1>) -> tensor<2x3xi1> {
  ^bb0(%a: tensor<2x3xi1>):
    rfuse.yield %a : tensor<2x3xi1>
  }
  // CHECK: %[[Q:.+]] = rfuse.fusion pointwise(%[[P]], %[[P]]) : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1> {
  // CHECK-NEXT: ^bb0(%[[U:.+]]: tensor<2x3xi1>, %[[V:.+]]: tensor<2x3xi1>):
  // CHECK-NEXT: %[[N:.+]] = rfuse.not %[[V]] : tensor<2x3xi1>
  // CHECK-NEXT: %[[O:.+]] = rfuse.or %[[U]], %[[N]] : tensor<2x3xi1>
  // CHECK-NEXT: rfuse.yield %[[O]] : tensor<2x3xi1>
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[C]], %[[P]], %[[Q]] : tensor<f32>, tensor<2x3xi1>, tensor<2x3xi1>
  %q = rfuse.fusion pointwise (%p, %p) : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1> {
  ^bb0(%u: tensor<2x3xi1>, %v: tensor<2x3xi1>):
    %n = rfuse.not %v : tensor<2x3xi1>
    %o = rfuse.or %u, %n : tensor<2x3xi1>
    rfuse.yield %o : tensor<2x3xi1>
  }
  return %c, %p, %q : tensor<f32>, tensor<2x3xi1>, tensor<2x3xi1>
}
