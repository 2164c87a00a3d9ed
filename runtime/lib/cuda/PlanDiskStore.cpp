// The library plans' disk store (PlanCache.h): entries next to the kernel cache, in
// cache_dir/plans, in the disk cache's format; skipped with disk_cache off.
#include "PlanCache.h"

#include "rfuse/Runtime/DiskCache.h"
#include "rfuse/Runtime/Options.h"

#include "llvm/Support/xxhash.h"

#include <algorithm>

namespace rfuse::cuda {

namespace {
constexpr char kPlanMagic[8] = {'R', 'F', 'P', 'L', 'A', 'N', '0', '1'};

class PlanDiskStore : public PlanStore {
public:
  PlanDiskStore() { setPlanStore(this); }
  ~PlanDiskStore() override { setPlanStore(nullptr); }

  bool load(const std::string &problem, std::vector<char> &choice) override {
    std::string path, key;
    if (!where(problem, path, key))
      return false;
    std::vector<char> payload;
    std::string why;
    // The payload starts with the problem's description and a NUL: a hash collision never hands
    // one problem another's algorithm.
    if (!readCacheEntry(path, kPlanMagic, key, payload, why) || payload.size() <= problem.size() ||
        !std::equal(problem.begin(), problem.end(), payload.begin()) || payload[problem.size()] != '\0')
      return false;
    choice.assign(payload.begin() + problem.size() + 1, payload.end());
    return true;
  }

  void save(const std::string &problem, const std::vector<char> &choice) override {
    std::string path, key;
    if (!where(problem, path, key))
      return;
    std::vector<char> payload(problem.begin(), problem.end());
    payload.push_back('\0');
    payload.insert(payload.end(), choice.begin(), choice.end());
    writeCacheEntry(path, kPlanMagic, key, payload); // best effort, as the kernel cache
  }

private:
  // The cache directory first (made 0700 by trustedCacheDir, as the kernel cache makes it), then
  // its plans/ folder.
  static bool where(const std::string &problem, std::string &path, std::string &key) {
    RuntimeOptions o = runtimeOptions();
    std::string dir = o.cacheDir + "/plans";
    if (!o.diskCache || !trustedCacheDir(o.cacheDir) || !trustedCacheDir(dir))
      return false;
    key = cacheKeyHex(llvm::xxh3_64bits(problem));
    path = dir + "/" + key + ".plan";
    return true;
  }
};

PlanDiskStore diskStore; // registered while the JIT runtime is loaded
} // namespace

} // namespace rfuse::cuda
