#include "loom/learners/momentum_sgd.h"

#include "loom/learners/parallel.h"

namespace loom {

namespace {

class MomentumSGDLearner final : public MomentumLearnerBase {
 public:
  MomentumSGDLearner(std::vector<Parameter> parameters, LearningRateSchedule lr,
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
      v[i] = scale * s.grad(i) + beta * v[i];
      s.p[i] = s.finish(s.p[i] - v[i]);
    });
  }
};

}  // namespace

std::shared_ptr<Learner> momentum_sgd(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                      MomentumSchedule momentum, LearnerOptions options) {
  return std::make_shared<MomentumSGDLearner>(std::move(parameters), std::move(lr),
                                              std::move(momentum), std::move(options));
}

}  // namespace loom
