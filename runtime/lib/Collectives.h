// The active process group as the executors see it (rfuse.all_reduce steps); see
// rfuse/Runtime/ProcessGroup.h.
#ifndef RFUSE_RUNTIME_COLLECTIVES_H
#define RFUSE_RUNTIME_COLLECTIVES_H

#include <cstdint>

namespace rfuse {
namespace cuda {
class NcclCommunicator;
}
/// The group's number of ranks (1 with no group).
int activeWorldSize();
/// The group's NCCL communicator, or null (no group, or a CPU group).
cuda::NcclCommunicator *activeCommunicator();
/// Counts the groups started and ended: a CUDA graph captured under one generation replays that
/// group's communicator, so a program with collectives recaptures when it changes.
uint64_t processGroupGeneration();
} // namespace rfuse

#endif
