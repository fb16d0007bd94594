// Batch and layer normalization loops. A batch-normalized tensor is seen as [N, C, S]: N
// samples, C channels (the statistics' index), S elements per channel and sample (the spatial
// positions; 1 for per-element statistics). Sums are kept in double, so float32 statistics of
// large minibatches stay accurate. Threads split channels (statistics) or samples (the
// elementwise passes); results do not depend on the thread count.
#pragma once

#include <cstddef>

namespace loom::kernels {

// mean[c] and the biased variance var[c] of x over n < N, s < S.
template <typename T>
void batch_norm_statistics(size_t N, size_t C, size_t S, const T* x, T* mean, T* var);

// y = (x - mean[c]) * inv_std[c] * scale[c] + bias[c].
template <typename T>
void batch_norm_apply(size_t N, size_t C, size_t S, const T* x, const T* mean, const T* inv_std,
                      const T* scale, const T* bias, T* y);

// Per channel: dbias[c] = Σ dy, dscale[c] = Σ dy * (x - mean[c]) * inv_std[c].
template <typename T>
void batch_norm_parameter_gradients(size_t N, size_t C, size_t S, const T* x, const T* dy,
                                    const T* mean, const T* inv_std, T* dscale, T* dbias);

// The gradient with respect to x (written, or added when accumulate). batch_statistics: mean and
// inv_std are the minibatch's own (training), so dx = scale * inv_std * (dy - dbias / M -
// xhat * dscale / M) with M = N * S and dscale, dbias from batch_norm_parameter_gradients;
// otherwise they are constants (running statistics) and dx = dy * scale * inv_std.
template <typename T>
void batch_norm_input_gradient(size_t N, size_t C, size_t S, const T* x, const T* dy, const T* mean,
                               const T* inv_std, const T* scale, const T* dscale, const T* dbias,
                               bool batch_statistics, T* dx, bool accumulate);

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

}  // namespace loom::kernels
