#include "loom/learners/nesterov.h"

#include "loom/learners/parallel.h"

namespace loom {

namespace {

class NesterovLearner final : public MomentumLearnerBase {
 public:
  NesterovLearner(std::vector<Parameter> parameters, LearningRateSchedule lr,
                  MomentumSchedule momentum, LearnerOptions options)
      : MomentumLearnerBase(std::move(parameters), std::move(lr), std::move(momentum),
                            std::move(options), 1) {}

 private:
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  void rule(const RuleStep<T>& s) const {
    const T beta = momentum<T>();
    const T scale = unit_gain_factor<T>() * T(s.learning_rate);
    T* v = s.state_block(0);
    learners_detail::parallel_for(s.n, [&](size_t i) {
      const T step = scale * s.grad(i);
      v[i] = step + beta * v[i];
      // Two subtractions, rounded as CNTK's two ScaleAndAdd calls.
      s.p[i] = s.finish((s.p[i] - beta * v[i]) - step);
    });
  }
};

}  // namespace

std::shared_ptr<Learner> nesterov(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                  MomentumSchedule momentum, LearnerOptions options) {
  return std::make_shared<NesterovLearner>(std::move(parameters), std::move(lr),
                                           std::move(momentum), std::move(options));
}

}  // namespace loom
