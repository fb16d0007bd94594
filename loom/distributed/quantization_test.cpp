#include "loom/distributed/quantization.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/random.h"
#include "loom/core/threads.h"

namespace loom::distributed {
namespace {

template <typename T>
struct RoundTrip {
  std::vector<T> reconstructed, residual;
};

// Quantizes values (cols columns of rows) once from a zero residual and reconstructs them.
template <typename T>
RoundTrip<T> round_trip(const std::vector<T>& values, size_t rows, int bits) {
  const size_t cols = values.size() / rows;
  RoundTrip<T> r{std::vector<T>(values.size()), std::vector<T>(values.size(), T(0))};
  std::vector<std::byte> packed(cols * quantized_column_bytes<T>(rows, bits));
  quantize_columns<T>(values.data(), r.residual.data(), rows, cols, bits, packed.data());
  unquantize_columns<T>(packed.data(), rows, cols, bits, r.reconstructed.data(), false);
  return r;
}

std::vector<float> normal_values(size_t n, uint64_t seed) {
  RandomGenerator random(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(random.normal());
  return v;
}

TEST(QuantizationTest, PacksLevelsIntoWordsAfterTheRange) {
  // The range (2 values), then ceil(rows / (32 / bits)) 32-bit words.
  EXPECT_EQ(quantized_column_bytes<float>(100, 1), 8u + 4 * 4);   // 32 per word
  EXPECT_EQ(quantized_column_bytes<float>(100, 2), 8u + 4 * 7);   // 16 per word
  EXPECT_EQ(quantized_column_bytes<float>(100, 3), 8u + 4 * 10);  // 10 per word
  EXPECT_EQ(quantized_column_bytes<float>(100, 8), 8u + 4 * 25);  // 4 per word
  EXPECT_EQ(quantized_column_bytes<double>(32, 1), 16u + 4 * 1);
  EXPECT_THROW(quantized_column_bytes<float>(10, 0), ArgumentError);
  EXPECT_THROW(quantized_column_bytes<float>(10, 9), ArgumentError);
}

// 1 bit: each sign group reconstructs to its own mean; the residual is what that loses.
TEST(QuantizationTest, OneBitReconstructsToTheMeanOfEachSignGroup) {
  const auto r = round_trip<float>({-3, -1, 2, 4, /* second column */ 1, 2, 3, 6}, 4, 1);
  EXPECT_EQ(r.reconstructed, (std::vector<float>{-2, -2, 3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(r.residual, (std::vector<float>{-1, 1, -1, 1, -2, -1, 0, 3}));
  // A column of zeros stays zeros.
  const auto z = round_trip<double>({0, 0, 0}, 3, 1);
  EXPECT_EQ(z.reconstructed, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(z.residual, (std::vector<double>{0, 0, 0}));
}

// More bits: 2^bits levels over +-4 sigma; inside the range a value is off by at most half a
// level, and the error shrinks with every bit.
TEST(QuantizationTest, MoreBitsBoundTheErrorByHalfALevel) {
  constexpr size_t kRows = 256, kCols = 3;
  const auto values = normal_values(kRows * kCols, 3);
  double previous = INFINITY;
  for (int bits = 2; bits <= 8; ++bits) {
    const auto r = round_trip<float>(values, kRows, bits);
    double worst = 0;
    for (size_t c = 0; c < kCols; ++c) {
      double squares = 0;
      for (size_t i = 0; i < kRows; ++i)
        squares += double(values[c * kRows + i]) * values[c * kRows + i];
      const double sigma = std::sqrt(squares / kRows);
      const double half_level = 8 * sigma / double((1 << bits) - 1) / 2;
      for (size_t i = 0; i < kRows; ++i) {
        const size_t k = c * kRows + i;
        EXPECT_FLOAT_EQ(r.reconstructed[k] + r.residual[k], values[k]);
        if (std::abs(values[k]) < 4 * sigma - 2 * half_level) {
          EXPECT_LE(std::abs(r.residual[k]), half_level * (1 + 1e-5)) << bits << " bits";
        }
        worst = std::max(worst, double(std::abs(r.residual[k])));
      }
    }
    EXPECT_LT(worst, previous) << bits << " bits";
    previous = worst;
  }
}

// Error feedback: what was sent over k steps plus the residual left is what was given, so the
// running sum of the reconstructions follows the running sum of the inputs.
TEST(QuantizationTest, ResidualMakesTheRunningSumExact) {
  constexpr size_t kRows = 64, kCols = 4, kSteps = 50;
  for (int bits : {1, 2, 4, 8}) {
    std::vector<double> residual(kRows * kCols, 0.0), sent(kRows * kCols, 0.0),
        given(kRows * kCols, 0.0), reconstructed(kRows * kCols);
    std::vector<std::byte> packed(kCols * quantized_column_bytes<double>(kRows, bits));
    for (size_t step = 0; step < kSteps; ++step) {
      const auto f = normal_values(kRows * kCols, 100 + step);
      std::vector<double> g(f.begin(), f.end());
      quantize_columns<double>(g.data(), residual.data(), kRows, kCols, bits, packed.data());
      unquantize_columns<double>(packed.data(), kRows, kCols, bits, reconstructed.data(), false);
      for (size_t k = 0; k < g.size(); ++k) {
        given[k] += g[k];
        sent[k] += reconstructed[k];
      }
    }
    for (size_t k = 0; k < given.size(); ++k)
      EXPECT_NEAR(sent[k] + residual[k], given[k], 1e-9) << bits << " bits";
  }
}

// Columns are quantized independently, so the bytes and residuals are the same whatever the
// thread count (workers must agree, and a resumed run must repeat itself). Large enough for
// the threaded loops.
TEST(QuantizationTest, ResultsDoNotDependOnTheThreadCount) {
  constexpr size_t kRows = 200, kCols = 784;
  const auto values = normal_values(kRows * kCols, 7);
  auto run = [&](int bits, int threads) {
    const int saved = get_max_num_cpu_threads();
    set_max_num_cpu_threads(threads);
    std::vector<float> residual(values.size(), 0.0f), reconstructed(values.size());
    std::vector<std::byte> packed(kCols * quantized_column_bytes<float>(kRows, bits));
    for (int step = 0; step < 2; ++step)  // the second step starts from a residual
      quantize_columns<float>(values.data(), residual.data(), kRows, kCols, bits, packed.data());
    unquantize_columns<float>(packed.data(), kRows, kCols, bits, reconstructed.data(), false);
    set_max_num_cpu_threads(saved);
    return std::make_tuple(packed, residual, reconstructed);
  };
  for (int bits : {1, 3}) EXPECT_TRUE(run(bits, 1) == run(bits, 4)) << bits << " bits";
}

// Why 1-bit SGD and momentum do not mix (docs/distributed.md, "Accuracy"): on a noisy quadratic
// 1/2 sum_i lambda_i w_i^2 (lambda from 1e-3 to 1, one column of 200), gradient descent with
// 1-bit error feedback settles where float does without momentum, but with unit-gain momentum
// 0.78 (the MLP recipe's per minibatch) it diverges at a step (lr lambda_max = 0.5) a quarter of
// float's limit. 1 bit reconstructs the small values as large ones and error feedback takes
// them back a step later; momentum delays both, and the loop oscillates.
TEST(QuantizationTest, OneBitErrorFeedbackWithMomentumHasASmallerStableStep) {
  constexpr size_t kDims = 200, kSteps = 2000;
  RandomGenerator random(5);
  std::vector<double> lambda(kDims);
  for (auto& l : lambda) l = std::exp(std::log(1e-3) * random.uniform());
  // The mean loss over the second half of the steps.
  auto settle = [&](bool one_bit, double momentum) {
    RandomGenerator noise(6);
    std::vector<double> w(kDims, 1.0), v(kDims, 0.0), residual(kDims, 0.0), g(kDims);
    std::vector<std::byte> packed(quantized_column_bytes<double>(kDims, 1));
    double loss = 0;
    for (size_t step = 0; step < kSteps; ++step) {
      for (size_t i = 0; i < kDims; ++i)
        g[i] = lambda[i] * w[i] + 0.1 * std::sqrt(lambda[i]) * noise.normal();
      if (one_bit) {
        quantize_columns<double>(g.data(), residual.data(), kDims, 1, 1, packed.data());
        unquantize_columns<double>(packed.data(), kDims, 1, 1, g.data(), false);
      }
      for (size_t i = 0; i < kDims; ++i) {
        v[i] = momentum * v[i] + (1 - momentum) * g[i];
        w[i] -= 0.5 * v[i];
      }
      if (step >= kSteps / 2)
        for (size_t i = 0; i < kDims; ++i) loss += 0.5 * lambda[i] * w[i] * w[i] / (kSteps / 2);
    }
    return loss;
  };
  const double float_plain = settle(false, 0), float_momentum = settle(false, 0.78);
  const double one_bit_plain = settle(true, 0), one_bit_momentum = settle(true, 0.78);
  const std::string losses = "float " + std::to_string(float_plain) + ", with momentum " +
                             std::to_string(float_momentum) + "; 1 bit " +
                             std::to_string(one_bit_plain) + ", with momentum " +
                             std::to_string(one_bit_momentum);
  EXPECT_LT(float_momentum, float_plain) << losses;           // momentum averages the noise
  EXPECT_LT(one_bit_plain, 1.5 * float_plain) << losses;      // 1 bit alone costs little
  EXPECT_GT(one_bit_momentum, 1000 * float_plain) << losses;  // together they diverge
}

TEST(QuantizationTest, UnquantizeCanAdd) {
  const std::vector<float> values{-1, 1, -1, 1};
  std::vector<float> residual(4, 0.0f), out{10, 10, 10, 10};
  std::vector<std::byte> packed(quantized_column_bytes<float>(4, 1));
  quantize_columns<float>(values.data(), residual.data(), 4, 1, 1, packed.data());
  unquantize_columns<float>(packed.data(), 4, 1, 1, out.data(), true);
  EXPECT_EQ(out, (std::vector<float>{9, 11, 9, 11}));
}

}  // namespace
}  // namespace loom::distributed
