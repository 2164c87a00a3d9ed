// NCCL through dlopen (see Nccl.h) and the process's communicator.
#include "Nccl.h"
#include "CudaApi.h"
#include "Device.h"

#include "rfuse/Runtime/Cuda.h"
#include "rfuse/Runtime/Options.h"


namespace rfuse::cuda {

const NcclApi &nccl() {
  static NcclApi api = [] {
    NcclApi a{};
    std::string configured = runtimeOptions().ncclLibrary;
    std::vector<std::string> names;
    if (!configured.empty())
      names.push_back(configured);
    else
      names = {"libnccl.so.2", "libnccl.so"};
    void *lib = openFirst(names, a.error, &a.library);
    if (!lib) {
      a.error += " (set the nccl_library option, RFUSE_NCCL_LIBRARY, to NCCL's libnccl.so.2)";
      return a;
    }
    bool ok = true;
#define RF_BIND(field, sym) ok &= bind(lib, a.field, sym, a.error)
    RF_BIND(ncclGetVersion, "ncclGetVersion");
    RF_BIND(ncclGetUniqueId, "ncclGetUniqueId");
    RF_BIND(ncclCommInitRank, "ncclCommInitRank");
    RF_BIND(ncclCommDestroy, "ncclCommDestroy");
    RF_BIND(ncclCommAbort, "ncclCommAbort");
    RF_BIND(ncclCommGetAsyncError, "ncclCommGetAsyncError");
    RF_BIND(ncclGetErrorString, "ncclGetErrorString");
    RF_BIND(ncclAllReduce, "ncclAllReduce");
    RF_BIND(ncclBroadcast, "ncclBroadcast");
    RF_BIND(ncclGroupStart, "ncclGroupStart");
    RF_BIND(ncclGroupEnd, "ncclGroupEnd");
#undef RF_BIND
    if (!ok)
      a.error += " in " + a.library;
    a.loaded = ok;
    return a;
  }();
  return api;
}

void checkNccl(ncclResult_t r, const char *call, const std::string &what) {
  if (r == ncclSuccess)
    return;
  const char *msg = nccl().ncclGetErrorString ? nccl().ncclGetErrorString(r) : nullptr;
  throw CudaError(what + ": " + call + " failed: " + (msg ? msg : "NCCL error " + std::to_string((int)r)));
}

namespace {
const NcclApi &loadedNccl() {
  const NcclApi &api = nccl();
  if (!api.loaded)
    throw CudaError("NCCL is not available: " + api.error);
  return api;
}

ncclDataType_t ncclType(DType t) {
  switch (t) {
  case DType::F32: return ncclFloat32;
  case DType::F64: return ncclFloat64;
  case DType::F16: return ncclFloat16;
  case DType::BF16: return ncclBfloat16;
  case DType::I32: return ncclInt32;
  case DType::I64: return ncclInt64;
  case DType::I1: break;
  }
  throw CudaError(std::string("NCCL collectives take float or integer tensors, not ") + dtypeName(t));
}
} // namespace

std::string newNcclUniqueId() {
  const NcclApi &api = loadedNccl();
  ncclUniqueId id;
  checkNccl(api.ncclGetUniqueId(&id), "ncclGetUniqueId", "making the communicator's id");
  return std::string(id.internal, kNcclUniqueIdBytes);
}

NcclCommunicator::NcclCommunicator(int rank, int worldSize, const std::string &id) : rank(rank), worldSize(worldSize) {
  const NcclApi &api = loadedNccl();
  if (id.size() != (size_t)kNcclUniqueIdBytes)
    throw CudaError("an NCCL unique id has " + std::to_string(kNcclUniqueIdBytes) + " bytes, not " +
                    std::to_string(id.size()));
  Device &dev = Device::get(); // device 0, current on this thread: NCCL's device
  (void)dev;
  checkNccl(api.ncclGetVersion(&version), "ncclGetVersion", "reading NCCL's version");
  ncclUniqueId uid;
  std::copy(id.begin(), id.end(), uid.internal);
  checkNccl(api.ncclCommInitRank(&comm, worldSize, uid, rank), "ncclCommInitRank",
            "joining the NCCL communicator as rank " + std::to_string(rank) + " of " + std::to_string(worldSize));
  check(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "creating the collectives' stream");
}

NcclCommunicator::~NcclCommunicator() {
  if (stream)
    driver().cuStreamSynchronize(stream);
  if (comm)
    nccl().ncclCommDestroy(comm);
  if (stream)
    driver().cuStreamDestroy(stream);
}

void NcclCommunicator::allReduce(const std::vector<Operand> &operands, bool mean, CUstream s) {
  const NcclApi &api = nccl();
  checkNccl(api.ncclGroupStart(), "ncclGroupStart", "an all-reduce");
  for (const Operand &o : operands)
    if (o.count)
      checkNccl(api.ncclAllReduce((const void *)o.in, (void *)o.out, o.count, ncclType(o.dtype), mean ? ncclAvg : ncclSum,
                                  comm, s),
                "ncclAllReduce", "an all-reduce of " + std::to_string(o.count) + " elements");
  checkNccl(api.ncclGroupEnd(), "ncclGroupEnd", "an all-reduce of " + std::to_string(operands.size()) + " tensors");
}

void NcclCommunicator::broadcast(const std::vector<Operand> &operands, int root, CUstream s) {
  const NcclApi &api = nccl();
  checkNccl(api.ncclGroupStart(), "ncclGroupStart", "a broadcast");
  for (const Operand &o : operands)
    if (o.count)
      checkNccl(api.ncclBroadcast((const void *)o.in, (void *)o.out, o.count, ncclType(o.dtype), root, comm, s),
                "ncclBroadcast", "a broadcast from rank " + std::to_string(root));
  checkNccl(api.ncclGroupEnd(), "ncclGroupEnd", "a broadcast of " + std::to_string(operands.size()) + " tensors");
}

} // namespace rfuse::cuda
