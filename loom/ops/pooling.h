// Max and average pooling over the trailing (spatial) axes of each sample, as CNTK's
// pooling(operand, pooling_type, pooling_window_shape, ...): a window of rank n (1 to 3) pools
// the last n axes of operand [C..., spatial...] for each channel (the leading axes) on its
// own. Windows are placed as by convolution (loom/ops/convolution.h): automatic padding
// centres them with ceil(input / stride) outputs; padding never wins a maximum, and average
// pooling divides by the elements inside the input unless include_pad.
#pragma once

#include <string>
#include <vector>

#include "loom/graph/function.h"

namespace loom {

enum class PoolingType { Max, Average };

struct PoolingOptions {
  std::vector<size_t> strides{1};         // one value, or one per window axis
  std::vector<bool> auto_padding{false};  // one value, or one per window axis
  bool include_pad = false;               // average: padding counts as zeros
  std::string name{};
};

Function pooling(const Variable& operand, PoolingType type, const NDShape& pooling_window_shape,
                 const PoolingOptions& options = {});

// Pooling over all axes but the first (the channels): [C, spatial...] gives [C, 1, ...]
// (CNTK's GlobalMaxPooling and GlobalAveragePooling).
Function global_pooling(const Variable& operand, PoolingType type, const std::string& name = "");

}  // namespace loom
