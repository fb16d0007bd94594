#include "loom/distributed/quantization.h"

#include <gtest/gtest.h>

#include <cmath>
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
