// parallel_for: every index in [0, n) runs exactly once, whatever n against the thread count,
// and the call returns only when all have run.
#include "base/parallel_for.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace dsv4 {
namespace {

TEST(ParallelForTest, RunsEveryIndexOnceAndReturnsWhenAllHaveRun) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  for (const int64_t n : {int64_t{0}, int64_t{1}, cores - 1, cores, cores + 1, int64_t{10007}}) {
    SCOPED_TRACE(n);
    std::vector<std::atomic<int>> runs(static_cast<size_t>(std::max<int64_t>(n, 0)));
    parallel_for(n, [&](int64_t i) { runs[static_cast<size_t>(i)].fetch_add(1); });
    int64_t wrong = 0;
    for (const std::atomic<int>& r : runs) wrong += r.load() != 1;
    EXPECT_EQ(wrong, 0);
  }
}

TEST(ParallelForTest, UsesMoreThanOneThreadWhenTheMachineHasThem) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core";
  std::atomic<int> inside{0}, most{0};
  parallel_for(64, [&](int64_t) {
    const int now = ++inside;
    for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    --inside;
  });
  EXPECT_GE(most.load(), 2);
}

}  // namespace
}  // namespace dsv4
