// The learner momentum_sgd and nesterov share (internal: included by their .cpp files only).
#pragma once

#include <utility>
#include <vector>

#include "loom/learners/learner.h"
#include "loom/learners/parallel.h"

namespace loom::learners_detail {

// A momentum learner with one state tensor, the velocity v. Per element, with
// step = ugf lr g: v = beta v + step, then p = Rule::next(p, v, beta, step), where
// Rule::next gives the new parameter value from the new velocity; Rule::kName names it and
// Rule::kReportsMomentum says whether it reports its momentum as CNTK's learner did.
template <typename Rule>
class VelocityLearner final : public MomentumLearnerBase {
 public:
  VelocityLearner(std::vector<Parameter> parameters, LearningRateSchedule lr,
                  MomentumSchedule momentum, LearnerOptions options)
      : MomentumLearnerBase(std::move(parameters), std::move(lr), std::move(momentum),
                            std::move(options), 1, Rule::kReportsMomentum) {}

 private:
  const char* kind() const override { return Rule::kName; }
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  void rule(const RuleStep<T>& s) const {
    const T beta = momentum<T>();
    const T scale = unit_gain_factor<T>() * T(s.learning_rate);
    T* v = s.state_block(0);
    parallel_for(s.n, [&](size_t i) {
      const T step = scale * s.g[i];
      v[i] = step + beta * v[i];
      s.p[i] = Rule::next(s.p[i], v[i], beta, step);
    });
  }
};

}  // namespace loom::learners_detail
