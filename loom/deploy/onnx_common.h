// What ONNX export and import share: the opsets, and where Loom's windows (convolution,
// pooling) go as ONNX's explicit pads. Internal to loom/deploy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace loom::onnx_detail {

// The opset Loom writes; import reads opsets 7 (the oldest CNTK wrote) to 17 of the default
// domain, each op in its form at the model's opset (onnx_import.cpp's opset_changes).
inline constexpr int64_t kOpset = 13, kOldestOpset = 7, kNewestOpset = 17;

// One spatial axis of a window as ONNX states it: pads before and after, and the output
// extent ONNX computes from them (floor((in + before + after - extent) / stride) + 1).
struct OnnxWindowAxis {
  int64_t before = 0, after = 0;
  size_t output = 0;
};

// Loom's window along one axis (conv_detail::window_axis, CNTK's padding rules; ceil_out_dim:
// pooling's last window overhanging the input) as ONNX pads. An upper pad the window never
// reaches (negative) becomes 0. The caller checks that `before` is not negative (CNTK's
// centring can start the first window past the first element, which ONNX cannot say) and that
// `output` is Loom's.
OnnxWindowAxis onnx_window_axis(size_t input, size_t kernel, size_t stride, size_t dilation,
                                bool auto_pad, size_t lower_pad, size_t upper_pad,
                                bool ceil_out_dim = false);

// The float32 value of IEEE half-precision bits (ONNX's float16) and of bfloat16 bits (the upper
// half of a float32's): both exact.
inline float float16_value(uint16_t bits) {
  const uint32_t sign = uint32_t(bits >> 15) << 31, exponent = (bits >> 10) & 0x1f,
                 fraction = bits & 0x3ff;
  uint32_t f;
  if (exponent == 0x1f) {
    f = sign | 0x7f800000u | (fraction << 13);  // infinity, NaN
  } else if (exponent != 0) {
    f = sign | ((exponent + 112) << 23) | (fraction << 13);
  } else {
    // Zero and the subnormals: fraction * 2^-24, exact in float32.
    const float v = float(fraction) * 0x1p-24f;
    return sign ? -v : v;
  }
  float v;
  std::memcpy(&v, &f, sizeof v);
  return v;
}
inline float bfloat16_value(uint16_t bits) {
  const uint32_t f = uint32_t(bits) << 16;
  float v;
  std::memcpy(&v, &f, sizeof v);
  return v;
}

}  // namespace loom::onnx_detail
