// rfuse.recurrent and rfuse.recurrent_backward: round trips in the custom and generic forms, the
// gradient rfuse-autodiff builds (one backward op, zero cotangents for results the loss does not
// reach), and the same values through the interpreter and the CPU backend (a host step there).
// Values against the layer written out step by step: tests/unit/RecurrentTest.cpp.
// RUN: rfuse-opt %s | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --mlir-print-op-generic | rfuse-opt | FileCheck %s
// RUN: rfuse-opt %s --rfuse-autodiff='function=loss' | FileCheck %s --check-prefix=GRAD
// RUN: rfuse-run %s --entry layers --random --seed 3 > %t.interp
// RUN: rfuse-run %s --entry layers --random --seed 3 --device cpu-jit > %t.cpu
// RUN: diff %t.interp %t.cpu
// RUN: FileCheck %s --check-prefix=VALUES < %t.interp

// CHECK-LABEL: func.func @layers
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = rfuse.recurrent %{{.*}}, %{{.*}} cell %{{.*}} weights %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mode = lstm : (tensor<3x2x4xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<20x4xf32>, tensor<20x5xf32>, tensor<20xf32>, tensor<20xf32>) -> (tensor<3x2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>)
// CHECK: rfuse.recurrent %{{.*}}, %{{.*}} weights %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mode = gru :
// CHECK: rfuse.recurrent_backward %{{.*}}, %{{.*}} cell %{{.*}} weights %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} grads %{{.*}}, %{{.*}} cell_grad %{{.*}} mode = lstm :
// VALUES: output 0: tensor<3x2x5xf32>
// VALUES: output 3: tensor<3x2x5xf32>
func.func @layers(%x: tensor<3x2x4xf32>, %h: tensor<2x5xf32>, %c: tensor<2x5xf32>, %wih: tensor<20x4xf32>,
                  %whh: tensor<20x5xf32>, %b: tensor<20xf32>, %gwih: tensor<15x4xf32>, %gwhh: tensor<15x5xf32>,
                  %gb: tensor<15xf32>, %gy: tensor<3x2x5xf32>)
    -> (tensor<3x2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<3x2x5xf32>, tensor<3x2x4xf32>, tensor<20x5xf32>) {
  %y, %hn, %cn = rfuse.recurrent %x, %h cell %c weights %wih, %whh, %b, %b mode = lstm : (tensor<3x2x4xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<20x4xf32>, tensor<20x5xf32>, tensor<20xf32>, tensor<20xf32>) -> (tensor<3x2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>)
  %gy2, %ghn = rfuse.recurrent %x, %h weights %gwih, %gwhh, %gb, %gb mode = gru : (tensor<3x2x4xf32>, tensor<2x5xf32>, tensor<15x4xf32>, tensor<15x5xf32>, tensor<15xf32>, tensor<15xf32>) -> (tensor<3x2x5xf32>, tensor<2x5xf32>)
  %dx, %dh, %dc, %dwih, %dwhh, %dbih, %dbhh = rfuse.recurrent_backward %x, %h cell %c weights %wih, %whh, %b, %b grads %gy, %h cell_grad %c mode = lstm : (tensor<3x2x4xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<20x4xf32>, tensor<20x5xf32>, tensor<20xf32>, tensor<20xf32>, tensor<3x2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>) -> (tensor<3x2x4xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<20x4xf32>, tensor<20x5xf32>, tensor<20xf32>, tensor<20xf32>)
  return %y, %hn, %cn, %gy2, %dx, %dwhh : tensor<3x2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<3x2x5xf32>, tensor<3x2x4xf32>, tensor<20x5xf32>
}

// Only h_n reaches the loss: y's and c_n's cotangents are zeros.
// GRAD-LABEL: func.func @loss_grad
// GRAD: %[[Y:.*]], %[[H:.*]], %[[C:.*]] = rfuse.recurrent
// GRAD-DAG: %[[ZY:.*]] = rfuse.constant dense<0.000000e+00> : tensor<3x2x5xf32>
// GRAD-DAG: %[[ZC:.*]] = rfuse.constant dense<0.000000e+00> : tensor<2x5xf32>
// GRAD: rfuse.recurrent_backward %{{.*}} grads %[[ZY]], %{{.*}} cell_grad %[[ZC]] mode = lstm
func.func @loss(%x: tensor<3x2x4xf32>, %h: tensor<2x5xf32>, %c: tensor<2x5xf32>, %wih: tensor<20x4xf32>,
                %whh: tensor<20x5xf32>, %bih: tensor<20xf32>, %bhh: tensor<20xf32>) -> tensor<f32> {
  %y, %hn, %cn = rfuse.recurrent %x, %h cell %c weights %wih, %whh, %bih, %bhh mode = lstm : (tensor<3x2x4xf32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<20x4xf32>, tensor<20x5xf32>, tensor<20xf32>, tensor<20xf32>) -> (tensor<3x2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>)
  %s = rfuse.reduce_sum %hn, dims = [0, 1] : (tensor<2x5xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
