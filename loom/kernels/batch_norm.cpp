#include "loom/kernels/batch_norm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "loom/kernels/detail.h"
#include "loom/kernels/onednn.h"

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

// ---- Batch normalization loops (double, the reference) ----

// mean[c] and the biased variance var[c] of x over n < N, s < S.
template <typename T>
void ref_statistics(size_t N, size_t C, size_t S, const T* x, T* mean, T* var) {
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

// y = (x - mean[c]) * inv_std[c] * scale[c] + bias[c].
template <typename T>
void ref_apply(size_t N, size_t C, size_t S, const T* x, const T* mean, const T* inv_std,
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

// Per channel: dbias[c] = Σ dy, dscale[c] = Σ dy * (x - mean[c]) * inv_std[c].
template <typename T>
void ref_parameter_gradients(size_t N, size_t C, size_t S, const T* x, const T* dy, const T* mean,
                             const T* inv_std, T* dscale, T* dbias) {
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

// dx (+)= the gradient with respect to x (see batch_norm_backward), dscale and dbias from
// ref_parameter_gradients.
template <typename T>
void ref_input_gradient(size_t N, size_t C, size_t S, const T* x, const T* dy, const T* mean,
                        const T* inv_std, const T* scale, const T* dscale, const T* dbias,
                        double batch_weight, T* dx, bool accumulate) {
  const T inv_M = T(batch_weight / double(N * S));
  detail::parallel_for(N, N * C * S, [&](size_t n0, size_t n1) {
    detail::with_accumulate(accumulate, [&](auto acc) {
      for (size_t n = n0; n < n1; ++n)
        for (size_t c = 0; c < C; ++c) {
          const size_t o = (n * C + c) * S;
          const T k = scale[c] * inv_std[c];
          // dx = k * dy - k * dbias / M - k * xhat * dscale / M, xhat = (x - mean) * inv_std.
          const T shift = k * dbias[c] * inv_M;
          const T slope = k * dscale[c] * inv_M * inv_std[c];
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

// inv_std[c] = 1 / sqrt(var[c] + epsilon), as the loops take it.
template <typename T>
std::vector<T> inverse_std(size_t C, const T* var, double epsilon) {
  std::vector<T> inv_std(C);
  for (size_t c = 0; c < C; ++c) inv_std[c] = T(1 / std::sqrt(double(var[c]) + epsilon));
  return inv_std;
}

// ---- Batch normalization on oneDNN (float) ----

namespace dnn = onednn;
using dnnl::memory;

struct BnPrimitives {
  dnnl::batch_normalization_forward::primitive_desc fwd_pd;
  dnnl::batch_normalization_forward fwd;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd;
  dnnl::batch_normalization_backward bwd;
  memory::desc x, y, channel;  // Loom's layouts of x and dx, of y and dy, of per-channel vectors
};

// Loom's layouts of x and y, described so that oneDNN 2.6 picks its fast kernels. It runs 3D
// tensors on its reference kernel only, so [N, C, S] is described as [N, C, S, 1] (the same
// memory in either layout). A row-major [N, C] (S = 1) would run a per-channel kernel strided
// over N, slower than Loom's loops; described as the channels-last [1, C, N, 1] (the same
// memory: N positions of C channels, over which the statistics run) it runs the vectorized
// channels-last kernel, 5 to 15 times faster (bench/convolution.cpp's figures, S = 1 rows).
std::pair<memory::desc, memory::desc> data_descs(const BatchNormShape& s) {
  const auto i = [](size_t v) { return memory::dim(v); };
  if (s.S == 1 && !s.input_blocked && !s.output_blocked) {
    const memory::desc rows({1, i(s.C), i(s.N), 1}, memory::data_type::f32,
                            memory::format_tag::nhwc);
    return {rows, rows};
  }
  const memory::dims d{i(s.N), i(s.C), i(s.S), 1};
  return {dnn::activation_desc(d, s.input_blocked), dnn::activation_desc(d, s.output_blocked)};
}

// Both run in x's layout, with global statistics (read) unless batch_statistics (written).
BnPrimitives make_primitives(const BatchNormShape& s, float epsilon, bool batch_statistics) {
  const auto [x, y] = data_descs(s);
  using flags = dnnl::normalization_flags;
  const flags f = flags::use_scale | flags::use_shift |
                  (batch_statistics ? flags::none : flags::use_global_stats);
  const dnnl::engine& eng = dnn::engine();
  dnnl::batch_normalization_forward::primitive_desc fwd_pd(
      {dnnl::prop_kind::forward_training, x, epsilon, f}, eng);
  dnnl::batch_normalization_backward::primitive_desc bwd_pd(
      {dnnl::prop_kind::backward, x, x, epsilon, f}, eng, fwd_pd);
  return {fwd_pd,
          dnnl::batch_normalization_forward(fwd_pd),
          bwd_pd,
          dnnl::batch_normalization_backward(bwd_pd),
          x,
          y,
          dnn::plain_desc({memory::dim(s.C)})};
}

BnPrimitives& primitives(const BatchNormShape& s, double epsilon, bool batch_statistics) {
  const float eps = float(epsilon);
  const memory::dims k{memory::dim(s.N),
                       memory::dim(s.C),
                       memory::dim(s.S),
                       memory::dim(s.input_blocked),
                       memory::dim(s.output_blocked),
                       memory::dim(batch_statistics),
                       memory::dim(std::bit_cast<uint32_t>(eps))};
  return dnn::cached<BnPrimitives>(dnn::key("bnorm", {k}),
                                   [&] { return make_primitives(s, eps, batch_statistics); });
}

}  // namespace

template <>
void batch_norm_forward<double>(const BatchNormShape& s, const double* x, const double* scale,
                                const double* bias, double epsilon, bool batch_statistics,
                                double* mean, double* var, double* y) {
  if (batch_statistics) ref_statistics(s.N, s.C, s.S, x, mean, var);
  ref_apply(s.N, s.C, s.S, x, mean, inverse_std(s.C, var, epsilon).data(), scale, bias, y);
}

template <>
void batch_norm_backward<double>(const BatchNormShape& s, const double* x, const double* dy,
                                 const double* mean, const double* var, const double* scale,
                                 const double* /*bias*/, double epsilon, double batch_weight,
                                 double* dx, bool accumulate, double* dscale, double* dbias) {
  const std::vector<double> inv_std = inverse_std(s.C, var, epsilon);
  ref_parameter_gradients(s.N, s.C, s.S, x, dy, mean, inv_std.data(), dscale, dbias);
  if (dx)
    ref_input_gradient(s.N, s.C, s.S, x, dy, mean, inv_std.data(), scale, dscale, dbias,
                       batch_weight, dx, accumulate);
}

template <>
void batch_norm_forward<float>(const BatchNormShape& s, const float* x, const float* scale,
                               const float* bias, double epsilon, bool batch_statistics,
                               float* mean, float* var, float* y) {
  BnPrimitives& p = primitives(s, epsilon, batch_statistics);
  dnn::Output dst(p.fwd_pd.dst_desc(), p.y, y, false, 0);
  dnn::execute(p.fwd,
               {{DNNL_ARG_SRC, dnn::wrap(p.x, x)},
                {DNNL_ARG_SCALE, dnn::wrap(p.channel, scale)},
                {DNNL_ARG_SHIFT, dnn::wrap(p.channel, bias)},
                {DNNL_ARG_MEAN, dnn::wrap(p.channel, mean)},
                {DNNL_ARG_VARIANCE, dnn::wrap(p.channel, var)},
                {DNNL_ARG_DST, dst.mem()}},
               "batch normalization forward");
  dst.finish();
}

template <>
void batch_norm_backward<float>(const BatchNormShape& s, const float* x, const float* dy,
                                const float* mean, const float* var, const float* scale,
                                const float* bias, double epsilon, double batch_weight, float* dx,
                                bool accumulate, float* dscale, float* dbias) {
  if (dx && batch_weight != 0 && batch_weight != 1) {
    // oneDNN has the two ends: dx is linear in the weight, so a blend of their gradients.
    // Both ends into this thread's buffer 4 (the calls use 0 to 3), reused minibatch after
    // minibatch; both layouts hold every element once (C blocks whole).
    const size_t n = s.N * s.C * s.S;
    float* batch = static_cast<float*>(dnn::buffer(4, 2 * n * sizeof(float)));
    float* constant = batch + n;
    batch_norm_backward(s, x, dy, mean, var, scale, bias, epsilon, 1.0, batch, false, dscale,
                        dbias);
    batch_norm_backward(s, x, dy, mean, var, scale, bias, epsilon, 0.0, constant, false, dscale,
                        dbias);
    const float w = float(batch_weight);
    for (size_t i = 0; i < n; ++i) {
      const float v = w * batch[i] + (1 - w) * constant[i];
      dx[i] = accumulate ? dx[i] + v : v;
    }
    return;
  }
  BnPrimitives& p = primitives(s, epsilon, batch_weight != 0);
  memory diff_dst = dnn::to_layout(p.y, dy, p.bwd_pd.diff_dst_desc(), 0);
  // The primitive writes dx whether wanted or not: without dx, into a buffer.
  float* out = dx ? dx : static_cast<float*>(dnn::buffer(1, p.x.get_size()));
  dnn::Output diff_src(p.bwd_pd.diff_src_desc(), p.x, out, dx && accumulate, 2);
  dnn::execute(p.bwd,
               {{DNNL_ARG_SRC, dnn::wrap(p.x, x)},
                {DNNL_ARG_DIFF_DST, diff_dst},
                {DNNL_ARG_MEAN, dnn::wrap(p.channel, mean)},
                {DNNL_ARG_VARIANCE, dnn::wrap(p.channel, var)},
                {DNNL_ARG_SCALE, dnn::wrap(p.channel, scale)},
                {DNNL_ARG_SHIFT, dnn::wrap(p.channel, bias)},
                {DNNL_ARG_DIFF_SRC, diff_src.mem()},
                {DNNL_ARG_DIFF_SCALE, dnn::wrap(p.channel, dscale)},
                {DNNL_ARG_DIFF_SHIFT, dnn::wrap(p.channel, dbias)}},
               "batch normalization backward");
  diff_src.finish();
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

namespace {

// The LRN window of channel c: [c - below, c + above], clipped to the channels; and the weight
// of its sum of squares, alpha / (2 depth_radius + 1).
struct LrnWindow {
  size_t channels, below, above;
  double scale;
  explicit LrnWindow(const LrnShape& s)
      : channels(s.channels),
        below((std::min(2 * s.depth_radius + 1, s.channels) - 1) / 2),
        above(std::min(2 * s.depth_radius + 1, s.channels) - 1 - below),
        scale(s.alpha / double(2 * s.depth_radius + 1)) {}
  // The sum of v over the window of c, from v's prefix sums (channels + 1 of them).
  double sum(const std::vector<double>& prefix, size_t c) const {
    return prefix[std::min(channels, c + above + 1)] - prefix[c > below ? c - below : 0];
  }
  // The sum of v over the channels whose windows hold c.
  double sum_over_holders(const std::vector<double>& prefix, size_t c) const {
    return prefix[std::min(channels, c + below + 1)] - prefix[c > above ? c - above : 0];
  }
};

// d^-beta for d > 0: CNTK's default beta 3/4 and 1/2 by square roots (std::pow per element made
// LRN 0.5-0.7x PyTorch's speed), others by std::pow.
double inverse_power(double d, double beta) {
  if (beta == 0.75) {
    const double r = std::sqrt(d);
    return 1 / (r * std::sqrt(r));
  }
  if (beta == 0.5) return 1 / std::sqrt(d);
  return std::pow(d, -beta);
}

// Calls f(first element, P, D) for each position of each sample, D[c] = bias + scale Σ x² over
// c's window and P[c] = D[c]^-beta, and the prefix sums' buffer for f's own use.
template <typename T, class F>
void for_each_lrn_position(const LrnShape& s, const LrnWindow& win, const T* x, F&& f) {
  detail::parallel_for(
      s.batch * s.spatial, s.batch * s.spatial * s.channels * 4, [&](size_t b, size_t e) {
        std::vector<double> prefix(s.channels + 1), D(s.channels), P(s.channels);
        for (size_t p = b; p < e; ++p) {
          const size_t first = p / s.spatial * s.channels * s.spatial + p % s.spatial;
          for (size_t c = 0; c < s.channels; ++c) {
            const double v = double(x[first + c * s.spatial]);
            prefix[c + 1] = prefix[c] + v * v;
          }
          for (size_t c = 0; c < s.channels; ++c) {
            D[c] = s.bias + win.scale * win.sum(prefix, c);
            P[c] = inverse_power(D[c], s.beta);
          }
          f(first, P, D, prefix);
        }
      });
}

}  // namespace

template <typename T>
void lrn_forward(const LrnShape& s, const T* x, T* y) {
  for_each_lrn_position(s, LrnWindow(s), x,
                        [&](size_t first, const std::vector<double>& P, const std::vector<double>&,
                            std::vector<double>&) {
                          for (size_t c = 0; c < s.channels; ++c) {
                            const size_t i = first + c * s.spatial;
                            y[i] = T(double(x[i]) * P[c]);
                          }
                        });
}

// dx_k = dy_k D_k^-beta - 2 scale beta x_k Σ_{i: k in window(i)} dy_i x_i D_i^(-beta - 1).
template <typename T>
void lrn_backward(const LrnShape& s, const T* x, const T* dy, T* dx, bool accumulate) {
  const LrnWindow win(s);
  for_each_lrn_position(s, win, x,
                        [&](size_t first, const std::vector<double>& P,
                            const std::vector<double>& D, std::vector<double>& prefix) {
                          for (size_t c = 0; c < s.channels; ++c) {
                            const size_t i = first + c * s.spatial;
                            prefix[c + 1] = prefix[c] + double(dy[i]) * double(x[i]) * P[c] / D[c];
                          }
                          for (size_t c = 0; c < s.channels; ++c) {
                            const size_t i = first + c * s.spatial;
                            const double g =
                                double(dy[i]) * P[c] - 2 * win.scale * s.beta * double(x[i]) *
                                                           win.sum_over_holders(prefix, c);
                            dx[i] = T((accumulate ? double(dx[i]) : 0.0) + g);
                          }
                        });
}

#define LOOM_INSTANTIATE(T)                                                                     \
  template void lrn_forward<T>(const LrnShape&, const T*, T*);                                  \
  template void lrn_backward<T>(const LrnShape&, const T*, const T*, T*, bool);                 \
  template void layer_norm_forward<T>(size_t, size_t, const T*, const T*, const T*, double, T*, \
                                      T*, T*);                                                  \
  template void layer_norm_input_gradient<T>(size_t, size_t, const T*, const T*, const T*,      \
                                             const T*, const T*, double, T*, bool);             \
  template void layer_norm_parameter_gradients<T>(size_t, size_t, const T*, const T*, const T*, \
                                                  const T*, double, T*, T*, bool);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
