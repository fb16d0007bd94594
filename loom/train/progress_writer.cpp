#include "loom/train/progress_writer.h"

#include <algorithm>

#include "loom/core/error.h"

namespace loom {

namespace {

constexpr int64_t kStateVersion = 1;

std::chrono::nanoseconds steady_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
}

}  // namespace

ProgressWriter::ProgressWriter(std::optional<size_t> training_freq, size_t training_first,
                               std::optional<size_t> test_freq, size_t test_first,
                               std::optional<size_t> distributed_freq, size_t distributed_first,
                               ProgressClock clock)
    : clock_(clock ? std::move(clock) : ProgressClock(steady_now)) {
  training_.freq = training_freq;
  training_.first = training_first;
  training_.has_loss = true;
  test_.freq = test_freq;
  test_.first = test_first;
  test_.has_metric = true;
  distributed_.freq = distributed_freq;
  distributed_.first = distributed_first;
  const auto now = clock_();
  for (Channel* c : {&training_, &test_, &distributed_}) c->period_start = now;
}

std::optional<ProgressWindow> ProgressWriter::Channel::update(size_t n, double loss_sum,
                                                              std::optional<double> metric_sum) {
  if (n == 0) return std::nullopt;
  samples.second += n;
  updates.second += 1;
  total_updates += 1;
  loss.second += loss_sum;
  if (metric_sum) {
    metric.second += *metric_sum;
    has_metric = true;
  }

  const size_t u = updates.second;
  // Geometric: u + 1 a power of two. Without a frequency only the first updates are due.
  const bool due = freq == 0 ? ((u + 1) & u) == 0 : (freq && u % *freq == 0) || u <= first;
  if (!due) return std::nullopt;

  ProgressWindow window{samples, updates, std::nullopt, std::nullopt};
  if (has_loss) window.loss = loss;
  if (has_metric) window.metric = metric;
  samples.first = samples.second;
  updates.first = updates.second;
  loss.first = loss.second;
  metric.first = metric.second;
  return window;
}

ProgressSummary ProgressWriter::Channel::close(std::chrono::nanoseconds now) {
  total_summaries += 1;
  ProgressSummary summary;
  summary.samples = samples.second;
  summary.updates = updates.second;
  summary.summaries = total_summaries;
  if (has_loss) summary.loss = loss.second;
  if (has_metric) summary.metric = metric.second;
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(now - period_start);
  summary.elapsed_ms = static_cast<uint64_t>(std::max<int64_t>(elapsed.count(), 0));

  samples = {0, 0};
  updates = {0, 0};
  loss = {0.0, 0.0};
  metric = {0.0, 0.0};
  period_start = now;
  return summary;
}

void ProgressWriter::update_training(size_t samples, double loss_sum,
                                     std::optional<double> metric_sum) {
  if (auto window = training_.update(samples, loss_sum, metric_sum)) {
    on_write_training_update(*window);
  }
  on_training_update_end();
}

void ProgressWriter::update_test(size_t samples, double metric_sum) {
  if (auto window = test_.update(samples, 0.0, metric_sum)) on_write_test_update(*window);
}

void ProgressWriter::update_distributed_sync(size_t samples) {
  if (auto window = distributed_.update(samples, 0.0, std::nullopt)) {
    on_write_distributed_sync_update(*window);
  }
}

void ProgressWriter::write_training_summary() {
  on_write_training_summary(training_.close(clock_()));
}

void ProgressWriter::write_test_summary() {
  on_write_test_summary(test_.close(clock_()));
}

void ProgressWriter::write(const std::string& key, double value) {
  on_write(key, value);
}

Dictionary ProgressWriter::Channel::state(std::chrono::nanoseconds now) const {
  Dictionary d;
  d["has_metric"] = has_metric;
  d["samples_start"] = uint64_t{samples.first};
  d["samples_end"] = uint64_t{samples.second};
  d["updates_start"] = uint64_t{updates.first};
  d["updates_end"] = uint64_t{updates.second};
  d["loss_start"] = loss.first;
  d["loss_end"] = loss.second;
  d["metric_start"] = metric.first;
  d["metric_end"] = metric.second;
  d["total_updates"] = uint64_t{total_updates};
  d["total_summaries"] = uint64_t{total_summaries};
  d["elapsed_ns"] = int64_t{(now - period_start).count()};
  return d;
}

void ProgressWriter::Channel::restore(const Dictionary& d, std::chrono::nanoseconds now) {
  const auto count = [&](const char* key) { return static_cast<size_t>(d.get<uint64_t>(key)); };
  has_metric = d.get<bool>("has_metric");
  samples = {count("samples_start"), count("samples_end")};
  updates = {count("updates_start"), count("updates_end")};
  LOOM_CHECK(samples.first <= samples.second && updates.first <= updates.second, StateError,
             "progress writer checkpoint has a window that ends before it starts");
  loss = {d.get<double>("loss_start"), d.get<double>("loss_end")};
  metric = {d.get<double>("metric_start"), d.get<double>("metric_end")};
  total_updates = count("total_updates");
  total_summaries = count("total_summaries");
  // The period resumes with the time it had already run; the downtime is not counted.
  period_start = now - std::chrono::nanoseconds(d.get<int64_t>("elapsed_ns"));
}

Dictionary ProgressWriter::get_checkpoint_state() const {
  const auto now = clock_();
  Dictionary d;
  d["version"] = kStateVersion;
  d["type"] = "ProgressWriter";
  d["training"] = training_.state(now);
  d["test"] = test_.state(now);
  d["distributed_sync"] = distributed_.state(now);
  return d;
}

void ProgressWriter::restore_from_checkpoint(const Dictionary& state) {
  LOOM_CHECK(state.contains("type") && state.at("type").is<std::string>() &&
                 state.get<std::string>("type") == "ProgressWriter",
             StateError, "checkpoint state is not a progress writer's");
  const int64_t version = state.get<int64_t>("version");
  LOOM_CHECK(version == kStateVersion, StateError, "progress writer checkpoint has version ",
             version, "; this build reads version ", kStateVersion);
  // Restore into copies so that a damaged state leaves the writer as it was.
  const auto now = clock_();
  Channel training = training_, test = test_, distributed = distributed_;
  training.restore(state.get_dictionary("training"), now);
  test.restore(state.get_dictionary("test"), now);
  distributed.restore(state.get_dictionary("distributed_sync"), now);
  training_ = training;
  test_ = test;
  distributed_ = distributed;
}

}  // namespace loom
