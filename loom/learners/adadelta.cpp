#include "loom/learners/adadelta.h"

#include <cmath>

#include "loom/core/error.h"
#include "loom/learners/parallel.h"

namespace loom {

namespace {

class AdaDeltaLearner final : public LearnerBase {
 public:
  AdaDeltaLearner(std::vector<Parameter> parameters, LearningRateSchedule lr, double rho,
                  double epsilon, LearnerOptions options)
      : LearnerBase(std::move(parameters), std::move(lr), std::move(options), 2),
        rho_(rho),
        epsilon_(epsilon) {
    LOOM_CHECK(rho >= 0 && rho <= 1, ArgumentError, "adadelta: rho must be in [0, 1], got ", rho);
    LOOM_CHECK(epsilon >= 0, ArgumentError, "adadelta: epsilon must be >= 0, got ", epsilon);
  }

 private:
  const char* kind() const override { return "adadelta"; }
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  void rule(const RuleStep<T>& s) const {
    const T rho = T(rho_), one_minus_rho = T(1) - rho, epsilon = T(epsilon_);
    const T lr = T(s.learning_rate);
    T* a = s.state_block(0);
    T* x = s.state_block(1);
    learners_detail::parallel_for(s.n, [&](size_t i) {
      const T g = s.g[i];
      a[i] = rho * a[i] + one_minus_rho * g * g;
      const T delta = -std::sqrt(x[i] + epsilon) / std::sqrt(a[i] + epsilon) * g;
      x[i] = rho * x[i] + one_minus_rho * delta * delta;
      s.p[i] = s.p[i] + lr * delta;
    });
  }

  double rho_, epsilon_;
};

}  // namespace

std::shared_ptr<Learner> adadelta(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                  double rho, double epsilon, LearnerOptions options) {
  return std::make_shared<AdaDeltaLearner>(std::move(parameters), std::move(lr), rho, epsilon,
                                           std::move(options));
}

}  // namespace loom
