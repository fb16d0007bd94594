// Softmax family along the last axis of a rows x cols row-major matrix. Conventions as in
// elementwise.h. Rows are independent, so threads split rows.
#pragma once

#include <cstddef>

namespace loom::kernels {

// y = exp(x - max) / sum(exp(x - max)) per row. A row of all -inf gives NaN, as in numpy.
template <typename T>
void softmax(size_t rows, size_t cols, const T* x, T* y);

// y = x - logsumexp(x) per row.
template <typename T>
void log_softmax(size_t rows, size_t cols, const T* x, T* y);

// dx = y * (dy - sum(dy * y)) per row, y the softmax output.
template <typename T>
void softmax_backward(size_t rows, size_t cols, const T* y, const T* dy, T* dx, bool accumulate);

// dx = dy - exp(y) * sum(dy) per row, y the log_softmax output.
template <typename T>
void log_softmax_backward(size_t rows, size_t cols, const T* y, const T* dy, T* dx,
                          bool accumulate);

// out[r] = log(sum(exp(x[r, :]))), computed as max + log(sum(exp(x - max))); -inf for an empty
// or all -inf row.
template <typename T>
void logsumexp(size_t rows, size_t cols, const T* x, T* out);

// position[r] = the position of the first largest element of row r (NaN is never the largest;
// 0 for a row of NaN).
template <typename T>
void row_argmax(size_t rows, size_t cols, const T* x, size_t* position);

// y = 1 at the first largest element of each row (as row_argmax), 0 elsewhere.
template <typename T>
void hardmax(size_t rows, size_t cols, const T* x, T* y);

}  // namespace loom::kernels
