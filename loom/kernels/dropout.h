// Dropout masks from counter-based random numbers: whether element i is kept depends only on
// the draw's Philox key and i, so threads split the elements freely and backward recomputes
// the forward mask instead of storing it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace loom::kernels {

// dst[i] = keep(i) ? src[i] / (1 - rate) : 0 (accumulate: dst[i] += that), for i < n. keep(i)
// is false with probability rate: word i % 4 of philox4x32(key, {i / 4, 0, 0, 0}) is below
// rate * 2^32. The same (key, rate) gives the same mask, so forward and backward agree.
template <typename T>
void dropout(size_t n, const T* src, T* dst, std::array<uint32_t, 2> key, double rate,
             bool accumulate);

}  // namespace loom::kernels
