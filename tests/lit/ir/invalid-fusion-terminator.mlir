// The fusion verifier's "body must end in rfuse.yield" is only reachable with a terminator that no
// registered op's own verifier rejects first (func.return would fail its parent check), so this
// test uses an unregistered op as the terminator.
// RUN: rfuse-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

func.func @unregistered_terminator(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'rfuse.fusion' op body must end in rfuse.yield}}
  %0 = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    "test.terminator"(%a) : (tensor<4xf32>) -> ()
  }
  return %0 : tensor<4xf32>
}

// -----

// The same fusion ending in rfuse.yield verifies (no diagnostic expected).
func.func @yield_terminator(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = rfuse.fusion pointwise (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    "test.op"() : () -> ()
    rfuse.yield %a : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}
