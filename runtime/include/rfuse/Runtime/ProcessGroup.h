// The process group of data-parallel training: one process per GPU, each a rank of the group.
// Rank 0 makes NCCL's communicator id and hands it to the other ranks over a TCP rendezvous at
// masterAddr:masterPort (the WORLD_SIZE / RANK / MASTER_ADDR / MASTER_PORT convention of
// torchrun); then every collective goes through NCCL (rfuse.all_reduce inside compiled
// programs, and allReduce / broadcast here for front ends). On the CPU a group has one rank:
// rfuse's collectives run through NCCL only. MLIR-free, like the rest of the runtime's API.
#ifndef RFUSE_RUNTIME_PROCESSGROUP_H
#define RFUSE_RUNTIME_PROCESSGROUP_H

#include "rfuse/Runtime/Tensor.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace rfuse {

/// A group that cannot start or a collective that fails: the message names the rank (and the
/// ranks missing from a rendezvous).
class DistributedError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct ProcessGroupOptions {
  int rank = 0, worldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  double timeoutSeconds = 300; ///< how long the rendezvous waits for every rank
  Device device = Device::Cuda;
};

struct ProcessGroupInfo {
  bool active = false;
  int rank = 0, worldSize = 1;
  Device device = Device::Cpu;
  std::string backend; ///< "nccl 2.27.3", or "none (one rank on the CPU)"
};

/// Starts this process's group. Throws DistributedError (bad options, a group already started,
/// the CPU with more than one rank, NCCL missing, a rendezvous that times out).
void initProcessGroup(const ProcessGroupOptions &options);
/// Ends it (waits for its collectives); nothing when none was started.
void destroyProcessGroup();
ProcessGroupInfo processGroupInfo();

/// Sums or averages each tensor over the ranks, in place: one grouped collective, ordered after
/// the device's queued work. Tensors on the group's device; with no group, nothing changes.
void allReduce(const std::vector<Tensor> &tensors, bool mean);
/// Rank `root`'s values of each tensor into every rank's, in place.
void broadcast(const std::vector<Tensor> &tensors, int root);

/// Rank 0's `payload` to every rank (the rendezvous): rank 0 listens at masterAddr:masterPort
/// until the other worldSize - 1 ranks have connected; they connect (retrying) and receive it.
/// Throws DistributedError naming the ranks that did not join (rank 0) or the address nobody
/// answered at (the others) within the timeout, or a rank whose world size differs from rank 0's.
std::string rendezvous(const ProcessGroupOptions &options, const std::string &payload);

} // namespace rfuse

#endif
