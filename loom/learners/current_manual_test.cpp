// The numbers of the current CNTK manual (v2.2+ API), CNTK-SEMANTICS.md §2.5: inspect_update
// hands the learner the SUM gradient of a minibatch of M all-ones samples, i.e. M; rates and
// momentums are given with minibatch_size = IGNORE (per minibatch).
#include <gtest/gtest.h>

#include <limits>

#include "loom/learners/adadelta.h"
#include "loom/learners/adagrad.h"
#include "loom/learners/adam.h"
#include "loom/learners/fsadagrad.h"
#include "loom/learners/learners_test_util.h"
#include "loom/learners/momentum_sgd.h"
#include "loom/learners/rmsprop.h"
#include "loom/learners/sgd.h"

namespace loom {
namespace {

using testing::inspect_update;
using testing::printed;

// "Learners with individual learning rates": mb_size 32, lr_schedule =
// learning_parameter_schedule(1, minibatch_size=IGNORE), t_schedule = momentum_schedule(0.971,
// minibatch_size=IGNORE), num_steps 30.
constexpr size_t kMbSize = 32;
constexpr size_t kSteps = 30;
const LearningRateSchedule kLr = learning_parameter_schedule(1, IGNORE);
const MomentumSchedule kT = momentum_schedule(0.971, FULL_DATA_SWEEP_EPOCH, IGNORE);

float run(const testing::LearnerFactory& make) {
  return inspect_update(make, kMbSize, kSteps, float(kMbSize));
}

TEST(CurrentManualTest, AdaDelta) {
  EXPECT_EQ(printed(run([](auto p) { return adadelta(std::move(p), kLr, 0.999, 1e-6); })),
            "-0.0297");
  const auto tuned = learning_parameter_schedule(1004, IGNORE);
  EXPECT_EQ(printed(run([&](auto p) { return adadelta(std::move(p), tuned, 0.999, 1e-6); })),
            "-29.7969");
}

TEST(CurrentManualTest, AdaGrad) {
  EXPECT_EQ(printed(run([](auto p) { return adagrad(std::move(p), kLr); })), "-30.0000");
}

TEST(CurrentManualTest, Adam) {
  EXPECT_EQ(printed(run([](auto p) {
              return adam(std::move(p), kLr, kT, default_variance_momentum_schedule(), 1e-8, false,
                          {.unit_gain = false});
            })),
            "-32.3197");
}

TEST(CurrentManualTest, Adamax) {
  EXPECT_EQ(printed(run([](auto p) {
              return adam(std::move(p), kLr, kT, default_variance_momentum_schedule(), 1e-8, true,
                          {.unit_gain = false});
            })),
            "-32.3276");
}

TEST(CurrentManualTest, FSAdaGrad) {
  EXPECT_EQ(printed(run([](auto p) {
              return fsadagrad(std::move(p), kLr, kT, default_variance_momentum_schedule(),
                               {.unit_gain = false});
            })),
            "-63.1707");
}

TEST(CurrentManualTest, RMSProp) {
  EXPECT_EQ(printed(run([](auto p) {
              return rmsprop(std::move(p), kLr, 0.999, 1.0 + 1e-9, 1.0 - 1e-9,
                             std::numeric_limits<double>::infinity(), 1e-30);
            })),
            "-30.0000");
}

// "Momentum": momentum 0.9672161004820059, minibatch_size 10, 5 updates. The momentum per
// minibatch, the same momentum per 10 samples (the legacy time constant 300), and unit gain
// with lr / (1 - momentum) all print -14.3602.
TEST(CurrentManualTest, Momentum) {
  const double momentum = 0.9672161004820059;
  const size_t minibatch_size = 10;
  const auto lr_schedule = learning_parameter_schedule(1, IGNORE);
  const auto ug_schedule = learning_parameter_schedule(1 / (1 - momentum), IGNORE);
  const auto m_schedule = momentum_schedule(momentum);
  const auto t_schedule = momentum_schedule(momentum, FULL_DATA_SWEEP_EPOCH, minibatch_size);
  auto msgd = [&](auto p) {
    return momentum_sgd(std::move(p), lr_schedule, m_schedule, {.unit_gain = false});
  };
  auto tsgd = [&](auto p) {
    return momentum_sgd(std::move(p), lr_schedule, t_schedule, {.unit_gain = false});
  };
  auto usgd = [&](auto p) {
    return momentum_sgd(std::move(p), ug_schedule, m_schedule, {.unit_gain = true});
  };
  const float m = float(minibatch_size);
  EXPECT_EQ(printed(inspect_update(msgd, minibatch_size, 5, m)), "-14.3602");
  EXPECT_EQ(printed(inspect_update(tsgd, minibatch_size, 5, m)), "-14.3602");
  EXPECT_EQ(printed(inspect_update(usgd, minibatch_size, 5, m)), "-14.3602");
}

// The hello-world cells: lr 0.5 with minibatch_size IGNORE gives -0.5 for minibatches of 2 and
// of 10; with minibatch_size 2, -0.5 for 2 samples and -2.5 for 10.
TEST(CurrentManualTest, SgdPerMinibatchAndPerTwoSamples) {
  auto sgd_m = [](auto p) { return sgd(std::move(p), 0.5, {.minibatch_size = IGNORE}); };
  auto sgd_s2 = [](auto p) { return sgd(std::move(p), 0.5, {.minibatch_size = 2}); };
  EXPECT_EQ(inspect_update(sgd_m, 2, 1, 2.0f), -0.5f);
  EXPECT_EQ(inspect_update(sgd_s2, 2, 1, 2.0f), -0.5f);
  EXPECT_EQ(inspect_update(sgd_m, 10, 1, 10.0f), -0.5f);
  EXPECT_EQ(inspect_update(sgd_s2, 10, 1, 10.0f), -2.5f);
}

}  // namespace
}  // namespace loom
