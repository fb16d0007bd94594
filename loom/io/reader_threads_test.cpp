#include "loom/io/reader_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "loom/core/error.h"

namespace loom {
namespace {

TEST(ForEachItem, EveryItemRunsAndTheFirstFailureInItemOrderIsRethrown) {
  for (size_t threads : {1, 2, 4}) {
    std::vector<std::atomic<int>> runs(50);
    EXPECT_THROW(for_each_item(runs.size(), threads,
                               [&](size_t i) {
                                 ++runs[i];
                                 if (i == 31) throw std::runtime_error("31");
                                 if (i == 7) throw ArgumentError("7");
                               }),
                 ArgumentError);
    for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
  }
}

// Jobs run one after another on one thread that outlives them; results and exceptions come
// back through the futures; the destructor finishes the jobs given.
TEST(BackgroundThread, RunsJobsInOrderOnOneThread) {
  std::vector<int> done;
  std::thread::id first;
  std::future<int> last;
  {
    BackgroundThread worker;
    std::future<int> a = worker.run<int>([&] {
      first = std::this_thread::get_id();
      done.push_back(1);
      return 10;
    });
    EXPECT_EQ(a.get(), 10);
    std::future<int> failing = worker.run<int>([]() -> int { throw IOError("unreadable"); });
    EXPECT_THROW(failing.get(), IOError);
    for (int k = 2; k <= 5; ++k)
      last = worker.run<int>([&, k] {
        EXPECT_EQ(std::this_thread::get_id(), first);  // the same thread every time
        done.push_back(k);
        return k;
      });
    EXPECT_NE(first, std::this_thread::get_id());
  }  // waits for the jobs
  EXPECT_EQ(done, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(last.get(), 5);
}

}  // namespace
}  // namespace loom
