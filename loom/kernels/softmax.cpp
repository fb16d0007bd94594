#include "loom/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/kernels/detail.h"
#include "loom/kernels/fast_math.h"

namespace loom::kernels {
namespace {

// exp() costs several simple ops; it lowers the threading threshold.
constexpr size_t kExpCost = 8;

// The row's max, the shift that keeps exp() from overflowing; 0 when the max is not finite, so
// that a row of -inf gives exp(-inf) = 0 instead of exp(-inf - -inf) = NaN. In detail::Lanes, as
// the sums below: one running max or double sum over the row ran scalar (softmax at 0.27x
// PyTorch's speed).
template <typename T>
T row_shift(size_t n, const T* x) {
  detail::Lanes<detail::Combine::Max, T> m;
  m.add(n, [x](size_t j) { return x[j]; });
  const T shift = m.result();
  return std::isfinite(shift) ? shift : T(0);
}

// Sum of exp(x - shift) in double.
template <typename T>
double sum_exp(size_t n, const T* x, T shift) {
  detail::Lanes<detail::Combine::Sum, double> s;
  s.add(n, [x, shift](size_t j) { return fast_exp(x[j] - shift); });
  return s.result();
}

template <typename T, typename Row>
void for_rows(size_t rows, size_t cols, size_t cost, Row row) {
  detail::parallel_for(rows, rows * cols * cost, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) row(r, r * cols);
  });
}

}  // namespace

template <typename T>
void softmax(size_t rows, size_t cols, const T* x, T* y) {
  for_rows<T>(rows, cols, kExpCost, [&](size_t, size_t o) {
    const T shift = row_shift(cols, x + o);
    T* yo = y + o;
    const T* xo = x + o;
#pragma omp simd
    for (size_t j = 0; j < cols; ++j) yo[j] = fast_exp(xo[j] - shift);
    detail::Lanes<detail::Combine::Sum, double> s;
    s.add(cols, [yo](size_t j) { return yo[j]; });
    const T inv = static_cast<T>(1.0 / s.result());
#pragma omp simd
    for (size_t j = 0; j < cols; ++j) y[o + j] *= inv;
  });
}

// Rows narrower than this are worked on kLanes at a time, across rows: a row of a few classes
// fills a fraction of a vector, and its max and sum would be mostly horizontal reductions.
constexpr size_t kNarrowRow = 16, kLanes = 8;

// log_softmax of rows [r0, r0 + lanes) of width cols < kNarrowRow, transposed into a
// [cols][kLanes] block so that every step is one vertical operation over the rows. The same
// numbers as the row-wise path: the max, the sum of exp in double in column order, log in T.
template <typename T>
void log_softmax_block(size_t r0, size_t lanes, size_t cols, const T* x, T* y) {
  T v[kNarrowRow][kLanes] = {};
  for (size_t l = 0; l < lanes; ++l)
    for (size_t j = 0; j < cols; ++j) v[j][l] = x[(r0 + l) * cols + j];
  T shift[kLanes], log_sum[kLanes];
  double sum[kLanes] = {};
  std::fill_n(shift, kLanes, -std::numeric_limits<T>::infinity());
  for (size_t j = 0; j < cols; ++j)
#pragma omp simd
    for (size_t l = 0; l < kLanes; ++l) shift[l] = v[j][l] > shift[l] ? v[j][l] : shift[l];
  for (size_t l = 0; l < kLanes; ++l)
    if (!std::isfinite(shift[l])) shift[l] = 0;
  for (size_t j = 0; j < cols; ++j)
#pragma omp simd
    for (size_t l = 0; l < kLanes; ++l) {
      v[j][l] -= shift[l];
      sum[l] += fast_exp(v[j][l]);
    }
  for (size_t l = 0; l < lanes; ++l) log_sum[l] = std::log(static_cast<T>(sum[l]));
  for (size_t l = 0; l < lanes; ++l)
    for (size_t j = 0; j < cols; ++j) y[(r0 + l) * cols + j] = v[j][l] - log_sum[l];
}

template <typename T>
void log_softmax(size_t rows, size_t cols, const T* x, T* y) {
  if (cols < kNarrowRow) {
    const size_t blocks = (rows + kLanes - 1) / kLanes;
    detail::parallel_for(blocks, rows * cols * kExpCost, [&](size_t b0, size_t b1) {
      for (size_t b = b0; b < b1; ++b)
        log_softmax_block(b * kLanes, std::min(kLanes, rows - b * kLanes), cols, x, y);
    });
    return;
  }
  for_rows<T>(rows, cols, kExpCost, [&](size_t, size_t o) {
    const T shift = row_shift(cols, x + o);
    // (x - shift) - log(sum) keeps the precision that x - logsumexp loses for large x.
    const T log_sum = std::log(static_cast<T>(sum_exp(cols, x + o, shift)));
#pragma omp simd
    for (size_t j = 0; j < cols; ++j) y[o + j] = (x[o + j] - shift) - log_sum;
  });
}

template <typename T>
void softmax_backward(size_t rows, size_t cols, const T* y, const T* dy, T* dx, bool accumulate) {
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    for_rows<T>(rows, cols, 1, [&](size_t, size_t o) {
      detail::Lanes<detail::Combine::Sum, double> dot;
      dot.add(cols,
              [yo = y + o, dyo = dy + o](size_t j) { return static_cast<double>(dyo[j]) * yo[j]; });
      const T d = static_cast<T>(dot.result());
#pragma omp simd
      for (size_t j = 0; j < cols; ++j) {
        const T v = y[o + j] * (dy[o + j] - d);
        dx[o + j] = A ? dx[o + j] + v : v;
      }
    });
  });
}

template <typename T>
void log_softmax_backward(size_t rows, size_t cols, const T* y, const T* dy, T* dx,
                          bool accumulate) {
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    for_rows<T>(rows, cols, kExpCost, [&](size_t, size_t o) {
      detail::Lanes<detail::Combine::Sum, double> sum;
      sum.add(cols, [dyo = dy + o](size_t j) { return dyo[j]; });
      const T s = static_cast<T>(sum.result());
#pragma omp simd
      for (size_t j = 0; j < cols; ++j) {
        const T v = dy[o + j] - fast_exp(y[o + j]) * s;
        dx[o + j] = A ? dx[o + j] + v : v;
      }
    });
  });
}

template <typename T>
void logsumexp(size_t rows, size_t cols, const T* x, T* out) {
  for_rows<T>(rows, cols, kExpCost, [&](size_t r, size_t o) {
    const T shift = row_shift(cols, x + o);
    out[r] = shift + std::log(static_cast<T>(sum_exp(cols, x + o, shift)));
  });
}

// The first position of the row's largest element; 0 for a row of NaN, where the max's
// identity (-inf) matches nothing.
template <typename T>
size_t first_max(size_t n, const T* x) {
  detail::Lanes<detail::Combine::Max, T> m;
  m.add(n, [x](size_t j) { return x[j]; });
  const T best = m.result();
  const size_t at = size_t(std::find(x, x + n, best) - x);
  return at < n ? at : 0;
}

template <typename T>
void row_argmax(size_t rows, size_t cols, const T* x, size_t* position) {
  for_rows<T>(rows, cols, 1, [&](size_t r, size_t o) { position[r] = first_max(cols, x + o); });
}

template <typename T>
void hardmax(size_t rows, size_t cols, const T* x, T* y) {
  if (cols == 0) return;
  // Twice the work of a row: its max, then zeros written.
  for_rows<T>(rows, cols, 2, [&](size_t, size_t o) {
    const size_t at = first_max(cols, x + o);
    std::fill_n(y + o, cols, T(0));
    y[o + at] = T(1);
  });
}

#define LOOM_INSTANTIATE(T)                                                            \
  template void softmax<T>(size_t, size_t, const T*, T*);                              \
  template void log_softmax<T>(size_t, size_t, const T*, T*);                          \
  template void softmax_backward<T>(size_t, size_t, const T*, const T*, T*, bool);     \
  template void log_softmax_backward<T>(size_t, size_t, const T*, const T*, T*, bool); \
  template void logsumexp<T>(size_t, size_t, const T*, T*);                            \
  template void row_argmax<T>(size_t, size_t, const T*, size_t*);                      \
  template void hardmax<T>(size_t, size_t, const T*, T*);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
