#include "loom/ops/random.h"

#include <gtest/gtest.h>

#include "loom/graph/random_state.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/ops_test_util.h"

namespace loom {
namespace {

constexpr size_t kDim = 1000, kBatch = 100;  // 100k elements

Value ones(size_t dim = kDim, size_t batch = kBatch) {
  return Value::create_batch<float>({dim}, std::vector<float>(dim * batch, 1.0f));
}

// One training-mode forward pass of f on x.
std::vector<double> train_forward(const Function& f, const Variable& x, const Value& v) {
  return values(f.forward({{x, v}}).second.at(f.output()));
}

TEST(Dropout, MasksAFractionNearTheRateAndScalesSurvivors) {
  Variable x = input_variable({kDim});
  for (double rate : {0.1, 0.5, 0.8}) {
    Function f = dropout(x, rate, 11);
    const auto y = train_forward(f, x, ones());
    size_t zeros = 0;
    for (double v : y) {
      if (v == 0) {
        ++zeros;
      } else {
        EXPECT_FLOAT_EQ(v, 1 / (1 - rate));
      }
    }
    // The binomial standard deviation for 100k draws is below 0.0016.
    EXPECT_NEAR(double(zeros) / double(y.size()), rate, 0.01) << "rate " << rate;
  }
}

TEST(Dropout, InferenceIsIdentityAndRateZeroKeepsAll) {
  Variable x = input_variable({4}, f64());
  Value v = random_batch({4}, 3, kF64, 1);
  Function f = dropout(x, 0.5);
  EXPECT_EQ(values(f.eval_one({{x, v}})), values(v));
  Function keep = dropout(x, 0.0);
  EXPECT_EQ(train_forward(keep, x, v), values(v));
}

TEST(Dropout, GradientIsTheForwardMaskTimesScale) {
  Variable x = input_variable({kDim}, {.needs_gradient = true});
  Function f = dropout(x, 0.4, 3);
  const Value in = ones(kDim, 8);
  auto [state, outs] = f.forward({{x, in}});
  const auto y = values(outs.at(f.output()));
  const Value dy = ones(kDim, 8);
  const auto dx = values(f.backward(state, {{f.output(), dy}}, {x}).at(x));
  ASSERT_EQ(dx.size(), y.size());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(dx[i], y[i]) << i;  // both mask * 1/(1-rate)
}

TEST(Dropout, SameSeedSameMasksAndDrawsAdvance) {
  Variable x = input_variable({kDim});
  Function a = dropout(x, 0.5, 42), b = dropout(x, 0.5, 42), c = dropout(x, 0.5, 43);
  const auto a1 = train_forward(a, x, ones()), b1 = train_forward(b, x, ones());
  EXPECT_EQ(a1, b1);
  EXPECT_NE(a1, train_forward(c, x, ones()));
  EXPECT_NE(a1, train_forward(a, x, ones()));  // a new mask per pass
  // Default seeds follow set_fixed_random_seed and creation order.
  set_fixed_random_seed(9);
  const auto d1 = train_forward(dropout(x, 0.5), x, ones());
  set_fixed_random_seed(9);
  EXPECT_EQ(train_forward(dropout(x, 0.5), x, ones()), d1);
}

TEST(Dropout, RejectsRatesOutsideZeroToOne) {
  Variable x = input_variable({2});
  EXPECT_THROW(dropout(x, 1.0), ArgumentError);
  EXPECT_THROW(dropout(x, -0.1), ArgumentError);
}

TEST(RandomState, RestoreContinuesTheSameMasks) {
  Variable x = input_variable({kDim});
  Function f = relu(dropout(dropout(x, 0.3, 1), 0.2));
  train_forward(f, x, ones());
  const Dictionary saved = random_state(f);
  EXPECT_EQ(saved.size(), 2u);
  const auto next = train_forward(f, x, ones());
  const auto after = train_forward(f, x, ones());
  restore_random_state(f, saved);
  EXPECT_EQ(train_forward(f, x, ones()), next);
  EXPECT_EQ(train_forward(f, x, ones()), after);
}

TEST(RandomState, MismatchedUidsAreNamed) {
  Variable x = input_variable({3});
  Function f = dropout(x, 0.5), g = dropout(x, 0.5);
  const Dictionary state = random_state(f);
  try {
    restore_random_state(g, state);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(g.uid()), std::string::npos) << e.what();
  }
  Dictionary extra = state;
  extra["Dropout999999"] = state.at(f.uid());
  try {
    restore_random_state(f, extra);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Dropout999999"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(random_state(relu(x)).map().empty());
}

}  // namespace
}  // namespace loom
