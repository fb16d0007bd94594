// AdaGrad: a += g^2; p -= lr g / sqrt(a), rescaled by the tensor's mean of 1/sqrt(a) when
// need_ave_multiplier (CNTK's default), which keeps the overall step size at lr.
#pragma once

#include <memory>
#include <vector>

#include "loom/learners/learner.h"

namespace loom {

std::shared_ptr<Learner> adagrad(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                 bool need_ave_multiplier = kNeedAveMultiplier,
                                 LearnerOptions options = {});

}  // namespace loom
