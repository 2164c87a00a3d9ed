// NCCL, dlopen'd on first use like CUDA's other libraries (on the GPU box it comes with PyTorch's
// wheels, as cuDNN does): nothing links it, so rfuse builds, loads and passes its tests on
// machines without it. NCCL's C ABI is declared here (the few types and calls rfuse uses; the
// values are nccl.h's), since its header is not part of the CUDA toolkit.
#ifndef RFUSE_RUNTIME_CUDA_NCCL_H
#define RFUSE_RUNTIME_CUDA_NCCL_H

#include "rfuse/IR/DType.h"

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

namespace rfuse::cuda {

typedef struct ncclComm *ncclComm_t;
constexpr int kNcclUniqueIdBytes = 128;
typedef struct {
  char internal[kNcclUniqueIdBytes];
} ncclUniqueId;
typedef enum { ncclSuccess = 0 } ncclResult_t;
typedef enum { ncclSum = 0, ncclAvg = 4 } ncclRedOp_t;
typedef enum {
  ncclInt32 = 2,
  ncclInt64 = 4,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9
} ncclDataType_t;

struct NcclApi {
  bool loaded = false;
  std::string error;   ///< why it is not loaded
  std::string library; ///< what was loaded
  ncclResult_t (*ncclGetVersion)(int *);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId *);
  ncclResult_t (*ncclCommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*ncclCommDestroy)(ncclComm_t);
  ncclResult_t (*ncclCommAbort)(ncclComm_t);
  ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t *);
  const char *(*ncclGetErrorString)(ncclResult_t);
  ncclResult_t (*ncclAllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream);
  ncclResult_t (*ncclBroadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, CUstream);
  ncclResult_t (*ncclGroupStart)();
  ncclResult_t (*ncclGroupEnd)();
};

/// Loaded on first use: the `nccl_library` option's file if set, else libnccl.so.2 from the
/// loader's path.
const NcclApi &nccl();

/// Throws CudaError "<what>: <call> failed: <NCCL's message>" unless r is ncclSuccess.
void checkNccl(ncclResult_t r, const char *call, const std::string &what);

/// NCCL's unique id of a new communicator (rank 0 makes it; the rendezvous hands it out).
std::string newNcclUniqueId();

/// This process's NCCL communicator on device 0 (one process per GPU) and the stream its
/// collectives inside programs run on.
class NcclCommunicator {
public:
  /// Joins communicator `id` (newNcclUniqueId's bytes) as `rank` of `worldSize`; returns once
  /// every rank has joined.
  NcclCommunicator(int rank, int worldSize, const std::string &id);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  struct Operand {
    CUdeviceptr in = 0, out = 0; ///< the same for an in-place collective
    size_t count = 0;
    DType dtype = DType::F32;
  };
  /// One grouped all-reduce (sum or mean) of every operand, queued on `stream`.
  void allReduce(const std::vector<Operand> &operands, bool mean, CUstream stream);
  /// Rank `root`'s values into every rank's `out`, one grouped call, queued on `stream`.
  void broadcast(const std::vector<Operand> &operands, int root, CUstream stream);

  const int rank, worldSize;
  CUstream stream = nullptr; ///< collectives inside programs (overlapping the compute stream)
  int version = 0;           ///< NCCL's, e.g. 22703

private:
  ncclComm_t comm = nullptr;
};

} // namespace rfuse::cuda

#endif
