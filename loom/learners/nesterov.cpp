#include "loom/learners/nesterov.h"

#include "loom/learners/velocity_learner.h"

namespace loom {

namespace {

// p -= beta v + step, as two subtractions, rounded as CNTK's two ScaleAndAdd calls.
struct NesterovRule {
  static constexpr const char* kName = "nesterov";
  static constexpr bool kReportsMomentum = false;
  template <typename T>
  static T next(T p, T v, T beta, T step) {
    return (p - beta * v) - step;
  }
};

}  // namespace

std::shared_ptr<Learner> nesterov(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                  MomentumSchedule momentum, LearnerOptions options) {
  return std::make_shared<learners_detail::VelocityLearner<NesterovRule>>(
      std::move(parameters), std::move(lr), std::move(momentum), std::move(options));
}

}  // namespace loom
