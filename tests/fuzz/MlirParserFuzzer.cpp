// libFuzzer target: MLIR text in the rfuse dialect (and the dialects it meets) through the
// parser and the verifier. Any input must give a module or diagnostics, never a crash, a hang
// or a sanitizer report (our dialect's custom parsers, printers, verifiers and shape functions
// are built with coverage and sanitizers; MLIR's own parser is Debian's build).
#include "rfuse/IR/RfuseDialect.h"
#include "rfuse/Passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A context per input, as rfuse has one per program.
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry;
    rfuse::registerRfuseDialects(*r);
    r->insert<mlir::arith::ArithDialect, mlir::math::MathDialect, mlir::tensor::TensorDialect>();
    return r;
  }();
  mlir::MLIRContext context(*registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  context.getDiagEngine().registerHandler([](mlir::Diagnostic &) { return mlir::success(); });
  // MLIR's lexer reads up to a NUL after the text (rfuse's module text is a std::string).
  std::string text(reinterpret_cast<const char *>(data), size);
  mlir::ParserConfig config(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, config);
  if (module && mlir::succeeded(mlir::verify(*module))) {
    std::string printed; // the printer too: custom assembly formats of verified IR
    llvm::raw_string_ostream os(printed);
    module->print(os);
  }
  return 0;
}
