// ProgressWriter: the observer that Trainer, Evaluator, learners and training_session report
// to, modeled on CNTK's C++ ProgressWriter. The base class owns the bookkeeping (which
// minibatches to report, the running sums of the current window and period, summary
// counters, the period's clock); derived classes only decide how to show what they are given.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "loom/core/dictionary.h"

namespace loom {

// Reads a monotonic time. Tests inject a fake one so that elapsed times are deterministic.
using ProgressClock = std::function<std::chrono::nanoseconds()>;

// The updates since the previous report within the current period (epoch). Every pair is
// (value when the window opened, value now), counted from the start of the period: the
// window is second - first, the period so far is second.
struct ProgressWindow {
  std::pair<size_t, size_t> samples;
  std::pair<size_t, size_t> updates;
  std::optional<std::pair<double, double>> loss;    // sums; absent for test and sync windows
  std::optional<std::pair<double, double>> metric;  // sums; absent when no metric was given
};

// A closed period.
struct ProgressSummary {
  size_t samples = 0;
  size_t updates = 0;
  size_t summaries = 0;  // index of this summary, from 1: the k of "Finished Epoch[k]"
  std::optional<double> loss;
  std::optional<double> metric;
  uint64_t elapsed_ms = 0;  // whole milliseconds since the period opened, as CNTK measures
};

class ProgressWriter {
 public:
  // Per kind of update (training, test, distributed sync): with freq = n > 0 the n-th, 2n-th,
  // ... update of a period is reported; freq = 0 reports geometrically, updates 1, 3, 7, 15,
  // ...; freq = nullopt never reports periodically. Independently of freq, each of the first
  // `first` updates of a period is reported on its own. An empty clock means the steady clock.
  static constexpr size_t kReportFirst = 0;  // CNTK's default first, test_first, ...
  ProgressWriter(std::optional<size_t> training_freq, size_t training_first,
                 std::optional<size_t> test_freq, size_t test_first,
                 std::optional<size_t> distributed_freq, size_t distributed_first,
                 ProgressClock clock = {});
  virtual ~ProgressWriter() = default;
  ProgressWriter(const ProgressWriter&) = delete;
  ProgressWriter& operator=(const ProgressWriter&) = delete;

  // One training minibatch: its sample count and the sums of the loss (and metric) over its
  // samples. A minibatch of 0 samples is not counted, as in CNTK.
  void update_training(size_t samples, double loss_sum, std::optional<double> metric_sum);
  // One test (evaluation) minibatch.
  void update_test(size_t samples, double metric_sum);
  // One synchronization of distributed workers covering `samples` samples.
  void update_distributed_sync(size_t samples);
  // Closes the current training (test) period: reports its totals and starts the next.
  void write_training_summary();
  void write_test_summary();
  // A named value such as "Learning rate per minibatch".
  void write(const std::string& key, double value);
  // Called after each training minibatch's update_training, reported or not (CNTK's
  // OnTrainingUpdateEnd); nothing by default.
  virtual void on_training_update_end() {}

  size_t total_training_updates() const { return training_.total_updates; }
  size_t total_test_updates() const { return test_.total_updates; }

  // Every counter and running sum, so a writer restored into a resumed run reports exactly
  // what the uninterrupted run would have. Time spent while stopped is not counted.
  Dictionary get_checkpoint_state() const;
  void restore_from_checkpoint(const Dictionary& state);

 protected:
  virtual void on_write_training_update(const ProgressWindow& window) = 0;
  virtual void on_write_test_update(const ProgressWindow& window) = 0;
  virtual void on_write_distributed_sync_update(const ProgressWindow&) {}
  virtual void on_write_training_summary(const ProgressSummary& summary) = 0;
  virtual void on_write_test_summary(const ProgressSummary& summary) = 0;
  virtual void on_write(const std::string&, double) {}

 private:
  // The bookkeeping of one kind of update.
  struct Channel {
    std::optional<size_t> freq;
    size_t first = 0;
    bool has_loss = false;
    bool has_metric = false;  // stays set once a metric was given
    std::pair<size_t, size_t> samples{0, 0};
    std::pair<size_t, size_t> updates{0, 0};
    std::pair<double, double> loss{0.0, 0.0};
    std::pair<double, double> metric{0.0, 0.0};
    size_t total_updates = 0;
    size_t total_summaries = 0;
    std::chrono::nanoseconds period_start{0};

    // Counts one update; the window to report when this update is due, else nullopt.
    std::optional<ProgressWindow> update(size_t samples, double loss_sum,
                                         std::optional<double> metric_sum);
    // Closes the period at time `now` and opens the next.
    ProgressSummary close(std::chrono::nanoseconds now);
    Dictionary state(std::chrono::nanoseconds now) const;
    void restore(const Dictionary& state, std::chrono::nanoseconds now);
  };

  ProgressClock clock_;
  Channel training_;
  Channel test_;
  Channel distributed_;
};

}  // namespace loom
