// The active process group as the executors see it (rfuse.all_reduce steps); see
// rfuse/Runtime/ProcessGroup.h.
#ifndef RFUSE_RUNTIME_COLLECTIVES_H
#define RFUSE_RUNTIME_COLLECTIVES_H

namespace rfuse {
namespace cuda {
class NcclCommunicator;
}
/// The group's number of ranks (1 with no group).
int activeWorldSize();
/// The group's NCCL communicator, or null (no group, or a CPU group).
cuda::NcclCommunicator *activeCommunicator();
} // namespace rfuse

#endif
