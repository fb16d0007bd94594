// FSAdaGrad: RMSProp-like normalization by a smoothed g^2 (variance momentum), scaled so the
// normalized gradient keeps the magnitude of the smoothed sample count, then momentum.
#pragma once

#include <memory>
#include <vector>

#include "loom/learners/learner.h"

namespace loom {

std::shared_ptr<Learner> fsadagrad(
    std::vector<Parameter> parameters, LearningRateSchedule lr, MomentumSchedule momentum,
    MomentumSchedule variance_momentum = default_variance_momentum_schedule(),
    LearnerOptions options = {});

}  // namespace loom
