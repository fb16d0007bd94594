#include "loom/kernels/fast_math.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace loom::kernels {
namespace {

// The largest error of f against exact (in double), in units in the last place of the float
// nearest the exact value, over every 257th float x of [low, high] (0 <= low <= high; floats of
// one sign are ordered as their bit patterns) and over -x for x in [neg_low, neg_high].
double max_ulp_error(float (*f)(float), double (*exact)(double), float low, float high,
                     float neg_low = 1, float neg_high = 0) {
  double worst = 0;
  auto walk = [&](float from, float to, float sign) {
    for (int64_t bits = std::bit_cast<int32_t>(from); bits <= std::bit_cast<int32_t>(to);
         bits += 257) {
      const float x = sign * std::bit_cast<float>(static_cast<int32_t>(bits));
      const double want = exact(x);
      const float nearest = std::abs(static_cast<float>(want));
      const double ulp =
          std::nextafter(nearest, std::numeric_limits<float>::infinity()) - double{nearest};
      worst = std::max(worst, std::abs(static_cast<double>(f(x)) - want) / ulp);
    }
  };
  walk(low, high, 1.0f);
  walk(neg_low, neg_high, -1.0f);
  return worst;
}

float exp_f(float x) {
  return fast_exp(x);
}
float tanh_f(float x) {
  return fast_tanh(x);
}
float log_f(float x) {
  return fast_log(x);
}
float log1p_f(float x) {
  return fast_log1p(x);
}
double exp_d(double x) {
  return std::exp(x);
}
double tanh_d(double x) {
  return std::tanh(x);
}
double log_d(double x) {
  return std::log(x);
}
double log1p_d(double x) {
  return std::log1p(x);
}

TEST(FastMath, ExpIsWithinTwoUlpFromMinus87Point3To88) {
  EXPECT_LE(max_ulp_error(exp_f, exp_d, 0.0f, 88.0f, 0.0f, 87.3f), 2.0);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(fast_exp(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, TanhIsWithinFourUlpEverywhere) {
  EXPECT_LE(max_ulp_error(tanh_f, tanh_d, 0.0f, 50.0f, 0.0f, 50.0f), 4.0);
  EXPECT_EQ(fast_tanh(0.0f), 0.0f);
  EXPECT_EQ(fast_tanh(1e-30f), 1e-30f);
  EXPECT_EQ(fast_tanh(60.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(fast_tanh(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, LogIsWithinTwoUlpOfEveryNormalFloat) {
  EXPECT_LE(max_ulp_error(log_f, log_d, std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::max()),
            2.0);
  EXPECT_EQ(fast_log(1.0f), 0.0f);
  EXPECT_EQ(fast_log(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fast_log(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, Log1pIsWithinThreeUlpOnItsDomainAndKeepsSmallArguments) {
  EXPECT_LE(max_ulp_error(log1p_f, log1p_d, 0.0f, 1.0f), 3.0);
  EXPECT_EQ(fast_log1p(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(fast_log1p(1e-20f), 1e-20f);  // where 1 + u rounds to 1
}

}  // namespace
}  // namespace loom::kernels
