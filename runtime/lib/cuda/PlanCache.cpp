#include "PlanCache.h"

#include "rfuse/Runtime/Cuda.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace rfuse::cuda {

namespace {
std::mutex planMutex;
std::unordered_map<std::string, std::vector<char>> remembered;
PlanCacheStats stats;
std::atomic<PlanStore *> planStore{nullptr};
} // namespace

void setPlanStore(PlanStore *store) { planStore = store; }

std::string planDeviceTag() {
  const DeviceInfo &info = gpuPresence();
  return info.name + " " + info.arch() + " sms " + std::to_string(info.multiprocessors);
}

bool recallPlan(const std::string &problem, std::vector<char> &choice) {
  {
    std::lock_guard<std::mutex> lock(planMutex);
    auto it = remembered.find(problem);
    if (it != remembered.end()) {
      choice = it->second;
      ++stats.memoryHits;
      return true;
    }
  }
  PlanStore *store = planStore;
  bool found = store && store->load(problem, choice);
  std::lock_guard<std::mutex> lock(planMutex);
  if (found) {
    remembered[problem] = choice;
    ++stats.diskHits;
  } else {
    ++stats.misses;
  }
  return found;
}

void rememberPlan(const std::string &problem, const std::vector<char> &choice) {
  {
    std::lock_guard<std::mutex> lock(planMutex);
    remembered[problem] = choice;
  }
  if (PlanStore *store = planStore)
    store->save(problem, choice);
}

void refusePlan(const std::string &problem) {
  std::lock_guard<std::mutex> lock(planMutex);
  remembered.erase(problem);
  ++stats.refused;
}

void clearMemoryPlanCache() {
  std::lock_guard<std::mutex> lock(planMutex);
  remembered.clear();
}

PlanCacheStats planCacheStats() {
  std::lock_guard<std::mutex> lock(planMutex);
  return stats;
}

} // namespace rfuse::cuda
