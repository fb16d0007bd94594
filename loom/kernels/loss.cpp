#include "loom/kernels/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "loom/core/error.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/fast_math.h"

namespace loom::kernels {
namespace {

// std::log's value for any float (-inf at 0, NaN below, subnormals scaled by 2^24 into
// fast_log's range) in selects, so that a loop of it vectorizes: a binary cross entropy's
// outputs reach 0 and 1 where a sigmoid saturates.
inline float log_any(float x) {
  constexpr float kScale = 16777216.0f, kLogScale = 16.6355323334f;  // 2^24 and 24 ln 2
  const bool small = x < std::numeric_limits<float>::min();
  const float v = fast_log(small ? x * kScale : x) - (small ? kLogScale : 0.0f);
  const float edge =
      x == 0 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  return x > 0 ? v : edge;
}
inline double log_any(double x) {
  return std::log(x);
}

template <RowLoss L, typename T>
T term(T o, T t) {
  if constexpr (L == RowLoss::SquaredError)
    return (o - t) * (o - t);
  else
    return -(t * log_any(o) + (1 - t) * log_any(1 - o));
}

// The derivative by operand I (0: o, 1: t).
template <RowLoss L, size_t I, typename T>
T derivative(T o, T t) {
  if constexpr (L == RowLoss::SquaredError)
    return I == 0 ? 2 * (o - t) : 2 * (t - o);
  else if constexpr (I == 0)
    return (1 - t) / (1 - o) - t / o;
  else
    return log_any(1 - o) - log_any(o);
}

// The work of an element, in kGrain's units: the logs cost several simple ops.
constexpr size_t cost(RowLoss loss) {
  return loss == RowLoss::SquaredError ? 1 : 8;
}

template <typename T>
T* row(LossOperand<T> x, size_t r, size_t n) {
  return x.shared ? x.data : x.data + r * n;
}

// Calls f(integral_constant<RowLoss, loss>).
template <class F>
void with_loss(RowLoss loss, F&& f) {
  if (loss == RowLoss::SquaredError)
    f(std::integral_constant<RowLoss, RowLoss::SquaredError>{});
  else
    f(std::integral_constant<RowLoss, RowLoss::BinaryCrossEntropy>{});
}

}  // namespace

template <typename T>
void row_loss(RowLoss loss, size_t rows, size_t n, LossOperand<const T> o, LossOperand<const T> t,
              T* y) {
  with_loss(loss, [&](auto l) {
    constexpr RowLoss L = decltype(l)::value;
    detail::parallel_for(rows, rows * n * cost(L), [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        detail::Lanes<detail::Combine::Sum, double> sum;
        sum.add(n, [a = row(o, r, n), b = row(t, r, n)](size_t i) { return term<L>(a[i], b[i]); });
        y[r] = static_cast<T>(sum.result());
      }
    });
  });
}

template <typename T>
void row_loss_backward(RowLoss loss, size_t index, size_t rows, size_t n, LossOperand<const T> o,
                       LossOperand<const T> t, const T* dy, LossOperand<T> dx, bool accumulate) {
  LOOM_CHECK(index < 2, ArgumentError, "row_loss_backward: operand ", index,
             " does not exist (0: output, 1: target)");
  with_loss(loss, [&](auto l) {
    constexpr RowLoss L = decltype(l)::value;
    auto run = [&](auto operand, auto add) {
      constexpr size_t I = decltype(operand)::value;
      constexpr bool A = decltype(add)::value;
      // dx[i] (+)= g dL/d(operand) for i in [c0, c1) of row r.
      auto span = [&](size_t r, size_t c0, size_t c1, T* d, auto first) {
        constexpr bool Add = A || !decltype(first)::value;
        const T *a = row(o, r, n), *b = row(t, r, n);
        const T g = dy[r];
        LOOM_OMP_SIMD()
        for (size_t i = c0; i < c1; ++i) {
          const T v = g * derivative<L, I>(a[i], b[i]);
          d[i] = Add ? d[i] + v : v;
        }
      };
      if (!dx.shared) {
        detail::parallel_for(rows, rows * n * cost(L), [&](size_t r0, size_t r1) {
          for (size_t r = r0; r < r1; ++r) span(r, 0, n, dx.data + r * n, std::true_type{});
        });
        return;
      }
      // A shared operand: threads take columns, each adding the rows in order.
      if (rows == 0 && !A) std::fill_n(dx.data, n, T(0));
      detail::parallel_for(n, rows * n * cost(L), [&](size_t c0, size_t c1) {
        for (size_t r = 0; r < rows; ++r) {
          if (r == 0)
            span(r, c0, c1, dx.data, std::true_type{});
          else
            span(r, c0, c1, dx.data, std::false_type{});
        }
      });
    };
    detail::with_accumulate(accumulate, [&](auto add) {
      if (index == 0)
        run(std::integral_constant<size_t, 0>{}, add);
      else
        run(std::integral_constant<size_t, 1>{}, add);
    });
  });
}

#define LOOM_INSTANTIATE(T)                                                                      \
  template void row_loss<T>(RowLoss, size_t, size_t, LossOperand<const T>, LossOperand<const T>, \
                            T*);                                                                 \
  template void row_loss_backward<T>(RowLoss, size_t, size_t, size_t, LossOperand<const T>,      \
                                     LossOperand<const T>, const T*, LossOperand<T>, bool);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
