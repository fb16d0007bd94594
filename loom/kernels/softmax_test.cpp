#include "loom/kernels/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using namespace loom::testing;

// log(sum(exp(row))) in long double, no shift needed for the test ranges.
template <typename T>
double lse_ref(size_t cols, const T* x) {
  long double s = 0;
  for (size_t j = 0; j < cols; ++j) s += std::exp(static_cast<long double>(x[j]));
  return static_cast<double>(std::log(s));
}

template <typename T>
class SoftmaxTest : public ::testing::Test {};
TYPED_TEST_SUITE(SoftmaxTest, RealTypes);

struct Size {
  size_t rows, cols;
};
// Rows narrower than 16 are worked on 8 at a time (37 leaves a partial block; 3000 x 15 is
// split across threads).
const Size kSizes[] = {{0, 5}, {1, 1}, {3, 7}, {37, 10}, {3000, 15}, {10, 1000}, {2000, 33}};

TYPED_TEST(SoftmaxTest, ForwardMatchesReference) {
  using T = TypeParam;
  unsigned seed = 1;
  for (const Size& s : kSizes) {
    const size_t n = s.rows * s.cols;
    const auto x = random_vector<T>(n, seed++, -3, 3);
    std::vector<T> sm(n), lsm(n), lse(s.rows);
    softmax(s.rows, s.cols, x.data(), sm.data());
    log_softmax(s.rows, s.cols, x.data(), lsm.data());
    logsumexp(s.rows, s.cols, x.data(), lse.data());
    for (size_t r = 0; r < s.rows; ++r) {
      const double l = lse_ref(s.cols, x.data() + r * s.cols);
      ASSERT_NEAR(lse[r], l, tolerance<T>() * (1 + std::abs(l)));
      for (size_t j = 0; j < s.cols; ++j) {
        const size_t i = r * s.cols + j;
        const double want_log = double(x[i]) - l;
        ASSERT_NEAR(lsm[i], want_log, tolerance<T>() * (1 + std::abs(want_log) + std::abs(l)));
        ASSERT_NEAR(sm[i], std::exp(want_log), tolerance<T>() * std::exp(want_log) * 2);
      }
    }
  }
}

TYPED_TEST(SoftmaxTest, BackwardMatchesReference) {
  using T = TypeParam;
  unsigned seed = 10;
  for (const Size& s : kSizes) {
    const size_t n = s.rows * s.cols;
    const auto x = random_vector<T>(n, seed++, -3, 3), dy = random_vector<T>(n, seed++, -3, 3);
    std::vector<T> sm(n), lsm(n);
    softmax(s.rows, s.cols, x.data(), sm.data());
    log_softmax(s.rows, s.cols, x.data(), lsm.data());
    for (bool accumulate : {false, true}) {
      const auto init = random_vector<T>(n, seed++, -3, 3);
      std::vector<T> dsm = init, dlsm = init;
      softmax_backward(s.rows, s.cols, sm.data(), dy.data(), dsm.data(), accumulate);
      log_softmax_backward(s.rows, s.cols, lsm.data(), dy.data(), dlsm.data(), accumulate);
      for (size_t r = 0; r < s.rows; ++r) {
        double dot = 0, sum = 0, mag = 0;
        for (size_t j = 0; j < s.cols; ++j) {
          const size_t i = r * s.cols + j;
          dot += double(dy[i]) * sm[i];
          sum += dy[i];
          mag += std::abs(double(dy[i]));
        }
        for (size_t j = 0; j < s.cols; ++j) {
          const size_t i = r * s.cols + j;
          const double base = accumulate ? double(init[i]) : 0.0;
          const double want_sm = base + sm[i] * (dy[i] - dot);
          const double want_lsm = base + dy[i] - std::exp(double(lsm[i])) * sum;
          ASSERT_NEAR(dsm[i], want_sm, tolerance<T>() * (1 + mag + std::abs(want_sm)));
          ASSERT_NEAR(dlsm[i], want_lsm, tolerance<T>() * (1 + mag + std::abs(want_lsm)));
        }
      }
    }
  }
}

TYPED_TEST(SoftmaxTest, ExtremeInputs) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity();
  // Large values do not overflow; -inf entries get probability 0; a row of -inf is NaN with
  // logsumexp -inf.
  const std::vector<T> x = {1000, 999, -1000, 5, -inf, 5, -inf, -inf, -inf};
  std::vector<T> sm(9), lsm(9), lse(3);
  softmax<T>(3, 3, x.data(), sm.data());
  log_softmax<T>(3, 3, x.data(), lsm.data());
  logsumexp<T>(3, 3, x.data(), lse.data());
  const double e = std::exp(-1.0);
  EXPECT_NEAR(sm[0], 1 / (1 + e), 1e-6);
  EXPECT_NEAR(sm[1], e / (1 + e), 1e-6);
  EXPECT_EQ(sm[2], T(0));
  EXPECT_NEAR(lse[0], 1000 + std::log(1 + e), 1e-3);
  EXPECT_NEAR(lsm[0], -std::log(1 + e), 1e-5);
  EXPECT_EQ(sm[3], T(0.5));
  EXPECT_EQ(sm[4], T(0));
  EXPECT_EQ(lsm[4], -inf);
  EXPECT_TRUE(std::isnan(sm[6]));
  EXPECT_EQ(lse[2], -inf);
  // Empty rows: logsumexp of nothing is -inf.
  std::vector<T> out(2, T(1));
  logsumexp<T>(2, 0, nullptr, out.data());
  EXPECT_EQ(out[0], -inf);
  EXPECT_EQ(out[1], -inf);
}

TYPED_TEST(SoftmaxTest, ResultsDoNotDependOnThreadCount) {
  using T = TypeParam;
  for (const size_t cols : {10, 50}) {
    const size_t rows = 3000;
    const auto x = random_vector<T>(rows * cols, 1, -3, 3),
               dy = random_vector<T>(rows * cols, 2, -3, 3);
    expect_same_for_thread_counts([&] {
      std::vector<T> y(rows * cols), dx(rows * cols), ly(rows * cols);
      softmax(rows, cols, x.data(), y.data());
      softmax_backward(rows, cols, y.data(), dy.data(), dx.data(), false);
      log_softmax(rows, cols, x.data(), ly.data());
      y.insert(y.end(), dx.begin(), dx.end());
      y.insert(y.end(), ly.begin(), ly.end());
      return y;
    });
  }
}

// Small integers, so that rows hold their max more than once: the first is taken; NaN is never
// the largest, and a row of NaN gives 0.
TYPED_TEST(SoftmaxTest, ArgmaxAndHardmaxTakeTheFirstLargest) {
  using T = TypeParam;
  for (const Size s : kSizes) {
    SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.cols);
    std::vector<T> x = random_vector<T>(s.rows * s.cols, 3, -4, 4);
    for (T& v : x) v = std::round(v);
    if (s.rows > 2 && s.cols > 2) {
      x[0] = std::numeric_limits<T>::quiet_NaN();  // row 0 starts with NaN
      std::fill_n(x.begin() + long(s.cols), s.cols, std::numeric_limits<T>::quiet_NaN());
    }
    std::vector<size_t> position(s.rows);
    std::vector<T> y(s.rows * s.cols, T(7));
    row_argmax(s.rows, s.cols, x.data(), position.data());
    hardmax(s.rows, s.cols, x.data(), y.data());
    for (size_t r = 0; r < s.rows; ++r) {
      size_t expected = 0;
      for (size_t j = 0; j < s.cols; ++j) {
        const T v = x[r * s.cols + j], best = x[r * s.cols + expected];
        if (v > best || (std::isnan(best) && !std::isnan(v))) expected = j;
      }
      ASSERT_EQ(position[r], expected) << "row " << r;
      for (size_t j = 0; j < s.cols; ++j)
        ASSERT_EQ(y[r * s.cols + j], T(j == expected ? 1 : 0)) << "row " << r << " column " << j;
    }
  }
}

}  // namespace
}  // namespace loom::kernels
