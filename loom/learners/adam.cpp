#include "loom/learners/adam.h"

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"
#include "loom/learners/parallel.h"

namespace loom {

namespace {

class AdamLearner final : public MomentumLearnerBase {
 public:
  AdamLearner(std::vector<Parameter> parameters, LearningRateSchedule lr, MomentumSchedule momentum,
              MomentumSchedule variance_momentum, double epsilon, bool adamax,
              LearnerOptions options)
      : MomentumLearnerBase(std::move(parameters), std::move(lr), std::move(momentum),
                            std::move(options), 2),
        variance_momentum_(adopt_minibatch_size(std::move(variance_momentum))),
        epsilon_(epsilon),
        adamax_(adamax) {
    LOOM_CHECK(epsilon >= 0, ArgumentError, "adam: epsilon must be >= 0, got ", epsilon);
    for (const auto& [end, v] : variance_momentum_.entries())
      LOOM_CHECK(v >= 0 && v <= 1, ArgumentError, "adam: variance momentum must be in [0, 1], got ",
                 v);
  }

  Dictionary create_checkpoint() const override {
    Dictionary d = MomentumLearnerBase::create_checkpoint();
    d["smoothed_count"] = smoothed_count_;
    return d;
  }
  void restore_from_checkpoint(const Dictionary& d) override {
    const double count = d.get<double>("smoothed_count");
    MomentumLearnerBase::restore_from_checkpoint(d);
    smoothed_count_ = count;
  }

 private:
  void on_minibatch(size_t m) override {
    MomentumLearnerBase::on_minibatch(m);
    smoothed_count_ += 1;  // the step t, one per minibatch for the whole learner
    beta2_ = momentum_for_minibatch(variance_momentum_, m);
    const double denominator = 1.0 - std::pow(momentum<double>(), smoothed_count_);
    bias_ = adamax_ ? 1.0 / denominator
                    : std::sqrt(1.0 - std::pow(beta2_, smoothed_count_)) / denominator;
  }
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  void rule(const RuleStep<T>& s) const {
    const T beta1 = momentum<T>(), ugf = unit_gain_factor<T>(), beta2 = T(beta2_);
    const T one_minus_beta2 = T(1) - beta2, bias = T(bias_), epsilon = T(epsilon_);
    const T lr = T(s.learning_rate);
    T* v = s.state_block(0);
    T* m = s.state_block(1);
    learners_detail::parallel_for(s.n, [&](size_t i) {
      T g = s.grad(i);
      T scale;
      if (adamax_) {
        v[i] = std::max(beta2 * v[i], std::abs(g));
        scale = v[i];
      } else {
        v[i] = beta2 * v[i] + one_minus_beta2 * g * g;
        scale = std::sqrt(v[i]);
      }
      // 1 / (scale + epsilon) in double, rounded once, as CNTK.
      const T w = bias * T(1.0 / double(scale + epsilon));
      g = beta1 * m[i] + ugf * g;
      m[i] = g;
      s.p[i] = s.finish(s.p[i] - g * w * lr);
    });
  }

  MomentumSchedule variance_momentum_;
  double epsilon_;
  bool adamax_;
  double beta2_ = 0, bias_ = 0;
  double smoothed_count_ = 0;
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
