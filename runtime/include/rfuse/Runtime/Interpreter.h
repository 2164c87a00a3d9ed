// The reference interpreter: executes rfuse IR op by op on the CPU. It is the oracle that every
// other execution path (fused IR, CUDA, CPU JIT) is tested against.
#ifndef RFUSE_RUNTIME_INTERPRETER_H
#define RFUSE_RUNTIME_INTERPRETER_H

#include "rfuse/Runtime/HostTensor.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
class Operation;
} // namespace mlir

namespace rfuse {

/// Raised for anything the interpreter cannot run: bad inputs (count, shape, dtype), an unknown
/// entry function, an op it does not know. The message names the op and its location.
class InterpreterError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct InterpreterOptions {
  /// When set, every floating-point tensor is computed and stored in this dtype instead of the
  /// declared one (F64 gives a float64 reference of an f32 graph; F32 the reverse).
  std::optional<DType> floatOverride;
};

/// Runs function `entry` of `module` on `inputs`; returns its results.
std::vector<HostTensor> interpret(mlir::ModuleOp module, const std::string &entry,
                                  const std::vector<HostTensor> &inputs,
                                  const InterpreterOptions &options = {});

/// Runs one op (an rfuse op or a call) on operand values; its module resolves calls.
std::vector<HostTensor> interpretOperation(mlir::Operation *op,
                                           const std::vector<HostTensor> &operands,
                                           const InterpreterOptions &options = {});

/// Same, from MLIR text (parsed and verified first; parse errors raise InterpreterError).
std::vector<HostTensor> interpretText(const std::string &moduleText, const std::string &entry,
                                      const std::vector<HostTensor> &inputs,
                                      const InterpreterOptions &options = {});

} // namespace rfuse

#endif
