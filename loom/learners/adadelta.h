// AdaDelta: a = rho a + (1 - rho) g^2; d = -sqrt(x + eps) / sqrt(a + eps) g;
// x = rho x + (1 - rho) d^2; p += lr d (lr only scales the applied step).
#pragma once

#include <memory>
#include <vector>

#include "loom/learners/learner.h"

namespace loom {

std::shared_ptr<Learner> adadelta(
    std::vector<Parameter> parameters,
    LearningRateSchedule lr = learning_parameter_schedule_per_sample(1), double rho = 0.95,
    double epsilon = 1e-8, LearnerOptions options = {});

}  // namespace loom
