// Learners: what turns the gradients of a minibatch into new parameter values.
//
// Conventions (CNTK's, DESIGN.md §4): the gradient handed to update() is the SUM over the
// minibatch's M samples. A schedule's reference minibatch size N says what its values are
// for: the effective per-step rate is lr/M for N == IGNORE (lr times the mean gradient) and
// lr/N for N > 0 (a step of lr per N samples). With the learner option minibatch_size ==
// IGNORE ("compatible mode") the gradient is divided by M first and the rate becomes lr, or
// lr*M/N.
//
// Learner is the interface (parameters, learning-rate schedule, counters, checkpoint,
// progress observer). LearnerBase applies the update pipeline of the built-in learners in one
// place; each built-in learner only supplies its rule.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/core/ndarray_view.h"
#include "loom/core/random.h"
#include "loom/graph/variable.h"
#include "loom/learners/schedule.h"

namespace loom {

// The global default of LearnerOptions::unit_gain (true, as in CNTK).
void set_default_unit_gain_value(bool value);
bool default_unit_gain_value();

// CNTK's default of adagrad's and rmsprop's need_ave_multiplier.
inline constexpr bool kNeedAveMultiplier = true;

// Options every built-in learner accepts (CNTK's AdditionalLearningOptions and the Python
// learners' keyword arguments), in the order of CNTK's signatures (designated initializers
// must follow it).
struct LearnerOptions {
  // Momentum learners: scale the gradient by (1 - momentum) when accumulating it.
  bool unit_gain = default_unit_gain_value();
  double l1_regularization_weight = 0.0;  // per sample
  double l2_regularization_weight = 0.0;  // per sample
  // Standard deviation of Gaussian noise added to each parameter after its update.
  TrainingParameterSchedule<double> gaussian_noise_injection_std_dev = 0.0;
  double gradient_clipping_threshold_per_sample = std::numeric_limits<double>::infinity();
  // Clip each element to the threshold; false: rescale the whole gradient to that norm.
  bool gradient_clipping_with_truncation = true;
  // The minibatch size the hyper-parameters were tuned for. It becomes N of every schedule
  // made without its own minibatch size. IGNORE selects compatible mode. Absent: neither.
  std::optional<size_t> minibatch_size = std::nullopt;
};

// What Learner::reset_learning_rate does with the new schedule's reference minibatch size.
enum class ReferenceMinibatchSize {
  keep,   // CNTK 2.7: the size of the schedule being replaced stays; only values change
  adopt,  // the new schedule's own size (or the learner's minibatch_size option) replaces it
};

class Learner {
 public:
  using ProgressObserver = std::function<void(const std::string& key, double value)>;

  virtual ~Learner() = default;
  Learner(const Learner&) = delete;
  Learner& operator=(const Learner&) = delete;

  const std::vector<Parameter>& parameters() const { return parameters_; }
  const LearnerOptions& options() const { return options_; }

  // Updates the parameters from the gradients (sums over the minibatch, keyed by parameter)
  // of a minibatch of training_sample_count samples; sweep_end marks the minibatch that ends
  // a sweep over the data. Returns false, changing nothing, when the current learning rate is
  // 0 (how a schedule that ends in 0 stops training). The gradients are left unchanged.
  virtual bool update(std::unordered_map<Variable, NDArrayView>& gradients,
                      size_t training_sample_count, bool sweep_end = false) = 0;
  // The same for gradients built in the call, as CNTK's Python learners take a dict:
  // learner->update({{p, g}}, 2). (A subclass that declares update() hides this overload;
  // call through a Learner pointer or reference.)
  bool update(std::unordered_map<Variable, NDArrayView>&& gradients, size_t training_sample_count,
              bool sweep_end = false) {
    return update(gradients, training_sample_count, sweep_end);
  }

  // The learning-rate schedule's value now.
  virtual double learning_rate() const { return current_value(lr_schedule_); }
  // Replaces the learning-rate schedule's values; the new ones start at the current sample (or
  // sweep) count, as if training started now. As in CNTK 2.7 the learner keeps its reference
  // minibatch size (what "per N samples" means) unless asked to adopt the new schedule's.
  virtual void reset_learning_rate(const LearningRateSchedule& schedule,
                                   ReferenceMinibatchSize reference = ReferenceMinibatchSize::keep);

  virtual size_t total_number_of_samples_seen() const { return sample_count_; }
  virtual size_t total_number_of_minibatches_seen() const { return minibatch_count_; }
  virtual size_t total_number_of_sweeps_seen() const { return sweep_count_; }

  // Sets the learner's smoothed gradients (momentum and the like) to 0, as at the start (block
  // momentum does this after each block). Nothing for a learner without such state.
  virtual void reset_smoothed_gradients() {}

  // Counters and the learning-rate schedule; built-in learners add their state.
  virtual Dictionary create_checkpoint() const;
  virtual void restore_from_checkpoint(const Dictionary& checkpoint);
  // create_checkpoint(), whose tensors may be the learner's live state instead of copies: for
  // a caller that writes it out before the learner changes (Trainer::save_checkpoint), so a
  // checkpoint costs no copy of the state. Not for keeping; not reentrant.
  Dictionary checkpoint_for_writing() const;

  // Called with ("Learning rate per minibatch", 0.1), ("Learning rate per 10 samples", ...),
  // ("Momentum per 1 samples", ...) when a hyper-parameter's value changes, the first update
  // included (CNTK's keys, as progress writers print them).
  virtual void set_progress_observer(ProgressObserver observer);

 protected:
  Learner(std::vector<Parameter> parameters, LearningRateSchedule lr, LearnerOptions options);
  // A learner that wraps another (the distributed learners): it overrides the accessors above
  // to answer with the wrapped learner's schedule, counters and observer, so it has none here.
  Learner(std::vector<Parameter> parameters, LearnerOptions options)
      : Learner(std::move(parameters), LearningRateSchedule(0.0), std::move(options)) {}

  // A schedule's value at the counter it is measured in (sweeps or samples).
  template <typename T>
  T current_value(const TrainingParameterSchedule<T>& s) const {
    return s.value(s.is_sweep_based() ? sweep_count_ : sample_count_);
  }
  // Compatible mode: the gradient is averaged over the minibatch before anything else.
  bool compatible_mode() const { return options_.minibatch_size == IGNORE; }
  // The rate applied to this learner's gradient for a minibatch of m samples (CNTK's
  // LearningRate(M)).
  double effective_learning_rate(size_t m) const;
  // The momentum for a minibatch of m samples: beta per N samples becomes beta^(m/N).
  double momentum_for_minibatch(const MomentumSchedule& s, size_t m) const;
  // s with this learner's minibatch_size as N unless s was given its own.
  TrainingParameterSchedule<double> adopt_minibatch_size(TrainingParameterSchedule<double> s) const;
  // Tells the observer about name's current value if it changed since last told.
  void report(const TrainingParameterSchedule<double>& s, const std::string& name);
  // Checks the update arguments; false when the learning rate is 0 (reported first).
  bool begin_update(size_t training_sample_count);
  void advance_counters(size_t training_sample_count, bool sweep_end);
  // True inside checkpoint_for_writing(): create_checkpoint may share its tensors.
  bool sharing_checkpoint() const { return sharing_checkpoint_; }

 private:
  std::vector<Parameter> parameters_;
  LearningRateSchedule lr_schedule_;
  LearnerOptions options_;
  size_t sample_count_ = 0, minibatch_count_ = 0, sweep_count_ = 0;
  ProgressObserver observer_;
  std::map<std::string, double> reported_;
  mutable bool sharing_checkpoint_ = false;
};

// The parameter, its gradient and the rule's state for one update of one parameter. The
// gradient has been through compatible mode, clipping and L2 already (LearnerBase does that
// in a pass before the rule when any of them is on), so a rule is one plain loop the compiler
// can vectorize; everything runs in T.
template <typename T>
struct RuleStep {
  T* p;
  const T* g;
  T* state;  // state_tensors consecutive blocks of n elements
  size_t n;
  size_t minibatch_size;  // M
  double learning_rate;   // effective_learning_rate(M)

  T* state_block(size_t k) const { return state + k * n; }
};

// The built-in learners' update: per parameter (1) compatible-mode mean, (2) clipping,
// (3) L2 (one pass, only when any is on), (4) the rule, (5) Gaussian noise, (6) L1; then the
// counters advance.
class LearnerBase : public Learner {
 public:
  bool update(std::unordered_map<Variable, NDArrayView>& gradients, size_t training_sample_count,
              bool sweep_end = false) final;
  // Adds (CNTK-SEMANTICS §2.6) noise_injection_seed, master_parameter_updated,
  // smoothed_gradients (one tensor per parameter, in parameter order) and Loom's
  // noise_generator state and learner kind.
  Dictionary create_checkpoint() const override;
  // StateError naming both kinds when the checkpoint is another kind of learner's.
  void restore_from_checkpoint(const Dictionary& checkpoint) override;
  void reset_smoothed_gradients() override;
  // The learner's name as its factory is called: "sgd", "momentum_sgd", "adam", ...
  virtual const char* kind() const = 0;

 protected:
  // state_tensors: how many tensors of each parameter's shape the rule keeps (all start at 0).
  LearnerBase(std::vector<Parameter> parameters, LearningRateSchedule lr, LearnerOptions options,
              size_t state_tensors);

  // Once per minibatch that updates, before the parameters (step counts, reports).
  virtual void on_minibatch(size_t /*training_sample_count*/) {}
  virtual void apply_rule(const RuleStep<float>& step) = 0;
  virtual void apply_rule(const RuleStep<double>& step) = 0;

 private:
  template <typename T>
  void update_parameter(size_t index, const NDArrayView& gradient, size_t m, double lr);

  size_t state_tensors_;
  std::vector<NDArrayView> state_;  // per parameter: [state_tensors, *shape], or a scalar if 0
  std::vector<std::byte> gradient_scratch_;  // the pre-processed gradient; grows only
  RandomGenerator noise_;
};

// The variance momentum adam and fsadagrad default to: per sample exp(-1/720000)
// (a time constant of 2 * 3600 * 100 samples), as in CNTK.
MomentumSchedule default_variance_momentum_schedule();

// Base of the learners with a momentum schedule (momentum_sgd, nesterov, fsadagrad, adam):
// the momentum of the current minibatch, scaled to its size, and the unit-gain factor.
class MomentumLearnerBase : public LearnerBase {
 protected:
  // reports_momentum: CNTK's momentum_sgd reports its momentum to the progress writers
  // ("Momentum per 1 samples: 0.9"); nesterov, adam and fsadagrad do not.
  MomentumLearnerBase(std::vector<Parameter> parameters, LearningRateSchedule lr,
                      MomentumSchedule momentum, LearnerOptions options, size_t state_tensors,
                      bool reports_momentum);

  // Reports the momentum (where CNTK did) and fixes beta and the unit-gain factor for this
  // minibatch.
  void on_minibatch(size_t training_sample_count) override;
  // beta scaled to the minibatch (momentum_for_minibatch), as T.
  template <typename T>
  T momentum() const {
    return T(beta_);
  }
  // 1 - beta (from the scaled beta, in T, as CNTK) with unit gain, else 1.
  template <typename T>
  T unit_gain_factor() const {
    return options().unit_gain ? T(1) - T(beta_) : T(1);
  }

 private:
  MomentumSchedule momentum_;
  bool reports_momentum_;
  double beta_ = 0;
};

// Base of adam and fsadagrad: besides the momentum of the smoothed gradient m (state block 1),
// a variance momentum beta2 for the smoothed g^2 v (state block 0), and a smoothed count that
// each learner advances its own way and that checkpoints as "smoothed_count".
class VarianceMomentumLearnerBase : public MomentumLearnerBase {
 public:
  Dictionary create_checkpoint() const override;
  void restore_from_checkpoint(const Dictionary& checkpoint) override;

 protected:
  VarianceMomentumLearnerBase(std::vector<Parameter> parameters, LearningRateSchedule lr,
                              MomentumSchedule momentum, MomentumSchedule variance_momentum,
                              LearnerOptions options);

  // ArgumentError unless every variance momentum is in [0, 1]; `learner` names the learner.
  void check_variance_momentum(const char* learner) const;
  // Also fixes beta2 for this minibatch.
  void on_minibatch(size_t training_sample_count) override;
  // beta2 scaled to the minibatch (momentum_for_minibatch), as T.
  template <typename T>
  T variance_momentum() const {
    return T(beta2_);
  }

  // The two smoothed averages of one update, element by element, in T.
  template <typename T>
  struct Averages {
    T beta1, ugf, beta2, one_minus_beta2;
    T* v;
    T* m;
    // v = beta2 v + (1 - beta2) g^2; returns the new v.
    T variance(size_t i, T g) const { return v[i] = beta2 * v[i] + one_minus_beta2 * g * g; }
    // m = beta1 m + ugf g; returns the new m.
    T momentum(size_t i, T g) const { return m[i] = beta1 * m[i] + ugf * g; }
  };
  template <typename T>
  Averages<T> averages(const RuleStep<T>& s) const {
    const T beta2 = variance_momentum<T>();
    return {momentum<T>(), unit_gain_factor<T>(), beta2,
            T(1) - beta2,  s.state_block(0),      s.state_block(1)};
  }

  double smoothed_count_ = 0;

 private:
  MomentumSchedule variance_momentum_;
  double beta2_ = 0;
};

}  // namespace loom
