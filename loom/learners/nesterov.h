// Nesterov's accelerated momentum: v = beta v + ugf lr g; p -= beta v + ugf lr g.
#pragma once

#include <memory>
#include <vector>

#include "loom/learners/learner.h"

namespace loom {

std::shared_ptr<Learner> nesterov(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                  MomentumSchedule momentum, LearnerOptions options = {});

}  // namespace loom
