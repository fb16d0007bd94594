#include "loom/learners/sgd.h"

#include <gtest/gtest.h>

#include "loom/learners/learners_test_util.h"

namespace loom {
namespace {

using testing::inspect_update;

// Seed 003: "unit = sample" gives -0.5 and "unit = minibatch" -0.25 for a minibatch of 2.
TEST(SgdTest, Seed003PerSampleAndPerMinibatch) {
  auto per_sample = [](std::vector<Parameter> p) {
    return sgd(std::move(p), learning_rate_schedule(0.5, UnitType::sample));
  };
  auto per_minibatch = [](std::vector<Parameter> p) {
    return sgd(std::move(p), learning_rate_schedule(0.5, UnitType::minibatch));
  };
  EXPECT_EQ(inspect_update(per_sample, 2), -0.5f);
  EXPECT_EQ(inspect_update(per_minibatch, 2), -0.25f);
}

// The current manual (CNTK-SEMANTICS §2.5): sgd(lr 0.5, minibatch_size 2), a minibatch of 10
// whose sum gradient is 10: a step of 0.5 per 2 samples gives -2.5.
TEST(SgdTest, LearnerMinibatchSizeBecomesTheReferenceSize) {
  auto make = [](std::vector<Parameter> p) {
    return sgd(std::move(p), 0.5, {.minibatch_size = 2});
  };
  EXPECT_EQ(inspect_update(make, 10, 1, 10.0f), -2.5f);
  // A schedule with its own reference size keeps it.
  auto own = [](std::vector<Parameter> p) {
    return sgd(std::move(p), learning_rate_schedule(0.5, UnitType::sample), {.minibatch_size = 2});
  };
  EXPECT_EQ(inspect_update(own, 10, 1, 10.0f), -5.0f);
}

TEST(SgdTest, LearningRateTable) {
  // CNTK-SEMANTICS §2.1: N = 0 -> lr/M on the sum, N > 0 -> lr/N; compatible mode averages
  // first and uses lr, or lr*M/N.
  auto run = [](LearningRateSchedule lr, LearnerOptions o) {
    return inspect_update([&](std::vector<Parameter> p) { return sgd(std::move(p), lr, o); }, 4, 1,
                          8.0f);
  };
  EXPECT_EQ(run(learning_parameter_schedule(0.5, IGNORE), {}), -1.0f);  // .5/4*8
  EXPECT_EQ(run(learning_parameter_schedule(0.5, 2), {}), -2.0f);       // .5/2*8
  EXPECT_EQ(run(learning_parameter_schedule(0.5, IGNORE), {.minibatch_size = IGNORE}), -1.0f);
  EXPECT_EQ(run(learning_parameter_schedule(0.5, 2), {.minibatch_size = IGNORE}), -2.0f);
  EXPECT_EQ(run(learning_parameter_schedule_per_sample(0.5), {}), -4.0f);
}

TEST(SgdTest, Float64Parameters) {
  Parameter p = testing::make_parameter<double>({0.0, 1.0});
  auto learner = sgd({p}, learning_rate_schedule(0.1, UnitType::sample));
  std::unordered_map<Variable, NDArrayView> g{
      {p, NDArrayView::from_vector<double>({2}, {1.0, -3.0})}};
  EXPECT_TRUE(learner->update(g, 3));
  EXPECT_EQ(testing::values_of<double>(p), (std::vector<double>{-0.1, 1.0 + 0.1 * 3.0}));
}

}  // namespace
}  // namespace loom
