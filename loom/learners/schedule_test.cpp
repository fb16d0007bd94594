#include "loom/learners/schedule.h"

#include <cmath>

#include <gtest/gtest.h>

#include "loom/core/error.h"

namespace loom {
namespace {

TEST(ScheduleTest, ScalarIsConstantAndIgnoresEpochSize) {
  auto s = learning_rate_schedule(0.5, UnitType::sample, 100);
  for (size_t c : {0, 1, 99, 100, 1000000}) EXPECT_EQ(s[c], 0.5);
  EXPECT_EQ(s.minibatch_size(), 1u);
  EXPECT_TRUE(s.is_minibatch_size_explicitly_specified());
  EXPECT_EQ(learning_rate_schedule(0.5, UnitType::minibatch).minibatch_size(), IGNORE);
}

// CNTK-SEMANTICS §2.2: pairs (n, v) with epoch_size E end at E*n1, E*(n1+n2), ...
TEST(ScheduleTest, PairsWithEpochSize) {
  auto s = learning_parameter_schedule({{3, .2}, {2, .4}, {1, .8}}, std::nullopt, 5);
  for (size_t c = 0; c <= 40; ++c) {
    const double expected = c < 15 ? .2 : (c < 25 ? .4 : .8);
    EXPECT_EQ(s[c], expected) << "count " << c;
  }
  EXPECT_EQ(s.entries().size(), 3u);
  EXPECT_EQ(s.entries().begin()->first, 15u);
  EXPECT_EQ(s.entries().rbegin()->first, 30u);
}

// Seed 003: [0.05]*3 + [0.025]*2 + [0.0125] with epoch_size 100.
TEST(ScheduleTest, ListWithEpochSize) {
  auto s =
      learning_rate_schedule({0.05, 0.05, 0.05, 0.025, 0.025, 0.0125}, UnitType::minibatch, 100);
  EXPECT_EQ(s[0], 0.05);
  EXPECT_EQ(s[299], 0.05);
  EXPECT_EQ(s[300], 0.025);
  EXPECT_EQ(s[499], 0.025);
  EXPECT_EQ(s[500], 0.0125);
  EXPECT_EQ(s[100000], 0.0125);
}

// The examples of CNTK's Python docstrings.
TEST(ScheduleTest, CntkDocstringExamples) {
  auto a = learning_parameter_schedule({0.01, 0.001}, std::nullopt, 1000);
  EXPECT_EQ(a[0], 0.01);
  EXPECT_EQ(a[1], 0.01);
  EXPECT_EQ(a[1000], 0.001);
  EXPECT_EQ(a[1001], 0.001);
  auto b = learning_parameter_schedule({{12, 0.1}, {15, 0.01}, {1, 0.001}}, std::nullopt, 100);
  EXPECT_EQ(b[0], 0.1);
  EXPECT_EQ(b[1199], 0.1);
  EXPECT_EQ(b[1200], 0.01);
  EXPECT_EQ(b[2699], 0.01);
  EXPECT_EQ(b[2700], 0.001);
  EXPECT_EQ(b[5000], 0.001);
  auto m = momentum_schedule({0.99, 0.9}, 1000);
  EXPECT_EQ(m[999], 0.99);
  EXPECT_EQ(m[1000], 0.9);
}

// Without epoch_size the unit is one sweep: the learner reads it at its sweep counter.
TEST(ScheduleTest, SweepBasedUnit) {
  auto s = momentum_schedule({{999, 0.99}, {888, 0.88}, {0, 0.77}});
  EXPECT_TRUE(s.is_sweep_based());
  EXPECT_EQ(s[0], 0.99);
  EXPECT_EQ(s[998], 0.99);
  EXPECT_EQ(s[999], 0.88);
  EXPECT_EQ(s[999 + 888 - 1], 0.88);
  EXPECT_EQ(s[999 + 888], 0.77);
  auto t = learning_parameter_schedule({0.3, 0.2, 0.1});
  EXPECT_EQ(t[0], 0.3);
  EXPECT_EQ(t[1], 0.2);
  EXPECT_EQ(t[2], 0.1);
  EXPECT_EQ(t[7], 0.1);
  EXPECT_FALSE(learning_parameter_schedule({0.3, 0.1}, std::nullopt, 10).is_sweep_based());
}

TEST(ScheduleTest, ReferenceMinibatchSizes) {
  auto a = learning_parameter_schedule(0.1);
  EXPECT_EQ(a.minibatch_size(), IGNORE);
  EXPECT_FALSE(a.is_minibatch_size_explicitly_specified());
  auto b = learning_parameter_schedule(0.1, 32);
  EXPECT_EQ(b.minibatch_size(), 32u);
  EXPECT_TRUE(b.is_minibatch_size_explicitly_specified());
  auto c = learning_parameter_schedule(0.1, IGNORE);
  EXPECT_EQ(c.minibatch_size(), IGNORE);
  EXPECT_TRUE(c.is_minibatch_size_explicitly_specified());
  EXPECT_EQ(learning_parameter_schedule_per_sample({0.1, 0.2}, 5).minibatch_size(), 1u);
  EXPECT_EQ(momentum_schedule_per_sample(0.9).minibatch_size(), 1u);
  EXPECT_EQ(momentum_schedule(0.9, FULL_DATA_SWEEP_EPOCH, 10).minibatch_size(), 10u);
  EXPECT_EQ(momentum_schedule(0.9).minibatch_size(), IGNORE);
}

TEST(ScheduleTest, MomentumAsTimeConstant) {
  auto m = momentum_as_time_constant_schedule(300);
  EXPECT_EQ(m.minibatch_size(), 1u);
  EXPECT_EQ(m[0], std::exp(-1.0 / 300));
  auto l = momentum_as_time_constant_schedule({1100, 0}, 1000);
  EXPECT_EQ(l[999], std::exp(-1.0 / 1100));
  EXPECT_EQ(l[1000], 0.0);
  EXPECT_THROW(momentum_as_time_constant_schedule(-1.0), ArgumentError);
}

TEST(ScheduleTest, MinibatchSizeSchedule) {
  auto s = minibatch_size_schedule({{2, 32}, {0, 64}}, 100);
  EXPECT_EQ(s[0], 32u);
  EXPECT_EQ(s[199], 32u);
  EXPECT_EQ(s[200], 64u);
  EXPECT_EQ(minibatch_size_schedule(256)[12345], 256u);
  auto per_sample = minibatch_size_schedule({16, 32});  // epoch_size 1: unit of one sample
  EXPECT_EQ(per_sample[0], 16u);
  EXPECT_EQ(per_sample[1], 32u);
  EXPECT_THROW(minibatch_size_schedule(0), ArgumentError);
  EXPECT_THROW(minibatch_size_schedule({8, 0}), ArgumentError);
}

TEST(ScheduleTest, BadSchedulesAreArgumentErrors) {
  EXPECT_THROW(learning_parameter_schedule(std::vector<double>{}), ArgumentError);
  EXPECT_THROW(learning_parameter_schedule({{1, .1}, {0, .2}, {1, .3}}, std::nullopt, 10),
               ArgumentError);
  EXPECT_NO_THROW(learning_parameter_schedule({{1, .1}, {0, .2}}, std::nullopt, 10));
  EXPECT_THROW(learning_parameter_schedule(std::nan("")), ArgumentError);
}

TEST(ScheduleTest, ShiftedStartsLater) {
  auto s = learning_parameter_schedule({{1, .1}, {1, .2}}, std::nullopt, 10).shifted(35);
  EXPECT_EQ(s[0], .1);
  EXPECT_EQ(s[44], .1);
  EXPECT_EQ(s[45], .2);
  EXPECT_EQ(s[1000], .2);
}

TEST(ScheduleTest, SerializeRoundTrip) {
  auto s = learning_parameter_schedule({{3, .2}, {2, .4}, {1, .8}}, 7, 5);
  Dictionary d = s.serialize();
  EXPECT_EQ(d.get<uint64_t>("epoch_size"), 5u);
  EXPECT_EQ(d.get<uint64_t>("ref_mb_size"), 7u);
  EXPECT_EQ(Dictionary(d.get<DictionaryMap>("schedule")).get<double>("25"), .4);
  EXPECT_EQ(LearningRateSchedule::deserialize(d), s);
  auto m = minibatch_size_schedule({{2, 32}, {0, 64}}, 100);
  EXPECT_EQ(MinibatchSizeSchedule::deserialize(m.serialize()), m);
  Dictionary bad = d;
  bad["type"] = "Something";
  EXPECT_THROW(LearningRateSchedule::deserialize(bad), StateError);
}

}  // namespace
}  // namespace loom
