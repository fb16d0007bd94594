// Adam (and Adamax): m = beta1 m + ugf g; v = beta2 v + (1 - beta2) g^2 (Adamax: u = max(beta2 u,
// |g|)); p -= lr b m / (sqrt(v) + epsilon) with the bias correction b of step t.
#pragma once

#include <memory>
#include <vector>

#include "loom/learners/learner.h"

namespace loom {

inline constexpr double kAdamEpsilon = 1e-8;  // CNTK's default
std::shared_ptr<Learner> adam(
    std::vector<Parameter> parameters, LearningRateSchedule lr, MomentumSchedule momentum,
    MomentumSchedule variance_momentum = default_variance_momentum_schedule(),
    double epsilon = kAdamEpsilon, bool adamax = false, LearnerOptions options = {});

}  // namespace loom
