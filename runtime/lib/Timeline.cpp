#include "rfuse/Runtime/Timeline.h"

#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace rfuse {

namespace {
constexpr size_t kMaxMarks = 4096;
const auto loadedAt = std::chrono::steady_clock::now();

struct Timeline {
  std::mutex mu;
  std::vector<TimelineMark> marks;
  std::unordered_map<std::thread::id, unsigned> threads;
};

Timeline &timeline() {
  static Timeline *t = new Timeline; // never destroyed: marks may come from threads joined at exit
  return *t;
}
} // namespace

void timelineMark(std::string what, std::string detail) {
  Timeline &t = timeline();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.marks.size() >= kMaxMarks)
    return;
  // (read under the lock: the marks' times follow their order, whichever thread made them)
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadedAt).count();
  auto id = t.threads.emplace(std::this_thread::get_id(), (unsigned)t.threads.size()).first->second;
  t.marks.push_back({s, id, std::move(what), std::move(detail)});
}

std::vector<TimelineMark> timelineMarks() {
  Timeline &t = timeline();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.marks;
}

TimelineSpan::TimelineSpan(std::string what, std::string detail) : what(std::move(what)), detail(std::move(detail)) {
  timelineMark(this->what + " begin", this->detail);
}

TimelineSpan::~TimelineSpan() { timelineMark(what + " end", detail); }

} // namespace rfuse
