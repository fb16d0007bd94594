// Convolution layers (CNTK's Convolution, SequentialConvolution, Convolution1D/2D/3D,
// ConvolutionTranspose, ConvolutionTranspose1D/2D/3D): activation(convolution(W, x) + b) over
// samples [C, spatial...], or [spatial...] with reduction_rank 0 (a black-and-white image). W is
// [num_filters, C, filter_shape...] (C inferred at the first call; 1 with reduction_rank 0), b
// is [num_filters, 1, ...]. Without num_filters (CNTK's None) W is [1, C, filter_shape...] and
// the output has no channel axis. Options left unset take default_options (activation, init,
// pad, bias, init_bias), else CNTK's defaults: no activation, glorot_uniform, pad false, bias
// with zeros.
//
// Sequential convolution (sequential = true, or SequentialConvolution) also convolves along the
// sequence axis, filter_shape[0] being its extent, as CNTK 2.7's layer builds it: a window of
// past and future values (zeros outside the sequence) spliced on an extra axis, convolved
// without padding there, and, without pad, sequence::slice dropping the steps whose window
// reaches outside the sequence (length T - filter_shape[0] + 1). Its stride and dilation along
// the sequence must be 1.
//
//   auto scope = default_options({.activation = relu, .pad = false});
//   Function c = Convolution2D({5, 5}, 32, {.pad = true, .reduction_rank = 0});
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "loom/layers/default_options.h"

namespace loom {

// One padding flag for every spatial axis, or one per axis (CNTK's bool or tuple of bools):
// `.pad = true` or `.pad = PadFlags{false, true}`.
struct PadFlags {
  std::vector<bool> flags;
  PadFlags(bool pad) : flags{pad} {}
  PadFlags(std::initializer_list<bool> per_axis) : flags(per_axis) {}
};

struct ConvolutionLayerOptions {
  bool sequential = false;  // also convolve along the sequence axis (SequentialConvolution: true)
  std::optional<Activation> activation = {};
  std::optional<Initializer> init = {};
  std::optional<PadFlags> pad = {};
  std::vector<size_t> strides{1};  // one for all axes or one per axis
  std::vector<bool> sharing{true};
  std::optional<bool> bias = {};
  std::optional<Initializer> init_bias = {};
  size_t reduction_rank = 1;  // 0: the input has no channel axis
  // CNTK's flag for a true convolution (flipped kernel); CNTK's layer refuses it, and so does
  // this one (ArgumentError).
  bool transpose_weight = false;
  std::vector<size_t> dilation{1};
  size_t groups = 1;
  size_t max_temp_mem_size_in_samples = 0;  // accepted; oneDNN manages its own memory
  std::string op_name = {};                 // the block's name; empty: the layer's own
  DataType dtype = DataType::Float32;
  std::string name = {};
};

// num_filters unset (CNTK's None): one filter and no output channel axis.
Function Convolution(const NDShape& filter_shape, std::optional<size_t> num_filters = {},
                     const ConvolutionLayerOptions& options = {});
// Convolution with sequential = true (the options' sequential is ignored).
Function SequentialConvolution(const NDShape& filter_shape, std::optional<size_t> num_filters = {},
                               const ConvolutionLayerOptions& options = {});
// The same, checking that filter_shape has 1, 2 or 3 axes.
Function Convolution1D(const NDShape& filter_shape, std::optional<size_t> num_filters = {},
                       const ConvolutionLayerOptions& options = {});
Function Convolution2D(const NDShape& filter_shape, std::optional<size_t> num_filters = {},
                       const ConvolutionLayerOptions& options = {});
Function Convolution3D(const NDShape& filter_shape, std::optional<size_t> num_filters = {},
                       const ConvolutionLayerOptions& options = {});

struct ConvolutionTransposeLayerOptions {
  std::optional<Activation> activation = {};
  std::optional<Initializer> init = {};
  std::optional<PadFlags> pad = {};
  std::vector<size_t> strides{1};
  std::vector<bool> sharing{true};
  std::optional<bool> bias = {};
  std::optional<Initializer> init_bias = {};
  std::optional<NDShape> output_shape = {};  // spatial extents; see ConvolutionTransposeOptions
  size_t reduction_rank = 1;
  std::vector<size_t> dilation{1};
  size_t max_temp_mem_size_in_samples = 0;  // accepted; oneDNN manages its own memory
  DataType dtype = DataType::Float32;
  std::string name = {};
};

// activation(convolution_transpose(W, x) + b), W [C, num_filters, filter_shape...].
Function ConvolutionTranspose(const NDShape& filter_shape, size_t num_filters,
                              const ConvolutionTransposeLayerOptions& options = {});
// The same, checking that filter_shape has 1, 2 or 3 axes (ArgumentError).
Function ConvolutionTranspose1D(const NDShape& filter_shape, size_t num_filters,
                                const ConvolutionTransposeLayerOptions& options = {});
Function ConvolutionTranspose2D(const NDShape& filter_shape, size_t num_filters,
                                const ConvolutionTransposeLayerOptions& options = {});
Function ConvolutionTranspose3D(const NDShape& filter_shape, size_t num_filters,
                                const ConvolutionTransposeLayerOptions& options = {});

}  // namespace loom
