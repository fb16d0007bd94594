#include "loom/learners/momentum_sgd.h"

#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "loom/core/error.h"
#include "loom/learners/adam.h"
#include "loom/learners/fsadagrad.h"
#include "loom/learners/learners_test_util.h"
#include "loom/learners/nesterov.h"

namespace loom {
namespace {

using testing::inspect_update;
using testing::printed;

// Seed 003, In [4]: mb 10, time constant 300, 5 updates: the two ways of giving the momentum
// without unit gain, and unit gain with lr / (1 - momentum), all print -1.436.
TEST(MomentumSgdTest, Seed003Momentum) {
  const size_t mb_size = 10;
  const double time_constant = 300;
  const double momentum = std::exp(-double(mb_size) / time_constant);
  const auto lr = learning_rate_schedule(1, UnitType::minibatch);
  const auto ug = learning_rate_schedule(1 / (1 - momentum), UnitType::minibatch);
  const auto m = momentum_schedule(momentum);
  const auto t = momentum_as_time_constant_schedule(time_constant);
  auto msgd = [&](std::vector<Parameter> p) {
    return momentum_sgd(std::move(p), lr, m, {.unit_gain = false});
  };
  auto tsgd = [&](std::vector<Parameter> p) {
    return momentum_sgd(std::move(p), lr, t, {.unit_gain = false});
  };
  auto usgd = [&](std::vector<Parameter> p) {
    return momentum_sgd(std::move(p), ug, m, {.unit_gain = true});
  };
  EXPECT_EQ(printed(inspect_update(msgd, mb_size, 5)), "-1.4360");
  EXPECT_EQ(printed(inspect_update(tsgd, mb_size, 5)), "-1.4360");
  EXPECT_EQ(printed(inspect_update(usgd, mb_size, 5)), "-1.4360");
}

TEST(MomentumSgdTest, ReportsMomentum) {
  Parameter p = testing::make_parameter({0.0f});
  auto learner = momentum_sgd({p}, 0.1, momentum_as_time_constant_schedule(100));
  std::vector<std::string> keys;
  learner->set_progress_observer([&](const std::string& k, double) { keys.push_back(k); });
  std::unordered_map<Variable, NDArrayView> g{{p, NDArrayView::from_vector<float>({1}, {1.0f})}};
  learner->update(g, 4);
  learner->update(g, 4);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"Learning rate per minibatch", "Momentum per 1 samples"}));
}

// CNTK's other momentum learners (LearnerNesterov, LearnerFSAdaGrad, LearnerAdam) override the
// update that reports the momentum: they report their learning rate only.
TEST(MomentumSgdTest, OnlyMomentumSgdReportsItsMomentum) {
  using Make = std::function<std::shared_ptr<Learner>(std::vector<Parameter>)>;
  const auto m = momentum_as_time_constant_schedule(100);
  for (const Make& make : std::vector<Make>{
           [&](std::vector<Parameter> p) { return nesterov(std::move(p), 0.1, m); },
           [&](std::vector<Parameter> p) { return adam(std::move(p), 0.1, m); },
           [&](std::vector<Parameter> p) { return fsadagrad(std::move(p), 0.1, m); }}) {
    Parameter p = testing::make_parameter({0.0f});
    auto learner = make({p});
    std::vector<std::string> keys;
    learner->set_progress_observer([&](const std::string& k, double) { keys.push_back(k); });
    std::unordered_map<Variable, NDArrayView> g{{p, NDArrayView::from_vector<float>({1}, {1.0f})}};
    learner->update(g, 4);
    EXPECT_EQ(keys, std::vector<std::string>{"Learning rate per minibatch"});
  }
}

TEST(MomentumSgdTest, CheckpointRoundTrip) {
  testing::expect_checkpoint_round_trip([](std::vector<Parameter> p) {
    return momentum_sgd(std::move(p), 0.01, momentum_schedule(0.9, FULL_DATA_SWEEP_EPOCH, 8));
  });
}

// After reset_smoothed_gradients the next step is a first step again: no velocity is left.
TEST(MomentumSgdTest, ResetSmoothedGradientsForgetsTheVelocity) {
  Parameter p = testing::make_parameter({0.0f});
  auto learner = momentum_sgd({p}, 0.1, 0.5, {.unit_gain = false});
  std::unordered_map<Variable, NDArrayView> g{{p, NDArrayView::from_vector<float>({1}, {1.0f})}};
  learner->update(g, 1);  // v = 0.1, p = -0.1
  learner->reset_smoothed_gradients();
  learner->update(g, 1);  // v = 0.1 again (not 0.15), p = -0.2
  EXPECT_FLOAT_EQ(testing::values_of(p)[0], -0.2f);
}

TEST(MomentumSgdTest, BadMomentumIsAnArgumentError) {
  Parameter p = testing::make_parameter({0.0f});
  EXPECT_THROW(momentum_sgd({p}, 0.1, 1.5), ArgumentError);
  EXPECT_THROW(momentum_sgd({p}, 0.1, -0.1), ArgumentError);
}

}  // namespace
}  // namespace loom
