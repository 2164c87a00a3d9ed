// Input for rfuse-run.mlir: parses, but the transpose's declared result type is wrong.
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %t = rfuse.transpose %x, perm = [1, 0] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %t : tensor<2x3xf32>
}
