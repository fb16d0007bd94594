#include "loom/kernels/permute.h"

#include <algorithm>

#include "loom/core/error.h"
#include "loom/kernels/detail.h"

namespace loom::kernels {
namespace {

using detail::kMaxRank;

// The permutation as a walk of y in row-major order: per axis of y, its extent and the stride of
// x along it. Axes of extent 1 are dropped and neighbours that x also holds in order merged, so
// a batch of matrix transposes is three axes and a permutation that keeps the order one.
struct Walk {
  size_t rank = 0, size = 1;
  size_t dim[kMaxRank] = {}, x_stride[kMaxRank] = {}, y_stride[kMaxRank] = {};
};

Walk plan(const std::vector<size_t>& dims, const std::vector<size_t>& perm) {
  const size_t rank = dims.size();
  LOOM_CHECK(perm.size() == rank && rank <= kMaxRank, ShapeError, "permute: ", perm.size(),
             " axes in the permutation of a tensor of rank ", rank, " (at most ", kMaxRank, ")");
  size_t stride[kMaxRank];
  for (size_t a = rank, s = 1; a-- > 0; s *= dims[a]) stride[a] = s;
  Walk w;
  for (size_t k = rank; k-- > 0;) {  // innermost first, reversed below
    const size_t d = dims[perm[k]], s = stride[perm[k]];
    w.size *= d;
    if (d == 1) continue;
    if (w.rank > 0 && s == w.x_stride[w.rank - 1] * w.dim[w.rank - 1]) {
      w.dim[w.rank - 1] *= d;
      continue;
    }
    w.dim[w.rank] = d;
    w.x_stride[w.rank++] = s;
  }
  if (w.rank == 0) {
    w.dim[0] = w.x_stride[0] = 1;
    w.rank = 1;
  }
  std::reverse(w.dim, w.dim + w.rank);
  std::reverse(w.x_stride, w.x_stride + w.rank);
  for (size_t k = w.rank, s = 1; k-- > 0; s *= w.dim[k]) w.y_stride[k] = s;
  return w;
}

// The offsets in x and y of index i of the space of w's axes `axes` (row-major over them).
void locate(const Walk& w, const size_t* axes, size_t n, size_t i, size_t& x, size_t& y) {
  x = y = 0;
  for (size_t a = n; a-- > 0;) {
    const size_t k = axes[a], at = i % w.dim[k];
    i /= w.dim[k];
    x += at * w.x_stride[k];
    y += at * w.y_stride[k];
  }
}

template <bool Accumulate, typename T>
void walk(const Walk& w, const T* x, T* y) {
  const size_t last = w.rank - 1;
  size_t outer[kMaxRank], n = 0;
  if (w.x_stride[last] == 1) {
    // y's rows are runs of x: copy them.
    for (size_t k = 0; k < last; ++k) outer[n++] = k;
    const size_t run = w.dim[last];
    detail::parallel_for(w.size / run, w.size, [&](size_t begin, size_t end) {
      for (size_t r = begin; r < end; ++r) {
        size_t xo, yo;
        locate(w, outer, n, r, xo, yo);
        const T* from = x + xo;
        T* to = y + yo;
#pragma omp simd
        for (size_t i = 0; i < run; ++i) to[i] = Accumulate ? to[i] + from[i] : from[i];
      }
    });
    return;
  }
  // x's rows run along y's axis j: transpose tiles of axes j (x's rows) and last (y's rows) small
  // enough for the L1 cache, the inner loop along the longer of the two (a [3, 1000] matrix is
  // three loops of 1000, not 1000 of three).
  constexpr size_t kTile = 32, kTileElements = 4096;
  size_t j = 0;
  while (w.x_stride[j] != 1) ++j;  // x's innermost axis, never dropped (x_stride 1)
  for (size_t k = 0; k < last; ++k)
    if (k != j) outer[n++] = k;
  const size_t rows = w.dim[j], cols = w.dim[last];
  const bool rows_inner = rows > cols;
  const size_t narrow = std::min(std::min(rows, cols), kTile),
               wide = std::max(kTile, kTileElements / narrow);
  const size_t row_tile = rows_inner ? wide : narrow, col_tile = rows_inner ? narrow : wide;
  const size_t tiles = (rows + row_tile - 1) / row_tile;
  const size_t y_row = w.y_stride[j], x_col = w.x_stride[last];
  detail::parallel_for(w.size / (rows * cols) * tiles, w.size, [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      size_t xo, yo;
      locate(w, outer, n, t / tiles, xo, yo);
      const T* from = x + xo;
      T* to = y + yo;
      const size_t r0 = t % tiles * row_tile, r1 = std::min(rows, r0 + row_tile);
      for (size_t c0 = 0; c0 < cols; c0 += col_tile) {
        const size_t c1 = std::min(cols, c0 + col_tile);
        if (rows_inner) {
          for (size_t c = c0; c < c1; ++c)
            for (size_t r = r0; r < r1; ++r) {
              T& out = to[r * y_row + c];
              out = Accumulate ? out + from[r + c * x_col] : from[r + c * x_col];
            }
        } else {
          for (size_t r = r0; r < r1; ++r)
            for (size_t c = c0; c < c1; ++c) {
              T& out = to[r * y_row + c];
              out = Accumulate ? out + from[r + c * x_col] : from[r + c * x_col];
            }
        }
      }
    }
  });
}

}  // namespace

template <typename T>
void permute(const T* x, T* y, const std::vector<size_t>& dims, const std::vector<size_t>& perm,
             bool accumulate) {
  const Walk w = plan(dims, perm);
  if (w.size == 0) return;  // an axis of extent 0: nothing to move
  detail::with_accumulate(accumulate, [&](auto acc) { walk<decltype(acc)::value>(w, x, y); });
}

template <typename T>
void copy_blocks(size_t count, size_t len, const T* x, size_t x_stride, T* y, size_t y_stride,
                 bool accumulate) {
  if (len == 0) return;
  detail::with_accumulate(accumulate, [&](auto acc) {
    // Split over the elements, not the blocks: a few long blocks thread as well as many short.
    detail::parallel_for(count * len, count * len, [&](size_t begin, size_t end) {
      for (size_t b = begin / len, i = begin % len; b * len + i < end; ++b, i = 0) {
        const size_t n = std::min(len, end - b * len);
        const T* from = x + b * x_stride;
        T* to = y + b * y_stride;
#pragma omp simd
        for (size_t k = i; k < n; ++k) to[k] = acc ? to[k] + from[k] : from[k];
      }
    });
  });
}

template <typename T>
void gather_rows(size_t rows, size_t n, const size_t* map, const T* x, T* y, bool accumulate) {
  detail::with_accumulate(accumulate, [&](auto acc) {
    detail::parallel_for(rows, rows * n, [&](size_t begin, size_t end) {
      for (size_t r = begin; r < end; ++r) {
        T* to = y + r * n;
        if (map[r] == kNoRow) {
          if (!acc) std::fill_n(to, n, T(0));
          continue;
        }
        const T* from = x + map[r] * n;
#pragma omp simd
        for (size_t k = 0; k < n; ++k) to[k] = acc ? to[k] + from[k] : from[k];
      }
    });
  });
}

template void permute<float>(const float*, float*, const std::vector<size_t>&,
                             const std::vector<size_t>&, bool);
template void permute<double>(const double*, double*, const std::vector<size_t>&,
                              const std::vector<size_t>&, bool);

template void copy_blocks<float>(size_t, size_t, const float*, size_t, float*, size_t, bool);
template void copy_blocks<double>(size_t, size_t, const double*, size_t, double*, size_t, bool);
template void gather_rows<float>(size_t, size_t, const size_t*, const float*, float*, bool);
template void gather_rows<double>(size_t, size_t, const size_t*, const double*, double*, bool);

}  // namespace loom::kernels
