// Training-parameter schedules (CNTK's TrainingParameterSchedule): a value that changes with
// training progress, for learning rates, momentums, noise and minibatch sizes.
//
// A schedule is an ordered map end-count -> value; value(count) is the value of the first entry
// whose end-count is greater than count, or the last value once all have passed. The count is
// in samples when epoch_size > 0 (one unit = epoch_size samples) and in sweeps over the data when
// epoch_size == FULL_DATA_SWEEP_EPOCH; the learner that owns the schedule supplies the right
// counter.
//
// A schedule also carries a reference minibatch size N: the number of samples its values are
// meant for. N == IGNORE applies the value to whatever minibatch arrives (per minibatch); N > 0
// lets learners rescale the value to the actual minibatch size (N == 1: per sample).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "loom/core/dictionary.h"

namespace loom {

// Reference minibatch size meaning "apply hyper-parameters to the minibatch as it is".
inline constexpr size_t IGNORE = 0;
// epoch_size meaning "one scheduling unit is one full sweep over the data".
inline constexpr size_t FULL_DATA_SWEEP_EPOCH = 0;

// Legacy (CNTK 2.0/2.1) unit of a learning-rate schedule: sample = N of 1, minibatch = N of 0.
enum class UnitType { sample, minibatch };

template <typename T>
class TrainingParameterSchedule {
 public:
  // A constant value; epoch_size does not matter for it.
  TrainingParameterSchedule(T value, size_t minibatch_size = IGNORE);
  // values[i] holds for epoch_size units each, the last one forever after.
  TrainingParameterSchedule(const std::vector<T>& values, size_t epoch_size, size_t minibatch_size);
  // (n, v) pairs: v holds for n units each; only the last pair may have n == 0 (taken as 1).
  TrainingParameterSchedule(const std::vector<std::pair<size_t, T>>& pairs, size_t epoch_size,
                            size_t minibatch_size);

  T value(size_t count) const;
  T operator[](size_t count) const { return value(count); }

  size_t epoch_size() const { return epoch_size_; }
  bool is_sweep_based() const { return epoch_size_ == FULL_DATA_SWEEP_EPOCH; }
  size_t minibatch_size() const { return minibatch_size_; }
  void set_minibatch_size(size_t n) { minibatch_size_ = n; }
  // False when the schedule was made without a reference minibatch size: a learner's own
  // minibatch_size option then replaces N (as CNTK's Python learners do).
  bool is_minibatch_size_explicitly_specified() const { return explicit_minibatch_size_; }
  void set_minibatch_size_explicitly_specified(bool v) { explicit_minibatch_size_ = v; }
  const std::map<size_t, T>& entries() const { return schedule_; }
  // Made by the legacy learning_rate_schedule(v, UnitType::sample): reported as
  // "Learning rate per sample" (seeds 000, 001) instead of "per 1 samples" (seed 002).
  bool is_legacy_per_sample() const { return legacy_per_sample_; }
  void set_legacy_per_sample(bool v) { legacy_per_sample_ = v; }

  // The same schedule starting at count `offset` instead of 0 (reset_learning_rate).
  TrainingParameterSchedule shifted(size_t offset) const;
  // Every value passed through f (time constants to per-sample momentums).
  template <typename F>
  TrainingParameterSchedule transformed(F f) const {
    TrainingParameterSchedule s = *this;
    for (auto& [end, v] : s.schedule_) v = f(v);
    return s;
  }

  // {version, type, epoch_size, ref_mb_size, schedule: {"end-count": value}}.
  Dictionary serialize() const;
  static TrainingParameterSchedule deserialize(const Dictionary& d);

  bool operator==(const TrainingParameterSchedule&) const = default;

 private:
  TrainingParameterSchedule() = default;
  void construct(const std::vector<std::pair<size_t, T>>& pairs);

  std::map<size_t, T> schedule_;
  size_t epoch_size_ = FULL_DATA_SWEEP_EPOCH;
  size_t minibatch_size_ = IGNORE;
  bool explicit_minibatch_size_ = false;
  bool legacy_per_sample_ = false;
};

extern template class TrainingParameterSchedule<double>;
extern template class TrainingParameterSchedule<size_t>;

using LearningRateSchedule = TrainingParameterSchedule<double>;
using MomentumSchedule = TrainingParameterSchedule<double>;
using MinibatchSizeSchedule = TrainingParameterSchedule<size_t>;

// Legacy learning-rate schedules (the API of seed 003): UnitType::sample is N = 1,
// UnitType::minibatch is N = IGNORE; the reference size counts as explicitly given.
LearningRateSchedule learning_rate_schedule(double lr, UnitType unit,
                                            size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
LearningRateSchedule learning_rate_schedule(const std::vector<double>& lr, UnitType unit,
                                            size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
LearningRateSchedule learning_rate_schedule(const std::vector<std::pair<size_t, double>>& lr,
                                            UnitType unit,
                                            size_t epoch_size = FULL_DATA_SWEEP_EPOCH);

// A schedule for values meant for minibatches of minibatch_size samples (IGNORE: for any
// minibatch); without minibatch_size, a learner's minibatch_size option decides N.
LearningRateSchedule learning_parameter_schedule(double value,
                                                 std::optional<size_t> minibatch_size = {},
                                                 size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
LearningRateSchedule learning_parameter_schedule(const std::vector<double>& values,
                                                 std::optional<size_t> minibatch_size = {},
                                                 size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
LearningRateSchedule learning_parameter_schedule(
    const std::vector<std::pair<size_t, double>>& pairs, std::optional<size_t> minibatch_size = {},
    size_t epoch_size = FULL_DATA_SWEEP_EPOCH);

// learning_parameter_schedule with minibatch_size 1.
LearningRateSchedule learning_parameter_schedule_per_sample(
    double value, size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
LearningRateSchedule learning_parameter_schedule_per_sample(
    const std::vector<double>& values, size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
LearningRateSchedule learning_parameter_schedule_per_sample(
    const std::vector<std::pair<size_t, double>>& pairs, size_t epoch_size = FULL_DATA_SWEEP_EPOCH);

// Momentum per minibatch_size samples (per minibatch when absent), argument order as CNTK's.
MomentumSchedule momentum_schedule(double value, size_t epoch_size = FULL_DATA_SWEEP_EPOCH,
                                   std::optional<size_t> minibatch_size = {});
MomentumSchedule momentum_schedule(const std::vector<double>& values,
                                   size_t epoch_size = FULL_DATA_SWEEP_EPOCH,
                                   std::optional<size_t> minibatch_size = {});
MomentumSchedule momentum_schedule(const std::vector<std::pair<size_t, double>>& pairs,
                                   size_t epoch_size = FULL_DATA_SWEEP_EPOCH,
                                   std::optional<size_t> minibatch_size = {});

MomentumSchedule momentum_schedule_per_sample(double value,
                                              size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
MomentumSchedule momentum_schedule_per_sample(const std::vector<double>& values,
                                              size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
MomentumSchedule momentum_schedule_per_sample(const std::vector<std::pair<size_t, double>>& pairs,
                                              size_t epoch_size = FULL_DATA_SWEEP_EPOCH);

// Momentum given as a time constant tc in samples: the per-sample momentum exp(-1/tc)
// (0 for tc == 0) with N = 1, so a minibatch of M samples decays by exp(-M/tc).
MomentumSchedule momentum_as_time_constant_schedule(double tc,
                                                    size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
MomentumSchedule momentum_as_time_constant_schedule(const std::vector<double>& tcs,
                                                    size_t epoch_size = FULL_DATA_SWEEP_EPOCH);
MomentumSchedule momentum_as_time_constant_schedule(
    const std::vector<std::pair<size_t, double>>& pairs, size_t epoch_size = FULL_DATA_SWEEP_EPOCH);

// Minibatch sizes in samples; the unit defaults to one sample (CNTK's epoch_size = 1).
inline constexpr size_t kMinibatchSizeScheduleEpochSize = 1;
MinibatchSizeSchedule minibatch_size_schedule(size_t size,
                                              size_t epoch_size = kMinibatchSizeScheduleEpochSize);
MinibatchSizeSchedule minibatch_size_schedule(const std::vector<size_t>& sizes,
                                              size_t epoch_size = kMinibatchSizeScheduleEpochSize);
MinibatchSizeSchedule minibatch_size_schedule(const std::vector<std::pair<size_t, size_t>>& pairs,
                                              size_t epoch_size = kMinibatchSizeScheduleEpochSize);

}  // namespace loom
