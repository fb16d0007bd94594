#include "loom/learners/adagrad.h"

#include <cmath>

#include "loom/learners/parallel.h"

namespace loom {

namespace {

class AdaGradLearner final : public LearnerBase {
 public:
  AdaGradLearner(std::vector<Parameter> parameters, LearningRateSchedule lr,
                 bool need_ave_multiplier, LearnerOptions options)
      : LearnerBase(std::move(parameters), std::move(lr), std::move(options), 1),
        need_ave_multiplier_(need_ave_multiplier) {}

 private:
  const char* kind() const override { return "adagrad"; }
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  void rule(const RuleStep<T>& s) const {
    const T floor = T(1e-16);
    T* a = s.state_block(0);
    if (!need_ave_multiplier_) {
      const T lr = T(s.learning_rate);
      learners_detail::parallel_for(s.n, [=, p = s.p, g = s.g](size_t i) {
        a[i] += g[i] * g[i];
        p[i] = p[i] - lr * (g[i] / std::sqrt(a[i] + floor));
      });
      return;
    }
    // The mean needs every accumulator first: one pass accumulates, a second steps.
    const double inverse_sum = learners_detail::ordered_sum<T>(s.n, [=, g = s.g](size_t i) {
      a[i] += g[i] * g[i];
      return T(1) / std::sqrt(a[i] + floor);
    });
    const T mean = T(inverse_sum / double(s.n));
    const T lr = mean > 0 ? T(s.learning_rate / double(mean)) : T(s.learning_rate);
    learners_detail::parallel_for(s.n, [=, p = s.p, g = s.g](size_t i) {
      p[i] = p[i] - lr * (g[i] / std::sqrt(a[i] + floor));
    });
  }

  bool need_ave_multiplier_;
};

}  // namespace

std::shared_ptr<Learner> adagrad(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                 bool need_ave_multiplier, LearnerOptions options) {
  return std::make_shared<AdaGradLearner>(std::move(parameters), std::move(lr), need_ave_multiplier,
                                          std::move(options));
}

}  // namespace loom
