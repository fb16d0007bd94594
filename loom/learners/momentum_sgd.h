// SGD with momentum: v = beta v + ugf lr g; p -= v (ugf = 1 - beta with unit gain, else 1).
#pragma once

#include <memory>
#include <vector>

#include "loom/learners/learner.h"

namespace loom {

std::shared_ptr<Learner> momentum_sgd(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                      MomentumSchedule momentum, LearnerOptions options = {});

}  // namespace loom
