// N-dimensional convolution (1 to 3 spatial axes) over dense row-major tensors: input
// [N, C, spatial...] (NCHW), weights [O, C / groups, kernel...] (OIHW; group g uses output
// channels [g O/G, (g+1) O/G) and input channels [g C/G, (g+1) C/G)), output [N, O, out...].
// It is a cross-correlation, as in CNTK, PyTorch and oneDNN. float runs oneDNN primitives;
// double runs plain loops (oneDNN has no f64), the reference the tests compare against.
#pragma once

#include <cstddef>
#include <vector>

namespace loom::kernels {

// How oneDNN lays out the activations it computes on. Loom's tensors come in row-major (NCHW)
// or already blocked (ConvShape::input_blocked / output_blocked); the primitive's layout is
// reordered from and to them where it differs. Blocked and ChannelsLast compute in oneDNN's
// preferred (nChw16c) or the channels-last (NHWC) layout. Auto picks per primitive what
// measured fastest on seed 002's convnet (bench/convolution.cpp): for convolution Blocked (its
// direct AVX-512 kernels beat im2col + gemm on NCHW about 2x, reorders included), except for the
// gradient of an input with fewer than 16 channels per group, which Blocked would pad to 16
// (Plain then); for pooling the layout Loom's tensor is in (reordering costs more than the
// blocked kernel saves).
enum class ConvLayout { Auto, Plain, Blocked, ChannelsLast };

// The channel block of oneDNN's blocked activation layout (nCw16c, nChw16c, nCdhw16c: the
// channel axis split into blocks of 16 that become the innermost axis). Loom keeps a tensor in
// it between consecutive oneDNN ops (Tensor::blocked) when its channels are a multiple of it,
// so no block is ever padded.
constexpr size_t kChannelBlock = 16;

// Where a window of extent kernel (dilated: (kernel - 1) * dilation + 1) visits an input axis
// of extent input: at positions o * stride - pad_lower, for o in [0, output). Pads may be
// negative (CNTK's centred automatic padding with a stride larger than the window skips
// leading elements); output * stride - pad_lower + extent - 1 <= input - 1 + pad_upper.
struct SpatialAxis {
  size_t input = 1, kernel = 1, output = 1, stride = 1, dilation = 1;
  long pad_lower = 0, pad_upper = 0;
};

// With fewer input channels per group than this, a convolution computes in float32 even in bf16
// mode: bf16's kernels (AMX on a Xeon with it) took 1.3x to 2.9x float32's time for seed 002's
// 5x5 first layer with 1 or 3 input channels, and less than float32 (forward and gradients
// together) from 4 up (bench_convolution --bf16, bench/README.md).
constexpr size_t kMinBf16Channels = 4;

struct ConvShape {
  size_t batch = 1, in_channels = 1, out_channels = 1, groups = 1;
  std::vector<SpatialAxis> axes;  // 1 to 3
  ConvLayout layout = ConvLayout::Auto;
  // Loom's memory of x and dx (input) and of y and dy (output): row-major, or oneDNN's
  // channel-blocked layout (see kChannelBlock; only where can_block() says so).
  bool input_blocked = false, output_blocked = false;
  bool bias = false;  // y gets one bias per output channel
  // float: compute in bf16 mixed precision (ComputePrecision::BFloat16): x, w and dy rounded
  // to bfloat16 by oneDNN's reorders, results (y, dx, dw, db) float32. Ignored where the
  // reference loops run, and with fewer than kMinBf16Channels input channels per group.
  bool bf16 = false;

  size_t input_size() const;   // elements of the input, N * C * spatial
  size_t output_size() const;  // N * O * out spatial
  size_t weight_size() const;  // O * C / G * kernel
};

// Checks the shape's consistency (channels divisible by groups, extents, rank); throws
// ShapeError naming `what`.
void check_conv_shape(const ConvShape& s, const char* what);

// Whether the float kernels can keep an activation of `channels` channels of this shape in
// the blocked layout: oneDNN runs it and the channels fill whole blocks.
bool can_block(const ConvShape& s, size_t channels);

// y (+)= conv(x, w) + b (b: out_channels values, read when s.bias).
template <typename T>
void convolution_forward(const ConvShape& s, const T* x, const T* w, const T* b, T* y,
                         bool accumulate = false);
// dx (+)= the gradient of the output with respect to x, given dy.
template <typename T>
void convolution_backward_data(const ConvShape& s, const T* dy, const T* w, T* dx, bool accumulate);
// dw (+)= the gradient with respect to the weights, given x and dy; with s.bias also db (+)=
// the bias gradient (one pass over dy for both).
template <typename T>
void convolution_backward_weights(const ConvShape& s, const T* x, const T* dy, T* dw, T* db,
                                  bool accumulate);
// db (+)= the bias gradient alone: dy summed over the batch and the spatial axes.
template <typename T>
void convolution_backward_bias(const ConvShape& s, const T* dy, T* db, bool accumulate);

}  // namespace loom::kernels
