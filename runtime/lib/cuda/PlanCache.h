// The algorithm a library call's plan chose (cuDNN's heuristics for a convolution, cuBLASLt's
// heuristics and timing for a product), remembered per problem: in the process, where a network
// asks about the same convolution many times (ResNet-18's step: 62 calls, 35 problems), and on
// disk next to the kernel cache, so that a new session's first step asks nothing. A problem is
// described in full (the library's version, the device, every descriptor field) and the library
// checks a remembered choice before it is used. The memory part lives here, in rfuse_rt; the JIT
// runtime adds the disk (PlanDiskStore.cpp: the disk cache's code is not rfuse_rt's).
#ifndef RFUSE_RUNTIME_CUDA_PLANCACHE_H
#define RFUSE_RUNTIME_CUDA_PLANCACHE_H

#include <cstdint>
#include <string>
#include <vector>

namespace rfuse::cuda {

/// Where remembered choices persist beyond the process (set once, at load, by the JIT runtime).
class PlanStore {
public:
  virtual ~PlanStore() = default;
  virtual bool load(const std::string &problem, std::vector<char> &choice) = 0;
  virtual void save(const std::string &problem, const std::vector<char> &choice) = 0;
};
void setPlanStore(PlanStore *store);

/// The choice remembered for `problem` (the bytes rememberPlan stored), in memory or in the
/// store; false when there is none.
bool recallPlan(const std::string &problem, std::vector<char> &choice);
/// Remembers `choice` for `problem`, in memory and in the store.
void rememberPlan(const std::string &problem, const std::vector<char> &choice);
/// Forgets (and counts) a remembered choice the library refused: in memory; the disk entry is
/// overwritten when the new choice is remembered.
void refusePlan(const std::string &problem);

struct PlanCacheStats {
  uint64_t memoryHits = 0, diskHits = 0, misses = 0, refused = 0;
};
PlanCacheStats planCacheStats();

/// The device part of every problem's description: its name, architecture and SM count.
std::string planDeviceTag();

template <typename T> std::vector<char> planBytes(const T &v) {
  const char *p = reinterpret_cast<const char *>(&v);
  return std::vector<char>(p, p + sizeof v);
}
template <typename T> bool planFromBytes(const std::vector<char> &b, T &v) {
  if (b.size() != sizeof v)
    return false;
  std::copy(b.begin(), b.end(), reinterpret_cast<char *>(&v));
  return true;
}

} // namespace rfuse::cuda

#endif
