// UserLearner (CNTK's cntk.UserLearner): the base of a learner written as a C++ class. Derive
// from it, pass the parameters and a learning-rate schedule to its constructor, and override
// update(); a Trainer then calls update() once per minibatch exactly as it calls a built-in
// learner's, with the gradients of this learner's parameters (sums over the minibatch) keyed
// by parameter.
//
//   class MySgd : public UserLearner {
//    public:
//     MySgd(std::vector<Parameter> p, LearningRateSchedule lr) : UserLearner(std::move(p), lr) {}
//     bool update(std::unordered_map<Variable, NDArrayView>& gradient_values,
//                 size_t training_sample_count, bool sweep_end) override { ...; return true; }
//   };
//
// What the base class does for you, and what it leaves to you (as CNTK's UserLearner):
// parameters(), learning_rate(), reset_learning_rate() and the checkpoint of the counters
// and schedule work as for any learner. update() is entirely yours: the base applies no
// schedule, no LearnerOptions, reports nothing to progress writers and advances no counter
// (the Trainer counts samples itself). A user learner that wants the built-in behaviour
// calls begin_update() first (reports "Learning rate per ..." and says whether the rate is
// 0) and advance_counters() last. Return false to tell the Trainer that this learner is done.
// Override create_checkpoint()/restore_from_checkpoint() (calling the base's) to save state
// of your own.
#pragma once

#include <vector>

#include "loom/learners/learner.h"

namespace loom {

class UserLearner : public Learner {
 public:
  bool update(std::unordered_map<Variable, NDArrayView>& gradient_values,
              size_t training_sample_count, bool sweep_end) override = 0;

 protected:
  // ArgumentError as for every learner: no parameters, a parameter twice, a parameter whose
  // shape is not inferred yet, a negative or non-finite rate.
  UserLearner(std::vector<Parameter> parameters, LearningRateSchedule lr_schedule,
              LearnerOptions options = {});

  using Learner::advance_counters;
  using Learner::begin_update;
  using Learner::effective_learning_rate;
};

}  // namespace loom
