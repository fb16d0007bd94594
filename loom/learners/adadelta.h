// AdaDelta: a = rho a + (1 - rho) g^2; d = -sqrt(x + eps) / sqrt(a + eps) g;
// x = rho x + (1 - rho) d^2; p += lr d (lr only scales the applied step).
#pragma once

#include <memory>
#include <vector>

#include "loom/learners/learner.h"

namespace loom {

// CNTK's defaults: the learning rate (per sample), rho and epsilon.
inline constexpr double kAdaDeltaLearningRate = 1;
inline constexpr double kAdaDeltaRho = 0.95;
inline constexpr double kAdaDeltaEpsilon = 1e-8;
std::shared_ptr<Learner> adadelta(
    std::vector<Parameter> parameters,
    LearningRateSchedule lr = learning_parameter_schedule_per_sample(kAdaDeltaLearningRate),
    double rho = kAdaDeltaRho, double epsilon = kAdaDeltaEpsilon, LearnerOptions options = {});

}  // namespace loom
