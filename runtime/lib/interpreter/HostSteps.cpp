#include "HostSteps.h"

#include "rfuse/Runtime/Interpreter.h"

namespace rfuse::runtime {

HostStepRunner interpretedHostSteps() {
  return [](const Step &s, size_t, const std::vector<HostTensor> &operands) {
    if (!s.op)
      throw InterpreterError("step " + s.label + " has no op to interpret (a plan loaded from an artifact)");
    return interpretOperation(s.op, operands);
  };
}

} // namespace rfuse::runtime
