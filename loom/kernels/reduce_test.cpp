#include "loom/kernels/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "loom/core/error.h"
#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using namespace loom::testing;

// Small integers, so that maxima tie.
template <typename T>
std::vector<T> random_ints(size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> dist(-3, 3);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(gen));
  return v;
}

struct Reference {
  std::vector<double> value, abs_sum;
  std::vector<size_t> argmax;  // first position of the max, per output
};

template <typename T>
Reference reference(ReduceOp op, const Dims& in, const std::vector<T>& x, const Dims& out) {
  const size_t n = product(in), m = product(out);
  Reference r;
  r.value.assign(m, op == ReduceOp::Max ? -std::numeric_limits<double>::infinity() : 0.0);
  r.abs_sum.assign(m, 0.0);
  r.argmax.assign(m, n);
  for (size_t i = 0; i < n; ++i) {
    const size_t o = broadcast_offset(in, out, i);
    r.abs_sum[o] += std::abs(double(x[i]));
    if (op != ReduceOp::Max) {
      r.value[o] += x[i];
    } else if (x[i] > r.value[o]) {
      r.value[o] = x[i];
      r.argmax[o] = i;
    }
  }
  if (op == ReduceOp::Mean)
    for (double& v : r.value) v /= double(n / m);
  return r;
}

template <typename T>
void check_reduce(const Dims& in, const Dims& out, unsigned seed) {
  const size_t n = product(in), m = product(out);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
    const auto x = op == ReduceOp::Max ? random_ints<T>(n, seed) : random_vector<T>(n, seed, -2, 2);
    const Reference ref = reference(op, in, x, out);
    const double count = double(n / m);
    for (bool accumulate : {false, true}) {
      const auto init = random_vector<T>(m, seed + 1, -2, 2);
      std::vector<T> y = init;
      reduce(op, in, x.data(), out, y.data(), accumulate);
      for (size_t j = 0; j < m; ++j) {
        const double want = ref.value[j] + (accumulate ? double(init[j]) : 0.0);
        const double scale = op == ReduceOp::Mean ? ref.abs_sum[j] / count : ref.abs_sum[j];
        ASSERT_NEAR(y[j], want, tolerance<T>() * (1 + scale + std::abs(want)))
            << "op " << int(op) << " acc " << accumulate << " j " << j;
      }

      // Backward, with y the non-accumulated forward result.
      std::vector<T> fwd(m);
      reduce(op, in, x.data(), out, fwd.data(), false);
      const auto dy = random_vector<T>(m, seed + 2, -2, 2);
      const auto dx_init = random_vector<T>(n, seed + 3, -2, 2);
      std::vector<T> dx = dx_init;
      reduce_backward(op, in, x.data(), out, fwd.data(), dy.data(), dx.data(), accumulate);
      for (size_t i = 0; i < n; ++i) {
        const size_t o = broadcast_offset(in, out, i);
        double g = dy[o];
        if (op == ReduceOp::Mean) g /= count;
        if (op == ReduceOp::Max) g = ref.argmax[o] == i ? g : 0.0;
        const double want = g + (accumulate ? double(dx_init[i]) : 0.0);
        ASSERT_NEAR(dx[i], want, tolerance<T>() * (1 + std::abs(want)))
            << "op " << int(op) << " acc " << accumulate << " i " << i;
      }
    }
  }
}

template <typename T>
class ReduceTest : public ::testing::Test {};
TYPED_TEST_SUITE(ReduceTest, RealTypes);

TYPED_TEST(ReduceTest, EveryAxisSubsetOfSmallShapes) {
  const Dims shapes[] = {{},     {1},       {6},          {3, 4},      {1, 5},
                         {4, 1}, {2, 3, 4}, {3, 1, 2, 5}, {2, 3, 4, 5}};
  unsigned seed = 1;
  for (const Dims& in : shapes)
    for (unsigned mask = 0; mask < (1u << in.size()); ++mask)
      check_reduce<TypeParam>(in, masked(in, ~mask), seed++);  // reduce the axes in mask
}

TYPED_TEST(ReduceTest, LargeShapesUseThreads) {
  check_reduce<TypeParam>({2000, 40}, {1, 40}, 1);    // leading rows (bias gradient)
  check_reduce<TypeParam>({2000, 40}, {2000, 1}, 2);  // last axis
  check_reduce<TypeParam>({100003}, {1}, 3);          // everything, split in blocks
  check_reduce<TypeParam>({300, 400}, {1, 1}, 4);     // everything, two axes
  check_reduce<TypeParam>({20, 300, 30}, {20, 1, 30}, 5);
  check_reduce<TypeParam>({20, 300, 30}, {1, 300, 1}, 6);
  check_reduce<TypeParam>({4, 3, 50, 300}, {4, 1, 50, 1}, 7);
}

// Per-channel sums (bias gradients) on odd sizes: runs shorter than, equal to and longer than
// the 16 partial sums, with tails; check_reduce covers Sum, Mean, Max and accumulate.
TYPED_TEST(ReduceTest, ChannelReductionsOfOddSizes) {
  unsigned seed = 100;
  for (size_t hw : {size_t{1}, size_t{7}, size_t{16}, size_t{37}}) {
    check_reduce<TypeParam>({5, 3, 1, hw}, {1, 3, 1, 1}, seed++);
    check_reduce<TypeParam>({5, 3, hw}, {1, 3, 1}, seed++);
    check_reduce<TypeParam>({5, hw}, {1, hw}, seed++);
    check_reduce<TypeParam>({3, hw}, {3, 1}, seed++);
  }
  check_reduce<TypeParam>({64, 7, 121}, {1, 7, 1}, seed++);  // threaded over channels
}

TYPED_TEST(ReduceTest, EmptyReductions) {
  using T = TypeParam;
  std::vector<T> y(3, T(7));
  reduce<T>(ReduceOp::Sum, {0, 3}, nullptr, {1, 3}, y.data(), false);
  EXPECT_EQ(y, std::vector<T>(3, T(0)));
  reduce<T>(ReduceOp::Mean, {0, 3}, nullptr, {1, 3}, y.data(), false);
  EXPECT_TRUE(std::isnan(y[0]));
  reduce<T>(ReduceOp::Max, {0, 3}, nullptr, {1, 3}, y.data(), false);
  EXPECT_EQ(y[2], -std::numeric_limits<T>::infinity());
  // Nothing to write.
  reduce<T>(ReduceOp::Sum, {3, 0}, nullptr, {1, 0}, y.data(), false);
  reduce_backward<T>(ReduceOp::Sum, {0, 3}, nullptr, {1, 3}, nullptr, y.data(), nullptr, false);
}

TYPED_TEST(ReduceTest, MaxGradientGoesToFirstMaximum) {
  using T = TypeParam;
  const std::vector<T> x = {1, 3, 3, 2, 5, 5};  // [2,3]
  const std::vector<T> dy = {10, 20};
  std::vector<T> y(2), dx(6);
  reduce<T>(ReduceOp::Max, {2, 3}, x.data(), {2, 1}, y.data(), false);
  EXPECT_EQ(y, (std::vector<T>{3, 5}));
  reduce_backward<T>(ReduceOp::Max, {2, 3}, x.data(), {2, 1}, y.data(), dy.data(), dx.data(),
                     false);
  EXPECT_EQ(dx, (std::vector<T>{0, 10, 0, 0, 20, 0}));
}

TYPED_TEST(ReduceTest, RejectsBadShapes) {
  using T = TypeParam;
  std::vector<T> x(6), y(6);
  EXPECT_THROW(reduce<T>(ReduceOp::Sum, {2, 3}, x.data(), {3}, y.data(), false), ShapeError);
  EXPECT_THROW(reduce<T>(ReduceOp::Sum, {2, 3}, x.data(), {2, 2}, y.data(), false), ShapeError);
}

TYPED_TEST(ReduceTest, ResultsDoNotDependOnThreadCount) {
  using T = TypeParam;
  const auto x = random_vector<T>(200000, 9, -2, 2);
  expect_same_for_thread_counts([&] {
    std::vector<T> all(1), rows(500), cols(400), channels(8);
    reduce<T>(ReduceOp::Sum, {200000}, x.data(), {1}, all.data(), false);
    reduce<T>(ReduceOp::Sum, {500, 400}, x.data(), {500, 1}, rows.data(), false);
    reduce<T>(ReduceOp::Mean, {500, 400}, x.data(), {1, 400}, cols.data(), false);
    reduce<T>(ReduceOp::Sum, {20, 8, 1250}, x.data(), {1, 8, 1}, channels.data(), false);
    all.insert(all.end(), rows.begin(), rows.end());
    all.insert(all.end(), channels.begin(), channels.end());
    all.insert(all.end(), cols.begin(), cols.end());
    return all;
  });
}

TYPED_TEST(ReduceTest, ScaleAndAxpy) {
  using T = TypeParam;
  for (size_t n : {size_t{0}, size_t{3}, size_t{100001}}) {
    const auto x = random_vector<T>(n, 1, -2, 2);
    auto y = random_vector<T>(n, 2, -2, 2);
    const auto y0 = y;
    axpy(n, T(0.5), x.data(), y.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], y0[i] + T(0.5) * x[i]);
    scale(n, T(-2), y.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], T(-2) * (y0[i] + T(0.5) * x[i]));
  }
}

}  // namespace
}  // namespace loom::kernels
