#include "loom/learners/fsadagrad.h"

#include <cmath>

#include "loom/learners/parallel.h"

namespace loom {

namespace {

class FSAdaGradLearner final : public VarianceMomentumLearnerBase {
 public:
  FSAdaGradLearner(std::vector<Parameter> parameters, LearningRateSchedule lr,
                   MomentumSchedule momentum, MomentumSchedule variance_momentum,
                   LearnerOptions options)
      : VarianceMomentumLearnerBase(std::move(parameters), std::move(lr), std::move(momentum),
                                    std::move(variance_momentum), std::move(options)) {
    check_variance_momentum("fsadagrad");
  }

 private:
  void on_minibatch(size_t m) override {
    VarianceMomentumLearnerBase::on_minibatch(m);
    const double beta2 = variance_momentum<double>();
    // The number of samples smoothed into the g^2 averages; its root rescales the
    // normalized gradient back to a sum-of-M magnitude.
    smoothed_count_ = beta2 * smoothed_count_ + (1.0 - beta2) * double(m);
    multiplier_ = std::sqrt(smoothed_count_);
  }
  const char* kind() const override { return "fsadagrad"; }
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  void rule(const RuleStep<T>& s) const {
    const Averages<T> a = averages(s);
    const T multiplier = T(multiplier_), lr = T(s.learning_rate);
    learners_detail::parallel_for(s.n, [&](size_t i) {
      T g = s.g[i];
      const T v = a.variance(i, g);
      if (v != T(0)) {
        const T w = multiplier * (T(1) / std::sqrt(v));
        g *= w > T(10) ? T(10) : w;
      }
      if (a.beta1 > T(0)) g = a.momentum(i, g);
      s.p[i] = s.p[i] - g * lr;
    });
  }

  double multiplier_ = 0;
};

}  // namespace

std::shared_ptr<Learner> fsadagrad(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                   MomentumSchedule momentum, MomentumSchedule variance_momentum,
                                   LearnerOptions options) {
  return std::make_shared<FSAdaGradLearner>(std::move(parameters), std::move(lr),
                                            std::move(momentum), std::move(variance_momentum),
                                            std::move(options));
}

}  // namespace loom
