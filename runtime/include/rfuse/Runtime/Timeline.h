// A process's start-up timeline: named marks with the time since the runtime was loaded and the
// thread that made them. What a new session's first GPU step waits for (the libraries' start on
// the warming threads, each library call's first plan, uploads) is a matter of order and overlap,
// which totals cannot show. Marks are cheap and few (the first 4,096 are kept); .rf_timeline() in
// R (benchmarks/r-warm-start.R prints it).
#ifndef RFUSE_RUNTIME_TIMELINE_H
#define RFUSE_RUNTIME_TIMELINE_H

#include <string>
#include <vector>

namespace rfuse {

struct TimelineMark {
  double seconds = 0; ///< since the runtime was loaded
  unsigned thread = 0; ///< 0 for the first thread that made a mark, then 1, 2, ... in order of first mark
  std::string what;
  std::string detail;
};

/// Adds a mark (dropped once 4,096 are kept).
void timelineMark(std::string what, std::string detail = {});
/// The marks so far, in the order they were made.
std::vector<TimelineMark> timelineMarks();

/// Marks `what` begin on construction and end on destruction.
class TimelineSpan {
public:
  explicit TimelineSpan(std::string what, std::string detail = {});
  ~TimelineSpan();
  TimelineSpan(const TimelineSpan &) = delete;
  TimelineSpan &operator=(const TimelineSpan &) = delete;

private:
  std::string what, detail;
};

} // namespace rfuse

#endif
