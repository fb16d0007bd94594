// e^x, tanh, log and log(1 + x) in plain arithmetic that the compiler vectorizes inside
// `omp simd` loops, where libm's expf, tanhf and logf stay one call per element (softmax and the
// losses spent ~11 % of a small training step in expf; tanh, sigmoid, exp and log ran at 0.1-0.2x
// PyTorch's speed, bench/README.md). float32 only: double keeps std::, which the float64 gradient
// checks compare with. Accuracy is tested over every float of a range in fast_math_test.cpp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace loom::kernels {

// e^x for x in [-87.3, 88.72], which the caller guarantees (no checks, so no blends in the
// vectorized loop; NaN gives NaN): x = n ln2 + r with |r| <= ln2/2, e^r from its Taylor
// polynomial of degree 7 (truncation below 1e-8, under half an ulp), 2^n through the exponent bits.
inline float exp_in_range(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  // ln2 split in a part with few mantissa bits (n * kLn2High is exact) and the rest.
  constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440054690583e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float n = (x * kLog2e + kRound) - kRound;
  n = n > 127.0f ? 127.0f : n;
  const float r = (x - n * kLn2High) - n * kLn2Low;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

// Within 2 ulp of std::exp for |x| <= 88 (tested), 0 below -87.3 (where e^x is subnormal), inf
// above 88.72, NaN for NaN.
inline float fast_exp(float x) {
  const float y = exp_in_range(x < -87.3f ? -87.3f : (x > 88.72f ? 88.72f : x));
  return x < -87.3f ? 0.0f
                    : (x > 88.72f ? std::numeric_limits<float>::infinity() : (x == x ? y : x));
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

// log(1 + u) for 0 <= u <= 1 (softplus, log_add_exp), within 3 ulp of std::log1p: log w of
// w = 1 + u, corrected by the rounding of w, (u - (w - 1)) / w, so that small u keep their
// digits.
inline float fast_log1p(float u) {
  const float w = 1.0f + u;
  return fast_log(w) + (u - (w - 1.0f)) / w;
}

inline double fast_log1p(double u) {
  return std::log1p(u);
}

}  // namespace loom::kernels
