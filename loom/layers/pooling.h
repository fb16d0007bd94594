// Pooling layers (CNTK's MaxPooling, AveragePooling, GlobalMaxPooling, GlobalAveragePooling)
// over samples [C..., spatial...]; see loom/ops/pooling.h. pad unset takes default_options,
// else false.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loom/layers/convolution.h"

namespace loom {

struct PoolingLayerOptions {
  std::vector<size_t> strides{1};
  std::optional<PadFlags> pad = {};
  std::string name = {};
};

Function MaxPooling(const NDShape& filter_shape, const PoolingLayerOptions& options = {});
Function AveragePooling(const NDShape& filter_shape, const PoolingLayerOptions& options = {});
// CNTK's MaxUnpooling: a layer of two arguments (x, pooling_input), unpooling(x, pooling_input)
// with the max-pooling window given (loom/ops/pooling.h). pad unset is false (CNTK's pad=False
// here is not a default_options option).
Function MaxUnpooling(const NDShape& filter_shape, const PoolingLayerOptions& options = {});
// [C, spatial...] to [C, 1, ...].
Function GlobalMaxPooling(const std::string& name = "");
Function GlobalAveragePooling(const std::string& name = "");

}  // namespace loom
