#include "loom/learners/momentum_sgd.h"

#include "loom/learners/velocity_learner.h"

namespace loom {

namespace {

// p -= v.
struct MomentumSGDRule {
  static constexpr const char* kName = "momentum_sgd";
  static constexpr bool kReportsMomentum = true;
  template <typename T>
  static T next(T p, T v, T /*beta*/, T /*step*/) {
    return p - v;
  }
};

}  // namespace

std::shared_ptr<Learner> momentum_sgd(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                      MomentumSchedule momentum, LearnerOptions options) {
  return std::make_shared<learners_detail::VelocityLearner<MomentumSGDRule>>(
      std::move(parameters), std::move(lr), std::move(momentum), std::move(options));
}

}  // namespace loom
