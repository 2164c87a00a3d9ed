// What a plan's steps do, in words (MLIR-free: a loaded plan describes itself the same way).
#include "rfuse/Codegen/Plan.h"

#include <cstdio>
#include <sstream>

namespace rfuse::codegen {

namespace {

std::string sizeOf(const cuda::KernelSpec &k) {
  std::ostringstream os;
  os << "grid " << k.grid << " block " << k.blockSize;
  if (k.launch == cuda::LaunchKind::GridStride)
    os << " vector " << k.vectorWidth;
  return os.str();
}

const char *launchName(cuda::LaunchKind l) {
  switch (l) {
  case cuda::LaunchKind::GridStride: return "pointwise";
  case cuda::LaunchKind::BlockPerRow: return "reduction, a block per row";
  case cuda::LaunchKind::ThreadPerColumn: return "reduction, tiles of 32 columns";
  case cuda::LaunchKind::Tiles: return "attention, a block per 64 rows";
  }
  return "";
}
std::string launchName(const cuda::KernelSpec &k) {
  if (k.launch == cuda::LaunchKind::ThreadPerColumn && (k.columnsPerBlock != 32 || k.dynamicSharedBytes))
    return "reduction, tiles of " + std::to_string(k.columnsPerBlock) + " columns " +
           (k.dynamicSharedBytes ? "cached in shared memory" : "read again from L2") +
           (k.clusterSize > 1 ? ", clusters of " + std::to_string(k.clusterSize) + " blocks" : "");
  return launchName(k.launch);
}

} // namespace

std::string Step::describe(Backend backend) const {
  std::ostringstream os;
  switch (kind) {
  case Kind::Alias: return "alias";
  case Kind::Constant: return "constant";
  case Kind::Host: return "interpreted (" + why + ")";
  case Kind::Collective: {
    char mb[32];
    std::snprintf(mb, sizeof mb, "%.2f", bytes / 2 / 1e6); // bytes counts inputs and outputs
    os << "all-reduce (" << (collectiveMean ? "mean" : "sum") << ") of " << in.size() << " tensor"
       << (in.size() == 1 ? "" : "s") << ", " << mb << " MB" << (backend == Backend::Cuda ? " through NCCL" : "");
    return os.str();
  }
  case Kind::Kernel: {
    if (backend == Backend::Cpu)
      return "compiled " + (scan ? std::string("scan") : kernelKind);
    os << "cuda " << (scan ? "scan, a thread per line" : launchName(*cudaKernel)) << " " << sizeOf(*cudaKernel);
    return os.str();
  }
  case Kind::Library:
    break;
  }
  if (backend == Backend::Cpu) {
    switch (library->kind) {
    case LibraryCall::Kind::Pool: return "pooling loops (f64)";
    case LibraryCall::Kind::Recurrent: return "recurrent loops (f64)";
    case LibraryCall::Kind::Conv: return cpuFunction ? "im2col + BLAS + compiled epilogue" : "im2col + BLAS";
    case LibraryCall::Kind::Matmul: return cpuFunction ? "BLAS + compiled epilogue" : "BLAS";
    }
  }
  os << (library->kind == LibraryCall::Kind::Matmul ? "cublaslt " : "cudnn ") << library->describe();
  if (cudaKernel)
    os << " + generated epilogue (" << sizeOf(*cudaKernel) << ")";
  return os.str();
}

std::vector<std::string> ExecutionPlan::hostSteps() const {
  std::vector<std::string> out;
  for (const Step &s : steps)
    if (s.kind == Step::Kind::Host)
      out.push_back(s.label + ": " + s.why);
  return out;
}

std::vector<std::string> ExecutionPlan::describe() const {
  std::vector<std::string> out;
  for (const Step &s : steps)
    if (s.kind != Step::Kind::Alias && s.kind != Step::Kind::Constant)
      out.push_back(s.label + ": " + s.describe(target.backend));
  return out;
}

} // namespace rfuse::codegen
