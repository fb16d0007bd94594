#include "loom/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/kernels/cpu_isa.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/fast_math.h"

namespace loom::kernels {

namespace isa::baseline {
#include "loom/kernels/softmax_impl.inc"
}  // namespace isa::baseline

// softmax_avx512.cpp's copy of softmax_impl.inc.
namespace isa::avx512 {
template <typename T>
void softmax(size_t rows, size_t cols, const T* x, T* y);
template <typename T>
void log_softmax(size_t rows, size_t cols, const T* x, T* y);
template <typename T>
void softmax_backward(size_t rows, size_t cols, const T* y, const T* dy, T* dx, bool accumulate);
template <typename T>
void log_softmax_backward(size_t rows, size_t cols, const T* y, const T* dy, T* dx,
                          bool accumulate);
template <typename T>
void logsumexp(size_t rows, size_t cols, const T* x, T* out);
template <typename T>
void row_argmax(size_t rows, size_t cols, const T* x, size_t* position);
template <typename T>
void hardmax(size_t rows, size_t cols, const T* x, T* y);
}  // namespace isa::avx512

template <typename T>
void softmax(size_t rows, size_t cols, const T* x, T* y) {
  use_avx512() ? isa::avx512::softmax(rows, cols, x, y) : isa::baseline::softmax(rows, cols, x, y);
}

template <typename T>
void log_softmax(size_t rows, size_t cols, const T* x, T* y) {
  use_avx512() ? isa::avx512::log_softmax(rows, cols, x, y)
               : isa::baseline::log_softmax(rows, cols, x, y);
}

template <typename T>
void softmax_backward(size_t rows, size_t cols, const T* y, const T* dy, T* dx, bool accumulate) {
  use_avx512() ? isa::avx512::softmax_backward(rows, cols, y, dy, dx, accumulate)
               : isa::baseline::softmax_backward(rows, cols, y, dy, dx, accumulate);
}

template <typename T>
void log_softmax_backward(size_t rows, size_t cols, const T* y, const T* dy, T* dx,
                          bool accumulate) {
  use_avx512() ? isa::avx512::log_softmax_backward(rows, cols, y, dy, dx, accumulate)
               : isa::baseline::log_softmax_backward(rows, cols, y, dy, dx, accumulate);
}

template <typename T>
void logsumexp(size_t rows, size_t cols, const T* x, T* out) {
  use_avx512() ? isa::avx512::logsumexp(rows, cols, x, out)
               : isa::baseline::logsumexp(rows, cols, x, out);
}

template <typename T>
void row_argmax(size_t rows, size_t cols, const T* x, size_t* position) {
  use_avx512() ? isa::avx512::row_argmax(rows, cols, x, position)
               : isa::baseline::row_argmax(rows, cols, x, position);
}

template <typename T>
void hardmax(size_t rows, size_t cols, const T* x, T* y) {
  use_avx512() ? isa::avx512::hardmax(rows, cols, x, y) : isa::baseline::hardmax(rows, cols, x, y);
}

LOOM_SOFTMAX_INSTANTIATE(float)
LOOM_SOFTMAX_INSTANTIATE(double)

}  // namespace loom::kernels
