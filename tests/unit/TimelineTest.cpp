// The start-up timeline (rfuse/Runtime/Timeline.h): marks in the order made, times that never go
// back, one number per thread, spans as a begin and an end mark, and at most 4,096 marks kept.
#include "rfuse/Runtime/Timeline.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

using namespace rfuse;

namespace {

// The marks this test made (other tests of the process may have made some before).
std::vector<TimelineMark> marksFrom(size_t first) {
  std::vector<TimelineMark> all = timelineMarks();
  return std::vector<TimelineMark>(all.begin() + (long)std::min(first, all.size()), all.end());
}

} // namespace

TEST(Timeline, MarksKeepOrderTimeThreadAndSpans) {
  size_t before = timelineMarks().size();
  timelineMark("first", "a detail");
  {
    TimelineSpan span("work", "42");
    std::thread([] { timelineMark("on another thread"); }).join();
  }
  std::vector<TimelineMark> m = marksFrom(before);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].what, "first");
  EXPECT_EQ(m[0].detail, "a detail");
  EXPECT_EQ(m[1].what, "work begin");
  EXPECT_EQ(m[1].detail, "42");
  EXPECT_EQ(m[2].what, "on another thread");
  EXPECT_EQ(m[3].what, "work end");
  for (size_t i = 1; i < m.size(); ++i)
    EXPECT_GE(m[i].seconds, m[i - 1].seconds);
  EXPECT_GE(m[0].seconds, 0);
  EXPECT_EQ(m[0].thread, m[1].thread);
  EXPECT_EQ(m[1].thread, m[3].thread);
  EXPECT_NE(m[2].thread, m[0].thread);
}

TEST(Timeline, KeepsAtMost4096Marks) {
  for (int i = 0; i < 5000; ++i)
    timelineMark("many");
  std::vector<TimelineMark> all = timelineMarks();
  EXPECT_EQ(all.size(), 4096u);
  timelineMark("one more");
  EXPECT_EQ(timelineMarks().size(), 4096u);
  EXPECT_EQ(timelineMarks().back().what, "many");
}
