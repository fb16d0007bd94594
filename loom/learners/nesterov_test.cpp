#include "loom/learners/nesterov.h"

#include <gtest/gtest.h>

#include "loom/learners/learners_test_util.h"

namespace loom {
namespace {

// v = b v + lr g; p -= b v + lr g with b = 0.5, lr 1 per sample, g = 1:
// step 1: v = 1, p = -1.5; step 2: v = 1.5, p = -1.5 - 0.75 - 1 = -3.25.
TEST(NesterovTest, TwoSteps) {
  auto make = [](std::vector<Parameter> p) {
    return nesterov(std::move(p), learning_rate_schedule(1, UnitType::sample), 0.5,
                    {.unit_gain = false});
  };
  EXPECT_EQ(testing::inspect_update(make, 1, 1), -1.5f);
  EXPECT_EQ(testing::inspect_update(make, 1, 2), -3.25f);
  // Unit gain scales the gradient's share by 1 - b.
  auto unit_gain = [](std::vector<Parameter> p) {
    return nesterov(std::move(p), learning_rate_schedule(1, UnitType::sample), 0.5,
                    {.unit_gain = true});
  };
  EXPECT_EQ(testing::inspect_update(unit_gain, 1, 2), -1.625f);
}

TEST(NesterovTest, CheckpointRoundTrip) {
  testing::expect_checkpoint_round_trip([](std::vector<Parameter> p) {
    return nesterov(std::move(p), 0.01, momentum_as_time_constant_schedule(50));
  });
}

}  // namespace
}  // namespace loom
