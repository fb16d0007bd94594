// Distributed learners (CNTK's DistributedLearner): a learner that wraps a local learner and
// makes the workers of a Communicator train one model together. docs/distributed.md has the
// design and how the Trainer and training_session drive them.
//
//  - data_parallel_distributed_learner: every minibatch, the gradients, loss, metric and sample
//    counts are summed over the workers (all-reduce, started for each gradient as the backward
//    pass finishes it; or 1..8-bit quantized with error feedback, CNTK's 1-bit SGD) and the
//    local learner steps with the global gradient and sample count, so every worker takes the
//    same step.
//  - block_momentum_distributed_learner: every worker steps on its own; after each block of
//    samples (over all workers) the models are merged through CNTK's block-level momentum
//    update. Only the sample counts, loss and metric travel every minibatch.
// Before distributed_after samples (counted over all workers) a learner does not communicate:
// the workers train on the same full data and take identical steps (warm start).
//
// Every worker must call update() (and create_checkpoint()) the same number of times, in the
// same order: they are collectives. A worker with an empty minibatch still calls update().
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "loom/distributed/communicator.h"
#include "loom/learners/learner.h"

namespace loom::distributed {

// One worker's minibatch, as the Trainer hands it to a distributed learner (CNTK's
// MinibatchInfo). The loss and metric are sums over the minibatch's samples. update() replaces
// them and number_of_samples with the sums over all workers.
struct MinibatchInfo {
  bool at_end_of_data = false;
  bool at_end_of_sweep = false;
  size_t number_of_samples = 0;
  double training_loss = 0;
  double eval_criterion = 0;

  bool is_empty() const { return number_of_samples == 0; }
};

class DistributedLearner : public Learner {
 public:
  // The Trainer's call. The gradients (sums over this worker's minibatch, keyed by parameter)
  // may be replaced by the sums over all workers. An empty minibatch (number_of_samples 0)
  // takes part with zero gradients. Returns false when training should stop.
  virtual bool update(std::unordered_map<Variable, NDArrayView>& gradients,
                      MinibatchInfo& info) = 0;
  // Overlap with the backward pass (the Trainer's calls; a learner that does not overlap
  // ignores them). set_gradient_order: the order in which the backward pass finishes the
  // parameters' gradients, the same on every worker (Executor::gradient_order). gradient_ready:
  // one parameter's gradient of this worker's minibatch is final; the learner may start
  // summing it over the workers. It must stay unchanged until update(), which gets the same
  // gradients and completes the step.
  virtual void set_gradient_order(const std::vector<Variable>& order) { (void)order; }
  virtual void gradient_ready(const Variable& parameter, const NDArrayView& gradient) {
    (void)parameter;
    (void)gradient;
  }
  // Learner's interface: a minibatch without loss and metric.
  bool update(std::unordered_map<Variable, NDArrayView>& gradients, size_t training_sample_count,
              bool sweep_end = false) final;

  // How many times this worker has combined its gradients (data parallel) or model (block
  // momentum) with the other workers'; 0 for a single worker. Progress writers report them.
  size_t synchronizations() const { return synchronizations_; }
  // The factor by which the training session multiplies each worker's minibatch size (block
  // momentum: the number of workers).
  virtual size_t minibatch_size_scale_factor() const { return 1; }

  const std::shared_ptr<Learner>& learner() const { return learner_; }
  const std::shared_ptr<Communicator>& communicator() const { return communicator_; }
  // Samples (over all workers) after which the learner starts to communicate.
  size_t parallelization_after() const { return distributed_after_; }

  // The wrapped learner's.
  double learning_rate() const override { return learner_->learning_rate(); }
  void reset_learning_rate(const LearningRateSchedule& schedule,
                           ReferenceMinibatchSize reference) override;
  size_t total_number_of_samples_seen() const override;
  size_t total_number_of_minibatches_seen() const override;
  size_t total_number_of_sweeps_seen() const override;
  void set_progress_observer(ProgressObserver observer) override;
  void reset_smoothed_gradients() override { learner_->reset_smoothed_gradients(); }

 protected:
  DistributedLearner(std::shared_ptr<Communicator> communicator, std::shared_ptr<Learner> learner,
                     size_t distributed_after);

  // The first time it is called, checks that every worker's learner has parameters of the same
  // count, data types and shapes (ShapeError on every worker naming the first difference).
  void check_models_agree();
  // The parameters in the order in which workers exchange them (by uid, as CNTK).
  const std::vector<Parameter>& exchange_order() const { return ordered_; }
  // Counts one synchronization with other workers (none for a single worker).
  void count_synchronization() { synchronizations_ += communicator_->num_workers() > 1; }
  // {"distributed_learner": kind, "localLearners": [the learner's], "totalNumberOfSamplesSeen"}.
  Dictionary base_checkpoint(const char* kind) const;
  // Restores base_checkpoint; StateError when it is another kind's.
  void restore_base_checkpoint(const Dictionary& checkpoint, const char* kind);

  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<Learner> learner_;
  size_t distributed_after_;
  size_t sample_count_ = 0;  // samples over all workers (CNTK's m_sampleCount)

 private:
  std::vector<Parameter> ordered_;
  bool models_checked_ = false;
  size_t synchronizations_ = 0;
};

// CNTK's defaults: distributed from the first sample; no quantization.
inline constexpr size_t kDistributedAfter = 0;
inline constexpr int kNumQuantizationBits = 32;

// CNTK's data_parallel_distributed_learner. num_quantization_bits 32: exact float all-reduce;
// 1..8: quantized aggregation with error feedback (each worker owns a stripe of columns).
std::shared_ptr<DistributedLearner> data_parallel_distributed_learner(
    std::shared_ptr<Learner> learner, size_t distributed_after = kDistributedAfter,
    int num_quantization_bits = kNumQuantizationBits,
    std::shared_ptr<Communicator> communicator = mpi_communicator());

struct BlockMomentumOptions {
  // The block momentum as a time constant in samples; absent: the one that gives a momentum
  // of 1 - 1/N per block.
  std::optional<double> block_momentum_as_time_constant = std::nullopt;
  bool use_nesterov_momentum = true;
  bool reset_sgd_momentum_after_aggregation = true;
  double block_learning_rate = 1.0;
  size_t distributed_after = kDistributedAfter;
};

// CNTK's block_momentum_distributed_learner: block_size samples (over all workers) per block.
std::shared_ptr<DistributedLearner> block_momentum_distributed_learner(
    std::shared_ptr<Learner> learner, size_t block_size, BlockMomentumOptions options = {},
    std::shared_ptr<Communicator> communicator = mpi_communicator());

}  // namespace loom::distributed
