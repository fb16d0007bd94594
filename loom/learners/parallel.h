// Element loops of the learners: one pass, threaded above a size where threads pay off.
#pragma once

#include <cstddef>
#include <vector>

#include "loom/core/threads.h"

namespace loom::learners_detail {

// Below this many elements a loop runs on the calling thread.
inline constexpr size_t kParallelThreshold = size_t{1} << 15;

// f(i) for i in [0, n); `elements` is the work it stands for, which decides the threading.
template <typename F>
void parallel_for(size_t n, F&& f, size_t elements) {
  if (elements < kParallelThreshold) {  // no OpenMP region at all: small updates are hot
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  for_each_piece(n, static_cast<size_t>(get_max_num_cpu_threads()),
                 [&](size_t, size_t begin, size_t end) {
                   for (size_t i = begin; i < end; ++i) f(i);
                 });
}

template <typename F>
void parallel_for(size_t n, F&& f) {
  parallel_for(n, f, n);
}

// Sum of f(i) over [0, n), in double. Partial sums over fixed-size blocks are added in block
// order, so the result does not depend on the thread count (bit-identical resumes).
template <typename F>
double ordered_sum(size_t n, F&& f) {
  constexpr size_t kBlock = 4096;
  const size_t blocks = (n + kBlock - 1) / kBlock;
  // The calling thread's buffer keeps its capacity (no allocation per update); workers write
  // through a plain pointer, since a thread_local named in the loop would be their own.
  thread_local std::vector<double> partial;
  partial.assign(blocks, 0.0);
  double* sums = partial.data();
  parallel_for(
      blocks,
      [&](size_t b) {
        double s = 0;
        const size_t end = b * kBlock + kBlock < n ? b * kBlock + kBlock : n;
        for (size_t i = b * kBlock; i < end; ++i) s += f(i);
        sums[b] = s;
      },
      n);
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace loom::learners_detail
