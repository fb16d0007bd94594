// Element loops of the learners: one pass, threaded above a size where threads pay off.
#pragma once

#include <cstddef>
#include <vector>

#include "loom/core/threads.h"
#include "loom/kernels/detail.h"

namespace loom::learners_detail {

// Below this many elements a loop runs on the calling thread (the kernels' threshold).
inline constexpr size_t kParallelThreshold = 2 * kernels::detail::kGrain;

// f(i) for i in [0, n); `elements` is the work it stands for, which decides the threading.
// Each loop runs a local copy of f: a rule that captures its constants by value then keeps
// them in registers, since the stores through its pointers cannot alias a copy whose address
// never escapes (through a reference they could, and the loop would neither hoist nor
// vectorize).
template <typename F>
void parallel_for(size_t n, const F& f, size_t elements) {
  if (elements < kParallelThreshold) {  // no OpenMP region at all: small updates are hot
    const F fn = f;
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  for_each_piece(n, static_cast<size_t>(get_max_num_cpu_threads()),
                 [&](size_t, size_t begin, size_t end) {
                   const F fn = f;
                   for (size_t i = begin; i < end; ++i) fn(i);
                 });
}

template <typename F>
void parallel_for(size_t n, const F& f) {
  parallel_for(n, f, n);
}

// Sum of f(i) over [0, n) (f returns T), in double, in an order fixed by n alone, so the
// result does not depend on the thread count (bit-identical resumes): within each block of
// kBlock elements, element i adds to partial sum (lane) i % kLanes, a lane's elements taken in
// order; the lanes are then added in order, and the blocks' sums in block order. Both loops of
// a block are plain loops the compiler runs in SIMD registers: f over the block into a buffer
// that stays in L1, then the lanes' sums.
template <typename T, typename F>
double ordered_sum(size_t n, const F& f) {
  constexpr size_t kBlock = 4096, kLanes = 8;
  static_assert(kBlock % kLanes == 0);
  const size_t blocks = (n + kBlock - 1) / kBlock;
  // The calling thread's buffer keeps its capacity (no allocation per update); workers write
  // through a plain pointer, since a thread_local named in the loop would be their own.
  thread_local std::vector<double> partial;
  partial.assign(blocks, 0.0);
  double* sums = partial.data();
  parallel_for(
      blocks,
      [&](size_t b) {
        const F fn = f;  // as in parallel_for
        T values[kBlock];
        const size_t begin = b * kBlock, end = begin + kBlock < n ? begin + kBlock : n;
        const size_t count = end - begin;
        for (size_t j = 0; j < count; ++j) values[j] = fn(begin + j);
        double lane[kLanes] = {};
        size_t j = 0;
        for (; j + kLanes <= count; j += kLanes)
          for (size_t l = 0; l < kLanes; ++l) lane[l] += double(values[j + l]);
        for (size_t l = 0; j < count; ++j, ++l) lane[l] += double(values[j]);
        double s = 0;
        for (double v : lane) s += v;
        sums[b] = s;
      },
      n);
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace loom::learners_detail
