// The generated CUDA kernels of rfuse.attention and rfuse.attention_backward (flash attention on
// the tensor cores). Each returns the kernel, or nothing with the reason in `why` (operands the
// kernel does not take: the step then runs in the interpreter).
#ifndef RFUSE_CODEGEN_ATTENTIONKERNELS_H
#define RFUSE_CODEGEN_ATTENTIONKERNELS_H

#include "rfuse/Codegen/KernelSpec.h"
#include "rfuse/IR/RfuseDialect.h"

#include <optional>
#include <string>

namespace rfuse::cuda {

std::optional<KernelSpec> emitAttention(AttentionOp op, const std::string &name, std::string &why);
std::optional<KernelSpec> emitAttentionBackward(AttentionBackwardOp op, const std::string &name, std::string &why);

} // namespace rfuse::cuda

#endif
