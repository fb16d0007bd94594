// BatchNormalization and LayerNormalization layers (CNTK's), over the ops of
// loom/ops/normalization.h. Their parameters' and running statistics' shapes are inferred at
// the first call; calling a layer object twice shares them.
#pragma once

#include <optional>
#include <string>

#include "loom/graph/function.h"
#include "loom/ops/normalization.h"

namespace loom {

struct BatchNormalizationOptions {
  // Unset: one statistic per element of the sample. 1: per channel (the first axis of the
  // sample: [C, H, W] inputs of convolutions), CNTK's spatial batch normalization.
  std::optional<int> map_rank = {};
  double init_scale = 1;
  double normalization_time_constant = kBatchNormalizationTimeConstant;
  double blend_time_constant = kBatchNormalizationBlendTimeConstant;
  double epsilon = kBatchNormalizationEpsilon;
  // CNTK's choice between cuDNN and its own kernels: Loom has one implementation, so either
  // value computes the same.
  bool use_cntk_engine = false;
  // CNTK: the learners' L1/L2 regularization skips scale and bias. Accepted; Loom's learners
  // regularize every parameter they update (no per-parameter exemption yet).
  bool disable_regularization = false;
  DataType dtype = DataType::Float32;
  std::string name = {};
};

// Parameters "scale" (init_scale) and "bias" (0); Constants "aggregate_mean",
// "aggregate_variance" and "aggregate_count" (0), which training updates. ArgumentError for a
// map_rank other than unset or 1.
Function BatchNormalization(const BatchNormalizationOptions& options = {});

struct LayerNormalizationOptions {
  double initial_scale = 1;
  double initial_bias = 0;
  double epsilon = 0.00001;
  // CNTK's choice between cuDNN and its own kernels: Loom has one implementation, so either
  // value computes the same.
  bool use_cntk_engine = false;
  // CNTK: the learners' L1/L2 regularization skips scale and bias. Accepted; Loom's learners
  // regularize every parameter they update (no per-parameter exemption yet).
  bool disable_regularization = false;
  DataType dtype = DataType::Float32;
  std::string name = {};
};

// Parameters "scale" and "bias" of the input's sample shape.
Function LayerNormalization(const LayerNormalizationOptions& options = {});

}  // namespace loom
