#include "loom/learners/user_learner.h"

namespace loom {

UserLearner::UserLearner(std::vector<Parameter> parameters, LearningRateSchedule lr_schedule,
                         LearnerOptions options)
    : Learner(std::move(parameters), std::move(lr_schedule), std::move(options)) {}

}  // namespace loom
