// rfuse-outline-kernels: every rfuse.fusion becomes a private kernel function
// `@<host>_k<N>_<kind>` carrying `rfuse.kernel = #rfuse<fusion_kind ...>`, called from the host.
// RUN: rfuse-opt %s -split-input-file --rfuse-outline-kernels | FileCheck %s
// The kernels are checked one by one (their order in the module is not pinned).
// RUN: rfuse-opt %s -split-input-file --rfuse-outline-kernels | FileCheck %s --check-prefix=K0
// RUN: rfuse-opt %s -split-input-file --rfuse-outline-kernels | FileCheck %s --check-prefix=K1
// The result verifies and round-trips.
// RUN: rfuse-opt %s -split-input-file --rfuse-outline-kernels | rfuse-opt -split-input-file | FileCheck %s
// Outlining does not change what is computed (the interpreter runs the kernel calls). Without
// -split-input-file the whole file is one module.
// RUN: rfuse-opt %s --rfuse-outline-kernels > %t.mlir
// RUN: rfuse-run %s --entry host --random --seed 9 > %t.host.ref
// RUN: rfuse-run %t.mlir --entry host --random --seed 9 > %t.host
// RUN: diff %t.host.ref %t.host
// RUN: rfuse-run %s --entry multi_result --random --seed 9 > %t.multi.ref
// RUN: rfuse-run %t.mlir --entry multi_result --random --seed 9 > %t.multi
// RUN: diff %t.multi.ref %t.multi

// Two fusions and an unfused op in one host: the host becomes kernel calls around the unfused op;
// kernels are numbered in program order per host and named after their kind.
// CHECK-LABEL: func.func @host
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[C0:.+]] = call @host_k0_pointwise(%[[X]], %[[Y]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[T:.+]] = rfuse.transpose %[[C0]], perm = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[C1:.+]] = call @host_k1_reduction(%[[T]]) : (tensor<8x4xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[C1]] : tensor<8xf32>
// CHECK-NOT: rfuse.fusion
// CHECK-NOT: rfuse.yield
// K0-LABEL: func.func private @host_k0_pointwise
// K0-SAME: (%[[A:[a-z0-9]+]]: tensor<4x8xf32>, %[[B:[a-z0-9]+]]: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {rfuse.kernel = #rfuse<fusion_kind pointwise>} {
// K0-NEXT: %[[S:.+]] = rfuse.add %[[A]], %[[B]] : tensor<4x8xf32>
// K0-NEXT: %[[E:.+]] = rfuse.exp %[[S]] : tensor<4x8xf32>
// K0-NEXT: return %[[E]] : tensor<4x8xf32>
// K0-NEXT: }
// K1-LABEL: func.func private @host_k1_reduction
// K1-SAME: (%[[A:[a-z0-9]+]]: tensor<8x4xf32>) -> tensor<8xf32> attributes {rfuse.kernel = #rfuse<fusion_kind reduction>} {
// K1-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[A]], dims = [1] : (tensor<8x4xf32>) -> tensor<8xf32>
// K1-NEXT: return %[[S]] : tensor<8xf32>
// K1-NEXT: }
func.func @host(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<8xf32> {
  %0 = rfuse.fusion pointwise (%x, %y) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    %s = rfuse.add %a, %b : tensor<4x8xf32>
    %e = rfuse.exp %s : tensor<4x8xf32>
    rfuse.yield %e : tensor<4x8xf32>
  }
  %t = rfuse.transpose %0, perm = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %1 = rfuse.fusion reduction (%t) : (tensor<8x4xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8x4xf32>):
    %s = rfuse.reduce_sum %a, dims = [1] : (tensor<8x4xf32>) -> tensor<8xf32>
    rfuse.yield %s : tensor<8xf32>
  }
  return %1 : tensor<8xf32>
}

// -----

// A fusion with two results: the kernel returns both, the call has two results, and each use of
// the fusion's results reads the matching call result.
// CHECK-LABEL: func.func @multi_result
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<8x16xf32>, %[[W:[a-z0-9]+]]: tensor<16x4xf32>)
// CHECK-NEXT: %[[C:.+]]:2 = call @multi_result_k0_matmul_epilogue(%[[A]], %[[W]]) : (tensor<8x16xf32>, tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK-NEXT: %[[N:.+]] = rfuse.neg %[[C]]#0 : tensor<8x4xf32>
// CHECK-NEXT: return %[[C]]#1, %[[N]] : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-LABEL: func.func private @multi_result_k0_matmul_epilogue
// CHECK-SAME: (%[[P:[a-z0-9]+]]: tensor<8x16xf32>, %[[Q:[a-z0-9]+]]: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) attributes {rfuse.kernel = #rfuse<fusion_kind matmul_epilogue>} {
// CHECK-NEXT: %[[MM:.+]] = rfuse.matmul %[[P]], %[[Q]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[RL:.+]] = rfuse.relu %[[MM]] : tensor<8x4xf32>
// CHECK-NEXT: return %[[MM]], %[[RL]] : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: }
func.func @multi_result(%a: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %r:2 = rfuse.fusion matmul_epilogue (%a, %w) : (tensor<8x16xf32>, tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  ^bb0(%p: tensor<8x16xf32>, %q: tensor<16x4xf32>):
    %mm = rfuse.matmul %p, %q : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %rl = rfuse.relu %mm : tensor<8x4xf32>
    rfuse.yield %mm, %rl : tensor<8x4xf32>, tensor<8x4xf32>
  }
  %n = rfuse.neg %r#0 : tensor<8x4xf32>
  return %r#1, %n : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Kernel numbers restart for every host; the conv_epilogue kind names the kernel too.
// CHECK-LABEL: func.func @first
// CHECK-NEXT: call @first_k0_conv_epilogue(
// CHECK-NEXT: return
// CHECK-LABEL: func.func @second
// CHECK-NEXT: call @second_k0_pointwise(
// CHECK-NEXT: return
// CHECK-NOT: _k1_
// K0-LABEL: func.func private @first_k0_conv_epilogue
// K0-SAME: -> tensor<1x2x4x4xf32> attributes {rfuse.kernel = #rfuse<fusion_kind conv_epilogue>} {
// K0-NEXT: rfuse.conv2d
// K0-NEXT: rfuse.relu
// K0-NEXT: return
// K1-LABEL: func.func private @second_k0_pointwise
// K1-SAME: -> tensor<4xf32> attributes {rfuse.kernel = #rfuse<fusion_kind pointwise>} {
// K1-NEXT: rfuse.tanh
// K1-NEXT: return
func.func @first(%x: tensor<1x1x6x6xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32> {
  %r = rfuse.fusion conv_epilogue (%x, %w) : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32> {
  ^bb0(%i: tensor<1x1x6x6xf32>, %f: tensor<2x1x3x3xf32>):
    %y = rfuse.conv2d %i, %f {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>,
           dilation = array<i64: 1, 1>, groups = 1 : i64, layout = #rfuse.layout<NCHW>}
         : (tensor<1x1x6x6xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x4x4xf32>
    %rl = rfuse.relu %y : tensor<1x2x4x4xf32>
    rfuse.yield %rl : tensor<1x2x4x4xf32>
  }
  return %r : tensor<1x2x4x4xf32>
}
func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %t = rfuse.tanh %a : tensor<4xf32>
    rfuse.yield %t : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// A kernel name that is already taken is made unique; the host calls the new kernel, and the
// existing function of that name is left as it was.
// CHECK-LABEL: func.func @clash
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT: %[[K:.+]] = call @[[KERNEL:clash_k0_pointwise_[a-z0-9_]+]](%[[X]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[U:.+]] = call @clash_k0_pointwise(%[[K]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[U]]
// CHECK-DAG: func.func private @[[KERNEL]](%{{.+}}: tensor<4xf32>) -> tensor<4xf32> attributes {rfuse.kernel = #rfuse<fusion_kind pointwise>}
// CHECK-DAG: func.func @clash_k0_pointwise(%[[Y:[a-z0-9]+]]: tensor<4xf32>) -> tensor<4xf32> {
func.func @clash(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = rfuse.exp %a : tensor<4xf32>
    rfuse.yield %e : tensor<4xf32>
  }
  %c = call @clash_k0_pointwise(%r) : (tensor<4xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}
func.func @clash_k0_pointwise(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A fusion without inputs becomes a kernel without arguments.
// CHECK-LABEL: func.func @no_inputs
// CHECK-NEXT: %[[C:.+]] = call @no_inputs_k0_pointwise() : () -> tensor<2xf32>
// CHECK-NEXT: return %[[C]] : tensor<2xf32>
// CHECK-LABEL: func.func private @no_inputs_k0_pointwise() -> tensor<2xf32> attributes {rfuse.kernel = #rfuse<fusion_kind pointwise>} {
// CHECK-NEXT: %[[K:.+]] = rfuse.constant dense<2.500000e+00> : tensor<2xf32>
// CHECK-NEXT: return %[[K]] : tensor<2xf32>
func.func @no_inputs() -> tensor<2xf32> {
  %0 = rfuse.fusion pointwise () : () -> tensor<2xf32> {
    %c = rfuse.constant dense<2.5> : tensor<2xf32>
    rfuse.yield %c : tensor<2xf32>
  }
  return %0 : tensor<2xf32>
}

// -----

// Negative: a module without fusions is unchanged: no call, no kernel function.
// CHECK-LABEL: func.func @plain
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[E:.+]] = rfuse.exp %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: %[[S:.+]] = rfuse.reduce_sum %[[E]], dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[S]] : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.func private @declaration(tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NOT: call
// CHECK-NOT: rfuse.kernel
func.func @plain(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %e = rfuse.exp %x : tensor<4x8xf32>
  %s = rfuse.reduce_sum %e, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}
func.func private @declaration(tensor<4xf32>) -> tensor<4xf32>
