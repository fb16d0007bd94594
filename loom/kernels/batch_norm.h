// Batch and layer normalization. A batch-normalized tensor is seen as [N, C, S]: N samples, C
// channels (the statistics' index), S elements per channel and sample (the spatial positions; 1
// for per-element statistics). float batch normalization runs oneDNN primitives (created once
// per shape), which sum in float: with N * S = 200,000 its statistics are within about 1e-5
// (relative) of exact ones, and may round differently with the thread count. double runs plain
// loops that sum in double, the reference the tests compare against. Layer normalization runs
// loops for both types. The loops' threads split channels (statistics) or samples (the
// elementwise passes); their results do not depend on the thread count.
#pragma once

#include <cstddef>

namespace loom::kernels {

struct BatchNormShape {
  size_t N = 1, C = 1, S = 1;
  // Loom's memory of x and dx (input) and of y and dy (output): row-major, or oneDNN's
  // channel-blocked layout (float only; C a multiple of kChannelBlock, see convolution.h).
  bool input_blocked = false, output_blocked = false;
};

// y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c]. batch_statistics: mean and
// var are the minibatch's own (var biased, over n < N and s < S), written; otherwise they are
// read (running statistics).
template <typename T>
void batch_norm_forward(const BatchNormShape& s, const T* x, const T* scale, const T* bias,
                        double epsilon, bool batch_statistics, T* mean, T* var, T* y);

// The gradients given dy and the forward's mean and var, with xhat = (x - mean[c]) *
// inv_std[c], inv_std[c] = 1 / sqrt(var[c] + epsilon): dscale[c] = Σ dy * xhat and dbias[c] =
// Σ dy (written), and unless dx is null, dx (written, or added when accumulate) =
// scale * inv_std * (dy - batch_weight * (dbias + xhat * dscale) / M), M = N * S. batch_weight
// is CNTK's weight of the minibatch's own statistics in mean and var (mbStatsWeight): 1 for
// batch statistics (the exact gradient), 0 for constant (running) ones, between for a blend of
// the two (CNTK's gradient of a blend, which weights the batch statistics' terms). bias enters
// no gradient; oneDNN's primitive takes it all the same.
template <typename T>
void batch_norm_backward(const BatchNormShape& s, const T* x, const T* dy, const T* mean,
                         const T* var, const T* scale, const T* bias, double epsilon,
                         double batch_weight, T* dx, bool accumulate, T* dscale, T* dbias);

// Layer normalization of each of `rows` rows of D elements (CNTK's LayerNormalization layer):
// y = (x - mean) / (std + epsilon) * scale + bias, std the population standard deviation of the
// row, scale and bias of D elements. Writes each row's mean and std.
template <typename T>
void layer_norm_forward(size_t rows, size_t D, const T* x, const T* scale, const T* bias,
                        double epsilon, T* y, T* mean, T* std);

// dx (written, or added when accumulate) from dy and forward's mean and std.
template <typename T>
void layer_norm_input_gradient(size_t rows, size_t D, const T* x, const T* dy, const T* scale,
                               const T* mean, const T* std, double epsilon, T* dx, bool accumulate);

// dscale = Σ_rows dy * xhat, dbias = Σ_rows dy (each written, or added when accumulate; either
// may be null when not wanted).
template <typename T>
void layer_norm_parameter_gradients(size_t rows, size_t D, const T* x, const T* dy, const T* mean,
                                    const T* std, double epsilon, T* dscale, T* dbias,
                                    bool accumulate);

// Local response normalization across channels (CNTK's LocalResponseNormalization) of x
// [N, C, S]: y = x / (bias + alpha / (2 depth_radius + 1) * Σ x²)^beta, the sum over a window of
// k = min(2 depth_radius + 1, C) channels from c - (k - 1) / 2 (CNTK's centred convolution of
// the squares, zero padded: depth_radius channels each side when 2 depth_radius < C).
struct LrnShape {
  size_t batch = 1, channels = 1, spatial = 1;
  size_t depth_radius = 0;
  double bias = 1, alpha = 1, beta = 1;
};

template <typename T>
void lrn_forward(const LrnShape& s, const T* x, T* y);
// dx (written, or added when accumulate) from dy.
template <typename T>
void lrn_backward(const LrnShape& s, const T* x, const T* dy, T* dx, bool accumulate);

}  // namespace loom::kernels
