#include "loom/io/reader_threads.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

#include "loom/core/threads.h"

namespace loom {

size_t reader_threads(size_t requested) {
  return requested > 0 ? requested : static_cast<size_t>(get_max_num_cpu_threads());
}

// Plain threads rather than OpenMP: a reader's threads block on files and never spin, and
// they run in parallel when called from inside a parallel region too.
void for_each_item(size_t n, size_t threads, const std::function<void(size_t)>& body) {
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        body(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> team;
  for (size_t t = 1; t < std::min(threads, n); ++t) team.emplace_back(work);
  work();
  for (std::thread& t : team) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

BackgroundThread::~BackgroundThread() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void BackgroundThread::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { loop(); });
  } else {
    wake_.notify_one();
  }
}

void BackgroundThread::run_next(std::unique_lock<std::mutex>& lock) {
  std::function<void()> job = std::move(jobs_.front());
  jobs_.pop_front();
  running_ = true;
  lock.unlock();
  job();  // a packaged_task: its exception goes to the future
  lock.lock();
  running_ = false;
}

void BackgroundThread::run_waiting_jobs() {
  std::unique_lock lock(mutex_);
  while (!running_ && !jobs_.empty()) run_next(lock);
  if (!jobs_.empty()) wake_.notify_one();
}

namespace {
thread_local bool background = false;
}  // namespace

bool on_background_thread() {
  return background;
}

void BackgroundThread::loop() {
  background = true;
  // Failing (a system that refuses it) leaves the thread at the caller's priority.
  setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || (!running_ && !jobs_.empty()); });
    if (jobs_.empty()) return;  // stopping, with every job done
    run_next(lock);
  }
}

}  // namespace loom
