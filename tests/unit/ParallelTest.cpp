// The CPU backend's thread pool (cpu/Parallel.h): each index once, chunks at multiples of 64,
// nested calls run where they are, exceptions reach the caller.
#include "cpu/Parallel.h"

#include "rfuse/Runtime/Options.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

using namespace rfuse;

namespace {

struct Threads {
  std::string old = getOption("cpu_threads");
  explicit Threads(int n) { setOption("cpu_threads", std::to_string(n)); }
  ~Threads() { setOption("cpu_threads", old); }
};

TEST(Parallel, EveryIndexOnceInChunksThatStartAtMultiplesOf64) {
  Threads t(4);
  for (int64_t extent : {1, 63, 64, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(extent);
    std::atomic<int> badStart{0};
    cpu::parallelFor(extent, 0, 1 << 10, [&](int64_t b, int64_t e) {
      if (b % 64)
        ++badStart;
      for (int64_t k = b; k < e; ++k)
        ++hits[k];
    });
    for (int64_t k = 0; k < extent; ++k)
      ASSERT_EQ(hits[k].load(), 1) << "extent " << extent << " index " << k;
    EXPECT_EQ(badStart.load(), 0);
  }
}

TEST(Parallel, NestedCallsAndExceptions) {
  Threads t(3);
  std::atomic<int64_t> sum{0};
  cpu::parallelFor(256, 0, 1 << 12, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
      cpu::parallelFor(100, 0, 1 << 12, [&](int64_t b2, int64_t e2) { sum += e2 - b2; });
  });
  EXPECT_EQ(sum.load(), 256 * 100);
  EXPECT_THROW(cpu::parallelFor(4096, 64, 1 << 12,
                                [&](int64_t b, int64_t) {
                                  if (b == 1024)
                                    throw std::runtime_error("chunk 16");
                                }),
               std::runtime_error);
  // The pool still works after a failure.
  std::atomic<int64_t> n{0};
  cpu::parallelFor(4096, 64, 1 << 12, [&](int64_t b, int64_t e) { n += e - b; });
  EXPECT_EQ(n.load(), 4096);
}

} // namespace
