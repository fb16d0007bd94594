#include "loom/deploy/onnx_common.h"

#include "loom/ops/convolution.h"

namespace loom::onnx_detail {

OnnxWindowAxis onnx_window_axis(size_t input, size_t kernel, size_t stride, size_t dilation,
                                bool auto_pad, size_t lower_pad, size_t upper_pad,
                                bool ceil_out_dim) {
  const kernels::SpatialAxis a = conv_detail::window_axis(
      "ONNX", input, kernel, stride, dilation, auto_pad, lower_pad, upper_pad, ceil_out_dim);
  OnnxWindowAxis o{a.pad_lower, a.pad_upper < 0 ? 0 : a.pad_upper, 0};
  const int64_t extent = int64_t((kernel - 1) * dilation + 1),
                padded = int64_t(input) + o.before + o.after;
  o.output = padded < extent ? 0 : size_t((padded - extent) / int64_t(stride) + 1);
  return o;
}

}  // namespace loom::onnx_detail
