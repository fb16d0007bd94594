#include "loom/kernels/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "loom/kernels/detail.h"

namespace loom::kernels {
namespace {

// Channels reduced together: their double accumulators live on the stack, and with S = 1 one
// sample's block of channels is contiguous.
constexpr size_t kBlock = 64;

// Calls body(c0, w) for each block of channels [c0, c0 + w); threads split the blocks.
template <class Body>
void for_channel_blocks(size_t N, size_t C, size_t S, Body&& body) {
  const size_t blocks = (C + kBlock - 1) / kBlock;
  detail::parallel_for(blocks, N * C * S, [&](size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; ++b) {
      const size_t c0 = b * kBlock, w = std::min(kBlock, C - c0);
      body(c0, w);
    }
  });
}

// Σ over n, s of f(n, c, index) for channels [c0, c0 + w), into acc (double).
template <class F>
void channel_sums(size_t N, size_t C, size_t S, size_t c0, size_t w, double* acc, F&& f) {
  std::fill_n(acc, w, 0.0);
  for (size_t n = 0; n < N; ++n)
    for (size_t j = 0; j < w; ++j) {
      const size_t base = (n * C + c0 + j) * S;
      double s = 0;
      for (size_t k = 0; k < S; ++k) s += double(f(base + k, c0 + j));
      acc[j] += s;
    }
}

}  // namespace

template <typename T>
void batch_norm_statistics(size_t N, size_t C, size_t S, const T* x, T* mean, T* var) {
  const double M = double(N * S);
  for_channel_blocks(N, C, S, [&](size_t c0, size_t w) {
    double acc[kBlock], m[kBlock];
    channel_sums(N, C, S, c0, w, acc, [&](size_t i, size_t) { return x[i]; });
    for (size_t j = 0; j < w; ++j) m[j] = acc[j] / M;
    // Two passes: the variance from centred values does not cancel catastrophically.
    channel_sums(N, C, S, c0, w, acc, [&](size_t i, size_t c) {
      const double d = double(x[i]) - m[c - c0];
      return d * d;
    });
    for (size_t j = 0; j < w; ++j) {
      mean[c0 + j] = T(m[j]);
      var[c0 + j] = T(acc[j] / M);
    }
  });
}

template <typename T>
void batch_norm_apply(size_t N, size_t C, size_t S, const T* x, const T* mean, const T* inv_std,
                      const T* scale, const T* bias, T* y) {
  detail::parallel_for(N, N * C * S, [&](size_t n0, size_t n1) {
    for (size_t n = n0; n < n1; ++n)
      for (size_t c = 0; c < C; ++c) {
        const T a = scale[c] * inv_std[c], b = bias[c] - mean[c] * a;
        const T* xs = x + (n * C + c) * S;
        T* ys = y + (n * C + c) * S;
#pragma omp simd
        for (size_t k = 0; k < S; ++k) ys[k] = xs[k] * a + b;
      }
  });
}

template <typename T>
void batch_norm_parameter_gradients(size_t N, size_t C, size_t S, const T* x, const T* dy,
                                    const T* mean, const T* inv_std, T* dscale, T* dbias) {
  for_channel_blocks(N, C, S, [&](size_t c0, size_t w) {
    double acc[kBlock];
    channel_sums(N, C, S, c0, w, acc, [&](size_t i, size_t) { return dy[i]; });
    for (size_t j = 0; j < w; ++j) dbias[c0 + j] = T(acc[j]);
    channel_sums(N, C, S, c0, w, acc, [&](size_t i, size_t c) {
      return double(dy[i]) * (double(x[i]) - double(mean[c]));
    });
    for (size_t j = 0; j < w; ++j) dscale[c0 + j] = T(acc[j] * double(inv_std[c0 + j]));
  });
}

template <typename T>
void batch_norm_input_gradient(size_t N, size_t C, size_t S, const T* x, const T* dy, const T* mean,
                               const T* inv_std, const T* scale, const T* dscale, const T* dbias,
                               bool batch_statistics, T* dx, bool accumulate) {
  const T inv_M = T(1.0 / double(N * S));
  detail::parallel_for(N, N * C * S, [&](size_t n0, size_t n1) {
    detail::with_accumulate(accumulate, [&](auto acc) {
      for (size_t n = n0; n < n1; ++n)
        for (size_t c = 0; c < C; ++c) {
          const size_t o = (n * C + c) * S;
          const T k = scale[c] * inv_std[c];
          // dx = k * dy - k * dbias / M - k * xhat * dscale / M, xhat = (x - mean) * inv_std.
          const T shift = batch_statistics ? k * dbias[c] * inv_M : T(0);
          const T slope = batch_statistics ? k * dscale[c] * inv_M * inv_std[c] : T(0);
          const T m = mean[c];
#pragma omp simd
          for (size_t i = 0; i < S; ++i) {
            const T v = k * dy[o + i] - shift - slope * (x[o + i] - m);
            if constexpr (decltype(acc)::value)
              dx[o + i] += v;
            else
              dx[o + i] = v;
          }
        }
    });
  });
}

template <typename T>
void layer_norm_forward(size_t rows, size_t D, const T* x, const T* scale, const T* bias,
                        double epsilon, T* y, T* mean, T* std) {
  detail::parallel_for(rows, rows * D, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const T* xr = x + r * D;
      T* yr = y + r * D;
      double s = 0;
      for (size_t i = 0; i < D; ++i) s += double(xr[i]);
      const double m = s / double(D);
      double q = 0;
      for (size_t i = 0; i < D; ++i) q += (double(xr[i]) - m) * (double(xr[i]) - m);
      const double sd = std::sqrt(q / double(D));
      mean[r] = T(m);
      std[r] = T(sd);
      const T inv = T(1.0 / (sd + epsilon)), mt = T(m);
#pragma omp simd
      for (size_t i = 0; i < D; ++i) yr[i] = (xr[i] - mt) * inv * scale[i] + bias[i];
    }
  });
}

template <typename T>
void layer_norm_input_gradient(size_t rows, size_t D, const T* x, const T* dy, const T* scale,
                               const T* mean, const T* std, double epsilon, T* dx,
                               bool accumulate) {
  detail::parallel_for(rows, rows * D, [&](size_t r0, size_t r1) {
    detail::with_accumulate(accumulate, [&](auto acc) {
      for (size_t r = r0; r < r1; ++r) {
        const T* xr = x + r * D;
        const T* dyr = dy + r * D;
        T* dxr = dx + r * D;
        // With u = x - mean, s = std, d = s + epsilon and g = dy * scale:
        // dx = g / d - mean(g) / d - u * Σ(g u) / (d² s D); the last term vanishes with s.
        const double m = double(mean[r]), s = double(std[r]), d = s + epsilon;
        double sum_g = 0, sum_gu = 0;
        for (size_t i = 0; i < D; ++i) {
          const double g = double(dyr[i]) * double(scale[i]);
          sum_g += g;
          sum_gu += g * (double(xr[i]) - m);
        }
        const T inv_d = T(1.0 / d), shift = T(sum_g / double(D) / d);
        const T slope = s > 0 ? T(sum_gu / (d * d * s * double(D))) : T(0);
        const T mt = T(m);
#pragma omp simd
        for (size_t i = 0; i < D; ++i) {
          const T v = dyr[i] * scale[i] * inv_d - shift - slope * (xr[i] - mt);
          if constexpr (decltype(acc)::value)
            dxr[i] += v;
          else
            dxr[i] = v;
        }
      }
    });
  });
}

template <typename T>
void layer_norm_parameter_gradients(size_t rows, size_t D, const T* x, const T* dy, const T* mean,
                                    const T* std, double epsilon, T* dscale, T* dbias,
                                    bool accumulate) {
  // Columns are independent sums over rows: threads split blocks of columns.
  const size_t blocks = (D + kBlock - 1) / kBlock;
  detail::parallel_for(blocks, rows * D, [&](size_t b0, size_t b1) {
    for (size_t b = b0; b < b1; ++b) {
      const size_t c0 = b * kBlock, w = std::min(kBlock, D - c0);
      double ds[kBlock] = {}, db[kBlock] = {};
      for (size_t r = 0; r < rows; ++r) {
        const double m = double(mean[r]), inv = 1.0 / (double(std[r]) + epsilon);
        for (size_t j = 0; j < w; ++j) {
          const size_t i = r * D + c0 + j;
          ds[j] += double(dy[i]) * (double(x[i]) - m) * inv;
          db[j] += double(dy[i]);
        }
      }
      for (size_t j = 0; j < w; ++j) {
        if (dscale) dscale[c0 + j] = T((accumulate ? double(dscale[c0 + j]) : 0.0) + ds[j]);
        if (dbias) dbias[c0 + j] = T((accumulate ? double(dbias[c0 + j]) : 0.0) + db[j]);
      }
    }
  });
}

#define LOOM_INSTANTIATE(T)                                                                        \
  template void batch_norm_statistics<T>(size_t, size_t, size_t, const T*, T*, T*);                \
  template void batch_norm_apply<T>(size_t, size_t, size_t, const T*, const T*, const T*,          \
                                    const T*, const T*, T*);                                       \
  template void batch_norm_parameter_gradients<T>(size_t, size_t, size_t, const T*, const T*,      \
                                                  const T*, const T*, T*, T*);                     \
  template void batch_norm_input_gradient<T>(size_t, size_t, size_t, const T*, const T*, const T*, \
                                             const T*, const T*, const T*, const T*, bool, T*,     \
                                             bool);                                                \
  template void layer_norm_forward<T>(size_t, size_t, const T*, const T*, const T*, double, T*,    \
                                      T*, T*);                                                     \
  template void layer_norm_input_gradient<T>(size_t, size_t, const T*, const T*, const T*,         \
                                             const T*, const T*, double, T*, bool);                \
  template void layer_norm_parameter_gradients<T>(size_t, size_t, const T*, const T*, const T*,    \
                                                  const T*, double, T*, T*, bool);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
