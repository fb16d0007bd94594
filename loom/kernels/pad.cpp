#include "loom/kernels/pad.h"

#include <algorithm>

namespace loom::kernels {

namespace {

// The input position that output position i of an axis of extent n with `head` elements of
// padding in front reads, or -1 for a constant.
int64_t source_position(int64_t i, int64_t n, int64_t head, PadMode mode) {
  int64_t j = i - head;
  if (j >= 0 && j < n) return j;
  switch (mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Reflect:  // ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...
      return j < 0 ? -j : 2 * (n - 1) - j;
    case PadMode::Symmetric:  // ... 1 0 | 0 1 2 ... n-1 | n-1 n-2 ...
      return j < 0 ? -j - 1 : 2 * n - 1 - j;
  }
  return -1;
}

// Calls f(o, i) for each output element o, with i the offset of the input element it reads (-1
// for a constant), in row-major order of the output.
template <class F>
void for_each_padded(const PadGeometry& g, F&& f) {
  const size_t rank = g.in.size();
  // Per axis: the input offset (position times the axis's stride) of each output position.
  std::vector<std::vector<int64_t>> offset(rank);
  int64_t stride = 1;
  for (size_t k = rank; k-- > 0;) {
    offset[k].resize(g.out[k]);
    for (size_t i = 0; i < g.out[k]; ++i) {
      const int64_t p = source_position(int64_t(i), int64_t(g.in[k]), int64_t(g.head[k]), g.mode);
      offset[k][i] = p < 0 ? -1 : p * stride;
    }
    stride *= int64_t(g.in[k]);
  }
  size_t total = 1;
  for (size_t d : g.out) total *= d;
  if (total == 0) return;
  std::vector<size_t> idx(rank, 0);
  for (size_t o = 0; o < total; ++o) {
    int64_t i = 0;
    for (size_t k = 0; k < rank && i >= 0; ++k) {
      const int64_t part = offset[k][idx[k]];
      i = part < 0 ? -1 : i + part;
    }
    f(o, i);
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < g.out[k]) break;
      idx[k] = 0;
    }
  }
}

}  // namespace

template <typename T>
void pad_forward(const PadGeometry& g, T value, const T* x, T* y) {
  for_each_padded(g, [&](size_t o, int64_t i) { y[o] = i < 0 ? value : x[i]; });
}

template <typename T>
void pad_backward(const PadGeometry& g, const T* dy, T* dx, bool accumulate) {
  if (!accumulate) {
    size_t n = 1;
    for (size_t d : g.in) n *= d;
    std::fill_n(dx, n, T(0));
  }
  for_each_padded(g, [&](size_t o, int64_t i) {
    if (i >= 0) dx[i] += dy[o];
  });
}

template void pad_forward<float>(const PadGeometry&, float, const float*, float*);
template void pad_forward<double>(const PadGeometry&, double, const double*, double*);
template void pad_backward<float>(const PadGeometry&, const float*, float*, bool);
template void pad_backward<double>(const PadGeometry&, const double*, double*, bool);

}  // namespace loom::kernels
