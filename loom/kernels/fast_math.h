// e^x, tanh, log, log(1 + x), the trigonometric and hyperbolic functions and their inverses in
// plain arithmetic that the compiler vectorizes inside `omp simd` loops, where libm's expf,
// sinf, ... stay one call per element (softmax and the losses spent ~11 % of a small
// training step in expf; tanh, sigmoid, exp and log ran at 0.1-0.2x PyTorch's speed, the
// trigonometric and hyperbolic ones at 0.1-0.6x, bench/README.md). float32 only: double
// keeps std::, which the float64 gradient checks compare with. Accuracy is tested over every float
// of a range (every 257th) in fast_math_test.cpp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace loom::kernels {

// The polynomial c[0] x^n + c[1] x^(n-1) + ... + c[n] by Horner's rule, one fused multiply-add a
// step (the build's -std=c++20 contracts nothing by itself).
template <typename T, typename... C>
T poly(T x, T highest, C... lower) {
  T p = highest;
  ((p = std::fma(p, x, T(lower))), ...);
  return p;
}

// e^x for x in [-88, 89], which the caller guarantees (no checks, so no blends in the vectorized
// loop; NaN gives NaN): x = n ln2 + r with |r| <= ln2/2, e^r = 1 + r + r^2 q(r) with q of degree
// 4 fitted to (e^r - 1 - r) / r^2 (least squares reweighted toward the minimax, relative error
// 3e-9 in e^r, a twentieth of an ulp), 2^n through the exponent bits: 0 for n = -127 (x below
// about -87.68, e^x subnormal), inf past float's largest (x above 88.72).
inline float exp_in_range(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  // ln2 split in a part with few mantissa bits (n * kLn2High is exact) and the rest.
  constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440054690583e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float n = (x * kLog2e + kRound) - kRound;
  n = n > 127.0f ? 127.0f : n;
  const float r = std::fma(-n, kLn2Low, std::fma(-n, kLn2High, x));
  const float q =
      poly(r, 1.381461298e-3f, 8.368709843e-3f, 4.166838737e-2f, 1.666652069e-1f, 4.999999345e-1f);
  const float p = 1.0f + std::fma(r * r, q, r);
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

// Within 2 ulp of std::exp for x in [-87.3, 88] (tested), 0 below about -87.68 (where e^x is
// subnormal; above it a subnormal e^x is rounded once more), inf above 88.72, NaN for NaN. The
// argument is clamped into exp_in_range's domain, and its ends give 0 and inf by themselves:
// two min/max, where selecting 0, inf and NaN afterwards took three blends and made exp and
// sigmoid 1.6x slower (NaN passes both clamps, as comparisons with it are false).
inline float fast_exp(float x) {
  const float low = x < -88.0f ? -88.0f : x;
  return exp_in_range(low > 89.0f ? 89.0f : low);
}

inline double fast_exp(double x) {
  return std::exp(x);
}

// tanh(x), within 4 ulp of std::tanh: below |x| = 0.55 its odd Taylor polynomial to x^17
// (truncation 5e-9 relative), above it 1 - 2 / (e^2|x| + 1) with x's sign, where the result is
// over 0.5 and the subtraction loses nothing. ±1 beyond |x| = 44, NaN for NaN.
inline float fast_tanh(float x) {
  const float a = std::abs(x), s = x * x;
  float p = 6404582.0f / 10854718875.0f;
  p = p * s - 929569.0f / 638512875.0f;
  p = p * s + 21844.0f / 6081075.0f;
  p = p * s - 1382.0f / 155925.0f;
  p = p * s + 62.0f / 2835.0f;
  p = p * s - 17.0f / 315.0f;
  p = p * s + 2.0f / 15.0f;
  p = p * s - 1.0f / 3.0f;
  const float small = x + x * s * p;
  const float e = exp_in_range(a < 44.0f ? 2 * a : 88.0f);
  const float large = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  return a < 0.55f ? small : (x == x ? large : x);
}

inline double fast_tanh(double x) {
  return std::tanh(x);
}

// log(x) for a normal, finite x > 0, which the caller guarantees: x = 2^k m with m in
// [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m - 1) / (m + 1), |s| <= 0.172, from its
// series to s^13 (truncation 5e-11 relative), k ln2 added in two parts.
inline float log_in_range(float x) {
  constexpr int32_t kSqrtHalfBits = 0x3f3504f3;  // the bits of sqrt(1/2) rounded down
  constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440054690583e-4f;
  const int32_t bits = std::bit_cast<int32_t>(x);
  const int32_t k = (bits - kSqrtHalfBits) >> 23;
  const float m = std::bit_cast<float>(bits - k * (int32_t{1} << 23));
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float p = 1.0f / 13;
  p = p * s2 + 1.0f / 11;
  p = p * s2 + 1.0f / 9;
  p = p * s2 + 1.0f / 7;
  p = p * s2 + 1.0f / 5;
  p = p * s2 + 1.0f / 3;
  const float kf = static_cast<float>(k);
  return kf * kLn2High + ((2 * s + 2 * s * s2 * p) + kf * kLn2Low);
}

// Within 2 ulp of std::log for x >= FLT_MIN, inf for inf, NaN for NaN; the caller clamps
// smaller inputs (CNTK's log does, at 1e-37).
inline float fast_log(float x) {
  const bool finite = x <= std::numeric_limits<float>::max();
  const float y = log_in_range(finite ? x : 1.0f);
  return finite ? y : x;
}

inline double fast_log(double x) {
  return std::log(x);
}

// log(1 + u) for finite u >= 0 (softplus, log_add_exp, asinh, atanh), within 3 ulp of
// std::log1p: log w of w = 1 + u, corrected by the rounding of w, (u - (w - 1)) / w (w - 1 is
// exact for w >= 1), so that small u keep their digits.
inline float fast_log1p(float u) {
  const float w = 1.0f + u;
  return fast_log(w) + (u - (w - 1.0f)) / w;
}

inline double fast_log1p(double u) {
  return std::log1p(u);
}

// ---- trigonometric functions -------------------------------------------------------------------

// sin, cos and tan reduce x exactly enough up to this bound (tested over every float below it,
// every 257th); beyond it the kernels call std:: (elementwise.cpp), which reduces by 2/pi's
// digits to any size.
constexpr float kTrigReductionBound = 65536.0f;

// pi/2 as the sum of three floats: the first is pi/2 rounded, each next the rest rounded.
constexpr float kPiOver2A = 1.57079637050628662f, kPiOver2B = -4.37113882867379306e-8f,
                kPiOver2C = -1.71512451000588186e-15f;

// x = n pi/2 + r with |r| <= pi/4 (a rounding more), for |x| <= kTrigReductionBound: n rounded
// from x 2/pi, r by three fused multiply-adds (the first exact: x - n kPiOver2A is a multiple of
// x's ulp below 1).
struct QuarterTurns {
  float r;
  int32_t n;
};
inline QuarterTurns reduce_quarter_turns(float x) {
  constexpr float k2OverPi = 0.636619772367581343f, kRound = 12582912.0f;  // 1.5 * 2^23
  const float n = (x * k2OverPi + kRound) - kRound;
  const float r = std::fma(-n, kPiOver2C, std::fma(-n, kPiOver2B, std::fma(-n, kPiOver2A, x)));
  return {n == 0 ? x : r, static_cast<int32_t>(n)};  // r is x there, but for -0's sign
}

// sin r and cos r for |r| <= pi/4 from their Taylor polynomials (to r^9 and r^10: truncation
// below 3e-9 relative).
inline float sin_reduced(float r) {
  const float s = r * r;
  const float v = std::fma(r * s, poly(s, 1.0f / 362880, -1.0f / 5040, 1.0f / 120, -1.0f / 6), r);
  return std::copysign(v, r);  // its sign already, but for -0's
}
inline float cos_reduced(float r) {
  const float s = r * r;
  const float q = poly(s, -1.0f / 3628800, 1.0f / 40320, -1.0f / 720, 1.0f / 24);
  return std::fma(s * s, q, std::fma(-0.5f, s, 1.0f));
}

// sin(x + quarter_turns pi/2) for |x| <= kTrigReductionBound, within 2 ulp of std::sin (tested);
// NaN for inf and NaN. sin(x) = ±sin r or ±cos r by n mod 4.
inline float sin_quarter_turns(float x, int32_t quarter_turns) {
  const QuarterTurns t = reduce_quarter_turns(x);
  const int32_t n = t.n + quarter_turns;
  const float v = (n & 1) ? cos_reduced(t.r) : sin_reduced(t.r);
  return std::bit_cast<float>(std::bit_cast<int32_t>(v) ^ ((n & 2) << 30));
}
inline float fast_sin(float x) {
  return sin_quarter_turns(x, 0);
}
inline float fast_cos(float x) {
  return sin_quarter_turns(x, 1);
}

// tan x = sin r / cos r for even n, -cos r / sin r for odd n; within 3 ulp of std::tan for |x| <=
// kTrigReductionBound (tested).
inline float fast_tan(float x) {
  const QuarterTurns t = reduce_quarter_turns(x);
  const float s = sin_reduced(t.r), c = cos_reduced(t.r);
  const bool odd = t.n & 1;
  return (odd ? c : s) / (odd ? -s : c);
}

// asin a (0 <= a <= 1) and its argument's complement: for a <= 1/2, asin a = a + a^3 p(a^2);
// above, asin a = pi/2 - 2 asin(sqrt((1 - a) / 2)) (1 - a is exact there). p of degree 4 fitted to
// (asin s - s) / s^3 on s in [0, 1/2] (reweighted least squares, relative error 5e-9). Returns
// asin(s) for the s used and whether a was above 1/2; NaN above 1 (sqrt of a negative).
struct HalfAngleAsin {
  float asin_s;
  bool reflected;
};
inline HalfAngleAsin asin_half_angle(float a) {
  const bool reflected = a > 0.5f;
  const float z = reflected ? (1.0f - a) * 0.5f : a * a;
  const float s = reflected ? std::sqrt(z) : a;
  const float p =
      poly(z, 4.221856654e-2f, 2.414760110e-2f, 4.547709886e-2f, 7.495241770e-2f, 1.666675393e-1f);
  return {std::fma(s * z, p, s), reflected};
}

// Within 2 ulp of std::asin; NaN for |x| > 1 and NaN.
inline float fast_asin(float x) {
  const HalfAngleAsin h = asin_half_angle(std::abs(x));
  const float v = h.reflected ? (kPiOver2A - 2.0f * h.asin_s) + kPiOver2B : h.asin_s;
  return std::copysign(v, x);
}

// Within 2 ulp of std::acos; NaN for |x| > 1 and NaN. pi/2 - asin x below |x| = 1/2, 2 asin s
// above it (pi minus that for negative x).
inline float fast_acos(float x) {
  const HalfAngleAsin h = asin_half_angle(std::abs(x));
  const float twice = 2.0f * h.asin_s;
  const float reflected = x > 0 ? twice : (2.0f * kPiOver2A - twice) + 2.0f * kPiOver2B;
  return h.reflected ? reflected : (kPiOver2A - std::copysign(h.asin_s, x)) + kPiOver2B;
}

// Within 2 ulp of std::atan; ±pi/2 for ±inf, NaN for NaN. t = min(|x|, 1/|x|), atan t = t +
// t^3 q(t^2) with q of degree 8 fitted to (atan t - t) / t^3 on [0, 1] (reweighted least
// squares, relative error 3e-9), pi/2 - atan t where |x| > 1.
inline float fast_atan(float x) {
  const float a = std::abs(x);
  const bool inverted = a > 1.0f;
  const float t = (inverted ? 1.0f : a) / (inverted ? a : 1.0f);  // NaN stays NaN
  const float z = t * t;
  const float q =
      poly(z, -1.793620310e-3f, 1.091459956e-2f, -3.117783446e-2f, 5.795758231e-2f,
           -8.403449682e-2f, 1.095218556e-1f, -1.426424164e-1f, 1.999854828e-1f, -3.333329909e-1f);
  const float v = std::fma(t * z, q, t);
  return std::copysign(inverted ? (kPiOver2A - v) + kPiOver2B : v, x);
}

// ---- hyperbolic functions ----------------------------------------------------------------------

// e^a / 2 and e^-a / 2 for a >= 0 (NaN gives NaN): the first also beyond e^a's overflow at
// 88.72, up to cosh's at 89.42 (inf beyond), as (e^(a/2) / 2) e^(a/2); the second 0 there.
struct HalfExps {
  float up, down;
};
inline HalfExps half_exps(float a) {
  const bool huge = a > 88.0f;
  const float e = exp_in_range(huge ? 0.5f * (a < 100.0f ? a : 100.0f) : a);
  return {huge ? (0.5f * e) * e : 0.5f * e, huge ? 0.0f : 0.5f / e};
}

// Within 2 ulp of std::cosh; inf beyond 89.42, NaN for NaN.
inline float fast_cosh(float x) {
  const HalfExps h = half_exps(std::abs(x));
  return h.up + h.down;
}

// Within 2 ulp of std::sinh: below |x| = 1 its odd Taylor polynomial to x^11 (truncation 2e-10
// relative), above it e^|x| / 2 - e^-|x| / 2 with x's sign; ±inf beyond 89.42, NaN for NaN.
inline float fast_sinh(float x) {
  const float a = std::abs(x), s = x * x;
  const float small = std::fma(
      x * s, poly(s, 1.0f / 39916800, 1.0f / 362880, 1.0f / 5040, 1.0f / 120, 1.0f / 6), x);
  const HalfExps h = half_exps(a);
  return a < 1.0f ? small : std::copysign(h.up - h.down, x);
}

// Within 3 ulp of std::asinh: log(1 + u) with u = |x| + x^2 / (1 + sqrt(1 + x^2)) (= |x| +
// sqrt(1 + x^2) - 1 without the cancellation) up to |x| = 2^12, log|x| + ln2 above (where 1/x^2 is
// below float's precision), with x's sign; ±inf for ±inf, NaN for NaN.
inline float fast_asinh(float x) {
  constexpr float kLn2 = 0.693147180559945309f;
  const float a = std::abs(x);
  const bool large = a > 4096.0f;
  const float m = large ? 1.0f : a;  // keeps x^2 finite on the side not taken
  const float s = m * m;
  const float v = large ? fast_log(a) + kLn2 : fast_log1p(m + s / (1.0f + std::sqrt(1.0f + s)));
  return std::copysign(v, x);
}

// Within 3 ulp of std::atanh: log(1 + 2|x| / (1 - |x|)) / 2 with x's sign (1 - |x| is exact
// above 1/2); ±inf at ±1, NaN beyond and for NaN.
inline float fast_atanh(float x) {
  const float a = std::abs(x);
  const bool inside = a < 1.0f;
  const float m = inside ? a : 0.0f;  // keeps log1p's argument finite on the side not taken
  const float v = 0.5f * fast_log1p(2.0f * m / (1.0f - m));
  const float edge =
      a == 1.0f ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  return std::copysign(inside ? v : edge, x);
}

// ---- power -------------------------------------------------------------------------------------

// ln x in double for a float x > 0, subnormals included, with a relative error near 1e-13 (so
// that y ln x keeps the digits a float x^y needs); x itself (as double) for inf and NaN. x = 2^k m
// with m in [sqrt(1/2), sqrt(2)) (a subnormal x scaled by 2^24 first), ln m = 2 atanh(s) with s =
// (m - 1) / (m + 1), |s| <= 0.172, from its series to s^13 (truncation 1.3e-12 relative). s is
// the float quotient of a float reciprocal, corrected once in double (2^-46 relative): a double
// division would halve the width of the loop and cost more than the rest.
[[gnu::always_inline]] inline double log_wide(float x) {
  constexpr int32_t kSqrtHalfBits = 0x3f3504f3;  // the bits of sqrt(1/2) rounded down
  constexpr double kLn2 = 0.693147180559945309;
  const bool subnormal = x < std::numeric_limits<float>::min();
  const int32_t bits = std::bit_cast<int32_t>(subnormal ? x * 16777216.0f : x);
  const int32_t k = (bits - kSqrtHalfBits) >> 23;
  const double m = std::bit_cast<float>(bits - k * (int32_t{1} << 23));
  const double num = m - 1.0, den = m + 1.0;  // exact
  const float r = 1.0f / static_cast<float>(den);
  const double q = static_cast<float>(num) * r;  // m - 1 is exact in float too
  const double s = std::fma(std::fma(-q, den, num), double{r}, q);
  const double s2 = s * s;
  const double p = poly(s2, 2.0 / 13, 2.0 / 11, 2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3);
  const double kd = static_cast<double>(k) - (subnormal ? 24.0 : 0.0);
  const double v = std::fma(kd, kLn2, std::fma(s * s2, p, 2.0 * s));
  return x <= std::numeric_limits<float>::max() ? v : double{x};
}

// e^z rounded to float, for any double z: z = n ln2 + r with |r| <= ln2/2, e^r from its Taylor
// polynomial to r^8 (truncation 2e-10 relative), 2^n through the exponent bits. z is clamped into
// [-110, 90] first, whose ends round to 0 and inf; NaN gives NaN.
[[gnu::always_inline]] inline float exp_wide(double z) {
  constexpr double kLog2e = 1.44269504088896341, kLn2 = 0.693147180559945309;
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double low = z < -110.0 ? -110.0 : z;
  const double c = low > 90.0 ? 90.0 : low;
  const double t = std::fma(c, kLog2e, kRound);  // n in its low bits
  const double n = t - kRound;
  const double r = std::fma(-n, kLn2, c);
  const double p =
      poly(r, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0);
  // 2^n: n + 1023 in the exponent field (the shift drops the bits of kRound above n's).
  const uint64_t scale = (std::bit_cast<uint64_t>(t) + 1023) << 52;
  return static_cast<float>(p * std::bit_cast<double>(scale));
}

// x^y for x > 0 (inf included) or NaN: e^(y ln x) in double arithmetic, within 0.51 ulp of the
// exact value (tested), so exact where x^y is a float (4^0.5 = 2, 2^-3 = 0.125); 1 for x = 1
// whatever y, inf or 0 for x = inf and y = ±inf (by their signs and log x's), NaN for a NaN. The
// caller handles x = 0 and y = 0 (NaN for inf^0): CNTK's safe power (elementwise_impl.inc)
// checks both anyway, and a second set of checks here cost it 12 % of its time.
[[gnu::always_inline]] inline float fast_pow(float x, float y) {
  const float v = exp_wide(static_cast<double>(y) * log_wide(x));
  return x == 1 ? 1.0f : v;  // y ln 1 is NaN for an infinite y
}

inline double log_wide(double x) {
  return std::log(x);
}
inline double fast_pow(double x, double y) {
  return std::pow(x, y);
}

// double keeps std:: for the functions above (what the float64 gradient checks compare with).
inline double fast_sin(double x) {
  return std::sin(x);
}
inline double fast_cos(double x) {
  return std::cos(x);
}
inline double fast_tan(double x) {
  return std::tan(x);
}
inline double fast_asin(double x) {
  return std::asin(x);
}
inline double fast_acos(double x) {
  return std::acos(x);
}
inline double fast_atan(double x) {
  return std::atan(x);
}
inline double fast_sinh(double x) {
  return std::sinh(x);
}
inline double fast_cosh(double x) {
  return std::cosh(x);
}
inline double fast_asinh(double x) {
  return std::asinh(x);
}
inline double fast_atanh(double x) {
  return std::atanh(x);
}

}  // namespace loom::kernels
