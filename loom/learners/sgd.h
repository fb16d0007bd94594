// Plain stochastic gradient descent: p -= lr * g.
#pragma once

#include <memory>
#include <vector>

#include "loom/learners/learner.h"

namespace loom {

std::shared_ptr<Learner> sgd(std::vector<Parameter> parameters, LearningRateSchedule lr,
                             LearnerOptions options = {});

}  // namespace loom
