// rfuse's passes: declarations and registration, generated from Passes.td.
#ifndef RFUSE_PASSES_PASSES_H
#define RFUSE_PASSES_PASSES_H

#include "rfuse/IR/RfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace rfuse {
#define GEN_PASS_DECL
#include "rfuse/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "rfuse/Passes/Passes.h.inc"
} // namespace rfuse

#endif
