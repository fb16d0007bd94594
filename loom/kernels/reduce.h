// Reductions over any set of axes of a row-major tensor, their gradients, and two BLAS-1
// helpers. Conventions as in elementwise.h (Dims, threading, determinism, accumulate).
#pragma once

#include <cstddef>

#include "loom/kernels/elementwise.h"

namespace loom::kernels {

enum class ReduceOp { Sum, Mean, Max };

// y = op of x over the axes where out_dims is 1 and in_dims is not (accumulate: y += ...).
// out_dims has in_dims' rank with each axis either kept (same extent) or 1. Sums accumulate in
// double. Over zero elements Sum gives 0, Mean NaN, Max -inf. Throws ShapeError on bad dims.
template <typename T>
void reduce(ReduceOp op, const Dims& in_dims, const T* x, const Dims& out_dims, T* y,
            bool accumulate);

// dx (in_dims) from dy (out_dims): Sum broadcasts dy, Mean dy / count, Max routes each dy to the
// first position (row-major order) where x equals the forward result y, 0 elsewhere. Sum and
// Mean read neither x nor y (both may be null).
template <typename T>
void reduce_backward(ReduceOp op, const Dims& in_dims, const T* x, const Dims& out_dims, const T* y,
                     const T* dy, T* dx, bool accumulate);

// x[i] *= alpha for i < n.
template <typename T>
void scale(size_t n, T alpha, T* x);

// y[i] += alpha * x[i] for i < n.
template <typename T>
void axpy(size_t n, T alpha, const T* x, T* y);

}  // namespace loom::kernels
