#include "loom/learners/fsadagrad.h"

#include <cmath>

#include "loom/core/error.h"
#include "loom/learners/parallel.h"

namespace loom {

namespace {

class FSAdaGradLearner final : public MomentumLearnerBase {
 public:
  FSAdaGradLearner(std::vector<Parameter> parameters, LearningRateSchedule lr,
                   MomentumSchedule momentum, MomentumSchedule variance_momentum,
                   LearnerOptions options)
      : MomentumLearnerBase(std::move(parameters), std::move(lr), std::move(momentum),
                            std::move(options), 2),
        variance_momentum_(adopt_minibatch_size(std::move(variance_momentum))) {
    for (const auto& [end, v] : variance_momentum_.entries())
      LOOM_CHECK(v >= 0 && v <= 1, ArgumentError,
                 "fsadagrad: variance momentum must be in [0, 1], got ", v);
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
    beta2_ = momentum_for_minibatch(variance_momentum_, m);
    // The number of samples smoothed into the g^2 averages; its root rescales the
    // normalized gradient back to a sum-of-M magnitude.
    smoothed_count_ = beta2_ * smoothed_count_ + (1.0 - beta2_) * double(m);
    multiplier_ = std::sqrt(smoothed_count_);
  }
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  void rule(const RuleStep<T>& s) const {
    const T beta1 = momentum<T>(), ugf = unit_gain_factor<T>(), beta2 = T(beta2_);
    const T one_minus_beta2 = T(1) - beta2, multiplier = T(multiplier_);
    const T lr = T(s.learning_rate);
    T* v = s.state_block(0);
    T* m = s.state_block(1);
    learners_detail::parallel_for(s.n, [&](size_t i) {
      T g = s.grad(i);
      v[i] = beta2 * v[i] + one_minus_beta2 * g * g;
      if (v[i] != T(0)) {
        const T w = multiplier * (T(1) / std::sqrt(v[i]));
        g *= w > T(10) ? T(10) : w;
      }
      if (beta1 > T(0)) {
        g = beta1 * m[i] + ugf * g;
        m[i] = g;
      }
      s.p[i] = s.finish(s.p[i] - g * lr);
    });
  }

  MomentumSchedule variance_momentum_;
  double beta2_ = 0, multiplier_ = 0;
  double smoothed_count_ = 0;
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
