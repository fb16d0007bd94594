// RMSProp with CNTK's adaptive per-element step: avar = gamma avar + (1 - gamma) g^2; the step
// grows by inc while the gradient keeps its sign and shrinks by dec otherwise, within
// [min, max]; p -= lr g step / sqrt(avar), rescaled by the tensor's mean multiplier when
// need_ave_multiplier.
#pragma once

#include <memory>
#include <vector>

#include "loom/learners/learner.h"

namespace loom {

// 0 < gamma < 1, inc > 1, 0 < dec < 1, max > min > 0 (ArgumentError otherwise).
std::shared_ptr<Learner> rmsprop(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                 double gamma, double inc, double dec, double max, double min,
                                 bool need_ave_multiplier = kNeedAveMultiplier,
                                 LearnerOptions options = {});

}  // namespace loom
