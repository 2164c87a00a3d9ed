// rfuse-opt: MLIR's opt driver with the rfuse dialect, the dialects rfuse IR meets (func, arith,
// math, tensor, linalg), upstream's generic passes (canonicalize, cse, inline, ...) and rfuse's
// own passes registered.
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<rfuse::RfuseDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect, mlir::tensor::TensorDialect,
                  mlir::linalg::LinalgDialect>();
  mlir::registerTransformsPasses();
  rfuse::registerRfusePasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "rfuse optimizer driver\n", registry));
}
