// Host steps and constants of a plan computed by the interpreter (the JIT runtime's way; the
// ahead-of-time runtime reads stored constants instead).
#ifndef RFUSE_RUNTIME_INTERPRETER_HOSTSTEPS_H
#define RFUSE_RUNTIME_INTERPRETER_HOSTSTEPS_H

#include "../StepLoop.h"

namespace rfuse::runtime {

/// Interprets the step's op (Step::op, so only for plans built from a live module).
HostStepRunner interpretedHostSteps();

} // namespace rfuse::runtime

#endif
