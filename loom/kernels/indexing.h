// Indexing kernels: one-hot encoding, gathering along an axis and its scatter-add gradient, and
// the k largest elements along an axis with their gradient. T is float or double; indices are
// held in a floating-point tensor (CNTK's convention), I float or double. Each kernel sees its
// tensor as [outer, n, inner], row-major, with the axis it works along in the middle. Buffers
// belong to the caller; only top_k keeps a grow-only buffer of its own (a thread's n positions).
// The loops stay on the calling thread, so results are deterministic.
#pragma once

#include <cstddef>

namespace loom::kernels {

// The position an index element holds: its value truncated toward zero, as CNTK's kernels cast
// it (1.7 is 1). An ArgumentError naming `op` and the value unless 0 <= value < extent (NaN
// included): "gather: index 7 is out of range [0, 6) of <what>".
template <typename I>
size_t index_value(I value, size_t extent, const char* op, const char* what);

// y [outer, num_classes, inner] = 1 where the class is x [outer, inner]'s index, else 0.
template <typename T>
void one_hot(size_t outer, size_t inner, size_t num_classes, const T* x, T* y, const char* op);

// y [outer, m, inner] = ref [outer, n, inner] at positions idx [m] of the middle axis.
template <typename T, typename I>
void gather(size_t outer, size_t n, size_t inner, const T* ref, size_t m, const I* idx, T* y,
            const char* op);

// dref [outer, n, inner] += dy [outer, m, inner] scattered to positions idx [m] (a position
// given several times receives the sum), in order, so the result is deterministic.
template <typename T, typename I>
void gather_backward(size_t outer, size_t n, size_t inner, size_t m, const I* idx, const T* dy,
                     T* dref, const char* op);

// The k largest of x [outer, n, inner] along the middle axis, in decreasing order, as values
// [outer, k, inner] and their positions [outer, k, inner] (as T in indices, and as size_t in
// positions; either may be null). Ties go to the lower position first; NaN ranks above every
// number. Needs k <= n (the caller checks).
template <typename T>
void top_k(size_t outer, size_t n, size_t inner, size_t k, const T* x, T* values, T* indices,
           size_t* positions);

// dx [outer, n, inner] += dy [outer, k, inner] at the positions top_k gave.
template <typename T>
void top_k_backward(size_t outer, size_t n, size_t inner, size_t k, const size_t* positions,
                    const T* dy, T* dx);

}  // namespace loom::kernels
