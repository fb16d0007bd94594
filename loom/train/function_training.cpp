#include "loom/train/function_training.h"

#include "loom/core/error.h"
#include "loom/distributed/communicator.h"

namespace loom {

namespace {

// The criterion's metric: its second output, else its only one.
Variable metric_of(const Function& criterion) {
  const std::vector<Variable> outs = criterion.outputs();
  LOOM_CHECK(outs.size() == 1 || outs.size() == 2, ArgumentError, "the criterion ",
             criterion.to_string(), " must have outputs (loss, metric) or (loss)");
  return outs.back();
}

TrainingProgress progress_of(const SummaryCollector::Entry& e) {
  return {e.loss, e.metric, e.samples};
}

// Fills in the criterion a config matches in-memory data to.
template <typename Config>
Config with_criterion(Config config, const Function& criterion) {
  if (!config.criterion.valid()) config.criterion = criterion;
  return config;
}

}  // namespace

TrainSummary Function::train(const DataSource& data, const TrainOptions& options) const {
  metric_of(*this);
  LOOM_CHECK(!options.epoch_size || *options.epoch_size > 0, ArgumentError,
             "train: epoch_size must be positive");
  LOOM_CHECK(!options.max_epochs || *options.max_epochs > 0, ArgumentError,
             "train: max_epochs must be positive");

  ProgressWriters writers;
  std::optional<CheckpointConfig> checkpoint;
  std::optional<CrossValidationConfig> cv;
  std::optional<TestConfig> test;
  auto set_once = [](auto& slot, const auto& config, const char* name) {
    LOOM_CHECK(!slot, ArgumentError, "train: more than one ", name, " among the callbacks");
    slot = config;
  };
  for (const TrainingCallback& callback : options.callbacks) {
    if (auto* w = std::get_if<std::shared_ptr<ProgressWriter>>(&callback)) {
      LOOM_CHECK(*w, ArgumentError, "train: a progress writer among the callbacks is null");
      writers.push_back(*w);
    } else if (auto* c = std::get_if<CheckpointConfig>(&callback)) {
      set_once(checkpoint, *c, "CheckpointConfig");
    } else if (auto* v = std::get_if<CrossValidationConfig>(&callback)) {
      set_once(cv, with_criterion(*v, *this), "CrossValidationConfig");
    } else {
      set_once(test, with_criterion(std::get<TestConfig>(callback), *this), "TestConfig");
    }
  }
  auto collector = std::make_shared<SummaryCollector>();
  writers.push_back(collector);

  const BoundSource bound =
      bind_data(data, *this, options.model_inputs_to_streams, options.streams);
  TrainingSessionConfig session{
      .trainer = std::make_shared<Trainer>(*this, *this, options.parameter_learners, writers),
      .mb_source = bound.source,
      .mb_size = options.minibatch_size,
      .model_inputs_to_streams = bound.input_map,
      .max_samples = options.max_samples,
      .checkpoint_config = checkpoint.value_or(CheckpointConfig{}),
      .cv_config = cv.value_or(CrossValidationConfig{}),
      .test_config = test.value_or(TestConfig{})};
  // An epoch is epoch_size samples; for in-memory data by default the data's size (CNTK's
  // rule), else one sweep over the source.
  const size_t max_epochs = options.max_epochs.value_or(1);
  const std::optional<size_t> epoch_size = options.epoch_size ? options.epoch_size
                                           : data.in_memory()
                                               ? std::optional<size_t>(bound.samples_per_sweep)
                                               : std::nullopt;
  if (epoch_size) {
    session.progress_frequency = options.progress_frequency.value_or(*epoch_size);
    if (!options.max_samples) session.max_samples = max_epochs * *epoch_size;
  } else {
    session.progress_frequency = options.progress_frequency.value_or(Frequency(1, DataUnit::sweep));
    if (!options.max_samples) session.max_sweeps = max_epochs;
  }
  TrainingSession(std::move(session)).train();

  TrainSummary summary;
  for (const auto& e : collector->training_summaries)
    summary.epoch_summaries.push_back(progress_of(e));
  for (const auto& e : collector->training_updates) summary.updates.push_back(progress_of(e));
  if (test && !collector->test_summaries.empty()) {
    const auto& t = collector->test_summaries.back();
    summary.test_summary = TestSummary{t.metric.value_or(0), t.samples};
  }
  return summary;
}

TestSummary Function::test(const DataSource& data) const {
  return test(data, TestOptions{});
}

TestSummary Function::test(const DataSource& data, const TestOptions& options) const {
  const Variable metric = metric_of(*this);
  auto collector = std::make_shared<SummaryCollector>();
  ProgressWriters writers;
  for (const auto& w : options.callbacks) {
    LOOM_CHECK(w, ArgumentError, "test: a progress writer among the callbacks is null");
    writers.push_back(w);
  }
  writers.push_back(collector);
  const auto workers = options.distributed ? distributed::mpi_communicator() : nullptr;
  Evaluator evaluator(metric, std::move(writers), workers);
  const BoundSource bound =
      bind_data(data, *this, options.model_inputs_to_streams, options.streams, /*max_sweeps=*/1);
  const SummaryCollector::Entry r = run_evaluation(bound, options.minibatch_size, INFINITELY_REPEAT,
                                                   evaluator, *collector, workers);
  return {r.metric.value_or(0), r.samples};
}

}  // namespace loom
