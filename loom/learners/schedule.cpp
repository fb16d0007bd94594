#include "loom/learners/schedule.h"

#include <cmath>
#include <string>

#include "loom/core/error.h"

namespace loom {

namespace {

constexpr int64_t kScheduleVersion = 1;
const char* const kScheduleType = "TrainingParameterSchedule";

template <typename T>
void check_value(T v) {
  if constexpr (std::is_floating_point_v<T>)
    LOOM_CHECK(!std::isnan(v), ArgumentError, "training parameter schedule: value is NaN");
}

template <typename T>
std::vector<std::pair<size_t, T>> one_unit_each(const std::vector<T>& values) {
  std::vector<std::pair<size_t, T>> pairs;
  pairs.reserve(values.size());
  for (T v : values) pairs.emplace_back(1, v);
  return pairs;
}

DictionaryValue to_dictionary_value(double v) {
  return v;
}
DictionaryValue to_dictionary_value(size_t v) {
  return uint64_t{v};
}

template <typename T>
T from_dictionary_value(const DictionaryValue& v) {
  if constexpr (std::is_same_v<T, double>)
    return v.get<double>();
  else
    return static_cast<T>(v.get<uint64_t>());
}

}  // namespace

template <typename T>
TrainingParameterSchedule<T>::TrainingParameterSchedule(T value, size_t minibatch_size)
    : minibatch_size_(minibatch_size) {
  check_value(value);
  schedule_[0] = value;
}

template <typename T>
TrainingParameterSchedule<T>::TrainingParameterSchedule(const std::vector<T>& values,
                                                        size_t epoch_size, size_t minibatch_size)
    : epoch_size_(epoch_size), minibatch_size_(minibatch_size) {
  construct(one_unit_each(values));
}

template <typename T>
TrainingParameterSchedule<T>::TrainingParameterSchedule(
    const std::vector<std::pair<size_t, T>>& pairs, size_t epoch_size, size_t minibatch_size)
    : epoch_size_(epoch_size), minibatch_size_(minibatch_size) {
  construct(pairs);
}

template <typename T>
void TrainingParameterSchedule<T>::construct(const std::vector<std::pair<size_t, T>>& pairs) {
  LOOM_CHECK(!pairs.empty(), ArgumentError, "training parameter schedule: the schedule is empty");
  // Without an epoch size the unit is one sweep, counted by the sweep counter.
  const size_t unit = is_sweep_based() ? 1 : epoch_size_;
  size_t units = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [count, value] = pairs[i];
    LOOM_CHECK(count != 0 || i + 1 == pairs.size(), ArgumentError,
               "training parameter schedule: entry ", i, " of ", pairs.size(),
               " has a count of 0; only the last entry may");
    check_value(value);
    units += count != 0 ? count : 1;
    schedule_[unit * units] = value;
  }
}

template <typename T>
T TrainingParameterSchedule<T>::value(size_t count) const {
  auto it = schedule_.upper_bound(count);
  if (it == schedule_.end()) --it;
  return it->second;
}

template <typename T>
TrainingParameterSchedule<T> TrainingParameterSchedule<T>::shifted(size_t offset) const {
  TrainingParameterSchedule s = *this;
  s.schedule_.clear();
  for (const auto& [end, v] : schedule_) s.schedule_[offset + end] = v;
  return s;
}

template <typename T>
Dictionary TrainingParameterSchedule<T>::serialize() const {
  DictionaryMap entries;
  for (const auto& [end, v] : schedule_) entries[std::to_string(end)] = to_dictionary_value(v);
  Dictionary d;
  d["version"] = kScheduleVersion;
  d["type"] = kScheduleType;
  d["epoch_size"] = uint64_t{epoch_size_};
  d["ref_mb_size"] = uint64_t{minibatch_size_};
  d["explicit_ref_mb_size"] = explicit_minibatch_size_;
  d["legacy_per_sample"] = legacy_per_sample_;
  d["schedule"] = std::move(entries);
  return d;
}

template <typename T>
TrainingParameterSchedule<T> TrainingParameterSchedule<T>::deserialize(const Dictionary& d) {
  LOOM_CHECK(d.contains("type") && d.get<std::string>("type") == kScheduleType, StateError,
             "not a serialized training parameter schedule");
  LOOM_CHECK(d.get<int64_t>("version") <= kScheduleVersion, StateError,
             "training parameter schedule: version ", d.get<int64_t>("version"),
             " is newer than this build reads (", kScheduleVersion, ")");
  TrainingParameterSchedule s;
  s.epoch_size_ = d.get<uint64_t>("epoch_size");
  s.minibatch_size_ = d.get<uint64_t>("ref_mb_size");
  s.explicit_minibatch_size_ = d.get<bool>("explicit_ref_mb_size");
  s.legacy_per_sample_ = d.get<bool>("legacy_per_sample");
  for (const auto& [key, v] : d.get<DictionaryMap>("schedule")) {
    size_t pos = 0;
    unsigned long long end = 0;
    try {
      end = std::stoull(key, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    LOOM_CHECK(pos == key.size() && pos > 0, StateError,
               "training parameter schedule: bad end-count key '", key, "'");
    s.schedule_[end] = from_dictionary_value<T>(v);
  }
  LOOM_CHECK(!s.schedule_.empty(), StateError, "training parameter schedule: no entries");
  return s;
}

template class TrainingParameterSchedule<double>;
template class TrainingParameterSchedule<size_t>;

namespace {

size_t legacy_minibatch_size(UnitType unit) {
  return unit == UnitType::sample ? 1 : IGNORE;
}

template <typename Values>
LearningRateSchedule make(const Values& values, std::optional<size_t> minibatch_size,
                          size_t epoch_size) {
  LearningRateSchedule s(values, epoch_size, minibatch_size.value_or(IGNORE));
  s.set_minibatch_size_explicitly_specified(minibatch_size.has_value());
  return s;
}

LearningRateSchedule make(double value, std::optional<size_t> minibatch_size, size_t) {
  LearningRateSchedule s(value, minibatch_size.value_or(IGNORE));
  s.set_minibatch_size_explicitly_specified(minibatch_size.has_value());
  return s;
}

double time_constant_to_momentum(double tc) {
  LOOM_CHECK(tc >= 0, ArgumentError, "momentum_as_time_constant_schedule: time constant ", tc,
             " is negative");
  return tc == 0 ? 0.0 : std::exp(-1.0 / tc);
}

}  // namespace

template <typename Values>
LearningRateSchedule make_legacy(const Values& lr, UnitType unit, size_t epoch_size) {
  LearningRateSchedule s = make(lr, legacy_minibatch_size(unit), epoch_size);
  s.set_legacy_per_sample(unit == UnitType::sample);
  return s;
}

LearningRateSchedule learning_rate_schedule(double lr, UnitType unit, size_t epoch_size) {
  return make_legacy(lr, unit, epoch_size);
}
LearningRateSchedule learning_rate_schedule(const std::vector<double>& lr, UnitType unit,
                                            size_t epoch_size) {
  return make_legacy(lr, unit, epoch_size);
}
LearningRateSchedule learning_rate_schedule(const std::vector<std::pair<size_t, double>>& lr,
                                            UnitType unit, size_t epoch_size) {
  return make_legacy(lr, unit, epoch_size);
}

LearningRateSchedule learning_parameter_schedule(double value, std::optional<size_t> minibatch_size,
                                                 size_t epoch_size) {
  return make(value, minibatch_size, epoch_size);
}
LearningRateSchedule learning_parameter_schedule(const std::vector<double>& values,
                                                 std::optional<size_t> minibatch_size,
                                                 size_t epoch_size) {
  return make(values, minibatch_size, epoch_size);
}
LearningRateSchedule learning_parameter_schedule(
    const std::vector<std::pair<size_t, double>>& pairs, std::optional<size_t> minibatch_size,
    size_t epoch_size) {
  return make(pairs, minibatch_size, epoch_size);
}

LearningRateSchedule learning_parameter_schedule_per_sample(double value, size_t epoch_size) {
  return make(value, 1, epoch_size);
}
LearningRateSchedule learning_parameter_schedule_per_sample(const std::vector<double>& values,
                                                            size_t epoch_size) {
  return make(values, 1, epoch_size);
}
LearningRateSchedule learning_parameter_schedule_per_sample(
    const std::vector<std::pair<size_t, double>>& pairs, size_t epoch_size) {
  return make(pairs, 1, epoch_size);
}

MomentumSchedule momentum_schedule(double value, size_t epoch_size,
                                   std::optional<size_t> minibatch_size) {
  return make(value, minibatch_size, epoch_size);
}
MomentumSchedule momentum_schedule(const std::vector<double>& values, size_t epoch_size,
                                   std::optional<size_t> minibatch_size) {
  return make(values, minibatch_size, epoch_size);
}
MomentumSchedule momentum_schedule(const std::vector<std::pair<size_t, double>>& pairs,
                                   size_t epoch_size, std::optional<size_t> minibatch_size) {
  return make(pairs, minibatch_size, epoch_size);
}

MomentumSchedule momentum_schedule_per_sample(double value, size_t epoch_size) {
  return make(value, 1, epoch_size);
}
MomentumSchedule momentum_schedule_per_sample(const std::vector<double>& values,
                                              size_t epoch_size) {
  return make(values, 1, epoch_size);
}
MomentumSchedule momentum_schedule_per_sample(const std::vector<std::pair<size_t, double>>& pairs,
                                              size_t epoch_size) {
  return make(pairs, 1, epoch_size);
}

MomentumSchedule momentum_as_time_constant_schedule(double tc, size_t epoch_size) {
  return make(tc, 1, epoch_size).transformed(time_constant_to_momentum);
}
MomentumSchedule momentum_as_time_constant_schedule(const std::vector<double>& tcs,
                                                    size_t epoch_size) {
  return make(tcs, 1, epoch_size).transformed(time_constant_to_momentum);
}
MomentumSchedule momentum_as_time_constant_schedule(
    const std::vector<std::pair<size_t, double>>& pairs, size_t epoch_size) {
  return make(pairs, 1, epoch_size).transformed(time_constant_to_momentum);
}

namespace {
template <typename Values>
MinibatchSizeSchedule make_sizes(const Values& values, size_t epoch_size) {
  MinibatchSizeSchedule s(values, epoch_size, IGNORE);
  for (const auto& [end, size] : s.entries())
    LOOM_CHECK(size > 0, ArgumentError, "minibatch_size_schedule: a minibatch size of 0");
  return s;
}
}  // namespace

MinibatchSizeSchedule minibatch_size_schedule(size_t size, size_t) {
  LOOM_CHECK(size > 0, ArgumentError, "minibatch_size_schedule: a minibatch size of 0");
  return MinibatchSizeSchedule(size);
}
MinibatchSizeSchedule minibatch_size_schedule(const std::vector<size_t>& sizes, size_t epoch_size) {
  return make_sizes(sizes, epoch_size);
}
MinibatchSizeSchedule minibatch_size_schedule(const std::vector<std::pair<size_t, size_t>>& pairs,
                                              size_t epoch_size) {
  return make_sizes(pairs, epoch_size);
}

}  // namespace loom
