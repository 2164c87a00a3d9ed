// An execution plan as JSON and back: what an ahead-of-time artifact stores of a compiled program
// (every field the runtime reads; not the MLIR it was built from). Reading validates everything
// an executor will index with, so a hostile or damaged plan is an ArtifactError, never a crash.
#ifndef RFUSE_RUNTIME_ARTIFACT_PLANJSON_H
#define RFUSE_RUNTIME_ARTIFACT_PLANJSON_H

#include "rfuse/Codegen/Plan.h"
#include "rfuse/Runtime/Artifact.h"

#include <nlohmann/json.hpp>

namespace rfuse::artifact {

nlohmann::json planToJson(const codegen::ExecutionPlan &plan);
/// Throws ArtifactError (Status::Corrupt) naming the field that is missing, mistyped or out of range.
codegen::ExecutionPlan planFromJson(const nlohmann::json &j);

} // namespace rfuse::artifact

#endif
