#include "loom/kernels/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "loom/core/error.h"
#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using namespace loom::testing;

double term(RowLoss loss, double o, double t) {
  return loss == RowLoss::SquaredError ? (o - t) * (o - t)
                                       : -(t * std::log(o) + (1 - t) * std::log(1 - o));
}
double derivative(RowLoss loss, size_t index, double o, double t) {
  if (loss == RowLoss::SquaredError) return index == 0 ? 2 * (o - t) : 2 * (t - o);
  return index == 0 ? (1 - t) / (1 - o) - t / o : std::log(1 - o) - std::log(o);
}

template <typename T>
class RowLossTest : public ::testing::Test {};
TYPED_TEST_SUITE(RowLossTest, RealTypes);

// Rows long enough for the threads and the four-step sums, a shared target among them.
TYPED_TEST(RowLossTest, MatchesReferenceAtAnyThreadCount) {
  using T = TypeParam;
  const size_t rows = 37, n = 1203;
  const std::vector<T> o = random_vector<T>(rows * n, 1, 0.05, 0.95);
  const std::vector<T> t = random_vector<T>(rows * n, 2, 0, 1);
  const std::vector<T> dy = random_vector<T>(rows, 3);
  for (RowLoss loss : {RowLoss::SquaredError, RowLoss::BinaryCrossEntropy}) {
    for (bool shared : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "loss " << int(loss) << " shared target " << shared);
      const LossOperand<const T> out{o.data()}, target{t.data(), shared};
      std::vector<T> y(rows);
      row_loss(loss, rows, n, out, target, y.data());
      for (size_t r = 0; r < rows; ++r) {
        double ref = 0, magnitude = 0;
        for (size_t i = 0; i < n; ++i) {
          const double v = term(loss, o[r * n + i], t[(shared ? 0 : r * n) + i]);
          ref += v;
          magnitude += std::abs(v);
        }
        EXPECT_NEAR(y[r], ref, tolerance<T>() * magnitude) << "row " << r;
      }
      for (size_t index : {0, 1}) {
        const bool dx_shared = index == 1 && shared;
        const size_t size = dx_shared ? n : rows * n;
        std::vector<T> dx(size, T(0.5));
        row_loss_backward(loss, index, rows, n, out, target, dy.data(), {dx.data(), dx_shared},
                          true);
        for (size_t i = 0; i < size; ++i) {
          double ref = 0.5;
          for (size_t r = dx_shared ? 0 : i / n; r < (dx_shared ? rows : i / n + 1); ++r) {
            const size_t c = dx_shared ? i : i % n;
            ref += dy[r] * derivative(loss, index, o[r * n + c], t[(shared ? 0 : r * n) + c]);
          }
          ASSERT_NEAR(dx[i], ref, tolerance<T>() * (1 + std::abs(ref)) * (dx_shared ? rows : 1))
              << "index " << index << " element " << i;
        }
      }
      expect_same_for_thread_counts([&] {
        std::vector<T> all(rows + rows * n + n);
        row_loss(loss, rows, n, out, target, all.data());
        row_loss_backward(loss, 0, rows, n, out, target, dy.data(), {all.data() + rows}, false);
        row_loss_backward(loss, 1, rows, n, out, target, dy.data(),
                          {all.data() + rows + rows * n, true}, false);
        return all;
      });
    }
  }
}

// log as std::log at the ends a saturated sigmoid reaches: an output of 0 or 1 gives an
// infinite loss where its target disagrees, a subnormal output a finite one.
TEST(RowLoss, BinaryCrossEntropyAtTheEnds) {
  const float inf = std::numeric_limits<float>::infinity(), tiny = 1e-40f;
  const std::vector<float> o = {0, 1, tiny, 0.5f}, t = {1, 0, 1, 1};
  for (size_t i = 0; i < o.size(); ++i) {
    float y = 0;
    row_loss(RowLoss::BinaryCrossEntropy, 1, 1, LossOperand<const float>{&o[i]},
             LossOperand<const float>{&t[i]}, &y);
    if (i < 2) {
      EXPECT_EQ(y, inf) << i;
    } else {
      EXPECT_FLOAT_EQ(y, -std::log(o[i])) << i;
    }
  }
  float dx = 0;
  row_loss_backward(RowLoss::BinaryCrossEntropy, 1, 1, 1, LossOperand<const float>{&o[0]},
                    LossOperand<const float>{&t[0]}, &t[0], LossOperand<float>{&dx}, false);
  EXPECT_EQ(dx, inf);  // log(1 - 0) - log(0)
}

TEST(RowLoss, SharedGradientOfNoRowsIsZero) {
  std::vector<float> dx(5, 7.0f);
  const float o = 0, t = 0, dy = 0;
  row_loss_backward(RowLoss::SquaredError, 1, 0, dx.size(), LossOperand<const float>{&o},
                    LossOperand<const float>{&t, true}, &dy, LossOperand<float>{dx.data(), true},
                    false);
  EXPECT_EQ(dx, std::vector<float>(5, 0.0f));
}

TEST(RowLoss, OperandIndexIsChecked) {
  float x = 0;
  EXPECT_THROW(row_loss_backward(RowLoss::SquaredError, 2, 1, 1, LossOperand<const float>{&x},
                                 LossOperand<const float>{&x}, &x, LossOperand<float>{&x}, false),
               ArgumentError);
}

}  // namespace
}  // namespace loom::kernels
