#include "loom/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "loom/distributed/distributed_learner.h"
#include "loom/graph/debugging.h"

namespace loom {

ValueMap values_of(const MinibatchMap& minibatch) {
  ValueMap values;
  for (auto& [var, data] : minibatch) values.emplace(var, data.data);
  return values;
}

namespace {
bool all_empty(const ValueMap& arguments) {
  return std::all_of(arguments.begin(), arguments.end(),
                     [](const auto& a) { return a.second.num_sequences() == 0; });
}

bool any_sweep_end(const MinibatchMap& minibatch) {
  for (auto& [var, data] : minibatch)
    if (data.sweep_end) return true;
  return false;
}

// The variable whose samples a minibatch's loss is averaged over, as CNTK's Trainer finds it:
// the loss where it has dynamic axes; for a loss without (a reduction over the batch axis,
// lambda_rank, forward_backward: one number for the minibatch), the first input with dynamic
// axes met depth first from the loss's function, inputs in order (lambda_rank's scores,
// forward_backward's graph). ArgumentError where there is none.
Variable training_sample_count_variable(const Variable& loss) {
  if (loss.has_batch_axis()) return loss;
  // Depth first with a stack (any depth), each function once.
  std::vector<std::pair<Function, size_t>> stack;  // a function and its next input
  std::unordered_set<const void*> seen;
  if (loss.is_output()) stack.emplace_back(loss.owner(), 0);
  while (!stack.empty()) {
    auto& [f, next] = stack.back();
    const std::vector<Variable> inputs = f.inputs();
    if (next == inputs.size()) {
      stack.pop_back();
      continue;
    }
    const Variable in = inputs[next++];
    if (in.has_batch_axis()) return in;
    if (in.is_output() && seen.insert(in.owner().impl().get()).second)
      stack.emplace_back(in.owner(), 0);
  }
  throw ArgumentError(detail::concat(
      "Trainer: the loss ", loss.describe(),
      " has no dynamic axes and no input with any, from which to count the minibatch's samples: "
      "compute it from the model's outputs or the minibatch's inputs"));
}

// The variable whose samples a metric is averaged over, as CNTK's Evaluator takes it: the metric
// where it has dynamic axes; for a metric without (ndcg_at_1, edit_distance_error), its
// function's first input (their predictions).
Variable test_sample_count_variable(const Variable& metric) {
  if (metric.has_batch_axis() || !metric.is_output()) return metric;
  const Function owner = metric.owner();
  return owner.inputs().empty() ? metric : owner.inputs()[0];
}

std::pair<Variable, Variable> criterion_outputs(const Function& criterion) {
  auto outs = criterion.outputs();
  LOOM_CHECK(outs.size() == 1 || outs.size() == 2, ArgumentError, "Trainer: the criterion ",
             criterion.to_string(), " must have one output (loss) or two (loss, metric)");
  return {outs[0], outs.size() == 2 ? outs[1] : Variable()};
}
}  // namespace

Trainer::Trainer(const Function& model, const Function& criterion,
                 std::vector<std::shared_ptr<Learner>> learners, ProgressWriters writers,
                 ExecutorOptions executor_options)
    : Trainer(model, criterion_outputs(criterion), std::move(learners), std::move(writers),
              executor_options) {}

Trainer::Trainer(const Function& model, const Variable& loss,
                 std::vector<std::shared_ptr<Learner>> learners, ProgressWriters writers,
                 ExecutorOptions executor_options)
    : Trainer(model, std::pair<Variable, Variable>{loss, Variable()}, std::move(learners),
              std::move(writers), executor_options) {}

Trainer::Trainer(const Function& model, const std::pair<Variable, Variable>& loss_and_metric,
                 std::vector<std::shared_ptr<Learner>> learners, ProgressWriters writers,
                 ExecutorOptions executor_options)
    : model_(model),
      loss_(loss_and_metric.first),
      metric_(loss_and_metric.second),
      learners_(std::move(learners)),
      writers_(std::move(writers)) {
  LOOM_CHECK(loss_.valid(), ArgumentError, "Trainer: no loss given");
  // The model is what checkpoints save for deployment: an uncalled layer (Dense(2) rather
  // than Dense(2)(x)) would save a graph that nothing can evaluate. No model (CNTK's None)
  // is allowed: checkpoints then hold the criterion alone.
  const std::vector<Variable> unbound =
      model_.valid() ? model_.placeholders() : std::vector<Variable>{};
  LOOM_CHECK(unbound.empty(), ArgumentError, "Trainer: the model ", model_.to_string(),
             " has an unbound placeholder '", unbound.empty() ? "" : unbound[0].name(),
             "'; give the model applied to its inputs (e.g. model(x), the function the criterion "
             "was built from), not the layer itself");
  LOOM_CHECK(!learners_.empty(), ArgumentError, "Trainer: no learner given");
  for (auto& w : writers_) LOOM_CHECK(w, ArgumentError, "Trainer: a progress writer is null");
  // Each parameter belongs to at most one learner; parameters of none stay fixed.
  std::unordered_set<Variable> covered;
  std::vector<Variable> wrt;
  for (auto& learner : learners_) {
    LOOM_CHECK(learner, ArgumentError, "Trainer: a learner is null");
    if (auto d = std::dynamic_pointer_cast<distributed::DistributedLearner>(learner)) {
      LOOM_CHECK(learners_.size() == 1, ArgumentError,
                 "Trainer: a distributed learner must be the trainer's only learner (got ",
                 learners_.size(), " learners)");
      distributed_ = std::move(d);
    }
    for (const Parameter& p : learner->parameters()) {
      LOOM_CHECK(covered.insert(p).second, ArgumentError, "Trainer: parameter ", p.describe(),
                 " is given to more than one learner");
      wrt.push_back(p);
    }
    learner->set_progress_observer([this](const std::string& key, double value) {
      for (auto& w : writers_) w->write(key, value);
    });
  }
  wrt_ = std::move(wrt);
  executor_options_ = executor_options;
  train_outputs_ = {loss_};
  if (metric_.valid()) train_outputs_.push_back(metric_);
  // A loss without dynamic axes: the samples are counted on another variable, computed too.
  counted_ = training_sample_count_variable(loss_);
  if (std::find(train_outputs_.begin(), train_outputs_.end(), counted_) == train_outputs_.end())
    train_outputs_.push_back(counted_);
  make_training_executor();
}

void Trainer::make_training_executor() {
  train_exec_ = std::make_unique<Executor>(train_outputs_, wrt_, executor_options_);
  if (distributed_) distributed_->set_gradient_order(train_exec_->gradient_order());
  learner_gradients_.clear();
  for (auto& learner : learners_) {
    std::unordered_map<Variable, NDArrayView> grads;
    for (const Parameter& p : learner->parameters())
      grads.emplace(p, train_exec_->parameter_gradient(p));
    learner_gradients_.push_back(std::move(grads));
  }
}

bool Trainer::train_minibatch(const ValueMap& arguments, const std::vector<Variable>& outputs,
                              ValueMap& output_values, bool is_sweep_end) {
  // The executor computes the outputs asked for too (made anew when one is new to it: a
  // shared buffer may hold another value by the end of backward otherwise).
  bool fresh = false;
  for (const Variable& o : outputs)
    if (std::find(train_outputs_.begin(), train_outputs_.end(), o) == train_outputs_.end()) {
      train_outputs_.push_back(o);
      fresh = true;
    }
  if (fresh) make_training_executor();
  const bool updated = train_minibatch(arguments, is_sweep_end);
  output_values.clear();
  if (!all_empty(arguments))
    for (const Variable& o : outputs)
      output_values.insert_or_assign(o, train_exec_->output_value(o));
  return updated;
}

void Trainer::set_compute_precision(ComputePrecision p) {
  detail::note_unsupported_bf16(p, "Trainer::set_compute_precision");
  precision_ = p;
}

bool Trainer::train_minibatch(const ValueMap& arguments, bool is_sweep_end) {
  return train(
      [&](const Variable& v) {
        auto it = arguments.find(v);
        return it == arguments.end() ? nullptr : &it->second;
      },
      all_empty(arguments), arguments.empty(), is_sweep_end);
}

bool Trainer::train_minibatch(const MinibatchMap& minibatch) {
  const bool empty = std::all_of(minibatch.begin(), minibatch.end(),
                                 [](const auto& a) { return a.second.data.num_sequences() == 0; });
  return train(
      [&](const Variable& v) {
        auto it = minibatch.find(v);
        return it == minibatch.end() ? nullptr : &it->second.data;
      },
      empty, minibatch.empty(), any_sweep_end(minibatch));
}

bool Trainer::train(const Executor::ArgumentLookup& argument, bool empty, bool no_arguments,
                    bool is_sweep_end) {
  const ComputePrecisionScope precision(compute_precision());
  if (empty && !distributed_) return false;
  const ProfileScope iteration(ProfilerEvent::Minibatch);
  size_t samples = 0;
  double loss_sum = 0, metric_sum = 0;
  if (!empty) {
    const ProfileScope forward_backward(ProfilerEvent::ForwardBackward);
    train_exec_->forward(argument, /*is_training=*/true);
    // A distributed learner starts summing each gradient as soon as backward finishes it.
    Executor::GradientReady ready;
    if (distributed_)
      ready = [this](const Variable& p, const NDArrayView& g) {
        distributed_->gradient_ready(p, g);
      };
    train_exec_->backward(loss_, nullptr, ready);
    samples = train_exec_->sample_count(counted_);
    loss_sum = train_exec_->sum(loss_);
    metric_sum = metric_.valid() ? train_exec_->sum(metric_) : 0;
  }
  bool go_on = false;
  {
    const ProfileScope update(ProfilerEvent::WeightUpdate);
    if (distributed_) {
      // A collective: the counts, loss and metric become the sums over all workers.
      distributed::MinibatchInfo info{no_arguments, is_sweep_end, samples, loss_sum, metric_sum};
      const size_t synchronizations = distributed_->synchronizations();
      go_on = distributed_->update(learner_gradients_[0], info);
      samples = info.number_of_samples;
      loss_sum = info.training_loss;
      metric_sum = info.eval_criterion;
      // CNTK reports each synchronization with the samples since the previous one.
      if (distributed_->synchronizations() != synchronizations) {
        for (auto& w : writers_)
          w->update_distributed_sync(total_samples_ + samples - synced_samples_);
        synced_samples_ = total_samples_ + samples;
      }
      if (samples == 0) return go_on;
    } else {
      for (size_t i = 0; i < learners_.size(); ++i)
        go_on = learners_[i]->update(learner_gradients_[i], samples, is_sweep_end) || go_on;
    }
  }
  previous_samples_ = samples;
  previous_loss_sum_ = loss_sum;
  previous_metric_sum_ = metric_sum;
  total_samples_ += samples;
  for (auto& w : writers_)
    w->update_training(
        samples, previous_loss_sum_,
        metric_.valid() ? std::optional<double>(previous_metric_sum_) : std::nullopt);
  return go_on;
}

double Trainer::test_minibatch(const ValueMap& arguments, bool distributed) {
  const ComputePrecisionScope precision(compute_precision());
  if (!evaluator_)
    evaluator_ = std::make_unique<Evaluator>(
        metric_.valid() ? metric_ : loss_, writers_,
        distributed_ ? distributed_->communicator() : std::shared_ptr<distributed::Communicator>());
  return evaluator_->test_minibatch(arguments, distributed);
}

double Trainer::test_minibatch(const MinibatchMap& minibatch, bool distributed) {
  return test_minibatch(values_of(minibatch), distributed);
}

double Trainer::previous_minibatch_loss_average() const {
  LOOM_CHECK(previous_samples_ > 0, StateError, "no minibatch has been trained yet");
  return previous_loss_sum_ / double(previous_samples_);
}

double Trainer::previous_minibatch_evaluation_average() const {
  LOOM_CHECK(previous_samples_ > 0, StateError, "no minibatch has been trained yet");
  LOOM_CHECK(metric_.valid(), StateError, "the trainer has no evaluation function");
  return previous_metric_sum_ / double(previous_samples_);
}

bool Trainer::is_main_worker() const {
  return !distributed_ || distributed_->communicator()->is_main();
}

void Trainer::summarize_training_progress() {
  for (auto& w : writers_) w->write_training_summary();
}

void Trainer::summarize_test_progress() {
  for (auto& w : writers_) w->write_test_summary();
}

Evaluator::Evaluator(const Variable& metric, ProgressWriters writers,
                     std::shared_ptr<distributed::Communicator> communicator)
    : metric_(metric), writers_(std::move(writers)), communicator_(std::move(communicator)) {
  LOOM_CHECK(metric_.valid(), ArgumentError, "Evaluator: no metric given");
}

double Evaluator::test_minibatch(const ValueMap& arguments, bool distributed) {
  double sums[2] = {0, 0};  // the metric's sum, the samples
  // A worker's share of a distributed evaluation may hold no sequence.
  if (!all_empty(arguments)) {
    const Variable counted = test_sample_count_variable(metric_);
    if (!exec_)
      exec_ =
          std::make_unique<Executor>(counted == metric_ ? std::vector<Variable>{metric_}
                                                        : std::vector<Variable>{metric_, counted});
    exec_->forward(arguments, /*is_training=*/false);
    sums[0] = exec_->sum(metric_);
    sums[1] = double(exec_->sample_count(counted));
  }
  if (distributed) {
    if (!communicator_) communicator_ = distributed::mpi_communicator();
    communicator_->all_reduce_sum(sums);
  }
  previous_samples_ = size_t(std::llround(sums[1]));
  for (auto& w : writers_) w->update_test(previous_samples_, sums[0]);
  return previous_samples_ ? sums[0] / sums[1] : 0.0;
}

double Evaluator::test_minibatch(const MinibatchMap& minibatch, bool distributed) {
  return test_minibatch(values_of(minibatch), distributed);
}

void Evaluator::summarize_test_progress() {
  for (auto& w : writers_) w->write_test_summary();
}

}  // namespace loom
