// Writing an ahead-of-time artifact from a compiled (fused) module: the JIT runtime's side, with
// the compilers at hand (plans per architecture, NVRTC cubins and PTX, constants interpreted).
#ifndef RFUSE_RUNTIME_ARTIFACT_EXPORT_H
#define RFUSE_RUNTIME_ARTIFACT_EXPORT_H

#include "rfuse/Runtime/Engine.h"

#include "mlir/IR/BuiltinOps.h"

namespace rfuse::artifact {

/// Throws ArtifactError: Unsupported (a step that would run on the host interpreter, an unknown
/// architecture), Io; NvrtcError when a kernel does not compile.
ExportSummary writeArtifact(mlir::ModuleOp fused, const std::string &entry, Tf32 tf32, const ExportOptions &options,
                            const std::string &path);

} // namespace rfuse::artifact

#endif
