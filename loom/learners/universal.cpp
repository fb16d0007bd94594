#include "loom/learners/universal.h"

#include <algorithm>
#include <unordered_set>

#include "loom/core/error.h"
#include "loom/core/trace.h"

namespace loom {

namespace {
const char* const kStateKey = "update_function_state";
}  // namespace

// CNTK's LearnerUniversal is a LearnerBase with LearningRateSchedule(1.0) and default options.
UniversalLearner::UniversalLearner(const ParameterUpdateFunction& update_function,
                                   std::vector<Parameter> parameters)
    : Learner(std::move(parameters), LearningRateSchedule(1.0), LearnerOptions{}) {
  LOOM_CHECK(update_function, ArgumentError, "universal: no update function given");
  for (const Parameter& p : this->parameters())
    gradients_.push_back(
        input_variable(p.shape(), {.dtype = p.dtype(), .name = "gradient", .dynamic_axes = {}}));
  update_function_ = update_function(this->parameters(), gradients_);
  LOOM_CHECK(update_function_.valid(), ArgumentError,
             "universal: the update function returned an empty Function");

  std::unordered_set<Variable> used;
  for (const Parameter& p : update_function_.parameters()) used.insert(p);
  for (const Parameter& p : this->parameters())
    LOOM_CHECK(used.count(p), ArgumentError,
               "universal: the update function does not use parameter ", p.describe());
  std::unordered_set<Variable> grads(gradients_.begin(), gradients_.end());
  std::unordered_set<Variable> read;
  for (const Variable& a : update_function_.arguments()) {
    LOOM_CHECK(grads.count(a), ArgumentError, "universal: the update graph depends on ",
               a.describe(), ", which is not one of the gradients; an update graph may only ",
               "read parameters, constants and the gradients it is given");
    read.insert(a);
  }
  for (size_t i = 0; i < gradients_.size(); ++i)
    if (!read.count(gradients_[i]))  // as CNTK: allowed, but most likely a mistake
      warn("the universal learner's update function does not use the gradient of parameter " +
           this->parameters()[i].describe());

  state_ = update_function_.constants();
  executor_ = std::make_unique<Executor>(update_function_.outputs());
}

bool UniversalLearner::update(std::unordered_map<Variable, NDArrayView>& gradients,
                              size_t training_sample_count, bool sweep_end) {
  if (!begin_update(training_sample_count)) return false;
  // Every gradient is checked before anything changes.
  for (size_t i = 0; i < parameters().size(); ++i) {
    const Parameter& p = parameters()[i];
    auto it = gradients.find(p);
    LOOM_CHECK(it != gradients.end(), ArgumentError,
               "UniversalLearner::update: no gradient for parameter ", p.describe(), "");
    const NDArrayView& g = it->second;
    LOOM_CHECK(g.dtype() == p.dtype() && g.shape() == p.shape(), ShapeError,
               "UniversalLearner::update: gradient of parameter ", p.describe(), " is ",
               to_string(g.dtype()), g.shape().to_string(), ", the parameter ",
               to_string(p.dtype()), p.shape().to_string());
  }
  // A Value of one sample that views the gradient's storage (no copy).
  for (size_t i = 0; i < parameters().size(); ++i) {
    const NDArrayView& g = gradients.find(parameters()[i])->second;
    arguments_.insert_or_assign(gradients_[i], Value(g.reshaped(g.shape().prepend(1)), false));
  }
  executor_->forward(arguments_, /*is_training=*/false);
  advance_counters(training_sample_count, sweep_end);
  return true;
}

Dictionary UniversalLearner::create_checkpoint() const {
  Dictionary d = Learner::create_checkpoint();
  DictionaryVector state;
  for (const Constant& c : state_) state.emplace_back(c.value().deep_clone());
  d[kStateKey] = std::move(state);
  return d;
}

void UniversalLearner::restore_from_checkpoint(const Dictionary& d) {
  LOOM_CHECK(d.contains(kStateKey), StateError, "not a universal learner's checkpoint: it has no '",
             kStateKey, "'");
  const auto& state = d.get<DictionaryVector>(kStateKey);
  LOOM_CHECK(state.size() == state_.size(), StateError, "universal learner checkpoint holds ",
             state.size(), " state tensors, the update graph has ", state_.size(),
             " constants: was it made by another update function?");
  for (size_t i = 0; i < state_.size(); ++i) {
    const auto& v = state[i].get<NDArrayView>();
    const NDArrayView& c = state_[i].value();
    LOOM_CHECK(v.dtype() == c.dtype() && v.shape() == c.shape(), StateError,
               "universal learner checkpoint: state tensor ", i, " is ", to_string(v.dtype()),
               v.shape().to_string(), ", the update graph's constant '", state_[i].name(), "' is ",
               to_string(c.dtype()), c.shape().to_string());
  }
  Learner::restore_from_checkpoint(d);
  for (size_t i = 0; i < state_.size(); ++i)
    state_[i].value().copy_from(state[i].get<NDArrayView>());
}

std::shared_ptr<Learner> universal(const ParameterUpdateFunction& update_function,
                                   std::vector<Parameter> parameters) {
  return std::make_shared<UniversalLearner>(update_function, std::move(parameters));
}

}  // namespace loom
