// The threads a reader parses and decodes on: CTF chunks and images are independent items,
// handled in parallel, with results and errors that do not depend on the thread count.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

namespace loom {

// The threads a reader uses for `requested` (0: as many as compute uses,
// get_max_num_cpu_threads()).
size_t reader_threads(size_t requested);

// Calls body(i) for every i in [0, n), on up to `threads` threads (items handed out one at a
// time). Every item runs even when some throw; then the exception of the lowest failing item
// is rethrown, so the error a caller sees is the first in item order.
void for_each_item(size_t n, size_t threads, const std::function<void(size_t)>& body);

// Whether the caller is a BackgroundThread's thread. Work there stays on that one thread: an
// OpenMP team started from it would be a second team competing with compute's.
bool on_background_thread();

// One thread that runs jobs in the background, one after another (a MinibatchSource's
// read-ahead). It starts with the first job and lives as long as its owner, so a job costs no
// thread start: std::async started a thread per minibatch, a fresh stack's page faults and
// two system calls each time. It runs at the lowest priority (nice 19): where the cores
// compute, it takes the time compute leaves instead of stalling a compute thread (and with it
// the others at their next barrier); a job it has not started when its result is wanted runs
// in the caller's thread (run_waiting_jobs).
class BackgroundThread {
 public:
  BackgroundThread() = default;
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;
  // Finishes the jobs given, then ends the thread.
  ~BackgroundThread();

  // Runs job on the thread after the jobs given before; the future holds its result or
  // exception.
  template <typename T>
  std::future<T> run(std::function<T()> job) {
    auto task = std::make_shared<std::packaged_task<T()>>(std::move(job));
    std::future<T> result = task->get_future();
    post([task] { (*task)(); });
    return result;
  }
  // Runs the jobs the thread has not started on the calling thread, in order; returns at once
  // when the thread is running one. Call it before waiting for a job's result.
  void run_waiting_jobs();

 private:
  void post(std::function<void()> job);
  void loop();
  // Runs the first waiting job with the lock released; called with it held.
  void run_next(std::unique_lock<std::mutex>& lock);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  bool running_ = false;  // a job runs (on the thread or the caller's)
  std::thread thread_;
};

}  // namespace loom
