// Copies of dense row-major tensors with strides: permuting their axes (transpose, swapaxes)
// and copying blocks (slice, splice), forward and gradient.
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

}  // namespace loom::kernels
