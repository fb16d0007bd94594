// Seed 003, In [5]: the learners with per-parameter rates after 10 minibatches of 32 samples,
// lr 1 per minibatch, momentum time constant 1000, all-ones sum gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "loom/core/error.h"
#include "loom/core/threads.h"
#include "loom/learners/adadelta.h"
#include "loom/learners/adagrad.h"
#include "loom/learners/adam.h"
#include "loom/learners/fsadagrad.h"
#include "loom/learners/learners_test_util.h"
#include "loom/learners/rmsprop.h"

namespace loom {
namespace {

using testing::inspect_update;
using testing::printed;

const LearningRateSchedule kLr = learning_rate_schedule(1, UnitType::minibatch);
const MomentumSchedule kT = momentum_as_time_constant_schedule(1000);
constexpr size_t kMbSize = 32;

float run(const testing::LearnerFactory& make) {
  return inspect_update(make, kMbSize, 10);
}

TEST(AdaDeltaTest, Seed003) {
  EXPECT_EQ(printed(run([](auto p) { return adadelta(std::move(p), kLr, 0.999, 1e-6); })),
            "-0.0099");
  auto tuned = learning_rate_schedule(1004, UnitType::minibatch);
  EXPECT_EQ(printed(run([&](auto p) { return adadelta(std::move(p), tuned, 0.999, 1e-6); })),
            "-9.9228");
}

TEST(AdaGradTest, Seed003) {
  EXPECT_EQ(printed(run([](auto p) { return adagrad(std::move(p), kLr); })), "-0.3125");
}

TEST(AdamTest, Seed003) {
  EXPECT_EQ(printed(run([](auto p) {
              return adam(std::move(p), kLr, kT, default_variance_momentum_schedule(), 1e-8, false,
                          {.unit_gain = false});
            })),
            "-9.9203");
}

TEST(AdamaxTest, Seed003) {
  EXPECT_EQ(printed(run([](auto p) {
              return adam(std::move(p), kLr, kT, default_variance_momentum_schedule(), 1e-8, true,
                          {.unit_gain = false});
            })),
            "-9.9227");
}

TEST(FSAdaGradTest, Seed003) {
  EXPECT_EQ(printed(run([](auto p) {
              return fsadagrad(std::move(p), kLr, kT, default_variance_momentum_schedule(),
                               {.unit_gain = false});
            })),
            "-8.8573");
}

TEST(RMSPropTest, Seed003) {
  EXPECT_EQ(printed(run([](auto p) {
              return rmsprop(std::move(p), kLr, 0.999, 1.0 + 1e-9, 1.0 - 1e-9,
                             std::numeric_limits<double>::infinity(), 1e-30);
            })),
            "-0.3125");
}

TEST(AdaptiveLearnersTest, CheckpointRoundTrips) {
  testing::expect_checkpoint_round_trip([](auto p) { return adagrad(std::move(p), 0.01); });
  testing::expect_checkpoint_round_trip(
      [](auto p) { return adagrad(std::move(p), 0.01, /*need_ave_multiplier=*/false); });
  testing::expect_checkpoint_round_trip(
      [](auto p) { return rmsprop(std::move(p), 0.01, 0.9, 1.2, 0.7, 10, 1e-3); });
  testing::expect_checkpoint_round_trip([](auto p) { return adam(std::move(p), 0.01, 0.9); });
  testing::expect_checkpoint_round_trip([](auto p) {
    return adam(std::move(p), 0.01, 0.9, default_variance_momentum_schedule(), 1e-8, true);
  });
  testing::expect_checkpoint_round_trip([](auto p) { return fsadagrad(std::move(p), 0.01, 0.9); });
  testing::expect_checkpoint_round_trip([](auto p) { return adadelta(std::move(p)); });
}

// The rules that need a mean over the tensor (need_ave_multiplier) sum it in a fixed order:
// the updated parameters are bit-identical at any thread count. The size leaves partial
// blocks and lanes, and is large enough for the threaded loops.
TEST(AdaptiveLearnersTest, ResultsDoNotDependOnTheThreadCount) {
  constexpr size_t kSize = 70001;
  std::vector<float> g(kSize);
  for (size_t i = 0; i < kSize; ++i) g[i] = std::sin(float(i) * 0.01f) * 3.0f;
  auto train = [&](const testing::LearnerFactory& make, int threads) {
    const int saved = get_max_num_cpu_threads();
    set_max_num_cpu_threads(threads);
    Parameter p = testing::make_parameter(std::vector<float>(kSize, 0.25f));
    auto learner = make({p});
    std::unordered_map<Variable, NDArrayView> grads{
        {p, NDArrayView::from_vector<float>({kSize}, g)}};
    for (int step = 0; step < 3; ++step) learner->update(grads, 16);
    set_max_num_cpu_threads(saved);
    return testing::values_of<float>(p);
  };
  const std::vector<testing::LearnerFactory> rules = {
      [](auto p) { return adagrad(std::move(p), 0.01); },
      [](auto p) { return rmsprop(std::move(p), 0.01, 0.9, 1.2, 0.7, 10, 1e-3); }};
  for (const auto& make : rules) {
    const std::vector<float> one = train(make, 1);
    EXPECT_NE(one, std::vector<float>(kSize, 0.25f));
    EXPECT_EQ(train(make, 2), one);
    EXPECT_EQ(train(make, 3), one);
  }
}

TEST(AdaptiveLearnersTest, BadOptionsAreArgumentErrors) {
  Parameter p = testing::make_parameter({0.0f});
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THROW(rmsprop({p}, 0.1, 1.0, 1.1, 0.9, inf, 1e-3), ArgumentError);
  EXPECT_THROW(rmsprop({p}, 0.1, 0.9, 1.0, 0.9, inf, 1e-3), ArgumentError);
  EXPECT_THROW(rmsprop({p}, 0.1, 0.9, 1.1, 1.0, inf, 1e-3), ArgumentError);
  EXPECT_THROW(rmsprop({p}, 0.1, 0.9, 1.1, 0.9, 1e-3, 1e-3), ArgumentError);
  EXPECT_THROW(rmsprop({p}, 0.1, 0.9, 1.1, 0.9, 1, 0), ArgumentError);
  EXPECT_THROW(adam({p}, 0.1, 0.9, default_variance_momentum_schedule(), -1), ArgumentError);
  EXPECT_THROW(adam({p}, 0.1, 0.9, 2.0), ArgumentError);
  EXPECT_THROW(fsadagrad({p}, 0.1, 0.9, -0.5), ArgumentError);
  EXPECT_THROW(adadelta({p}, 1.0, 1.5), ArgumentError);
  EXPECT_THROW(adadelta({p}, 1.0, 0.9, -1), ArgumentError);
}

}  // namespace
}  // namespace loom
