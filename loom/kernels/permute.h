// Permuting the axes of a dense row-major tensor (transpose, swapaxes), forward and gradient.
#pragma once

#include <cstddef>
#include <vector>

namespace loom::kernels {

// y (+)= x with its axes permuted: y's axis k is x's axis perm[k], x of dims `dims`. The
// gradient of y = permute(x, perm) is permute(dy, perm's inverse) with y's dims.
template <typename T>
void permute(const T* x, T* y, const std::vector<size_t>& dims, const std::vector<size_t>& perm,
             bool accumulate);

}  // namespace loom::kernels
