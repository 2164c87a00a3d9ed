// The process group (see rfuse/Runtime/ProcessGroup.h): the TCP rendezvous, NCCL's communicator,
// collectives for front ends.
#include "rfuse/Runtime/ProcessGroup.h"

#include "Collectives.h"
#include "cuda/Device.h"
#include "cuda/Nccl.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace rfuse {
namespace {

using Clock = std::chrono::steady_clock;

struct Group {
  ProcessGroupOptions options;
  std::unique_ptr<cuda::NcclCommunicator> nccl;
};
std::mutex groupMutex;
std::unique_ptr<Group> group;
uint64_t generation = 0; // bumped whenever a group starts or ends (under groupMutex)

std::string where(const ProcessGroupOptions &o) { return o.masterAddr + ":" + std::to_string(o.masterPort); }

// A socket closed when it goes out of scope.
struct Socket {
  int fd = -1;
  explicit Socket(int f = -1) : fd(f) {}
  Socket(Socket &&o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket &operator=(Socket &&o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0)
      ::close(fd);
  }
};

sockaddr_in resolve(const ProcessGroupOptions &o) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(o.masterAddr.c_str(), std::to_string(o.masterPort).c_str(), &hints, &res);
  if (rc != 0 || !res)
    throw DistributedError("rank " + std::to_string(o.rank) + ": cannot resolve MASTER_ADDR '" + o.masterAddr +
                           "': " + gai_strerror(rc));
  sockaddr_in a;
  std::memcpy(&a, res->ai_addr, sizeof a);
  freeaddrinfo(res);
  return a;
}

int millisLeft(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : (int)std::min<int64_t>(ms, 1 << 30);
}

// Reads or writes exactly n bytes before the deadline; false on a timeout or a closed peer.
bool transfer(int fd, void *data, size_t n, bool reading, Clock::time_point deadline) {
  char *p = static_cast<char *>(data);
  while (n) {
    pollfd pfd{fd, (short)(reading ? POLLIN : POLLOUT), 0};
    int ready = ::poll(&pfd, 1, millisLeft(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      return false;
    ssize_t k = reading ? ::recv(fd, p, n, 0) : ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    p += k;
    n -= (size_t)k;
  }
  return true;
}

void checkOptions(const ProcessGroupOptions &o) {
  if (o.worldSize < 1)
    throw DistributedError("the world size must be at least 1, not " + std::to_string(o.worldSize));
  if (o.rank < 0 || o.rank >= o.worldSize)
    throw DistributedError("rank " + std::to_string(o.rank) + " is not in 0.." + std::to_string(o.worldSize - 1) +
                           " (world size " + std::to_string(o.worldSize) + ")");
  if (o.masterPort < 1 || o.masterPort > 65535)
    throw DistributedError("MASTER_PORT must be in 1..65535, not " + std::to_string(o.masterPort));
  if (!(o.timeoutSeconds > 0))
    throw DistributedError("the rendezvous timeout must be positive");
}

// What a rank sends rank 0 first: its rank and world size.
struct Hello {
  int32_t rank, worldSize;
};

std::string serve(const ProcessGroupOptions &o, const std::string &payload, Clock::time_point deadline) {
  if (o.worldSize == 1)
    return payload; // nobody to hand it to: no port is taken
  Socket listener(::socket(AF_INET, SOCK_STREAM, 0));
  if (listener.fd < 0)
    throw DistributedError("rank 0: cannot open a socket: " + std::string(std::strerror(errno)));
  int one = 1;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = resolve(o);
  if (::bind(listener.fd, (sockaddr *)&addr, sizeof addr) != 0)
    throw DistributedError("rank 0: cannot listen at " + where(o) + ": " + std::strerror(errno) +
                           " (is another group using MASTER_PORT " + std::to_string(o.masterPort) + "?)");
  if (::listen(listener.fd, 128) != 0)
    throw DistributedError("rank 0: cannot listen at " + where(o) + ": " + std::strerror(errno));
  std::set<int> joined;
  std::vector<Socket> peers;
  while ((int)joined.size() < o.worldSize - 1) {
    pollfd pfd{listener.fd, POLLIN, 0};
    int ready = ::poll(&pfd, 1, millisLeft(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0) {
      std::string missing;
      for (int r = 1; r < o.worldSize; ++r)
        if (!joined.count(r))
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw DistributedError("rank 0: rank" + std::string(o.worldSize - 1 - joined.size() > 1 ? "s " : " ") + missing +
                             " of " + std::to_string(o.worldSize) + " did not join the rendezvous at " + where(o) +
                             " within " + std::to_string((int)o.timeoutSeconds) + " s");
    }
    Socket peer(::accept(listener.fd, nullptr, nullptr));
    if (peer.fd < 0)
      continue;
    Hello h{};
    if (!transfer(peer.fd, &h, sizeof h, true, deadline))
      continue; // not one of ours, or gone: keep waiting for the ranks
    if (h.worldSize != o.worldSize)
      throw DistributedError("rank " + std::to_string(h.rank) + " was started with world size " +
                             std::to_string(h.worldSize) + ", rank 0 with " + std::to_string(o.worldSize));
    if (h.rank < 1 || h.rank >= o.worldSize || joined.count(h.rank))
      throw DistributedError("rank 0: a process joined the rendezvous at " + where(o) + " as rank " +
                             std::to_string(h.rank) + (joined.count(h.rank) ? ", which has joined already" : ", which is not a rank of the group"));
    joined.insert(h.rank);
    peers.push_back(std::move(peer));
  }
  // Everyone is here: the payload to each.
  uint32_t n = (uint32_t)payload.size();
  for (Socket &p : peers)
    if (!transfer(p.fd, &n, sizeof n, false, deadline) || !transfer(p.fd, (void *)payload.data(), n, false, deadline))
      throw DistributedError("rank 0: a rank left the rendezvous at " + where(o) + " before it received the group's id");
  return payload;
}

std::string join(const ProcessGroupOptions &o, Clock::time_point deadline) {
  sockaddr_in addr = resolve(o);
  std::string rank = "rank " + std::to_string(o.rank);
  while (true) {
    Socket s(::socket(AF_INET, SOCK_STREAM, 0));
    if (s.fd < 0)
      throw DistributedError(rank + ": cannot open a socket: " + std::strerror(errno));
    if (::connect(s.fd, (sockaddr *)&addr, sizeof addr) == 0) {
      Hello h{o.rank, o.worldSize};
      uint32_t n = 0;
      std::string payload;
      if (transfer(s.fd, &h, sizeof h, false, deadline) && transfer(s.fd, &n, sizeof n, true, deadline)) {
        payload.resize(n);
        if (transfer(s.fd, payload.data(), n, true, deadline))
          return payload;
      }
      throw DistributedError(rank + ": rank 0 at " + where(o) + " did not hand out the group's id within " +
                             std::to_string((int)o.timeoutSeconds) + " s (did every rank start?)");
    }
    if (millisLeft(deadline) == 0)
      throw DistributedError(rank + ": no rank 0 answered at " + where(o) + " within " +
                             std::to_string((int)o.timeoutSeconds) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<cuda::NcclCommunicator::Operand> operands(const std::vector<Tensor> &tensors, const ProcessGroupOptions &o) {
  std::vector<cuda::NcclCommunicator::Operand> out;
  for (const Tensor &t : tensors) {
    if (t.device() != Device::Cuda)
      throw DistributedError("rank " + std::to_string(o.rank) + ": a collective over NCCL takes tensors on the GPU");
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)t.data();
    out.push_back({p, p, (size_t)t.numel(), t.dtype});
  }
  return out;
}

} // namespace

std::string rendezvous(const ProcessGroupOptions &o, const std::string &payload) {
  checkOptions(o);
  auto deadline = Clock::now() + std::chrono::milliseconds((int64_t)(o.timeoutSeconds * 1000));
  return o.rank == 0 ? serve(o, payload, deadline) : join(o, deadline);
}

void initProcessGroup(const ProcessGroupOptions &o) {
  std::lock_guard<std::mutex> lock(groupMutex);
  if (group)
    throw DistributedError("a process group is running already (rank " + std::to_string(group->options.rank) + " of " +
                           std::to_string(group->options.worldSize) + "); end it first");
  checkOptions(o);
  auto g = std::make_unique<Group>();
  g->options = o;
  if (o.device == Device::Cpu) {
    if (o.worldSize > 1)
      throw DistributedError("a process group on the CPU has one rank: rfuse's collectives run through NCCL, one GPU "
                             "per process (world size " + std::to_string(o.worldSize) + " asked for)");
  } else {
    const cuda::NcclApi &api = cuda::nccl();
    if (!api.loaded)
      throw DistributedError("rank " + std::to_string(o.rank) + ": NCCL is not available: " + api.error);
    try {
      std::string id = rendezvous(o, o.rank == 0 ? cuda::newNcclUniqueId() : std::string());
      g->nccl = std::make_unique<cuda::NcclCommunicator>(o.rank, o.worldSize, id);
    } catch (const cuda::CudaError &e) {
      throw DistributedError("rank " + std::to_string(o.rank) + ": " + e.what());
    }
  }
  group = std::move(g);
  ++generation;
}

void destroyProcessGroup() {
  std::lock_guard<std::mutex> lock(groupMutex);
  if (group)
    ++generation;
  group.reset();
}

uint64_t processGroupGeneration() {
  std::lock_guard<std::mutex> lock(groupMutex);
  return generation;
}

ProcessGroupInfo processGroupInfo() {
  std::lock_guard<std::mutex> lock(groupMutex);
  ProcessGroupInfo info;
  if (!group)
    return info;
  info.active = true;
  info.rank = group->options.rank;
  info.worldSize = group->options.worldSize;
  info.device = group->options.device;
  if (group->nccl) {
    int v = group->nccl->version; // e.g. 22703: 2.27.3
    info.backend = "nccl " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
  } else {
    info.backend = "none (one rank on the CPU)";
  }
  return info;
}

int activeWorldSize() {
  std::lock_guard<std::mutex> lock(groupMutex);
  return group ? group->options.worldSize : 1;
}

cuda::NcclCommunicator *activeCommunicator() {
  std::lock_guard<std::mutex> lock(groupMutex);
  return group ? group->nccl.get() : nullptr;
}

void allReduce(const std::vector<Tensor> &tensors, bool mean) {
  cuda::NcclCommunicator *c = activeCommunicator();
  if (!c)
    return; // no group, or a CPU group of one: the values are the ranks' sum and mean already
  try {
    c->allReduce(operands(tensors, group->options), mean, cuda::Device::get().stream);
  } catch (const cuda::CudaError &e) {
    throw DistributedError("rank " + std::to_string(c->rank) + ": " + e.what());
  }
}

void broadcast(const std::vector<Tensor> &tensors, int root) {
  cuda::NcclCommunicator *c = activeCommunicator();
  if (!c)
    return;
  if (root < 0 || root >= c->worldSize)
    throw DistributedError("broadcast from rank " + std::to_string(root) + ", not a rank of the group");
  try {
    c->broadcast(operands(tensors, group->options), root, cuda::Device::get().stream);
  } catch (const cuda::CudaError &e) {
    throw DistributedError("rank " + std::to_string(c->rank) + ": " + e.what());
  }
}

} // namespace rfuse
