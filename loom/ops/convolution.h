// Convolution and transposed convolution over samples [C, spatial...] (1 to 3 spatial axes),
// as CNTK's convolution(convolution_map, operand, ...). Per-axis options (strides,
// auto_padding, lower_pad, upper_pad, dilation) take one value per spatial axis, or, as CNTK's
// kernel-rank tuples, one more in front for the channel axis (ignored: the channel axis is
// always reduced whole), or fewer: the trailing axes', the leading axes repeating the first
// value (one value is every axis's).
//
// Automatic padding ("same") follows CNTK: the output extent is ceil(input / stride) and the
// window is centred, its first position at extra / 2 where extra = input - ((out - 1) * stride
// + 1); for an even window the extra padding goes to the upper side (kernel 4: 1 below, 2
// above). Without it the window stays inside the input plus the explicit lower/upper pads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loom/graph/function.h"
#include "loom/graph/op.h"
#include "loom/kernels/convolution.h"

namespace loom {

struct ConvolutionOptions {
  std::vector<size_t> strides{1};
  std::vector<bool> sharing{true};  // must be true (as in CNTK)
  std::vector<bool> auto_padding{true};
  std::vector<size_t> lower_pad{0}, upper_pad{0};  // where auto_padding is false
  std::vector<size_t> dilation{1};
  // 1: the operand has a channel axis in front, W is [O, C / groups, kernel...]. 0: it has
  // none (a black-and-white image [H, W]) and W is [O, kernel...] or, as CNTK's layers make
  // it, [O, 1, kernel...] (an inferred 1 is inferred).
  size_t reduction_rank = 1;
  size_t groups = 1;
  // A bias added to each output channel: shape (O) or (O, 1, ...), as the Convolution layers
  // make it. Not in CNTK's convolution(), whose layers add it with plus(); here oneDNN adds it
  // inside the convolution and takes its gradient in the weights' pass.
  std::optional<Variable> bias{};
  // CNTK's sequential: the operand's sequence axis is the first spatial axis, ahead of its
  // static ones (see convolution below).
  bool sequential = false;
  std::string name{};
};

// The convolution of operand [C, spatial...] with convolution_map W [O, C / groups,
// kernel...] (plus the bias): output [O, out...]. W's input-channel axis may be
// NDShape::kInferred (a parameter learns C / groups at the first call). A W of the operand's
// rank has no O axis (CNTK's): one output channel, W reshaped to [1, W...].
//
// Sequential (CNTK's convolution(sequential=True)): the operand is a sequence of steps
// [C, spatial...] and W is [O, C / groups, kT, kernel...], kT along the sequence. As CNTK
// builds it: the sequences unpacked into [C, T, spatial...] (zeros after each sequence's end,
// up to the minibatch's longest), convolved with every option per axis, the sequence's first,
// then packed again into sequences of [O, out...] on a new sequence axis, each as long as its
// own length convolved (convolution_sequence_lengths). With automatic padding and a stride
// along the sequence above 1, where the windows start depends on the longest sequence, as in
// CNTK.
Function convolution(const Variable& convolution_map, const Variable& operand,
                     const ConvolutionOptions& options = {});
// The length of each of operand's sequences after a sequential convolution with these options
// (CNTK's ConvolutionSequenceShape): the sequence axis's output extent for the sequence's
// length, as a number per sequence (no gradient).
Function convolution_sequence_lengths(const Variable& convolution_map, const Variable& operand,
                                      const ConvolutionOptions& options);

struct ConvolutionTransposeOptions {
  std::vector<size_t> strides{1};
  std::vector<bool> sharing{true};
  std::vector<bool> auto_padding{true};
  std::vector<size_t> lower_pad{0}, upper_pad{0};
  // The spatial output extents (or [O, spatial...]); unset: the smallest whose convolution
  // gives the operand's extents, (in - 1) * stride + 1 with auto padding, else
  // (in - 1) * stride + dilated kernel - lower_pad - upper_pad.
  std::optional<NDShape> output_shape{};
  std::vector<size_t> dilation{1};
  size_t reduction_rank = 1;  // 0: W is [O, kernel...] or [1, O, kernel...]
  std::string name{};
};

// The gradient of a convolution with respect to its input, as a function of operand
// [C, spatial...] and convolution_map W [C, O, kernel...] (C: the operand's channels; O may be
// given, C inferred): output [O, out...]. A convolution with the same W maps the output's
// shape back to the operand's. A W of the operand's rank has no O axis: one output channel.
Function convolution_transpose(const Variable& convolution_map, const Variable& operand,
                               const ConvolutionTransposeOptions& options = {});

namespace conv_detail {
// Where a window goes along one axis under CNTK's padding rules (see the file comment);
// ShapeError naming op when the input is too small for the window. ceil_out_dim (pooling's,
// without automatic padding): one more output where the last window would overhang the padded
// input, the overhang padding the upper side.
kernels::SpatialAxis window_axis(const char* op, size_t input, size_t kernel, size_t stride,
                                 size_t dilation, bool auto_pad, size_t lower_pad, size_t upper_pad,
                                 bool ceil_out_dim = false);
// The map from a window op's output positions to the centres of their windows in its input
// along the two trailing axes (CNTK's filter transform: scale stride, translate (kernel - 1) / 2
// - lower pad, kernel undilated); nullopt for windows over fewer than two axes.
std::optional<SpatialTransform> window_centres(const std::vector<kernels::SpatialAxis>& axes);
// A per-axis option for `rank` spatial axes: one per axis, one more in front (the channel
// axis, dropped), or fewer, which are the trailing axes' while the leading ones repeat the first
// (CNTK's rule: one value is every axis's). ShapeError naming op and the option otherwise.
std::vector<size_t> per_axis(const char* op, const char* option, const std::vector<size_t>& v,
                             size_t rank);
// A per-axis option of sizes (strides, dilation) as the op table's parameter holds it
// (ParamType::Ints), and back: an ArgumentError naming function and the option for a negative
// value.
DictionaryValue sizes_attribute(const std::vector<size_t>& sizes);
std::vector<size_t> attribute_sizes(const char* function, const Dictionary& attributes,
                                    const char* option);
}  // namespace conv_detail

}  // namespace loom
