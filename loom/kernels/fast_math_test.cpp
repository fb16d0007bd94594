#include "loom/kernels/fast_math.h"

#include <gtest/gtest.h>

#include <algorithm>
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

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMax = std::numeric_limits<float>::max();

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
  // The ends of exp_in_range's domain, reached by clamping: 0 and inf without selects.
  for (float x : {-88.0f, -87.7f, -kInf}) EXPECT_EQ(fast_exp(x), 0.0f) << x;
  for (float x : {88.73f, 89.0f, kInf}) EXPECT_EQ(fast_exp(x), kInf) << x;
  EXPECT_NEAR(fast_exp(-87.5f), std::exp(-87.5), 1.5e-45);  // subnormal
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
  EXPECT_LE(max_ulp_error(log1p_f, log1p_d, 0.0f, 1e30f), 3.0);
  EXPECT_EQ(fast_log1p(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(fast_log1p(1e-20f), 1e-20f);  // where 1 + u rounds to 1
}

// fast_math.h's float function f against std::'s double one g, through max_ulp_error.
#define LOOM_PAIR(name)       \
  float name##_f(float x) {   \
    return fast_##name(x);    \
  }                           \
  double name##_d(double x) { \
    return std::name(x);      \
  }
LOOM_PAIR(sin)
LOOM_PAIR(cos)
LOOM_PAIR(tan)
LOOM_PAIR(asin)
LOOM_PAIR(acos)
LOOM_PAIR(atan)
LOOM_PAIR(sinh)
LOOM_PAIR(cosh)
LOOM_PAIR(asinh)
LOOM_PAIR(atanh)
#undef LOOM_PAIR

TEST(FastMath, SinAndCosAreWithinTwoUlpUpToTheReductionBound) {
  const float b = kTrigReductionBound;
  EXPECT_LE(max_ulp_error(sin_f, sin_d, 0.0f, b, 0.0f, b), 2.0);
  EXPECT_LE(max_ulp_error(cos_f, cos_d, 0.0f, b, 0.0f, b), 2.0);
  // Near multiples of pi/2, where the reduction cancels most digits.
  EXPECT_LE(max_ulp_error(sin_f, sin_d, 3.14150f, 3.14170f, 6.28310f, 6.28325f), 2.0);
  EXPECT_LE(max_ulp_error(cos_f, cos_d, 1.57070f, 1.57090f, 4.71230f, 4.71245f), 2.0);
  EXPECT_EQ(std::bit_cast<uint32_t>(fast_sin(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  EXPECT_EQ(fast_sin(1e-30f), 1e-30f);
  EXPECT_EQ(fast_cos(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(fast_sin(kInf)));
  EXPECT_TRUE(std::isnan(fast_cos(-kInf)));
  EXPECT_TRUE(std::isnan(fast_sin(kNaN)));
}

TEST(FastMath, TanIsWithinFourUlpUpToTheReductionBound) {
  const float b = kTrigReductionBound;
  EXPECT_LE(max_ulp_error(tan_f, tan_d, 0.0f, b, 0.0f, b), 4.0);
  EXPECT_LE(max_ulp_error(tan_f, tan_d, 1.57070f, 1.57090f, 1.57070f, 1.57090f), 4.0);  // poles
  EXPECT_EQ(std::bit_cast<uint32_t>(fast_tan(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  EXPECT_TRUE(std::isnan(fast_tan(kInf)));
  EXPECT_TRUE(std::isnan(fast_tan(kNaN)));
}

TEST(FastMath, InverseTrigonometricFunctionsAreWithinTwoUlpAndNaNOutsideTheirDomain) {
  EXPECT_LE(max_ulp_error(asin_f, asin_d, 0.0f, 1.0f, 0.0f, 1.0f), 2.0);
  EXPECT_LE(max_ulp_error(acos_f, acos_d, 0.0f, 1.0f, 0.0f, 1.0f), 2.0);
  EXPECT_LE(max_ulp_error(atan_f, atan_d, 0.0f, kMax, 0.0f, kMax), 2.0);
  EXPECT_EQ(fast_asin(1.0f), std::asin(1.0f));
  EXPECT_EQ(fast_asin(-1.0f), std::asin(-1.0f));
  EXPECT_EQ(fast_acos(1.0f), 0.0f);
  EXPECT_EQ(fast_acos(-1.0f), static_cast<float>(std::acos(-1.0)));
  EXPECT_EQ(std::bit_cast<uint32_t>(fast_asin(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  for (float x : {1.0000001f, -1.5f, 2.0f, kInf, -kInf, kNaN}) {
    EXPECT_TRUE(std::isnan(fast_asin(x))) << x;
    EXPECT_TRUE(std::isnan(fast_acos(x))) << x;
  }
  EXPECT_EQ(fast_atan(kInf), static_cast<float>(std::atan(INFINITY)));
  EXPECT_EQ(fast_atan(-kInf), -static_cast<float>(std::atan(INFINITY)));
  EXPECT_EQ(fast_atan(1e-30f), 1e-30f);
  EXPECT_TRUE(std::isnan(fast_atan(kNaN)));
}

TEST(FastMath, HyperbolicFunctionsAreWithinTwoUlpUpToOverflow) {
  EXPECT_LE(max_ulp_error(sinh_f, sinh_d, 0.0f, 89.4f, 0.0f, 89.4f), 2.5);
  EXPECT_LE(max_ulp_error(cosh_f, cosh_d, 0.0f, 89.4f, 0.0f, 89.4f), 2.5);
  EXPECT_EQ(fast_sinh(1e-30f), 1e-30f);
  EXPECT_EQ(std::bit_cast<uint32_t>(fast_sinh(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  EXPECT_EQ(fast_cosh(0.0f), 1.0f);
  EXPECT_EQ(fast_sinh(89.5f), kInf);
  EXPECT_EQ(fast_sinh(-1000.0f), -kInf);
  EXPECT_EQ(fast_cosh(-89.5f), kInf);
  EXPECT_EQ(fast_cosh(kInf), kInf);
  EXPECT_TRUE(std::isnan(fast_sinh(kNaN)));
  EXPECT_TRUE(std::isnan(fast_cosh(kNaN)));
}

TEST(FastMath, InverseHyperbolicFunctionsAreWithinFourUlpOnTheirDomain) {
  EXPECT_LE(max_ulp_error(asinh_f, asinh_d, 0.0f, kMax, 0.0f, kMax), 4.0);
  EXPECT_LE(max_ulp_error(atanh_f, atanh_d, 0.0f, std::nextafter(1.0f, 0.0f), 0.0f,
                          std::nextafter(1.0f, 0.0f)),
            4.0);
  EXPECT_EQ(fast_asinh(1e-30f), 1e-30f);
  EXPECT_EQ(fast_asinh(-kInf), -kInf);
  EXPECT_EQ(fast_atanh(1e-30f), 1e-30f);
  EXPECT_EQ(fast_atanh(1.0f), kInf);
  EXPECT_EQ(fast_atanh(-1.0f), -kInf);
  for (float x : {1.0000001f, -2.0f, kInf, kNaN}) EXPECT_TRUE(std::isnan(fast_atanh(x))) << x;
  EXPECT_TRUE(std::isnan(fast_asinh(kNaN)));
}

// fast_pow against std::pow in double, in units in the last place of the float nearest the
// exact value; 0 where both overflow.
double pow_ulp_error(float x, float y) {
  const double want = std::pow(double{x}, double{y});
  const float got = fast_pow(x, y);
  if (want > static_cast<double>(kMax)) return got == kInf ? 0.0 : kInf;
  const float nearest = static_cast<float>(want);
  const double ulp = std::nextafter(nearest, kInf) - double{nearest};
  return std::abs(double{got} - want) / ulp;
}

TEST(FastMath, PowIsWithinAHalfUlpAndAHundredthOfEveryPositiveBase) {
  double worst = 0;
  // Every 16411th positive float (subnormals included) to powers that reach both ends of float's
  // range, then exponents over their whole range for some bases.
  for (float y :
       {-150.0f, -20.5f, -3.7f, -1.0f, -0.5f, -1e-3f, 1e-7f, 0.3f, 0.5f, 1.5f, 2.0f, 10.1f, 127.9f})
    for (int32_t bits = 1; bits < 0x7f800000; bits += 16411)  // x > 0
      worst = std::max(worst, pow_ulp_error(std::bit_cast<float>(bits), y));
  for (float x : {1e-42f, 1e-30f, 0.7f, 0.99999f, 1.0001f, 1.5f, 3.0f, 1e30f})
    for (int32_t bits = 0; bits < 0x7f800000; bits += 16411) {
      const float y = std::bit_cast<float>(bits);
      worst = std::max({worst, pow_ulp_error(x, y), pow_ulp_error(x, -y)});
    }
  EXPECT_LE(worst, 0.51);
  // Exact where the power is a float.
  for (int x = 1; x < 100; ++x)
    for (int y = -8; y <= 8; ++y) {
      const double want = std::pow(double(x), y);
      if (static_cast<float>(want) == want) {
        EXPECT_EQ(fast_pow(float(x), float(y)), want) << x << "^" << y;
      }
    }
  EXPECT_EQ(fast_pow(4.0f, 0.5f), 2.0f);
  EXPECT_EQ(fast_pow(2.0f, -149.0f), std::bit_cast<float>(1));  // the smallest subnormal
}

TEST(FastMath, PowSpecialCasesOfPositiveBases) {
  EXPECT_EQ(fast_pow(1.0f, kNaN), 1.0f);
  EXPECT_EQ(fast_pow(1.0f, kInf), 1.0f);
  EXPECT_EQ(fast_pow(1.0f, -kInf), 1.0f);
  EXPECT_EQ(fast_pow(2.0f, 0.0f), 1.0f);
  EXPECT_EQ(fast_pow(kInf, 0.5f), kInf);
  EXPECT_EQ(fast_pow(kInf, -2.0f), 0.0f);
  EXPECT_EQ(fast_pow(kInf, kInf), kInf);
  EXPECT_EQ(fast_pow(kInf, -kInf), 0.0f);
  EXPECT_EQ(fast_pow(2.0f, kInf), kInf);
  EXPECT_EQ(fast_pow(0.5f, kInf), 0.0f);
  EXPECT_EQ(fast_pow(2.0f, -kInf), 0.0f);
  EXPECT_EQ(fast_pow(0.5f, -kInf), kInf);
  EXPECT_EQ(fast_pow(2.0f, 128.0f), kInf);
  EXPECT_EQ(fast_pow(2.0f, -151.0f), 0.0f);
  EXPECT_EQ(fast_pow(3.0f, 1e30f), kInf);
  for (float x : {kNaN, 2.0f, kInf}) EXPECT_TRUE(std::isnan(fast_pow(x, kNaN))) << x;
  for (float y : {-1.0f, 0.0f, 0.5f, kInf}) EXPECT_TRUE(std::isnan(fast_pow(kNaN, y))) << y;
}

}  // namespace
}  // namespace loom::kernels
