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

// A job knows whether it runs on the background thread (where it must not start an OpenMP
// team) or on the caller's (run_waiting_jobs).
TEST(BackgroundThread, JobsKnowWhichThreadRunsThem) {
  EXPECT_FALSE(on_background_thread());
  BackgroundThread worker;
  EXPECT_TRUE(worker.run<bool>([] { return on_background_thread(); }).get());
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::future<bool>> agree;
  for (int k = 0; k < 200; ++k) {
    agree.push_back(worker.run<bool>(
        [caller] { return on_background_thread() == (std::this_thread::get_id() != caller); }));
    worker.run_waiting_jobs();
  }
  for (std::future<bool>& a : agree) EXPECT_TRUE(a.get());
  EXPECT_FALSE(on_background_thread());
}

// run_waiting_jobs runs the jobs the thread has not started on the caller's thread, in order,
// and leaves them alone while the thread runs one.
TEST(BackgroundThread, WaitingJobsRunInOrderOnEitherThread) {
  BackgroundThread worker;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> started{false};
  std::future<int> busy = worker.run<int>([&] {
    started = true;
    released.wait();
    return 1;
  });
  while (!started) std::this_thread::yield();
  std::atomic<int> second_ran{0};
  std::future<int> second = worker.run<int>([&] { return ++second_ran; });
  worker.run_waiting_jobs();  // the thread runs the first job: returns without running this one
  EXPECT_EQ(second_ran.load(), 0);
  release.set_value();
  EXPECT_EQ(busy.get(), 1);
  worker.run_waiting_jobs();
  EXPECT_EQ(second.get(), 1);

  std::vector<int> order;
  std::vector<std::future<int>> results;
  for (int k = 0; k < 200; ++k) {
    results.push_back(worker.run<int>([&order, k] {
      order.push_back(k);
      return k;
    }));
    if (k % 2) worker.run_waiting_jobs();
  }
  worker.run_waiting_jobs();
  for (int k = 0; k < 200; ++k) EXPECT_EQ(results[size_t(k)].get(), k);
  std::vector<int> expected(200);
  for (int k = 0; k < 200; ++k) expected[size_t(k)] = k;
  EXPECT_EQ(order, expected);
}

}  // namespace
}  // namespace loom
