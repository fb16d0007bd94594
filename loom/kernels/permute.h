// Copies of dense row-major tensors with strides: permuting their axes (transpose, swapaxes)
// and copying blocks (slice, splice) or rows (the sequence ops), forward and gradient.
#pragma once

#include <cstddef>
#include <vector>

namespace loom::kernels {

// y (+)= x with its axes permuted: y's axis k is x's axis perm[k], x of dims `dims`. The
// gradient of y = permute(x, perm) is permute(dy, perm's inverse) with y's dims.
template <typename T>
void permute(const T* x, T* y, const std::vector<size_t>& dims, const std::vector<size_t>& perm,
             bool accumulate);

// count blocks of len elements: block i is read at x + i * x_stride and written (accumulate:
// added) at y + i * y_stride; split over threads above the kernels' grain.
template <typename T>
void copy_blocks(size_t count, size_t len, const T* x, size_t x_stride, T* y, size_t y_stride,
                 bool accumulate);

// Row i of y (rows of n elements) = row map[i] of x (accumulate: +=), for i < rows; a row whose
// map is kNoRow is zeroed (accumulate: kept). Split over threads above the kernels' grain.
inline constexpr size_t kNoRow = static_cast<size_t>(-1);
template <typename T>
void gather_rows(size_t rows, size_t n, const size_t* map, const T* x, T* y, bool accumulate);

}  // namespace loom::kernels
