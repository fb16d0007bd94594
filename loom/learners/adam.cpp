#include "loom/learners/adam.h"

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"
#include "loom/learners/parallel.h"

namespace loom {

namespace {

class AdamLearner final : public VarianceMomentumLearnerBase {
 public:
  AdamLearner(std::vector<Parameter> parameters, LearningRateSchedule lr, MomentumSchedule momentum,
              MomentumSchedule variance_momentum, double epsilon, bool adamax,
              LearnerOptions options)
      : VarianceMomentumLearnerBase(std::move(parameters), std::move(lr), std::move(momentum),
                                    std::move(variance_momentum), std::move(options)),
        epsilon_(epsilon),
        adamax_(adamax) {
    LOOM_CHECK(epsilon >= 0, ArgumentError, "adam: epsilon must be >= 0, got ", epsilon);
    check_variance_momentum("adam");
  }

 private:
  void on_minibatch(size_t m) override {
    VarianceMomentumLearnerBase::on_minibatch(m);
    smoothed_count_ += 1;  // the step t, one per minibatch for the whole learner
    const double beta2 = variance_momentum<double>();
    const double denominator = 1.0 - std::pow(momentum<double>(), smoothed_count_);
    bias_ = adamax_ ? 1.0 / denominator
                    : std::sqrt(1.0 - std::pow(beta2, smoothed_count_)) / denominator;
  }
  const char* kind() const override { return "adam"; }
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  void rule(const RuleStep<T>& s) const {
    const Averages<T> a = averages(s);
    const T bias = T(bias_), epsilon = T(epsilon_), lr = T(s.learning_rate);
    learners_detail::parallel_for(s.n, [&](size_t i) {
      const T g = s.g[i];
      // Adamax keeps u = max(beta2 u, |g|) in place of v.
      const T scale = adamax_ ? (a.v[i] = std::max(a.beta2 * a.v[i], std::abs(g)))
                              : std::sqrt(a.variance(i, g));
      // 1 / (scale + epsilon) in double, rounded once, as CNTK.
      const T w = bias * T(1.0 / double(scale + epsilon));
      s.p[i] = s.p[i] - a.momentum(i, g) * w * lr;
    });
  }

  double epsilon_;
  bool adamax_;
  double bias_ = 0;
};

}  // namespace

std::shared_ptr<Learner> adam(std::vector<Parameter> parameters, LearningRateSchedule lr,
                              MomentumSchedule momentum, MomentumSchedule variance_momentum,
                              double epsilon, bool adamax, LearnerOptions options) {
  return std::make_shared<AdamLearner>(std::move(parameters), std::move(lr), std::move(momentum),
                                       std::move(variance_momentum), epsilon, adamax,
                                       std::move(options));
}

}  // namespace loom
