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
  // Per window axis, as convolution's options (loom/ops/convolution.h): one value is every
  // axis's.
  std::vector<size_t> strides{1};
  std::vector<bool> auto_padding{false};
  bool include_pad = false;  // average: padding counts as zeros
  // Without automatic padding: one more output where the last window would overhang the
  // input, the overhang padding (which max pooling never picks; average pooling counts it as
  // zeros only with include_pad, dividing by the whole window).
  bool ceil_out_dim = false;
  std::string name{};
};

Function pooling(const Variable& operand, PoolingType type, const NDShape& pooling_window_shape,
                 const PoolingOptions& options = {});

// CNTK's unpooling (MAX_UNPOOLING, PoolingType::Max, only): operand has the shape of max
// pooling pooling_input with the window and options given (strides, auto_padding; not
// include_pad or ceil_out_dim), and the result pooling_input's: 0 but where that pooling finds
// its maxima, which take the operand's values (where overlapping windows choose one position,
// the later window's). Differentiable with respect to the operand.
Function unpooling(const Variable& operand, const Variable& pooling_input,
                   PoolingType unpooling_type, const NDShape& unpooling_window_shape,
                   const PoolingOptions& options = {});

// CNTK's roipooling (PoolingType::Max only; Fast R-CNN's): operand [C, H, W], rois [R, 4] with
// the same dynamic axes, each row a region (x1, y1, x2, y2) of the original image; the result
// [R, C, PH, PW] (roi_output_shape [PH, PW]) is the maximum over each of PH x PW cells of each
// region scaled by spatial_scale (kernels::roi_pooling_forward says how it rounds).
// Differentiable with respect to the operand.
Function roipooling(const Variable& operand, const Variable& rois, PoolingType pooling_type,
                    const NDShape& roi_output_shape, double spatial_scale,
                    const std::string& name = "");

// Pooling over all axes but the first (the channels): [C, spatial...] gives [C, 1, ...]
// (CNTK's GlobalMaxPooling and GlobalAveragePooling).
Function global_pooling(const Variable& operand, PoolingType type, const std::string& name = "");

}  // namespace loom
