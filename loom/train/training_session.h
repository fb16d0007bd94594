// training_session: the training loop with checkpoints, cross-validation and a final test,
// following CNTK's TrainingSession (CNTK-SEMANTICS.md §4):
//
//   auto session = training_session({.trainer = trainer, .mb_source = source, .mb_size = 4,
//                                    .model_inputs_to_streams = input_map,
//                                    .max_samples = 800,
//                                    .checkpoint_config = {.filename = "ckpt", .frequency = 100},
//                                    .test_config = {.source = test_source}});
//   session.train();
//
// Each step reads min(mb_size[seen], max_samples - seen) samples and trains (an empty
// minibatch or a false from the trainer ends the loop); then each periodic action whose index
// floor(units / frequency) changed runs, in the order progress summary, cross-validation (with
// its callback, which may stop training or change the learning rate), checkpoint. The
// checkpoint comes last, so it holds the outcome of everything its step did and a run resumed
// from it replays nothing (docs/decisions.md). At the end the actions due for a partial period
// run in the same order, a final checkpoint is written to `filename` when saves are numbered,
// and the test runs.
#pragma once

#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/core/shared.h"
#include "loom/io/minibatch_source.h"
#include "loom/io/minibatch_source_from_data.h"
#include "loom/io/user_minibatch_source.h"
#include "loom/learners/schedule.h"
#include "loom/train/checkpoint_policy.h"
#include "loom/train/trainer.h"

namespace loom {

using InputMap = std::unordered_map<Variable, StreamInformation>;

// Data to train, validate or test on: a minibatch source (Loom's reader or a
// UserMinibatchSource), or in-memory arrays in the order of the criterion's arguments (CNTK's
// tuple of numpy arrays), read in order.
class DataSource {
 public:
  DataSource() = default;
  // Shared or borrowed (Shared<T>).
  template <std::derived_from<MinibatchSourceInterface> S>
  DataSource(std::shared_ptr<S> source)
      : DataSource(std::shared_ptr<MinibatchSourceInterface>(std::move(source)), 0) {}
  DataSource(MinibatchSourceInterface& source)
      : DataSource(Shared<MinibatchSourceInterface>(source), 0) {}
  DataSource(std::vector<DataArray> arrays) : arrays_(std::move(arrays)) {}
  DataSource(std::initializer_list<DataArray> arrays) : arrays_(arrays) {}

  bool empty() const { return !source_ && arrays_.empty(); }
  bool in_memory() const { return !arrays_.empty(); }
  const std::shared_ptr<MinibatchSourceInterface>& source() const { return source_; }
  const std::vector<DataArray>& arrays() const { return arrays_; }

 private:
  DataSource(std::shared_ptr<MinibatchSourceInterface> source, int);

  std::shared_ptr<MinibatchSourceInterface> source_;
  std::vector<DataArray> arrays_;
};

// A source and the binding of a function's arguments to its streams.
struct BoundSource {
  std::shared_ptr<MinibatchSourceInterface> source;
  InputMap input_map;
  // In-memory data: the samples of one sweep over them as the Trainer counts them (the loss's;
  // for a model that reads sequences and outputs one label each, the number of sequences).
  size_t samples_per_sweep = 0;
};

// Binds data to criterion's arguments. In-memory arrays become a MinibatchSourceFromData read
// in order for max_sweeps sweeps, matched to the arguments by position. A source is
// matched by input_map when given, else by `streams` (stream names in argument order), else by
// the arguments' names. ArgumentError when the data do not fit the arguments.
BoundSource bind_data(const DataSource& data, const Function& criterion,
                      const InputMap& input_map = {}, const std::vector<std::string>& streams = {},
                      size_t max_sweeps = INFINITELY_REPEAT);

// Called after each cross-validation with its index (from 0), average error, samples and
// minibatches; false stops training. It may change the learners' rates (reset_learning_rate).
using CrossValidationCallback = std::function<bool(
    size_t index, double average_error, size_t cv_num_samples, size_t cv_num_minibatches)>;

struct CrossValidationConfig {
  // Without data only the callback runs, with (index, 0, 0, 0).
  DataSource source = {};
  // nullopt: once at the end of training.
  std::optional<Frequency> frequency = std::nullopt;
  MinibatchSizeSchedule minibatch_size = 32;
  CrossValidationCallback callback = {};
  size_t max_samples = INFINITELY_REPEAT;  // per cross-validation pass
  InputMap model_inputs_to_streams = {};
  // The function whose arguments in-memory data are matched to (default: the trainer's).
  Function criterion = {};
};

struct TestConfig {
  DataSource source = {};
  MinibatchSizeSchedule minibatch_size = 32;
  InputMap model_inputs_to_streams = {};
  Function criterion = {};
};

// The trainer and source are shared or borrowed (Shared<T>: `.trainer = trainer` works for a
// `Trainer trainer(...)` and for a shared_ptr alike).
struct TrainingSessionConfig {
  Shared<Trainer> trainer = {};
  Shared<MinibatchSourceInterface> mb_source = {};
  MinibatchSizeSchedule mb_size = 32;
  InputMap model_inputs_to_streams = {};
  // nullopt: until the source ends (a source that never ends needs max_samples or max_sweeps).
  std::optional<size_t> max_samples = std::nullopt;
  // Loom: also stop after this many sweeps (as the trainer's first learner counts them).
  std::optional<size_t> max_sweeps = std::nullopt;
  // nullopt: one training summary at the end.
  std::optional<Frequency> progress_frequency = std::nullopt;
  CheckpointConfig checkpoint_config = {};
  CrossValidationConfig cv_config = {};
  TestConfig test_config = {};
  // Measures training time for frequencies in seconds; empty: the steady clock.
  ProgressClock clock = {};
};

// The period summaries a progress writer is given (Function::train's results, and the
// cross-validation averages). Every training update is recorded.
class SummaryCollector : public ProgressWriter {
 public:
  struct Entry {
    double loss = 0;               // average per sample; 0 for test summaries
    std::optional<double> metric;  // average per sample
    size_t samples = 0;
    size_t updates = 0;  // minibatches
  };
  SummaryCollector() : ProgressWriter(1, 0, std::nullopt, 0, std::nullopt, 0) {}

  std::vector<Entry> training_updates, training_summaries, test_summaries;

 protected:
  void on_write_training_update(const ProgressWindow& window) override;
  void on_write_test_update(const ProgressWindow&) override {}
  void on_write_training_summary(const ProgressSummary& summary) override;
  void on_write_test_summary(const ProgressSummary& summary) override;
};

// Evaluates data minibatch by minibatch until the source ends or max_samples are read, then
// closes the test period (progress writers print "Finished Evaluation"). The collector must be
// one of the evaluator's writers; its summary of the pass is returned. With workers (the
// evaluator's communicator) every worker evaluates its partition of each minibatch and the
// results are summed over them: every worker returns and reports the same numbers.
SummaryCollector::Entry run_evaluation(
    const BoundSource& data, const MinibatchSizeSchedule& mb_size, size_t max_samples,
    Evaluator& evaluator, const SummaryCollector& collector,
    const std::shared_ptr<distributed::Communicator>& workers = nullptr);

class TrainingSession {
 public:
  // ArgumentError for a missing trainer or source, a source that never ends without
  // max_samples or max_sweeps, a zero frequency, or CV/test data that do not fit the model.
  explicit TrainingSession(TrainingSessionConfig config);
  virtual ~TrainingSession() = default;

  // Restores (when configured) from the newest valid checkpoint by its recorded position,
  // trains, and tests. StateError when checkpoints exist but none can be restored; nothing is
  // written or deleted then. A checkpoint that failed while another one restored is moved aside
  // to `<file>.damaged` at once (a damaged final checkpoint is then written anew at the end),
  // and of this configuration's `.damaged` files the newest kKeptDamaged are kept.
  void train();

  static constexpr const char* kDamagedSuffix = ".damaged";
  static constexpr size_t kKeptDamaged = 3;

  const CheckpointPolicy& checkpoint_policy() const { return policy_; }

  // After each cross-validation (CNTK's OnCrossValidationEnd): its index (from 0), average
  // error, samples and minibatches; false stops training. By default the CV config's callback
  // (true without one); a subclass may do more.
  virtual bool on_cross_validation_end(size_t index, double average_error, size_t num_samples,
                                       size_t num_minibatches);

 private:
  enum class ActionKind { progress, cross_validation, checkpoint };
  struct Action {
    ActionKind kind;
    Frequency frequency;  // count SIZE_MAX: only at the end
    size_t current_index = 0;
    size_t units_when_last_called = 0;
  };

  // The workers that share cross-validation and test (those of the distributed learner), or
  // null.
  std::shared_ptr<distributed::Communicator> evaluation_workers() const;
  // Whether each worker reads its partition of the training data (distributed, after the
  // warm start).
  bool partitioned() const;
  // The next training minibatch (of mb_size samples over all workers): this worker's share of
  // it in distributed training.
  MinibatchMap next_training_minibatch(size_t mb_size);
  // Samples trained so far as the session counts them (schedules, limits, actions).
  size_t samples_seen() const;
  size_t units_seen(DataUnit unit) const;
  bool due(const Action& action) const;
  // Runs the action for the period it is due for; false stops training.
  bool run(Action& action);
  size_t elapsed_ms() const;
  void restore();
  // What a checkpoint's external state holds for the session, read and checked.
  struct SavedAction {
    int64_t kind, unit;
    uint64_t count, index, units;
  };
  struct SessionState {
    Dictionary source;
    uint64_t elapsed_ms;
    CheckpointPolicy policy;
    std::vector<SavedAction> actions;
    std::optional<std::pair<size_t, double>> last_cv;
    Dictionary user;
  };
  SessionState read_session_state(const Dictionary& external) const;
  bool save_checkpoint(size_t index);
  void write_checkpoint(const std::string& file, const Dictionary& policy_state);
  // Moves the checkpoints that failed to restore to `<file>.damaged` (the main worker) and
  // removes all but the newest kKeptDamaged such files of this configuration.
  void set_aside(const std::vector<std::string>& damaged) const;
  std::optional<double> monitored_value() const;
  // A cross-validation pass that leaves both readers where they were.
  SummaryCollector::Entry validate();
  bool cross_validate(size_t index);
  void test();

  TrainingSessionConfig config_;
  CheckpointPolicy policy_;
  BoundSource train_data_, cv_data_, test_data_;
  std::vector<Action> actions_;
  // Cross-validation reports to the trainer's writers and to a collector that reads its totals.
  std::shared_ptr<SummaryCollector> cv_collector_, test_collector_;
  std::unique_ptr<Evaluator> cv_evaluator_, test_evaluator_;
  // The last cross-validation's average error and the samples trained when it ran: a
  // checkpoint of the same step is ranked by it.
  std::optional<std::pair<size_t, double>> last_cv_;
  bool finishing_ = false;  // running the actions due for the last, partial period
  size_t restored_elapsed_ms_ = 0;
  std::chrono::nanoseconds start_{0};
};

TrainingSession training_session(TrainingSessionConfig config);

}  // namespace loom
