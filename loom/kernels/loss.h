// Per-sample losses that sum an elementwise term of an output and a target over each row of a
// rows x n row-major matrix. Conventions as in elementwise.h (threading, determinism,
// accumulate).
#pragma once

#include <cstddef>

namespace loom::kernels {

// The term f(o, t) summed over a row, and its derivatives:
// SquaredError (o - t)^2, d/do 2 (o - t), d/dt 2 (t - o);
// BinaryCrossEntropy -(t log o + (1 - t) log(1 - o)), d/do (1 - t) / (1 - o) - t / o,
// d/dt log(1 - o) - log o.
enum class RowLoss { SquaredError, BinaryCrossEntropy };

// One operand: `data` holds `rows` rows of n, or (shared) one row of n that every row uses.
template <typename T>
struct LossOperand {
  T* data;
  bool shared = false;
};

// y[r] = sum over i < n of f(o[r, i], t[r, i]), summed in double.
template <typename T>
void row_loss(RowLoss loss, size_t rows, size_t n, LossOperand<const T> o, LossOperand<const T> t,
              T* y);

// The gradient of the operand `index` (0: o, 1: t): dx[r, i] = dy[r] df/d(operand)(o[r, i],
// t[r, i]) (accumulate: dx += ...); a shared dx gets the sum over the rows, added in row order.
template <typename T>
void row_loss_backward(RowLoss loss, size_t index, size_t rows, size_t n, LossOperand<const T> o,
                       LossOperand<const T> t, const T* dy, LossOperand<T> dx, bool accumulate);

}  // namespace loom::kernels
