#include "loom/kernels/indexing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "loom/core/error.h"

namespace loom::kernels {

template <typename I>
size_t index_value(I value, size_t extent, const char* op, const char* what) {
  // NaN fails both comparisons.
  LOOM_CHECK(value >= I(0) && value < I(extent), ArgumentError, op, ": index ", value,
             " is out of range [0, ", extent, ") of ", what);
  return size_t(value);
}

template <typename T>
void one_hot(size_t outer, size_t inner, size_t num_classes, const T* x, T* y, const char* op) {
  std::fill(y, y + outer * num_classes * inner, T(0));
  for (size_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < inner; ++i) {
      const size_t c = index_value(x[o * inner + i], num_classes, op, "num_classes");
      y[(o * num_classes + c) * inner + i] = T(1);
    }
}

template <typename T, typename I>
void gather(size_t outer, size_t n, size_t inner, const T* ref, size_t m, const I* idx, T* y,
            const char* op) {
  for (size_t j = 0; j < m; ++j) index_value(idx[j], n, op, "the reference's gathered axis");
  for (size_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < m; ++j)
      std::memcpy(y + (o * m + j) * inner, ref + (o * n + size_t(idx[j])) * inner,
                  inner * sizeof(T));
}

template <typename T, typename I>
void gather_backward(size_t outer, size_t n, size_t inner, size_t m, const I* idx, const T* dy,
                     T* dref, const char* op) {
  for (size_t j = 0; j < m; ++j) index_value(idx[j], n, op, "the reference's gathered axis");
  for (size_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < m; ++j) {
      const T* src = dy + (o * m + j) * inner;
      T* dst = dref + (o * n + size_t(idx[j])) * inner;
      for (size_t i = 0; i < inner; ++i) dst[i] += src[i];
    }
}

template <typename T>
void top_k(size_t outer, size_t n, size_t inner, size_t k, const T* x, T* values, T* indices,
           size_t* positions) {
  thread_local std::vector<size_t> order;
  if (order.size() < n) order.resize(n);
  for (size_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < inner; ++i) {
      const T* column = x + o * n * inner + i;
      // Decreasing, NaN first, ties by position: a strict weak order.
      auto before = [column, inner](size_t a, size_t b) {
        const T va = column[a * inner], vb = column[b * inner];
        const bool na = std::isnan(va), nb = std::isnan(vb);
        if (na != nb) return na;
        if (!na && va != vb) return va > vb;
        return a < b;
      };
      std::iota(order.begin(), order.begin() + n, size_t{0});
      std::partial_sort(order.begin(), order.begin() + k, order.begin() + n, before);
      for (size_t j = 0; j < k; ++j) {
        const size_t at = (o * k + j) * inner + i;
        if (values) values[at] = column[order[j] * inner];
        if (indices) indices[at] = T(order[j]);
        if (positions) positions[at] = order[j];
      }
    }
}

template <typename T>
void top_k_backward(size_t outer, size_t n, size_t inner, size_t k, const size_t* positions,
                    const T* dy, T* dx) {
  for (size_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < k; ++j)
      for (size_t i = 0; i < inner; ++i) {
        const size_t at = (o * k + j) * inner + i;
        dx[(o * n + positions[at]) * inner + i] += dy[at];
      }
}

#define LOOM_INSTANTIATE_INDEX(T, I)                                                               \
  template void gather<T, I>(size_t, size_t, size_t, const T*, size_t, const I*, T*, const char*); \
  template void gather_backward<T, I>(size_t, size_t, size_t, size_t, const I*, const T*, T*,      \
                                      const char*);
#define LOOM_INSTANTIATE(T)                                                                     \
  template size_t index_value<T>(T, size_t, const char*, const char*);                          \
  template void one_hot<T>(size_t, size_t, size_t, const T*, T*, const char*);                  \
  template void top_k<T>(size_t, size_t, size_t, size_t, const T*, T*, T*, size_t*);            \
  template void top_k_backward<T>(size_t, size_t, size_t, size_t, const size_t*, const T*, T*); \
  LOOM_INSTANTIATE_INDEX(T, float)                                                              \
  LOOM_INSTANTIATE_INDEX(T, double)
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE
#undef LOOM_INSTANTIATE_INDEX

}  // namespace loom::kernels
