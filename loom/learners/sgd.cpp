#include "loom/learners/sgd.h"

#include "loom/learners/parallel.h"

namespace loom {

namespace {

class SGDLearner final : public LearnerBase {
 public:
  SGDLearner(std::vector<Parameter> parameters, LearningRateSchedule lr, LearnerOptions options)
      : LearnerBase(std::move(parameters), std::move(lr), std::move(options), 0) {}

 private:
  const char* kind() const override { return "sgd"; }
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  static void rule(const RuleStep<T>& s) {
    const T lr = T(s.learning_rate);
    learners_detail::parallel_for(s.n, [&](size_t i) { s.p[i] = s.p[i] - lr * s.g[i]; });
  }
};

}  // namespace

std::shared_ptr<Learner> sgd(std::vector<Parameter> parameters, LearningRateSchedule lr,
                             LearnerOptions options) {
  return std::make_shared<SGDLearner>(std::move(parameters), std::move(lr), std::move(options));
}

}  // namespace loom
