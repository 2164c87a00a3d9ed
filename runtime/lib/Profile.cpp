#include "rfuse/Runtime/Profile.h"

#include <atomic>
#include <mutex>

namespace rfuse {

namespace {
std::atomic<bool> open{false};
std::mutex mu;
std::vector<ProfileRecord> records;
} // namespace

void startProfile() {
  std::lock_guard<std::mutex> lock(mu);
  records.clear();
  open = true;
}

bool profiling() { return open; }

std::vector<ProfileRecord> stopProfile() {
  std::lock_guard<std::mutex> lock(mu);
  open = false;
  return std::move(records);
}

void recordProfile(ProfileRecord r) {
  std::lock_guard<std::mutex> lock(mu);
  if (open)
    records.push_back(std::move(r));
}

} // namespace rfuse
