// The pipeline every built-in learner shares, exercised through sgd.
#include "loom/learners/learner.h"

#include <cmath>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "loom/core/error.h"
#include "loom/learners/learners_test_util.h"
#include "loom/learners/momentum_sgd.h"
#include "loom/learners/sgd.h"

namespace loom {
namespace {

using testing::make_parameter;
using testing::values_of;
using Grads = std::unordered_map<Variable, NDArrayView>;

Grads gradient(const Parameter& p, const std::vector<float>& g) {
  return {{p, NDArrayView::from_vector<float>({g.size()}, g)}};
}

LearningRateSchedule per_sample(double lr) {
  return learning_rate_schedule(lr, UnitType::sample);
}

TEST(LearnerTest, ZeroLearningRateStopsWithoutChanges) {
  Parameter p = make_parameter({1.0f, 2.0f});
  auto learner = sgd({p}, learning_parameter_schedule({{1, 0.5}, {0, 0.0}}, std::nullopt, 4));
  Grads g = gradient(p, {1.0f, 1.0f});
  EXPECT_TRUE(learner->update(g, 4));
  const auto after_one = values_of(p);
  EXPECT_EQ(learner->total_number_of_samples_seen(), 4u);
  EXPECT_FALSE(learner->update(g, 4));
  EXPECT_FALSE(learner->update(g, 0));  // a stopped learner does not complain
  EXPECT_EQ(values_of(p), after_one);
  EXPECT_EQ(learner->total_number_of_samples_seen(), 4u);
  EXPECT_EQ(learner->total_number_of_minibatches_seen(), 1u);
}

TEST(LearnerTest, UpdateTakesGradientsBuiltInTheCall) {
  // CNTK's seed 003: sgd_learner.update({p: g}, 2), -0.25 per minibatch of 2 at lr 0.5.
  Parameter p = make_parameter({0.0f, 0.0f});
  auto learner = sgd({p}, learning_rate_schedule(0.5, UnitType::minibatch));
  EXPECT_TRUE(learner->update({{p, NDArrayView::from_vector<float>({2}, {1.0f, 1.0f})}}, 2));
  EXPECT_EQ(values_of(p), (std::vector<float>{-0.25f, -0.25f}));
  EXPECT_EQ(learner->total_number_of_samples_seen(), 2u);
}

TEST(LearnerTest, EmptyMinibatchIsAnError) {
  Parameter p = make_parameter({1.0f});
  auto learner = sgd({p}, 0.1);
  Grads g = gradient(p, {1.0f});
  EXPECT_THROW(learner->update(g, 0), ArgumentError);
  EXPECT_EQ(values_of(p), std::vector<float>{1.0f});
}

TEST(LearnerTest, CountersAndSweepBasedSchedule) {
  Parameter p = make_parameter({0.0f});
  auto learner = sgd({p}, learning_parameter_schedule({0.3, 0.2, 0.1}));  // one value per sweep
  Grads g = gradient(p, {0.0f});
  EXPECT_EQ(learner->learning_rate(), 0.3);
  learner->update(g, 5);
  learner->update(g, 5);
  EXPECT_EQ(learner->learning_rate(), 0.3);
  learner->update(g, 5, /*sweep_end=*/true);
  EXPECT_EQ(learner->learning_rate(), 0.2);
  learner->update(g, 5, true);
  EXPECT_EQ(learner->learning_rate(), 0.1);
  EXPECT_EQ(learner->total_number_of_samples_seen(), 20u);
  EXPECT_EQ(learner->total_number_of_minibatches_seen(), 4u);
  EXPECT_EQ(learner->total_number_of_sweeps_seen(), 2u);
}

TEST(LearnerTest, SampleBasedScheduleReadsTheCountBeforeTheUpdate) {
  Parameter p = make_parameter({0.0f});
  auto learner = sgd({p}, learning_parameter_schedule({{3, 0.2}, {2, 0.4}, {1, 0.8}}, 1, 5));
  Grads g = gradient(p, {1.0f});
  std::vector<float> steps;
  for (int i = 0; i < 8; ++i) {  // minibatches of 4 samples: counts 0, 4, ..., 28
    float before = values_of(p)[0];
    learner->update(g, 4);
    steps.push_back(before - values_of(p)[0]);
  }
  const std::vector<float> expected{0.2f, 0.2f, 0.2f, 0.2f, 0.4f, 0.4f, 0.4f, 0.8f};
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_FLOAT_EQ(steps[i], expected[i]) << i;
}

// CNTK 2.7's ResetLearningRate replaces the values and keeps the reference minibatch size;
// ReferenceMinibatchSize::adopt takes the new schedule's.
TEST(LearnerTest, ResetLearningRateKeepsTheReferenceMinibatchSizeAsCntkDoes) {
  for (auto reference : {ReferenceMinibatchSize::keep, ReferenceMinibatchSize::adopt}) {
    Parameter p = make_parameter({0.0f});
    auto learner = sgd({p}, learning_parameter_schedule_per_sample(0.5));
    Grads g = gradient(p, {13.0f});  // a minibatch of 13 samples, gradient 1 each
    learner->update(g, 13);
    learner->reset_learning_rate(learning_parameter_schedule(0.1, 13), reference);
    const float before = values_of(p)[0];
    learner->update(g, 13);
    const float step = before - values_of(p)[0];
    if (reference == ReferenceMinibatchSize::keep)
      EXPECT_NEAR(step, 0.1 * 13, 1e-5);  // still per sample: 0.1 for each of 13 samples
    else
      EXPECT_NEAR(step, 0.1, 1e-6);  // per 13 samples
  }
}

TEST(LearnerTest, ACheckpointOfAnotherKindOfLearnerIsRefusedByName) {
  Parameter p = make_parameter({0.0f});
  const Dictionary saved = sgd({p}, per_sample(0.5))->create_checkpoint();
  auto momentum = momentum_sgd({p}, per_sample(0.5), momentum_schedule(0.9));
  try {
    momentum->restore_from_checkpoint(saved);
    ADD_FAILURE() << "expected a StateError";
  } catch (const StateError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("a learner made by sgd(); this learner was made by momentum_sgd()"),
              std::string::npos)
        << m;
  }
}

TEST(LearnerTest, ResetLearningRateStartsTheNewScheduleNow) {
  Parameter p = make_parameter({0.0f});
  auto learner = sgd({p}, per_sample(0.5));
  Grads g = gradient(p, {0.0f});
  for (int i = 0; i < 3; ++i) learner->update(g, 2);  // 6 samples
  learner->reset_learning_rate(learning_parameter_schedule({{1, .2}, {1, .4}}, 1, 4));
  EXPECT_EQ(learner->learning_rate(), .2);
  learner->update(g, 2);
  EXPECT_EQ(learner->learning_rate(), .2);
  learner->update(g, 2);  // 10 samples: 4 after the reset
  EXPECT_EQ(learner->learning_rate(), .4);
  // A sweep-based schedule is shifted by the sweep count.
  learner->update(g, 2, true);
  learner->reset_learning_rate(learning_parameter_schedule({.7, .6}));
  EXPECT_EQ(learner->learning_rate(), .7);
  learner->update(g, 2, true);
  EXPECT_EQ(learner->learning_rate(), .6);
}

TEST(LearnerTest, ObserverHearsEachChangeOnce) {
  Parameter p = make_parameter({0.0f});
  std::vector<std::pair<std::string, double>> heard;
  auto learner = sgd({p}, learning_parameter_schedule({{1, .1}, {1, .05}}, std::nullopt, 4));
  learner->set_progress_observer([&](const std::string& k, double v) { heard.emplace_back(k, v); });
  Grads g = gradient(p, {1.0f});
  for (int i = 0; i < 4; ++i) learner->update(g, 2);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0], std::make_pair(std::string("Learning rate per minibatch"), .1));
  EXPECT_EQ(heard[1], std::make_pair(std::string("Learning rate per minibatch"), .05));

  heard.clear();
  auto s = sgd({p}, learning_parameter_schedule_per_sample(.3));
  s->set_progress_observer([&](const std::string& k, double v) { heard.emplace_back(k, v); });
  s->update(g, 2);
  s->update(g, 2);
  auto n = sgd({p}, learning_parameter_schedule(.3, 10));
  n->set_progress_observer([&](const std::string& k, double v) { heard.emplace_back(k, v); });
  n->update(g, 2);
  // The legacy per-sample unit prints as seeds 000 and 001 do.
  auto legacy = sgd({p}, per_sample(.3));
  legacy->set_progress_observer([&](const std::string& k, double v) { heard.emplace_back(k, v); });
  legacy->update(g, 2);
  ASSERT_EQ(heard.size(), 3u);
  EXPECT_EQ(heard[0].first, "Learning rate per 1 samples");
  EXPECT_EQ(heard[1].first, "Learning rate per 10 samples");
  EXPECT_EQ(heard[2].first, "Learning rate per sample");
}

TEST(LearnerTest, ClippingByTruncation) {
  Parameter p = make_parameter({0.0f, 0.0f, 0.0f, 0.0f});
  auto learner = sgd({p}, per_sample(1.0), {.gradient_clipping_threshold_per_sample = 0.1});
  Grads g = gradient(p, {1.0f, -1.0f, 0.1f, -0.05f});
  learner->update(g, 2);  // threshold 0.1 * 2 samples
  const auto v = values_of(p);
  EXPECT_FLOAT_EQ(v[0], -0.2f);
  EXPECT_FLOAT_EQ(v[1], 0.2f);
  EXPECT_FLOAT_EQ(v[2], -0.1f);
  EXPECT_FLOAT_EQ(v[3], 0.05f);
  // The caller's gradient is left as it was.
  EXPECT_EQ(g.begin()->second.to_vector<float>()[0], 1.0f);
}

TEST(LearnerTest, ClippingByNorm) {
  Parameter p = make_parameter({0.0f, 0.0f});
  auto learner = sgd(
      {p}, per_sample(1.0),
      {.gradient_clipping_threshold_per_sample = 0.5, .gradient_clipping_with_truncation = false});
  Grads g = gradient(p, {3.0f, 4.0f});
  learner->update(g, 2);  // norm 5 > 1: scaled to norm 1
  auto v = values_of(p);
  EXPECT_FLOAT_EQ(v[0], -0.6f);
  EXPECT_FLOAT_EQ(v[1], -0.8f);
  learner->update(g, 20);  // norm 5 < 10: unchanged
  v = values_of(p);
  EXPECT_FLOAT_EQ(v[0], -3.6f);
  EXPECT_FLOAT_EQ(v[1], -4.8f);
}

TEST(LearnerTest, L2AddsWeightTimesParameterPerSample) {
  Parameter p = make_parameter({1.0f, -2.0f});
  auto learner = sgd({p}, per_sample(0.5), {.l2_regularization_weight = 0.1});
  Grads g = gradient(p, {0.0f, 0.0f});
  learner->update(g, 2);  // g += 0.1 * 2 * p; p -= 0.5 g
  auto v = values_of(p);
  EXPECT_FLOAT_EQ(v[0], 0.9f);
  EXPECT_FLOAT_EQ(v[1], -1.8f);
}

TEST(LearnerTest, L1SoftThresholdsByRateTimesWeightPerSample) {
  Parameter p = make_parameter({1.0f, -0.05f, 0.02f, -1.0f});
  auto learner = sgd({p}, per_sample(0.5), {.l1_regularization_weight = 0.1});
  Grads g = gradient(p, {0.0f, 0.0f, 0.0f, 0.0f});
  learner->update(g, 2);  // threshold 0.5 * 0.1 * 2
  auto v = values_of(p);
  EXPECT_FLOAT_EQ(v[0], 0.9f);
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_FLOAT_EQ(v[3], -0.9f);
}

TEST(LearnerTest, CompatibleModeAveragesFirstAndScalesNothingByM) {
  Parameter p = make_parameter({1.0f, 0.0f});
  auto learner = sgd({p}, learning_rate_schedule(0.5, UnitType::minibatch),
                     {.l2_regularization_weight = 0.1,
                      .gradient_clipping_threshold_per_sample = 1.0,
                      .minibatch_size = IGNORE});
  Grads g = gradient(p, {0.0f, 8.0f});
  learner->update(g, 4);  // mean [0, 2]; clipped to 1 (not 4); L2 adds 0.1 * p (not 0.4 * p)
  auto v = values_of(p);
  EXPECT_FLOAT_EQ(v[0], 1.0f - 0.5f * 0.1f);
  EXPECT_FLOAT_EQ(v[1], -0.5f);
}

TEST(LearnerTest, NoiseIsDrawnFromTheLearnersGenerator) {
  auto run = [] {
    set_fixed_random_seed(7);
    Parameter p = make_parameter(std::vector<float>(1000, 0.0f));
    auto learner = sgd({p}, per_sample(0.1), {.gaussian_noise_injection_std_dev = 0.5});
    Grads g = gradient(p, std::vector<float>(1000, 0.0f));
    learner->update(g, 1);
    return values_of(p);
  };
  const auto a = run(), b = run();
  EXPECT_EQ(a, b);
  double sum = 0, sum2 = 0;
  for (float x : a) sum += x, sum2 += double(x) * x;
  EXPECT_NEAR(sum / 1000, 0.0, 0.1);
  EXPECT_NEAR(std::sqrt(sum2 / 1000), 0.5, 0.05);
}

// N updates, checkpoint, M more; a fresh learner over fresh parameters holding the
// checkpointed values, restored, repeats the M updates bit for bit (noise and L1 included,
// and a tensor large enough for the threaded loops).
TEST(LearnerTest, CheckpointRoundTripIsBitIdentical) {
  constexpr size_t kSize = 100000;
  auto grad_at = [](const Parameter& p, int step) {
    std::vector<float> g(kSize);
    for (size_t i = 0; i < kSize; ++i) g[i] = std::sin(float(i) * 0.001f + float(step));
    return gradient(p, g);
  };
  LearnerOptions o{
      .l1_regularization_weight = 1e-4,
      .l2_regularization_weight = 1e-3,
      .gaussian_noise_injection_std_dev = learning_parameter_schedule({0.01, 0.0}, {}, 20),
      .gradient_clipping_threshold_per_sample = 0.3};
  auto lr = learning_parameter_schedule({{2, 0.2}, {0, 0.1}}, 4, 10);
  Parameter p = make_parameter(std::vector<float>(kSize, 0.5f));
  auto learner = sgd({p}, lr, o);
  int step = 0;
  for (; step < 3; ++step) {
    auto g = grad_at(p, step);
    learner->update(g, 4, step == 1);
  }
  const Dictionary checkpoint = learner->create_checkpoint();
  const NDArrayView saved = p.value().deep_clone();
  for (int s = step; s < step + 4; ++s) {
    auto g = grad_at(p, s);
    learner->update(g, 4);
  }
  const auto expected = values_of(p);

  Parameter q = parameter(saved);
  auto fresh = sgd({q}, 1.0, o);
  fresh->restore_from_checkpoint(checkpoint);
  EXPECT_EQ(fresh->total_number_of_samples_seen(), 12u);
  EXPECT_EQ(fresh->total_number_of_sweeps_seen(), 1u);
  for (int s = step; s < step + 4; ++s) {
    auto g = grad_at(q, s);
    fresh->update(g, 4);
  }
  EXPECT_EQ(values_of(q), expected);
}

TEST(LearnerTest, CheckpointHoldsCntkKeys) {
  Parameter p = make_parameter({0.0f, 0.0f});
  auto learner = sgd({p}, per_sample(0.1));
  Grads g = gradient(p, {1.0f, 1.0f});
  learner->update(g, 3, true);
  Dictionary d = learner->create_checkpoint();
  EXPECT_EQ(d.get<int64_t>("version"), 3);
  EXPECT_EQ(d.get<std::string>("type"), "Learner");
  EXPECT_EQ(d.get<uint64_t>("sample_count"), 3u);
  EXPECT_EQ(d.get<uint64_t>("minibatchCount"), 1u);
  EXPECT_EQ(d.get<uint64_t>("sweepCount"), 1u);
  EXPECT_EQ(LearningRateSchedule::deserialize(d.get_dictionary("learnig_rate_schedule")),
            per_sample(0.1));
  EXPECT_TRUE(d.contains("noise_injection_seed"));
  EXPECT_TRUE(d.contains("master_parameter_updated"));
  EXPECT_EQ(d.get<DictionaryVector>("smoothed_gradients").size(), 1u);
}

TEST(LearnerTest, RestoreRejectsAForeignCheckpoint) {
  Parameter a = make_parameter({0.0f}), b = make_parameter({0.0f});
  auto two = sgd({a, b}, 0.1);
  auto one = sgd({a}, 0.1);
  EXPECT_THROW(one->restore_from_checkpoint(two->create_checkpoint()), StateError);
  EXPECT_THROW(one->restore_from_checkpoint(Dictionary{}), StateError);
}

TEST(LearnerTest, BadArgumentsAreErrors) {
  Parameter p = make_parameter({0.0f});
  EXPECT_THROW(sgd({p}, -0.1), ArgumentError);
  EXPECT_THROW(sgd({p}, learning_parameter_schedule({0.1, -0.1}, {}, 10)), ArgumentError);
  EXPECT_THROW(sgd({p}, 0.1, {.l1_regularization_weight = -1}), ArgumentError);
  EXPECT_THROW(sgd({p}, 0.1, {.l2_regularization_weight = -1}), ArgumentError);
  EXPECT_THROW(sgd({p}, 0.1, {.gaussian_noise_injection_std_dev = -1.0}), ArgumentError);
  EXPECT_THROW(sgd({p}, 0.1, {.gradient_clipping_threshold_per_sample = 0}), ArgumentError);
  EXPECT_THROW(sgd({}, 0.1), ArgumentError);
  EXPECT_THROW(sgd({p, p}, 0.1), ArgumentError);
  auto learner = sgd({p}, 0.1);
  EXPECT_THROW(learner->reset_learning_rate(-1.0), ArgumentError);
  Grads none;
  EXPECT_THROW(learner->update(none, 1), ArgumentError);
  Grads wrong_shape{{p, NDArrayView::from_vector<float>({2}, {1.0f, 1.0f})}};
  EXPECT_THROW(learner->update(wrong_shape, 1), ShapeError);
  Grads wrong_type{{p, NDArrayView::from_vector<double>({1}, {1.0})}};
  EXPECT_THROW(learner->update(wrong_type, 1), ShapeError);
  EXPECT_EQ(learner->total_number_of_minibatches_seen(), 0u);
}

TEST(LearnerTest, DefaultUnitGainIsGlobal) {
  EXPECT_TRUE(default_unit_gain_value());
  EXPECT_TRUE(LearnerOptions{}.unit_gain);
  set_default_unit_gain_value(false);
  EXPECT_FALSE(LearnerOptions{}.unit_gain);
  set_default_unit_gain_value(true);
}

}  // namespace
}  // namespace loom
