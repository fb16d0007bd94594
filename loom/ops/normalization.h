// Normalization ops: batch normalization (CNTK's BatchNormalization node) and layer
// normalization (CNTK's LayerNormalization layer as one op).
#pragma once

#include <string>
#include <vector>

#include "loom/graph/function.h"

namespace loom {

// Batch normalization of x, which must have a batch axis. spatial: one statistic per channel,
// the first axis of x's sample shape, over the samples and all other axes (x [C, H, W], the
// statistics [C]); otherwise one per element of the sample (statistics of x's sample shape).
// scale, bias, running_mean and running_inv_std have the statistics' shape (inferred
// dimensions are fixed at the first call); running_count has one element. running_mean,
// running_inv_std (which holds the running variance, as in CNTK) and running_count are
// Constants: training mode writes them, save_model keeps them.
//
// Training mode: y = (x - mean) / sqrt(var + epsilon) * scale + bias with the minibatch's mean
// and biased variance; then, with n the minibatch's samples and f the weight of the minibatch
// (CNTK's rule): f = 1 while running_count is 0, else 1 - exp(-n / normalization_time_constant)
// (f = 1 for a time constant of 0: the last minibatch only; f = 0 for +infinity: frozen; a
// negative time constant gives the cumulative average n / (n + running_count)),
//   running_mean = (1 - f) running_mean + f mean,
//   running_inv_std = (1 - f) running_inv_std + f var * M / (M - 1) (M values per statistic),
//   running_count += n.
// Then, once running_count > 0, a blend_time_constant T > 0 normalizes by CNTK's blend of the
// (updated) running statistics, weight b = T / (T + n) (1 for +infinity), with the minibatch's:
// mean b running_mean + (1 - b) mean, inverse standard deviation b / sqrt(running_inv_std +
// epsilon) + (1 - b) / sqrt(var + epsilon); the gradient is CNTK's, whose batch-statistics
// terms weigh 1 - b (kernels::batch_norm_backward). T = 0: the minibatch's statistics alone.
// Inference mode: y = (x - running_mean) / sqrt(running_inv_std + epsilon) * scale + bias; a
// StateError while running_count is 0 (nothing has been trained, as CNTK says).
// Differentiable with respect to x, scale and bias.
// CNTK's defaults (the op's and the BatchNormalization layer's); the time constants are ints, as
// CNTK's Python signature writes them.
inline constexpr int kBatchNormalizationTimeConstant = 5000;
inline constexpr int kBatchNormalizationBlendTimeConstant = 0;
inline constexpr double kBatchNormalizationEpsilon = 0.00001;
Function batch_normalization(const Variable& x, const Variable& scale, const Variable& bias,
                             const Variable& running_mean, const Variable& running_inv_std,
                             const Variable& running_count, bool spatial,
                             double normalization_time_constant = kBatchNormalizationTimeConstant,
                             double blend_time_constant = kBatchNormalizationBlendTimeConstant,
                             double epsilon = kBatchNormalizationEpsilon,
                             const std::string& name = "");

// Per sample over all its elements: y = (x - mean) / (std + epsilon) * scale + bias, std the
// population standard deviation (epsilon is added to std, as CNTK's LayerNormalization layer
// does). scale and bias have x's sample shape (inferred dimensions are fixed at the first
// call). Differentiable with respect to x, scale and bias.
Function layer_normalization(const Variable& x, const Variable& scale, const Variable& bias,
                             double epsilon = 0.00001, const std::string& name = "");

// Local response normalization across channels (CNTK's local_response_normalization): of
// operand [C, ...], y = x / (bias + alpha / (2 depth_radius + 1) * Σ x²)^beta, the sum over the
// channels within depth_radius of each (a window of all C channels when 2 depth_radius + 1 > C
// is cut to C, placed as CNTK places it: kernels::LrnShape). Differentiable.
Function local_response_normalization(const Variable& operand, size_t depth_radius, double bias,
                                      double alpha, double beta, const std::string& name = "");

// CNTK's PerDimMeanVarianceNormalize: (operand - mean) * inv_stddev, elementwise with
// broadcasting (mean and inv_stddev typically the data's statistics of the sample's shape).
Function per_dim_mean_variance_normalize(const Variable& operand, const Variable& mean,
                                         const Variable& inv_stddev, const std::string& name = "");

// CNTK's MeanVarianceNormalization: operand minus its mean, divided by (with
// do_variance_scaling) its population standard deviation plus epsilon, the statistics per
// channel (the first axis: over the other static axes of each sample) or, with
// use_stats_across_channels or for a vector, over all static axes of each sample.
// ArgumentError for a scalar operand or a negative epsilon.
struct MeanVarianceNormalizationOptions {
  double epsilon = 0.00001;
  bool use_stats_across_channels = false;
  bool do_variance_scaling = true;
};
Function mean_variance_normalization(const Variable& operand,
                                     const MeanVarianceNormalizationOptions& options = {},
                                     const std::string& name = "");

// CNTK's ImageScaler: operand [C, H, W] * scalar + biases[c] on channel c (biases has C values),
// in operand's dtype. ArgumentError for another rank or number of biases.
Function image_scaler(const Variable& operand, double scalar, const std::vector<double>& biases,
                      const std::string& name = "");

}  // namespace loom
