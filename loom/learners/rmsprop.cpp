#include "loom/learners/rmsprop.h"

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"
#include "loom/learners/parallel.h"

namespace loom {

namespace {

class RMSPropLearner final : public LearnerBase {
 public:
  RMSPropLearner(std::vector<Parameter> parameters, LearningRateSchedule lr, double gamma,
                 double inc, double dec, double max, double min, bool need_ave_multiplier,
                 LearnerOptions options)
      : LearnerBase(std::move(parameters), std::move(lr), std::move(options), 3),
        gamma_(gamma),
        inc_(inc),
        dec_(dec),
        max_(max),
        min_(min),
        need_ave_multiplier_(need_ave_multiplier) {
    LOOM_CHECK(gamma > 0 && gamma < 1, ArgumentError, "rmsprop: gamma must be in (0, 1), got ",
               gamma);
    LOOM_CHECK(inc > 1, ArgumentError, "rmsprop: inc must be > 1, got ", inc);
    LOOM_CHECK(dec > 0 && dec < 1, ArgumentError, "rmsprop: dec must be in (0, 1), got ", dec);
    LOOM_CHECK(min > 0, ArgumentError, "rmsprop: min must be > 0, got ", min);
    LOOM_CHECK(max > min, ArgumentError, "rmsprop: max must be > min, got max ", max, ", min ",
               min);
  }

  Dictionary create_checkpoint() const override {
    Dictionary d = LearnerBase::create_checkpoint();
    d["smoothed_count"] = smoothed_count_;
    return d;
  }
  void restore_from_checkpoint(const Dictionary& d) override {
    const double count = d.get<double>("smoothed_count");
    LearnerBase::restore_from_checkpoint(d);
    smoothed_count_ = count;
  }

 private:
  void on_minibatch(size_t /*training_sample_count*/) override { smoothed_count_ += 1; }
  const char* kind() const override { return "rmsprop"; }
  void apply_rule(const RuleStep<float>& s) override { rule(s); }
  void apply_rule(const RuleStep<double>& s) override { rule(s); }

  template <typename T>
  void rule(const RuleStep<T>& s) const {
    const T floor = T(1e-6), gamma = T(gamma_), one_minus_gamma = T(1) - gamma;
    const T inc = T(inc_), dec = T(dec_), max = T(max_), min = T(min_);
    T* avar = s.state_block(0);
    T* sign = s.state_block(1);
    T* step = s.state_block(2);
    // The first minibatch starts the variance at g^2 and the step at 0.02.
    const bool first = smoothed_count_ <= 1;
    // Updates element i's state and returns its multiplier step / sqrt(avar). Selects rather
    // than branches (std::min and std::max written out), so that the loops vectorize.
    auto advance = [=](size_t i, T g) {
      const T g2 = g * g, a = avar[i], sg = sign[i], st0 = step[i];  // loaded unconditionally
      const T old_avar = first ? g2 : a, old_sign = first ? T(0) : sg;
      const T old_step = first ? T(0.02) : st0;
      const T v = gamma * old_avar + one_minus_gamma * g2;
      const T sgn = T(T(0) < g) - T(g < T(0));
      const T up = old_step * inc, down = old_step * dec;
      const T grown = max < up ? max : up, shrunk = down < min ? min : down;  // both, then pick
      const T st = old_sign * sgn > 0 ? grown : shrunk;
      avar[i] = v;
      sign[i] = sgn;
      step[i] = st;
      return st / std::sqrt(v + floor);
    };
    if (!need_ave_multiplier_) {
      const T lr = T(s.learning_rate);
      learners_detail::parallel_for(
          s.n, [=, p = s.p, g = s.g](size_t i) { p[i] = p[i] - lr * (g[i] * advance(i, g[i])); });
      return;
    }
    const double sum =
        learners_detail::ordered_sum<T>(s.n, [=, g = s.g](size_t i) { return advance(i, g[i]); });
    const T mean = T(sum / double(s.n));
    const T lr = T(s.learning_rate / double(mean));
    learners_detail::parallel_for(s.n, [=, p = s.p, g = s.g](size_t i) {
      p[i] = p[i] - lr * (g[i] * (step[i] / std::sqrt(avar[i] + floor)));
    });
  }

  double gamma_, inc_, dec_, max_, min_;
  bool need_ave_multiplier_;
  double smoothed_count_ = 0;
};

}  // namespace

std::shared_ptr<Learner> rmsprop(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                 double gamma, double inc, double dec, double max, double min,
                                 bool need_ave_multiplier, LearnerOptions options) {
  return std::make_shared<RMSPropLearner>(std::move(parameters), std::move(lr), gamma, inc, dec,
                                          max, min, need_ave_multiplier, std::move(options));
}

}  // namespace loom
