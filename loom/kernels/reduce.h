// Reductions over any set of axes of a row-major tensor, their gradients, and two BLAS-1
// helpers. Conventions as in elementwise.h (Dims, threading, determinism, accumulate).
#pragma once

#include <cstddef>

#include "loom/core/sequence_layout.h"
#include "loom/kernels/elementwise.h"

namespace loom::kernels {

// CNTK's reductions (its ReduceElements ops and the reduce_l1/l2/sum_square blocks). LogSumExp
// is log(sum(exp(x))) computed shifted by the max; L2 is sqrt(sum(x^2)). ArgMax and ArgMin give
// the row-major position, within the reduced axes, of the first max (min), as a T.
enum class ReduceOp { Sum, Mean, Max, Min, Prod, LogSumExp, L1, L2, SumSquare, ArgMax, ArgMin };

// y = op of x over the axes where out_dims is 1 and in_dims is not (accumulate: y += ...).
// out_dims has in_dims' rank with each axis either kept (same extent) or 1. Sums accumulate in
// double. Over zero elements Sum, SumSquare, L1 and L2 give 0, Mean NaN, Max and LogSumExp -inf,
// Min inf, Prod 1, ArgMax and ArgMin inf (no position). Throws ShapeError on bad dims, and
// ArgumentError for accumulate with LogSumExp, L2, ArgMax or ArgMin, which keep partial results
// in y.
template <typename T>
void reduce(ReduceOp op, const Dims& in_dims, const T* x, const Dims& out_dims, T* y,
            bool accumulate);

// dx (in_dims) from dy (out_dims) and the forward result y: Sum broadcasts dy, Mean dy / count,
// SumSquare 2 x dy, L1 sign(x) dy, L2 x / y dy (0 where y is 0), LogSumExp exp(x - y) dy;
// Max and Min route each dy to the first position (row-major order) where x equals y, 0
// elsewhere; Prod gives dy times the product of the other elements of the group (exact where x
// has zeros). Sum and Mean read neither x nor y (both may be null); SumSquare, L1 and Prod do
// not read y. ArgMax and ArgMin have no gradient (ArgumentError).
template <typename T>
void reduce_backward(ReduceOp op, const Dims& in_dims, const T* x, const Dims& out_dims, const T* y,
                     const T* dy, T* dx, bool accumulate);

// Reductions over the steps of packed sequences (sequence::reduce_sum, reduce_max): x holds the
// l.rows() rows of l (n elements each, in SequenceLayout's time-major order), y one row per
// sequence of l, in the minibatch's order. Sum adds each sequence's steps in order, in T; Max
// keeps the larger step by step, as std::max (a NaN counts at step 0 only). An empty sequence
// gives zeros. Threads split the columns (whole cache lines) above the kernels' grain. Ops other
// than Sum and Max throw ArgumentError.
template <typename T>
void reduce_sequences(ReduceOp op, const SequenceLayout& l, size_t n, const T* x, T* y);

// Their gradients (dx, like x, l's rows; dy, like y, a row per sequence): Sum gives each step
// its sequence's dy; Max routes each element of dy to the first step where x equals y (none for
// a NaN in y), 0 elsewhere. Sum reads neither x nor y (both may be null).
template <typename T>
void reduce_sequences_backward(ReduceOp op, const SequenceLayout& l, size_t n, const T* x,
                               const T* y, const T* dy, T* dx, bool accumulate);

// x[i] *= alpha for i < n.
template <typename T>
void scale(size_t n, T alpha, T* x);

// y[i] += alpha * x[i] for i < n.
template <typename T>
void axpy(size_t n, T alpha, const T* x, T* y);

}  // namespace loom::kernels
