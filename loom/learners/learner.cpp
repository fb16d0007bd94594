#include "loom/learners/learner.h"

#include <atomic>
#include <cmath>
#include <unordered_set>

#include "loom/core/error.h"
#include "loom/learners/parallel.h"

namespace loom {

namespace {

std::atomic<bool> g_default_unit_gain{true};

constexpr int64_t kCheckpointVersion = 3;
const char* const kCheckpointType = "Learner";

void check_schedule(const TrainingParameterSchedule<double>& s, const char* what) {
  for (const auto& [end, v] : s.entries())
    LOOM_CHECK(std::isfinite(v) && v >= 0, ArgumentError, what, " must be finite and >= 0, got ",
               v);
}

void check_weight(double w, const char* what) {
  LOOM_CHECK(std::isfinite(w) && w >= 0, ArgumentError, what, " must be finite and >= 0, got ", w);
}

}  // namespace

void set_default_unit_gain_value(bool value) {
  g_default_unit_gain = value;
}
bool default_unit_gain_value() {
  return g_default_unit_gain;
}

Learner::Learner(std::vector<Parameter> parameters, LearningRateSchedule lr, LearnerOptions options)
    : parameters_(std::move(parameters)),
      lr_schedule_(std::move(lr)),
      options_(std::move(options)) {
  LOOM_CHECK(!parameters_.empty(), ArgumentError, "a learner needs at least one parameter");
  std::unordered_set<Variable> seen;
  for (const auto& p : parameters_) {
    LOOM_CHECK(p.valid() && p.is_parameter(), ArgumentError,
               "a learner's parameters must be parameters");
    LOOM_CHECK(seen.insert(p).second, ArgumentError, "parameter ", p.describe(),
               " is given to the learner twice");
    LOOM_CHECK(!p.shape().has_inferred(), ArgumentError, "parameter ", p.describe(), " has shape ",
               p.shape().to_string(),
               " with dimensions not yet inferred; call the model before creating its learner");
  }
  check_schedule(lr_schedule_, "learning rate");
  check_schedule(options_.gaussian_noise_injection_std_dev, "gaussian_noise_injection_std_dev");
  check_weight(options_.l1_regularization_weight, "l1_regularization_weight");
  check_weight(options_.l2_regularization_weight, "l2_regularization_weight");
  LOOM_CHECK(options_.gradient_clipping_threshold_per_sample > 0, ArgumentError,
             "gradient_clipping_threshold_per_sample must be > 0, got ",
             options_.gradient_clipping_threshold_per_sample);
  lr_schedule_ = adopt_minibatch_size(std::move(lr_schedule_));
}

void Learner::reset_learning_rate(const LearningRateSchedule& schedule,
                                  ReferenceMinibatchSize reference) {
  check_schedule(schedule, "learning rate");
  LearningRateSchedule s = adopt_minibatch_size(schedule);
  if (reference == ReferenceMinibatchSize::keep) {
    s.set_minibatch_size(lr_schedule_.minibatch_size());
    s.set_minibatch_size_explicitly_specified(
        lr_schedule_.is_minibatch_size_explicitly_specified());
    s.set_legacy_per_sample(lr_schedule_.is_legacy_per_sample());
  }
  lr_schedule_ = s.shifted(s.is_sweep_based() ? sweep_count_ : sample_count_);
}

double Learner::effective_learning_rate(size_t m) const {
  const double lr = learning_rate();
  const size_t n = lr_schedule_.minibatch_size();
  if (n == IGNORE) return compatible_mode() ? lr : lr / double(m);
  return compatible_mode() ? lr * (double(m) / double(n)) : lr / double(n);
}

double Learner::momentum_for_minibatch(const MomentumSchedule& s, size_t m) const {
  const double beta = current_value(s);
  if (s.minibatch_size() == IGNORE) return beta;
  return std::pow(beta, double(m) / double(s.minibatch_size()));
}

TrainingParameterSchedule<double> Learner::adopt_minibatch_size(
    TrainingParameterSchedule<double> s) const {
  if (!s.is_minibatch_size_explicitly_specified() && options_.minibatch_size)
    s.set_minibatch_size(*options_.minibatch_size);
  return s;
}

void Learner::set_progress_observer(ProgressObserver observer) {
  observer_ = std::move(observer);
  reported_.clear();  // a new observer hears the current values at the next update
}

void Learner::report(const TrainingParameterSchedule<double>& s, const std::string& name) {
  const double v = current_value(s);
  auto it = reported_.find(name);
  if (it != reported_.end() && it->second == v) return;
  reported_[name] = v;
  if (!observer_) return;
  if (s.minibatch_size() == IGNORE)
    observer_(name + " per minibatch", v);
  else if (s.is_legacy_per_sample())
    observer_(name + " per sample", v);
  else
    observer_(name + " per " + std::to_string(s.minibatch_size()) + " samples", v);
}

bool Learner::begin_update(size_t training_sample_count) {
  report(lr_schedule_, "Learning rate");
  if (learning_rate() == 0) return false;
  LOOM_CHECK(training_sample_count > 0, ArgumentError,
             "Learner::update: a minibatch of 0 samples cannot update parameters");
  return true;
}

void Learner::advance_counters(size_t training_sample_count, bool sweep_end) {
  sample_count_ += training_sample_count;
  ++minibatch_count_;
  if (sweep_end) ++sweep_count_;
}

Dictionary Learner::create_checkpoint() const {
  Dictionary d;
  d["version"] = kCheckpointVersion;
  d["type"] = kCheckpointType;
  d["sample_count"] = uint64_t{sample_count_};
  d["minibatchCount"] = uint64_t{minibatch_count_};
  d["sweepCount"] = uint64_t{sweep_count_};
  d["learnig_rate_schedule"] = lr_schedule_.serialize();  // sic: CNTK's key
  // The values last reported to progress writers, so a resumed run prints no line that the
  // uninterrupted run would not have printed.
  Dictionary reported;
  for (const auto& [name, value] : reported_) reported[name] = value;
  d["reported"] = std::move(reported);
  return d;
}

Dictionary Learner::checkpoint_for_writing() const {
  // A flag rather than a parameter, so the overrides of create_checkpoint() that add their
  // own fields need no second version.
  struct Sharing {
    bool& flag;
    explicit Sharing(bool& f) : flag(f) { flag = true; }
    ~Sharing() { flag = false; }
  } sharing(sharing_checkpoint_);
  return create_checkpoint();
}

void Learner::restore_from_checkpoint(const Dictionary& d) {
  LOOM_CHECK(d.contains("type") && d.at("type").is<std::string>() &&
                 d.get<std::string>("type") == kCheckpointType,
             StateError, "not a learner checkpoint");
  const int64_t version = d.get<int64_t>("version");
  LOOM_CHECK(version >= 1 && version <= kCheckpointVersion, StateError,
             "learner checkpoint version ", version, " is not one this build reads (1..",
             kCheckpointVersion, ")");
  auto schedule = LearningRateSchedule::deserialize(d.get_dictionary("learnig_rate_schedule"));
  std::map<std::string, double> reported;
  if (d.contains("reported")) {
    const Dictionary r = d.get_dictionary("reported");
    for (const auto& [name, value] : r.map()) reported[name] = value.get<double>();
  }
  sample_count_ = d.get<uint64_t>("sample_count");
  minibatch_count_ = d.get<uint64_t>("minibatchCount");
  sweep_count_ = version >= 3 ? d.get<uint64_t>("sweepCount") : 0;
  lr_schedule_ = std::move(schedule);
  reported_ = std::move(reported);
}

LearnerBase::LearnerBase(std::vector<Parameter> parameters, LearningRateSchedule lr,
                         LearnerOptions options, size_t state_tensors)
    : Learner(std::move(parameters), std::move(lr), std::move(options)),
      state_tensors_(state_tensors),
      noise_(next_default_generator()) {
  for (const auto& p : this->parameters())
    state_.emplace_back(p.dtype(), state_tensors ? p.shape().prepend(state_tensors) : NDShape{});
}

bool LearnerBase::update(std::unordered_map<Variable, NDArrayView>& gradients,
                         size_t training_sample_count, bool sweep_end) {
  if (!begin_update(training_sample_count)) return false;
  // Every gradient is checked before anything changes, so a bad call leaves all as it was.
  for (const auto& p : parameters()) {
    auto it = gradients.find(p);
    LOOM_CHECK(it != gradients.end(), ArgumentError, "Learner::update: no gradient for parameter ",
               p.describe(), "");
    const NDArrayView& g = it->second;
    LOOM_CHECK(g.dtype() == p.dtype(), ShapeError, "Learner::update: gradient of parameter ",
               p.describe(), " is ", to_string(g.dtype()), ", the parameter ",
               to_string(p.dtype()));
    LOOM_CHECK(g.shape() == p.shape(), ShapeError, "Learner::update: gradient of parameter ",
               p.describe(), " has shape ", g.shape().to_string(), ", the parameter ",
               p.shape().to_string());
  }
  on_minibatch(training_sample_count);
  const double lr = effective_learning_rate(training_sample_count);
  for (size_t i = 0; i < parameters().size(); ++i) {
    const NDArrayView& g = gradients.find(parameters()[i])->second;
    dispatch(parameters()[i].dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (g.is_sparse()) {
        update_parameter<T>(i, g.to_dense(), training_sample_count, lr);
      } else {
        update_parameter<T>(i, g, training_sample_count, lr);  // no copy: the common path
      }
    });
  }
  advance_counters(training_sample_count, sweep_end);
  return true;
}

namespace {
// The element-wise options around a rule, in CNTK's order and rounding (all in T).
template <typename T>
struct GradientOptions {
  T mean_scale = 1;  // 1/M in compatible mode
  bool mean = false;
  T clip = 0;  // truncation threshold
  bool truncate = false;
  T norm_scale = 1;  // rescaling to the clipping norm
  bool rescale = false;
  T l2 = 0;
  bool l2_on = false;

  bool any() const { return mean || truncate || rescale || l2_on; }
  T grad(const T* g, const T* p, size_t i) const {
    T x = g[i];
    if (mean) x *= mean_scale;
    if (truncate) x = x < -clip ? -clip : (x > clip ? clip : x);
    if (rescale) x *= norm_scale;
    if (l2_on) x += l2 * p[i];
    return x;
  }
};
}  // namespace

template <typename T>
void LearnerBase::update_parameter(size_t index, const NDArrayView& gradient, size_t m, double lr) {
  using learners_detail::ordered_sum;
  using learners_detail::parallel_for;
  NDArrayView& value = parameters()[index].value();
  const LearnerOptions& o = options();
  const bool compat = compatible_mode();
  // Per-sample options scale with M, except in compatible mode where g is already a mean.
  const double per_minibatch = compat ? 1.0 : double(m);

  RuleStep<T> s{};
  s.p = value.data<T>();
  s.g = gradient.data<T>();
  s.state = state_tensors_ ? state_[index].data<T>() : nullptr;
  s.n = value.size();
  s.minibatch_size = m;
  s.learning_rate = lr;

  GradientOptions<T> go;
  go.mean = compat;
  go.mean_scale = T(1) / T(m);
  const double tau = o.gradient_clipping_threshold_per_sample;
  if (tau != std::numeric_limits<double>::infinity()) {
    const double limit = tau * per_minibatch;
    if (o.gradient_clipping_with_truncation) {
      go.truncate = true;
      go.clip = T(limit);
    } else {
      const double norm = std::sqrt(ordered_sum<double>(s.n, [&](size_t i) {
        const double x = go.grad(s.g, s.p, i);  // only the mean is on yet
        return x * x;
      }));
      if (norm > limit) {
        go.rescale = true;
        go.norm_scale = T(limit / norm);
      }
    }
  }
  if (o.l2_regularization_weight > 0) {
    go.l2_on = true;
    go.l2 = T(o.l2_regularization_weight * per_minibatch);
  }
  if (go.any()) {
    if (gradient_scratch_.size() < s.n * sizeof(T)) gradient_scratch_.resize(s.n * sizeof(T));
    T* g = reinterpret_cast<T*>(gradient_scratch_.data());
    parallel_for(s.n, [&](size_t i) { g[i] = go.grad(s.g, s.p, i); });
    s.g = g;
  }
  apply_rule(s);
  T* p = s.p;
  const double sigma = current_value(o.gaussian_noise_injection_std_dev);
  // One generator draw per element in order: reproducible after a restore.
  if (sigma > 0)
    for (size_t i = 0; i < s.n; ++i) p[i] += T(sigma * noise_.normal());
  const double l1 = lr * o.l1_regularization_weight * per_minibatch;
  if (l1 > 0) {  // the proximal step (soft threshold)
    const T t = T(l1);
    parallel_for(s.n,
                 [&](size_t i) { p[i] = p[i] > t ? p[i] - t : (p[i] < -t ? p[i] + t : T(0)); });
  }
}

Dictionary LearnerBase::create_checkpoint() const {
  Dictionary d = Learner::create_checkpoint();
  d["noise_injection_seed"] = noise_.seed();
  d["master_parameter_updated"] = total_number_of_minibatches_seen() > 0;
  DictionaryVector smoothed;
  for (const auto& s : state_) smoothed.emplace_back(sharing_checkpoint() ? s : s.deep_clone());
  d["smoothed_gradients"] = std::move(smoothed);
  d["noise_generator"] = noise_.checkpoint();
  d["learner"] = std::string(kind());
  return d;
}

void LearnerBase::restore_from_checkpoint(const Dictionary& d) {
  if (d.contains("learner"))  // older checkpoints do not record it
    LOOM_CHECK(d.get<std::string>("learner") == kind(), StateError,
               "the checkpoint holds the state of a learner made by ",
               d.get<std::string>("learner"), "(); this learner was made by ", kind(),
               "() (create the learners as when the checkpoint was saved)");
  const auto& smoothed = d.get<DictionaryVector>("smoothed_gradients");
  LOOM_CHECK(smoothed.size() == state_.size(), StateError, "learner checkpoint holds state for ",
             smoothed.size(), " parameters, the learner has ", state_.size());
  for (size_t i = 0; i < state_.size(); ++i) {
    const auto& v = smoothed[i].get<NDArrayView>();
    LOOM_CHECK(v.dtype() == state_[i].dtype() && v.shape() == state_[i].shape(), StateError,
               "learner checkpoint: state of parameter ", parameters()[i].describe(), " is ",
               to_string(v.dtype()), v.shape().to_string(), ", expected ",
               to_string(state_[i].dtype()), state_[i].shape().to_string());
  }
  Learner::restore_from_checkpoint(d);
  for (size_t i = 0; i < state_.size(); ++i) state_[i].copy_from(smoothed[i].get<NDArrayView>());
  if (d.contains("noise_generator")) noise_.restore(d.get_dictionary("noise_generator"));
}

void LearnerBase::reset_smoothed_gradients() {
  for (auto& s : state_) s.fill(0.0);
}

MomentumSchedule default_variance_momentum_schedule() {
  return momentum_schedule_per_sample(0.9999986111120757);
}

MomentumLearnerBase::MomentumLearnerBase(std::vector<Parameter> parameters, LearningRateSchedule lr,
                                         MomentumSchedule momentum, LearnerOptions options,
                                         size_t state_tensors, bool reports_momentum)
    : LearnerBase(std::move(parameters), std::move(lr), std::move(options), state_tensors),
      momentum_(adopt_minibatch_size(std::move(momentum))),
      reports_momentum_(reports_momentum) {
  for (const auto& [end, v] : momentum_.entries())
    LOOM_CHECK(v >= 0 && v <= 1, ArgumentError, "momentum must be in [0, 1], got ", v);
}

void MomentumLearnerBase::on_minibatch(size_t training_sample_count) {
  if (reports_momentum_) report(momentum_, "Momentum");
  beta_ = momentum_for_minibatch(momentum_, training_sample_count);
}

VarianceMomentumLearnerBase::VarianceMomentumLearnerBase(std::vector<Parameter> parameters,
                                                         LearningRateSchedule lr,
                                                         MomentumSchedule momentum,
                                                         MomentumSchedule variance_momentum,
                                                         LearnerOptions options)
    : MomentumLearnerBase(std::move(parameters), std::move(lr), std::move(momentum),
                          std::move(options), 2, /*reports_momentum=*/false),
      variance_momentum_(adopt_minibatch_size(std::move(variance_momentum))) {}

void VarianceMomentumLearnerBase::check_variance_momentum(const char* learner) const {
  for (const auto& [end, v] : variance_momentum_.entries())
    LOOM_CHECK(v >= 0 && v <= 1, ArgumentError, learner,
               ": variance momentum must be in [0, 1], got ", v);
}

void VarianceMomentumLearnerBase::on_minibatch(size_t training_sample_count) {
  MomentumLearnerBase::on_minibatch(training_sample_count);
  beta2_ = momentum_for_minibatch(variance_momentum_, training_sample_count);
}

Dictionary VarianceMomentumLearnerBase::create_checkpoint() const {
  Dictionary d = MomentumLearnerBase::create_checkpoint();
  d["smoothed_count"] = smoothed_count_;
  return d;
}

void VarianceMomentumLearnerBase::restore_from_checkpoint(const Dictionary& d) {
  const double count = d.get<double>("smoothed_count");
  MomentumLearnerBase::restore_from_checkpoint(d);
  smoothed_count_ = count;
}

}  // namespace loom
