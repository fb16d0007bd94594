// e^x in plain arithmetic that the compiler vectorizes inside `omp simd` loops, where libm's
// expf stays one call per element (softmax and the losses spent ~11 % of a small training step
// there). float32 only: double keeps std::exp, which the float64 gradient checks compare with.
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

}  // namespace loom::kernels
