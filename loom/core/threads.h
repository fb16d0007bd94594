// The CPU thread count shared by Loom's loops (OpenMP) and oneDNN, and the split of loops
// across those threads.
#pragma once

#include <cstddef>
#include <functional>

namespace loom {

// Caps the threads used by compute; n >= 1. Defaults to the cores available.
void set_max_num_cpu_threads(int n);
int get_max_num_cpu_threads();

// A loop over at least this many bytes splits across threads: a team costs microseconds to
// start, so shorter loops stay on the calling thread.
inline constexpr size_t kParallelBytes = size_t{8} << 20;

// The pieces a loop over n bytes splits into: one per thread from kParallelBytes on, else 1.
inline size_t byte_pieces(size_t n) {
  return n >= kParallelBytes ? static_cast<size_t>(get_max_num_cpu_threads()) : 1;
}

// Calls body(i, begin, end) for the pieces i = 0 .. pieces - 1 of [0, n), contiguous and in
// order, piece i being [n * i / pieces, n * (i + 1) / pieces); in parallel (OpenMP), a piece
// per thread, when there are several. The parallel region is compiled in threads.cpp, so this
// header needs no OpenMP flags; a call costs one indirect call per piece.
void for_each_piece(size_t n, size_t pieces,
                    const std::function<void(size_t, size_t, size_t)>& body);

// memcpy of n bytes, split over the threads from kParallelBytes on (long copies: restored
// checkpoints, packed sequences).
void copy_bytes(void* to, const void* from, size_t n);

// Whether the caller runs inside a parallel region (where a nested one would run on one thread).
bool in_parallel_region();

}  // namespace loom
