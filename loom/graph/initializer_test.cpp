#include "loom/graph/initializer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"
#include "loom/graph/variable.h"

namespace loom {
namespace {

NDArrayView filled(const Initializer& init, const NDShape& shape, uint64_t seed = 7) {
  NDArrayView t(DataType::Float64, shape);
  RandomGenerator gen(seed);
  init.fill(t, gen);
  return t;
}

TEST(Initializer, XavierIsUniformWithinScaleTimesRootThreeOverFanIn) {
  // [in 50, out 20]: range 2 * sqrt(3 / 50).
  NDArrayView t = filled(xavier(2.0), NDShape{50, 20});
  const double range = 2.0 * std::sqrt(3.0 / 50);
  double lo = 1e9, hi = -1e9;
  for (double x : t.to_vector<double>()) lo = std::min(lo, x), hi = std::max(hi, x);
  EXPECT_LE(hi, range);
  EXPECT_GE(lo, -range);
  EXPECT_GT(hi, 0.9 * range);  // 1000 draws reach the ends
  EXPECT_LT(lo, -0.9 * range);
}

TEST(Initializer, TruncatedNormalStaysWithinTwoStandardDeviations) {
  NDArrayView t = filled(truncated_normal(0.5), NDShape{4000});
  double sum = 0, sq = 0;
  for (double x : t.to_vector<double>()) {
    EXPECT_LE(std::fabs(x), 1.0);
    sum += x, sq += x * x;
  }
  // The variance of N(0, 1) cut at +-2 is 0.774; the mean 0.
  EXPECT_NEAR(sum / 4000, 0.0, 0.03);
  EXPECT_NEAR(sq / 4000, 0.25 * 0.774, 0.02);
}

TEST(Initializer, BilinearIsCntksUpsamplingKernel) {
  NDArrayView t = filled(bilinear(3, 3), NDShape{2, 2, 3, 3});
  const std::vector<double> v = t.to_vector<double>();
  const std::vector<double> kernel = {0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25};
  for (size_t k = 0; k < 2; ++k)
    for (size_t c = 0; c < 2; ++c)
      for (size_t i = 0; i < 9; ++i)
        EXPECT_DOUBLE_EQ(v[(k * 2 + c) * 9 + i], k == c ? kernel[i] : 0.0) << k << c << i;
  // Size 4: factor 2, center 1.5: 0.25, 0.75, 0.75, 0.25 along each axis.
  NDArrayView four = filled(bilinear(4, 4), NDShape{1, 1, 4, 4});
  EXPECT_DOUBLE_EQ(four.to_vector<double>()[0], 0.25 * 0.25);
  EXPECT_DOUBLE_EQ(four.to_vector<double>()[5], 0.75 * 0.75);
  EXPECT_THROW(bilinear(3, 2), ArgumentError);
  EXPECT_THROW(filled(bilinear(3, 3), NDShape{2, 3, 3, 3}), ShapeError);
}

TEST(Initializer, WithRankSetsOnlyTheRanksGiven) {
  Initializer i = initializer_with_rank(glorot_uniform(1.0, 1, 0, 5), std::nullopt, 2);
  EXPECT_EQ(i.output_rank, 1);
  EXPECT_EQ(i.filter_rank, 2);
  EXPECT_EQ(i.seed, 5u);
  EXPECT_EQ(initializer_with_rank(i, -1).output_rank, -1);
  EXPECT_THROW(initializer_with_rank(i, std::nullopt, -1), ArgumentError);
}

// CNTK's init as an array: the parameter takes its values (converted to its type) and its
// shape, where the given shape allows it (an inferred extent allows any).
TEST(Initializer, AnArrayIsTheInitialValue) {
  const NDArrayView a = NDArrayView::from_vector<double>({2, 3}, {1, 2, 3, 4, 5, 6.5});
  const Parameter p =
      parameter({NDShape::kInferred, 3}, array_initializer(a), DataType::Float32, "W");
  EXPECT_EQ(p.shape(), (NDShape{2, 3}));
  EXPECT_EQ(p.value().to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6.5f}));
  EXPECT_EQ(p.dtype(), DataType::Float32);
  EXPECT_THROW(parameter({3, 2}, array_initializer(a), DataType::Float32, "W"), ShapeError);
  EXPECT_THROW(parameter({2, 3, 1}, array_initializer(a), DataType::Float32, "W"), ShapeError);
  // Filling a tensor of another shape is an error too.
  NDArrayView t(DataType::Float64, {3, 2});
  RandomGenerator gen;
  EXPECT_THROW(array_initializer(a).fill(t, gen), ShapeError);
}

}  // namespace
}  // namespace loom
