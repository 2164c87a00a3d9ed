// rfuse-run: runs a function of this file on the reference interpreter and prints, per output,
// its type, shape, checksums and first values.
//
// Random inputs: the printed types and shapes, and determinism for a given seed.
// RUN: rfuse-run %s --random --seed 7 | FileCheck %s
// RUN: rfuse-run %s --random --seed 7 > %t.a
// RUN: rfuse-run %s --random --seed 7 > %t.b
// RUN: diff %t.a %t.b
// RUN: rfuse-run %s --random --seed 8 > %t.c
// RUN: not diff %t.a %t.c
//
// --output-dir writes the random inputs and the outputs as .npy; feeding those inputs back with
// --inputs reproduces the same outputs.
// RUN: rm -rf %t.dir
// RUN: rfuse-run %s --random --seed 7 --output-dir %t.dir > %t.d
// RUN: diff %t.a %t.d
// RUN: ls %t.dir | FileCheck %s --check-prefix=FILES
// RUN: rfuse-run %s --inputs %t.dir/in0.npy,%t.dir/in1.npy > %t.e
// RUN: diff %t.a %t.e
//
// A function without arguments computes exact values.
// RUN: rfuse-run %s --entry consts | FileCheck %s --check-prefix=CONSTS
// RUN: rfuse-run %s --entry consts --print-count 2 | FileCheck %s --check-prefix=COUNT
// RUN: rfuse-run %s --entry consts --dtype f64 | FileCheck %s --check-prefix=F64
//
// Errors.
// RUN: not rfuse-run %s --inputs %t.dir/in0.npy 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not rfuse-run %s 2>&1 | FileCheck %s --check-prefix=NOINPUTS
// RUN: not rfuse-run %s --random --inputs %t.dir/in0.npy,%t.dir/in1.npy 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not rfuse-run %s --random --entry nope 2>&1 | FileCheck %s --check-prefix=NOFUNC
// RUN: not rfuse-run %s --random --dtype i32 2>&1 | FileCheck %s --check-prefix=DTYPE
// f16 and bf16 are rfuse element types, but --dtype only overrides floats with f32 or f64.
// RUN: not rfuse-run %s --entry consts --dtype f16 2>&1 | FileCheck %s --check-prefix=DTYPE-F16
// RUN: not rfuse-run %s --entry consts --dtype bf16 2>&1 | FileCheck %s --check-prefix=DTYPE-BF16
// RUN: not rfuse-run %s --entry consts --dtype nope 2>&1 | FileCheck %s --check-prefix=DTYPE-NOPE
// RUN: not rfuse-run %S/Inputs/does-not-verify.mlir --random 2>&1 | FileCheck %s --check-prefix=VERIFY
// RUN: not rfuse-run %t.no-such-file.mlir --random 2>&1 | FileCheck %s --check-prefix=NOFILE

// CHECK: output 0: tensor<2x3xf32> shape [2, 3] sum {{[-+0-9.e]+}} abs_sum {{[0-9.e+-]+}}
// CHECK-NEXT: first: {{([-0-9.e+]+ ){5}[-0-9.e+]+$}}
// CHECK-NEXT: output 1: tensor<2xf32> shape [2] sum {{[-+0-9.e]+}} abs_sum {{[0-9.e+-]+}}
// CHECK-NEXT: first: {{[-0-9.e+]+ [-0-9.e+]+$}}
// CHECK-NOT: output 2

// FILES: in0.npy
// FILES-NEXT: in1.npy
// FILES-NEXT: out0.npy
// FILES-NEXT: out1.npy

// ERR: rfuse-run: error: @main takes 2 arguments but 1 .npy files were given
// NOINPUTS: rfuse-run: error: @main takes 2 arguments: give --inputs a.npy,... or --random
// BOTH: rfuse-run: error: give either --inputs or --random, not both
// NOFUNC: rfuse-run: error: no function 'nope' in '{{.*}}rfuse-run.mlir'
// DTYPE: rfuse-run: error: --dtype must be f32 or f64, got 'i32'
// DTYPE-F16: rfuse-run: error: --dtype must be f32 or f64, got 'f16'
// DTYPE-F16-NOT: output 0
// DTYPE-BF16: rfuse-run: error: --dtype must be f32 or f64, got 'bf16'
// DTYPE-NOPE: rfuse-run: error: --dtype must be f32 or f64, got 'nope'
// VERIFY: does-not-verify.mlir:3:8: error: 'rfuse.transpose' op inferred type(s) 'tensor<3x2xf32>' are incompatible
// The parser verifies already, so a module that does not verify is reported by the parse branch.
// VERIFY: rfuse-run: error: cannot parse or verify '{{.*}}Inputs{{[/\\]}}does-not-verify.mlir'{{$}}
// VERIFY-NOT: does not verify
// NOFILE: rfuse-run: error: cannot parse or verify '{{.*}}no-such-file.mlir'{{$}}

func.func @main(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2xf32>) {
  %b = rfuse.broadcast_in_dim %y, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
  %s = rfuse.add %x, %b : tensor<2x3xf32>
  %r = rfuse.reduce_sum %s, dims = [1] : (tensor<2x3xf32>) -> tensor<2xf32>
  return %s, %r : tensor<2x3xf32>, tensor<2xf32>
}

// [[1, 2], [3, 4]] @ itself = [[7, 10], [15, 22]]; > 10 gives [[0, 0], [1, 1]]; |[-3, 0, 5]|.
// CONSTS: output 0: tensor<2x2xf32> shape [2, 2] sum 54 abs_sum 54
// CONSTS-NEXT: first: 7 10 15 22
// CONSTS-NEXT: output 1: tensor<2x2xi1> shape [2, 2] sum 2 abs_sum 2
// CONSTS-NEXT: first: 0 0 1 1
// CONSTS-NEXT: output 2: tensor<3xi32> shape [3] sum 8 abs_sum 8
// CONSTS-NEXT: first: 3 0 5
// CONSTS-NEXT: output 3: tensor<f32> shape [] sum -2.5 abs_sum 2.5
// CONSTS-NEXT: first: -2.5
// COUNT: output 0: tensor<2x2xf32> shape [2, 2] sum 54 abs_sum 54
// COUNT-NEXT: first: 7 10{{$}}
// F64: output 0: tensor<2x2xf64> shape [2, 2] sum 54 abs_sum 54
// F64: output 2: tensor<3xi32> shape [3] sum 8 abs_sum 8
func.func @consts() -> (tensor<2x2xf32>, tensor<2x2xi1>, tensor<3xi32>, tensor<f32>) {
  %a = rfuse.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %m = rfuse.matmul %a, %a : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %t = rfuse.constant dense<10.0> : tensor<2x2xf32>
  %c = rfuse.compare gt, %m, %t : tensor<2x2xf32>
  %i = rfuse.constant dense<[-3, 0, 5]> : tensor<3xi32>
  %ab = rfuse.abs %i : tensor<3xi32>
  %s = rfuse.constant dense<-2.5> : tensor<f32>
  return %m, %c, %ab, %s : tensor<2x2xf32>, tensor<2x2xi1>, tensor<3xi32>, tensor<f32>
}
