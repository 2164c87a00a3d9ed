// rfuse.random_uniform: round trips in the custom and generic forms; its values through the
// reference interpreter and the CPU backend (a compiled kernel) are the same numbers; the first
// draw under key (0, 0) is Philox4x32-10's known answer for counter 0 (word 0x6627e8d5: its top 24
// bits times 2^-24 = 0.399046421...). Verifier: invalid.mlir. GPU: the corpus's dropout graph.
// RUN: rfuse-opt %s | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | rfuse-opt | FileCheck %s
// RUN: rfuse-run %s --entry zero_key | FileCheck %s --check-prefix=VALUES
// RUN: rfuse-run %s --entry zero_key --device cpu-jit | FileCheck %s --check-prefix=VALUES
// RUN: rfuse-run %s --entry dropout --random --seed 5 > %t.interp
// RUN: rfuse-run %s --entry dropout --random --seed 5 --device cpu-jit > %t.cpu
// RUN: diff %t.interp %t.cpu

// CHECK-LABEL: func.func @zero_key
// CHECK: rfuse.random_uniform %{{.*}} : tensor<2xi32> -> tensor<3x5xf32>
// VALUES: output 0: tensor<3x5xf32> shape [3, 5]
// VALUES-NEXT: first: 0.399046421 0.972241163 0.0194494128
func.func @zero_key() -> tensor<3x5xf32> {
  %k = rfuse.constant dense<0> : tensor<2xi32>
  %u = rfuse.random_uniform %k : tensor<2xi32> -> tensor<3x5xf32>
  return %u : tensor<3x5xf32>
}

// A dropout as R traces it: the draws compared with p's threshold, scaled, and multiplied in.
// CHECK-LABEL: func.func @dropout
// CHECK: rfuse.random_uniform %{{.*}} : tensor<2xi32> -> tensor<64x33xf32>
func.func @dropout(%x: tensor<64x33xf32>) -> (tensor<64x33xf32>, tensor<64x33xf32>) {
  %k = rfuse.constant dense<[12345, -7]> : tensor<2xi32>
  %u = rfuse.random_uniform %k : tensor<2xi32> -> tensor<64x33xf32>
  %p = rfuse.constant dense<0.25> : tensor<64x33xf32>
  %keep = rfuse.compare ge, %u, %p : tensor<64x33xf32>
  %s = rfuse.constant dense<1.33333337> : tensor<64x33xf32>
  %z = rfuse.constant dense<0.0> : tensor<64x33xf32>
  %m = rfuse.select %keep, %s, %z : tensor<64x33xi1>, tensor<64x33xf32>
  %y = rfuse.mul %x, %m : tensor<64x33xf32>
  return %y, %u : tensor<64x33xf32>, tensor<64x33xf32>
}
