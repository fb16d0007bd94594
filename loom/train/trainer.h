// Trainer: drives one minibatch at a time through forward, backward and the learners, and
// reports to progress writers. The loss of a minibatch is the SUM of the per-sample loss;
// that sum's gradient is what the learners receive (DESIGN.md §4).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "loom/core/precision.h"
#include "loom/graph/executor.h"
#include "loom/io/minibatch_source.h"
#include "loom/learners/learner.h"
#include "loom/train/progress_writer.h"

namespace loom {

namespace distributed {
class Communicator;
class DistributedLearner;
}  // namespace distributed

// A minibatch keyed by the variables it feeds (next_minibatch with an input map).
using MinibatchMap = Minibatch<Variable>;
using ProgressWriters = std::vector<std::shared_ptr<ProgressWriter>>;

// Values of a minibatch read from a source, for train_minibatch/test_minibatch/eval.
ValueMap values_of(const MinibatchMap& minibatch);

// Evaluator: the metric of a model over test minibatches, reported to progress writers.
class Evaluator {
 public:
  // communicator: the workers a distributed test_minibatch sums over; null: all of the
  // process's (distributed::mpi_communicator()), as CNTK's.
  explicit Evaluator(const Variable& metric, ProgressWriters progress_writers = {},
                     std::shared_ptr<distributed::Communicator> communicator = nullptr);
  // The metric's average over the minibatch's samples. distributed (CNTK's): every worker
  // calls it with its share of a minibatch (possibly without a sequence) and the metric's
  // sum and the sample count are summed over the workers (a collective), so every worker gets
  // and reports the same numbers.
  double test_minibatch(const ValueMap& arguments, bool distributed = false);
  double test_minibatch(const MinibatchMap& minibatch, bool distributed = false);
  // The samples of the last test_minibatch (over all workers when distributed).
  size_t previous_minibatch_sample_count() const { return previous_samples_; }
  void summarize_test_progress();
  const Variable& evaluation_function() const { return metric_; }

 private:
  Variable metric_;
  ProgressWriters writers_;
  std::shared_ptr<distributed::Communicator> communicator_;
  std::unique_ptr<Executor> exec_;
  size_t previous_samples_ = 0;
};

class Trainer {
 public:
  // criterion: a function whose outputs are (loss) or (loss, metric), e.g. combine({loss, metric}).
  // model: the function checkpoints deploy (load_model reads it out of them), applied to its
  // inputs (z = layer(x), not the layer: ArgumentError for unbound placeholders); or {} for
  // none, as CNTK's Trainer(None, criterion, ...). executor_options: how the training
  // executor runs (share_buffers off: every value keeps its own buffer, to measure or debug).
  Trainer(const Function& model, const Function& criterion,
          std::vector<std::shared_ptr<Learner>> learners, ProgressWriters progress_writers = {},
          ExecutorOptions executor_options = {});
  Trainer(const Function& model, const std::pair<Variable, Variable>& loss_and_metric,
          std::vector<std::shared_ptr<Learner>> learners, ProgressWriters progress_writers = {},
          ExecutorOptions executor_options = {});
  Trainer(const Function& model, const Variable& loss,
          std::vector<std::shared_ptr<Learner>> learners, ProgressWriters progress_writers = {},
          ExecutorOptions executor_options = {});

  // One update from a minibatch. Returns false when training should stop: the minibatch is
  // empty, or every learner's learning rate has reached 0. With a distributed learner (it must
  // be the trainer's only learner) every worker calls this the same number of times: a worker
  // whose share of the data is empty passes an empty share (or no arguments once its source
  // has ended) and still takes the global step; the counts, loss and metric the trainer
  // reports are then the sums over all workers (data parallel), and training stops when every
  // worker's data has ended.
  bool train_minibatch(const ValueMap& arguments, bool is_sweep_end = false);
  bool train_minibatch(const MinibatchMap& minibatch);
  // The same, and the values of outputs (any variables of the model or criterion) that this
  // step computed, in output_values (CNTK's train_minibatch(arguments, outputs)).
  bool train_minibatch(const ValueMap& arguments, const std::vector<Variable>& outputs,
                       ValueMap& output_values, bool is_sweep_end = false);
  // The metric's average over the minibatch's samples (the loss's when there is no metric).
  // distributed: summed over the workers, as Evaluator's (of the distributed learner's
  // communicator, if there is one).
  double test_minibatch(const ValueMap& arguments, bool distributed = false);
  double test_minibatch(const MinibatchMap& minibatch, bool distributed = false);

  // Saves everything needed to continue training bit for bit: the training graph with every
  // parameter and constant (batch-norm statistics), each learner's state, the trainer's
  // counters, the progress writers' running sums, the random generators of random ops (dropout)
  // and the caller's external_state (e.g. a MinibatchSource's get_checkpoint_state()). The
  // write is atomic: a crash leaves the previous file or the new one, never a mix.
  // A checkpoint file is also a model file: load_model reads its graph. With a distributed
  // learner every worker calls it (the learner's state is gathered) and the main worker
  // writes the file; the others return once it is written.
  void save_checkpoint(const std::string& path, const Dictionary& external_state = {}) const;
  // Restores what save_checkpoint saved and returns its external_state. The whole file is
  // checked before anything changes: a damaged or foreign file (DataError), an unreadable one
  // (IOError) or one saved from a different graph (StateError naming the first mismatch) leaves
  // the trainer as it was. check_external, when given, is one more of those checks: it sees
  // the external state before anything changes and refuses it by throwing.
  Dictionary restore_from_checkpoint(
      const std::string& path, const std::function<void(const Dictionary&)>& check_external = {});

  // The training position a checkpoint file records (its total samples seen), read without
  // restoring it; DataError or IOError as restore_from_checkpoint for a damaged or unreadable
  // file.
  static size_t checkpoint_samples(const std::string& path);

  // The precision the trainer's matrix products and convolutions compute in, in
  // train_minibatch and test_minibatch: its own once set (checkpoints save and restore it),
  // else the process-wide get_compute_precision(). BFloat16 on a CPU without bf16 support is
  // kept but computes in float32, with a message (set_compute_precision in precision.h).
  void set_compute_precision(ComputePrecision p);
  ComputePrecision compute_precision() const {
    return precision_.value_or(get_compute_precision());
  }

  size_t total_number_of_samples_seen() const { return total_samples_; }
  double previous_minibatch_loss_average() const;
  double previous_minibatch_evaluation_average() const;
  size_t previous_minibatch_sample_count() const { return previous_samples_; }

  void summarize_training_progress();
  void summarize_test_progress();

  const Function& model() const { return model_; }
  const Variable& loss_function() const { return loss_; }
  const Variable& evaluation_function() const { return metric_; }
  const std::vector<std::shared_ptr<Learner>>& parameter_learners() const { return learners_; }
  const ProgressWriters& progress_writers() const { return writers_; }
  // The distributed learner, if the trainer has one.
  const std::shared_ptr<distributed::DistributedLearner>& distributed_learner() const {
    return distributed_;
  }
  // Whether this process writes files (checkpoints): always, but in distributed training only
  // the main worker.
  bool is_main_worker() const;

 private:
  // The function a checkpoint saves: the model's outputs, the loss and the metric.
  Function training_graph() const;
  // One training step on the arguments the lookup finds; empty: no input holds a sequence;
  // no_arguments: no input was given at all.
  bool train(const Executor::ArgumentLookup& argument, bool empty, bool no_arguments,
             bool is_sweep_end);
  // (Re)makes train_exec_ for train_outputs_ and points the learners at its gradients.
  void make_training_executor();

  Function model_;
  Variable loss_, metric_;  // metric_ invalid when there is none
  Variable counted_;        // whose samples the loss is averaged over (CNTK's rule)
  std::vector<std::shared_ptr<Learner>> learners_;
  std::shared_ptr<distributed::DistributedLearner> distributed_;
  ProgressWriters writers_;
  std::unique_ptr<Executor> train_exec_;
  std::vector<Variable> train_outputs_;  // loss, metric, then what train_minibatch was asked for
  std::vector<Variable> wrt_;
  ExecutorOptions executor_options_;
  std::unique_ptr<Evaluator> evaluator_;  // test_minibatch, made at first use
  std::vector<std::unordered_map<Variable, NDArrayView>> learner_gradients_;
  size_t total_samples_ = 0, previous_samples_ = 0;
  size_t synced_samples_ = 0;  // total_samples_ at the last distributed synchronization
  double previous_loss_sum_ = 0, previous_metric_sum_ = 0;
  std::optional<ComputePrecision> precision_;  // none: the process-wide setting
};

}  // namespace loom
