// The code generation passes (CodegenPasses.td): rfuse-emit-cuda, rfuse-lower-kernels-to-cpu.
#ifndef RFUSE_CODEGEN_CODEGENPASSES_H
#define RFUSE_CODEGEN_CODEGENPASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace rfuse {

#define GEN_PASS_DECL
#include "rfuse/Codegen/CodegenPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "rfuse/Codegen/CodegenPasses.h.inc"

} // namespace rfuse

#endif
