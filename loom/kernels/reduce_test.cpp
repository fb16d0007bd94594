#include "loom/kernels/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <utility>
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

const ReduceOp kOps[] = {ReduceOp::Sum,    ReduceOp::Mean,      ReduceOp::Max,
                         ReduceOp::Min,    ReduceOp::Prod,      ReduceOp::L1,
                         ReduceOp::L2,     ReduceOp::SumSquare, ReduceOp::LogSumExp,
                         ReduceOp::ArgMax, ReduceOp::ArgMin};

bool selects(ReduceOp op) {
  return op == ReduceOp::Max || op == ReduceOp::Min || op == ReduceOp::ArgMax ||
         op == ReduceOp::ArgMin;
}
// The ops that finish their results in y, so cannot accumulate.
bool in_y(ReduceOp op) {
  return op == ReduceOp::L2 || op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
}
bool has_gradient(ReduceOp op) {
  return op != ReduceOp::ArgMax && op != ReduceOp::ArgMin;
}

// Inputs for op: small integers where it selects (so that maxima tie), halves of them for Prod
// (zeros, and products that stay in float's range), else uniform in [-2, 2).
template <typename T>
std::vector<T> inputs(ReduceOp op, size_t n, unsigned seed) {
  if (selects(op)) return random_ints<T>(n, seed);
  if (op != ReduceOp::Prod) return random_vector<T>(n, seed, -2, 2);
  std::vector<T> v = random_ints<T>(n, seed);
  for (T& x : v) x *= T(0.5);
  return v;
}

// Each output's result and the gradient of its elements for dy = 1, from its group's elements
// in row-major order, in double.
struct Reference {
  std::vector<double> value, magnitude;  // magnitude: what rounding errors scale with
  std::vector<double> gradient;          // per element of x
};

template <typename T>
Reference reference(ReduceOp op, const Dims& in, const std::vector<T>& x, const Dims& out) {
  const size_t n = product(in), m = product(out);
  std::vector<std::vector<size_t>> groups(m);
  for (size_t i = 0; i < n; ++i) groups[broadcast_offset(in, out, i)].push_back(i);
  Reference r{std::vector<double>(m), std::vector<double>(m), std::vector<double>(n)};
  for (size_t o = 0; o < m; ++o) {
    const std::vector<size_t>& g = groups[o];
    double sum = 0, abs_sum = 0, squares = 0;
    double max = -std::numeric_limits<double>::infinity(), min = -max;
    size_t first_max = 0, first_min = 0;
    for (size_t k = 0; k < g.size(); ++k) {
      const double v = x[g[k]];
      sum += v;
      abs_sum += std::abs(v);
      squares += v * v;
      if (v > max) max = v, first_max = k;
      if (v < min) min = v, first_min = k;
    }
    // Products of the elements before and after each one.
    std::vector<double> before(g.size() + 1, 1.0), after(g.size() + 1, 1.0);
    for (size_t k = 0; k < g.size(); ++k) before[k + 1] = before[k] * double(x[g[k]]);
    for (size_t k = g.size(); k-- > 0;) after[k] = after[k + 1] * double(x[g[k]]);
    double exp_sum = 0;
    for (size_t i : g) exp_sum += std::exp(double(x[i]) - max);
    const double count = double(g.size()), l2 = std::sqrt(squares), lse = max + std::log(exp_sum);
    double magnitude = 0;
    switch (op) {
      case ReduceOp::Sum:
        r.value[o] = sum, magnitude = abs_sum;
        break;
      case ReduceOp::Mean:
        r.value[o] = sum / count, magnitude = abs_sum / count;
        break;
      case ReduceOp::Max:
        r.value[o] = max;
        break;
      case ReduceOp::Min:
        r.value[o] = min;
        break;
      case ReduceOp::Prod:
        r.value[o] = before[g.size()];
        break;
      case ReduceOp::L1:
        r.value[o] = abs_sum, magnitude = abs_sum;
        break;
      case ReduceOp::L2:
        r.value[o] = l2;
        break;
      case ReduceOp::SumSquare:
        r.value[o] = squares, magnitude = squares;
        break;
      case ReduceOp::LogSumExp:
        r.value[o] = lse;
        break;
      case ReduceOp::ArgMax:
        r.value[o] = double(first_max);
        break;
      case ReduceOp::ArgMin:
        r.value[o] = double(first_min);
        break;
    }
    r.magnitude[o] = magnitude;
    for (size_t k = 0; k < g.size(); ++k) {
      const double v = x[g[k]];
      double grad = 0;
      switch (op) {
        case ReduceOp::Sum:
          grad = 1;
          break;
        case ReduceOp::Mean:
          grad = 1 / count;
          break;
        case ReduceOp::Max:
          grad = k == first_max;
          break;
        case ReduceOp::Min:
          grad = k == first_min;
          break;
        case ReduceOp::Prod:
          grad = before[k] * after[k + 1];
          break;
        case ReduceOp::L1:
          grad = (v > 0) - (v < 0);
          break;
        case ReduceOp::L2:
          grad = v / l2;
          break;
        case ReduceOp::SumSquare:
          grad = 2 * v;
          break;
        case ReduceOp::LogSumExp:
          grad = std::exp(v - lse);
          break;
        case ReduceOp::ArgMax:
        case ReduceOp::ArgMin:
          break;
      }
      r.gradient[g[k]] = grad;
    }
  }
  return r;
}

template <typename T>
void check_reduce(const Dims& in, const Dims& out, unsigned seed) {
  const size_t n = product(in), m = product(out);
  if (m == 0) return;
  for (ReduceOp op : kOps) {
    const auto x = inputs<T>(op, n, seed);
    const Reference ref = reference(op, in, x, out);
    std::vector<T> fwd(m);
    reduce(op, in, x.data(), out, fwd.data(), false);
    for (size_t j = 0; j < m; ++j)
      ASSERT_NEAR(fwd[j], ref.value[j],
                  tolerance<T>() * (1 + ref.magnitude[j] + std::abs(ref.value[j])))
          << "op " << int(op) << " j " << j;
    const auto init = random_vector<T>(m, seed + 1, -2, 2);
    std::vector<T> y = init;
    if (in_y(op)) {
      EXPECT_THROW(reduce(op, in, x.data(), out, y.data(), true), ArgumentError);
    } else {
      reduce(op, in, x.data(), out, y.data(), true);
      for (size_t j = 0; j < m; ++j)
        ASSERT_NEAR(y[j], double(init[j]) + double(fwd[j]), tolerance<T>() * (1 + std::abs(y[j])))
            << "op " << int(op) << " accumulated j " << j;
    }

    const auto dy = random_vector<T>(m, seed + 2, -2, 2);
    if (!has_gradient(op)) {
      std::vector<T> dx(n);
      EXPECT_THROW(reduce_backward(op, in, x.data(), out, fwd.data(), dy.data(), dx.data(), false),
                   ArgumentError);
      continue;
    }
    for (bool accumulate : {false, true}) {
      const auto dx_init = random_vector<T>(n, seed + 3, -2, 2);
      std::vector<T> dx = dx_init;
      reduce_backward(op, in, x.data(), out, fwd.data(), dy.data(), dx.data(), accumulate);
      for (size_t i = 0; i < n; ++i) {
        const double want = double(dy[broadcast_offset(in, out, i)]) * ref.gradient[i] +
                            (accumulate ? double(dx_init[i]) : 0.0);
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
// the 16 partial sums, with tails; check_reduce covers every op and accumulate.
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
  const T inf = std::numeric_limits<T>::infinity();
  const std::pair<ReduceOp, T> empty[] = {
      {ReduceOp::Max, -inf},       {ReduceOp::Min, inf},    {ReduceOp::Prod, 1},
      {ReduceOp::LogSumExp, -inf}, {ReduceOp::L1, 0},       {ReduceOp::L2, 0},
      {ReduceOp::SumSquare, 0},    {ReduceOp::ArgMax, inf}, {ReduceOp::ArgMin, inf}};
  for (const auto& [op, value] : empty) {
    reduce<T>(op, {0, 3}, nullptr, {1, 3}, y.data(), false);
    EXPECT_EQ(y, std::vector<T>(3, value)) << int(op);
  }
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

TYPED_TEST(ReduceTest, ArgMaxAndArgMinGiveTheFirstPositionWithinTheReducedAxes) {
  using T = TypeParam;
  const std::vector<T> x = {1, 3, 3, 5, 0, 5};  // [2,3]
  std::vector<T> rows(2), cols(3), all(1);
  reduce<T>(ReduceOp::ArgMax, {2, 3}, x.data(), {2, 1}, rows.data(), false);
  EXPECT_EQ(rows, (std::vector<T>{1, 0}));
  reduce<T>(ReduceOp::ArgMax, {2, 3}, x.data(), {1, 3}, cols.data(), false);
  EXPECT_EQ(cols, (std::vector<T>{1, 0, 1}));
  reduce<T>(ReduceOp::ArgMax, {2, 3}, x.data(), {1, 1}, all.data(), false);
  EXPECT_EQ(all, (std::vector<T>{3}));  // row-major over both axes
  reduce<T>(ReduceOp::ArgMin, {2, 3}, x.data(), {2, 1}, rows.data(), false);
  EXPECT_EQ(rows, (std::vector<T>{0, 1}));
  reduce<T>(ReduceOp::ArgMin, {2, 3}, x.data(), {1, 1}, all.data(), false);
  EXPECT_EQ(all, (std::vector<T>{4}));
  // A middle axis of [2,2,2]: the position along it alone.
  const std::vector<T> z = {0, 9, 1, 2, 7, 3, 7, 4};
  std::vector<T> mid(4);
  reduce<T>(ReduceOp::ArgMax, {2, 2, 2}, z.data(), {2, 1, 2}, mid.data(), false);
  EXPECT_EQ(mid, (std::vector<T>{1, 0, 0, 1}));
}

TYPED_TEST(ReduceTest, LogSumExpIsStable) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> x = {1000, 1000, -1000, -1000, -inf, -inf, -inf, 0, inf, 1};
  std::vector<T> y(5), dx(10);
  reduce<T>(ReduceOp::LogSumExp, {5, 2}, x.data(), {5, 1}, y.data(), false);
  EXPECT_NEAR(y[0], 1000 + std::log(2.0), 1e-3);
  EXPECT_NEAR(y[1], -1000 + std::log(2.0), 1e-3);
  EXPECT_EQ(y[2], -inf);
  EXPECT_EQ(y[3], 0);
  EXPECT_EQ(y[4], inf);
  const std::vector<T> dy(5, T(1));
  reduce_backward<T>(ReduceOp::LogSumExp, {5, 2}, x.data(), {5, 1}, y.data(), dy.data(), dx.data(),
                     false);
  EXPECT_NEAR(dx[0], 0.5, 1e-4);  // float's y is within 1e-4 of 1000 + log 2
  EXPECT_NEAR(dx[3], 0.5, 1e-4);
  EXPECT_EQ(dx[6], 0);
  EXPECT_EQ(dx[7], 1);
  const std::vector<T> nan = {1, std::numeric_limits<T>::quiet_NaN()};
  reduce<T>(ReduceOp::LogSumExp, {2}, nan.data(), {1}, y.data(), false);
  EXPECT_TRUE(std::isnan(y[0]));
}

TYPED_TEST(ReduceTest, ProdGradientIsExactAtZeros) {
  using T = TypeParam;
  const std::vector<T> x = {2, 3, 4, 2, 0, 3, 0, 5, 0};  // [3,3]: no zero, one, two
  const std::vector<T> dy = {1, 1, 2};
  std::vector<T> y(3), dx(9);
  reduce<T>(ReduceOp::Prod, {3, 3}, x.data(), {3, 1}, y.data(), false);
  EXPECT_EQ(y, (std::vector<T>{24, 0, 0}));
  reduce_backward<T>(ReduceOp::Prod, {3, 3}, x.data(), {3, 1}, y.data(), dy.data(), dx.data(),
                     false);
  EXPECT_EQ(dx, (std::vector<T>{12, 8, 6, 0, 6, 0, 0, 0, 0}));
}

TYPED_TEST(ReduceTest, L2GradientIsZeroWhereTheNormIs) {
  using T = TypeParam;
  const std::vector<T> x = {0, 0, 3, -4};
  const std::vector<T> dy = {1, 10};
  std::vector<T> y(2), dx(4);
  reduce<T>(ReduceOp::L2, {2, 2}, x.data(), {2, 1}, y.data(), false);
  EXPECT_EQ(y, (std::vector<T>{0, 5}));
  reduce_backward<T>(ReduceOp::L2, {2, 2}, x.data(), {2, 1}, y.data(), dy.data(), dx.data(), false);
  EXPECT_EQ(dx[0], 0);
  EXPECT_EQ(dx[1], 0);
  EXPECT_NEAR(dx[2], 6, 1e-6);
  EXPECT_NEAR(dx[3], -8, 1e-6);
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
    // The ops that combine each group on its own, and ArgMax's second pass.
    for (ReduceOp op : {ReduceOp::Prod, ReduceOp::LogSumExp, ReduceOp::ArgMax}) {
      std::vector<T> row_results(500), col_results(400), one(1);
      reduce<T>(op, {500, 400}, x.data(), {500, 1}, row_results.data(), false);
      reduce<T>(op, {500, 400}, x.data(), {1, 400}, col_results.data(), false);
      reduce<T>(op, {200000}, x.data(), {1}, one.data(), false);
      all.insert(all.end(), row_results.begin(), row_results.end());
      all.insert(all.end(), col_results.begin(), col_results.end());
      all.push_back(one[0]);
    }
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

// reduce_sequences against a loop over each sequence's steps by SequenceLayout::row: small
// integers, so that maxima tie and sums in T are exact; an empty sequence among them; rows of
// 1, 37 (a partial cache line) and 1000 elements (columns split over threads).
TYPED_TEST(ReduceTest, SequencesSumAndMaxTheirStepsWithGradients) {
  using T = TypeParam;
  const SequenceLayout l = SequenceLayout::from_lengths({3, 0, 7, 1, 7, 2});
  for (size_t n : {size_t{1}, size_t{37}, size_t{1000}}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
      const bool sum = op == ReduceOp::Sum;
      const auto x = random_ints<T>(l.rows() * n, unsigned(n));
      std::vector<T> y(l.num_sequences() * n, T(-7));
      reduce_sequences(op, l, n, x.data(), y.data());
      const auto dy = random_ints<T>(y.size(), unsigned(n) + 1);
      std::vector<T> want_dx(x.size(), T(0));
      for (size_t b = 0; b < l.num_sequences(); ++b) {
        for (size_t k = 0; k < n; ++k) {
          T want = 0;
          for (size_t t = 0; t < l.lengths[b]; ++t) {
            const T v = x[l.row(b, t) * n + k];
            want = t == 0 ? v : (sum ? want + v : std::max(want, v));
          }
          ASSERT_EQ(y[b * n + k], want) << "op " << int(op) << " n " << n << " seq " << b;
          for (size_t t = 0; t < l.lengths[b]; ++t) {
            if (!sum && x[l.row(b, t) * n + k] != want) continue;
            want_dx[l.row(b, t) * n + k] = dy[b * n + k];
            if (!sum) break;  // the first maximum only
          }
        }
      }
      for (bool accumulate : {false, true}) {
        const auto dx_init = random_ints<T>(x.size(), unsigned(n) + 2);
        std::vector<T> dx = dx_init;
        reduce_sequences_backward(op, l, n, x.data(), y.data(), dy.data(), dx.data(), accumulate);
        for (size_t i = 0; i < x.size(); ++i)
          ASSERT_EQ(dx[i], want_dx[i] + (accumulate ? dx_init[i] : T(0)))
              << "op " << int(op) << " n " << n << " accumulate " << accumulate << " i " << i;
      }
    }
  }
}

TYPED_TEST(ReduceTest, SequenceMaxGivesNoGradientWhereTheMaxIsNaN) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const SequenceLayout l = SequenceLayout::from_lengths({2});
  const std::vector<T> x = {nan, T(1)}, dy = {T(5)};
  std::vector<T> y(1), dx(2, T(3));
  reduce_sequences(ReduceOp::Max, l, 1, x.data(), y.data());
  EXPECT_TRUE(std::isnan(y[0]));
  reduce_sequences_backward(ReduceOp::Max, l, 1, x.data(), y.data(), dy.data(), dx.data(), false);
  EXPECT_EQ(dx, (std::vector<T>{T(0), T(0)}));
}

TYPED_TEST(ReduceTest, SequencesReduceOnlyBySumAndMax) {
  using T = TypeParam;
  const SequenceLayout l = SequenceLayout::from_lengths({1});
  T x = 1, y = 0;
  EXPECT_THROW(reduce_sequences(ReduceOp::Mean, l, 1, &x, &y), ArgumentError);
  EXPECT_THROW(reduce_sequences_backward(ReduceOp::Prod, l, 1, &x, &y, &y, &x, false),
               ArgumentError);
}

}  // namespace
}  // namespace loom::kernels
