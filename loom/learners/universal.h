// The universal learner (CNTK's C.universal): a learner written as an expression. The user's
// update function receives the parameters and one gradient variable per parameter and returns
// a graph, usually combine() of assign() ops, whose evaluation writes the new parameter values
// (and any state it keeps in constants). Each update binds the minibatch's gradients to the
// gradient variables and evaluates that graph once.
//
// As in CNTK: no schedules and no LearnerOptions. learning_rate() reports CNTK's fixed
// LearningRateSchedule(1.0) per minibatch (a ProgressPrinter prints "Learning rate per
// minibatch: 1.0"), and reset_learning_rate to 0 stops the learner like any other. The
// gradient handed to the graph is the sum over the minibatch (DESIGN.md §4), as given;
// training_sample_count is not visible to the graph. Sparse gradients are densified.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "loom/graph/executor.h"
#include "loom/graph/function.h"
#include "loom/learners/learner.h"

namespace loom {

// Builds the update graph from the parameters and their gradients. The gradients are input
// variables of the parameters' shapes and data types without dynamic axes (plain tensors),
// named "gradient", in parameter order.
using ParameterUpdateFunction = std::function<Function(const std::vector<Parameter>& parameters,
                                                       const std::vector<Variable>& gradients)>;

class UniversalLearner : public Learner {
 public:
  // ArgumentError when the update graph does not use every parameter, or depends on an input
  // that is not one of the gradients.
  UniversalLearner(const ParameterUpdateFunction& update_function,
                   std::vector<Parameter> parameters);

  bool update(std::unordered_map<Variable, NDArrayView>& gradients, size_t training_sample_count,
              bool sweep_end = false) override;

  // Learner's counters and schedule, plus "update_function_state": a copy of every constant
  // of the update graph (its state, e.g. my_rmsprop's accumulators), in the order of
  // update_function().constants(). Restoring needs a learner built by the same update
  // function over parameters of the same shapes. A later model-file issue stores these
  // constants with the graph; until then the learner's checkpoint carries their values.
  Dictionary create_checkpoint() const override;
  void restore_from_checkpoint(const Dictionary& checkpoint) override;

  // The graph each update evaluates, and the gradient variables it reads (parameter order).
  const Function& update_function() const { return update_function_; }
  const std::vector<Variable>& gradient_variables() const { return gradients_; }

 private:
  std::vector<Variable> gradients_;
  Function update_function_;
  std::vector<Constant> state_;  // update_function_.constants()
  std::unique_ptr<Executor> executor_;
  ValueMap arguments_;  // gradient variable -> the current gradient, rebound each update
};

// CNTK's universal(update_func, parameters).
std::shared_ptr<Learner> universal(const ParameterUpdateFunction& update_function,
                                   std::vector<Parameter> parameters);

}  // namespace loom
