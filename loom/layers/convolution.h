// Convolution layers (CNTK's Convolution, Convolution1D/2D/3D, ConvolutionTranspose):
// activation(convolution(W, x) + b) over samples [C, spatial...], or [spatial...] with
// reduction_rank 0 (a black-and-white image). W is [num_filters, C, filter_shape...] (C
// inferred at the first call; 1 with reduction_rank 0), b is [num_filters, 1, ...]. Options
// left unset take default_options (activation, init, pad, bias, init_bias), else CNTK's
// defaults: no activation, glorot_uniform, pad false, bias with zeros.
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
  std::optional<Activation> activation = {};
  std::optional<Initializer> init = {};
  std::optional<PadFlags> pad = {};
  std::vector<size_t> strides{1};  // one for all axes or one per axis
  std::vector<bool> sharing{true};
  std::optional<bool> bias = {};
  std::optional<Initializer> init_bias = {};
  size_t reduction_rank = 1;  // 0: the input has no channel axis
  std::vector<size_t> dilation{1};
  size_t groups = 1;
  DataType dtype = DataType::Float32;
  std::string name = {};
};

Function Convolution(const NDShape& filter_shape, size_t num_filters,
                     const ConvolutionLayerOptions& options = {});
// The same, checking that filter_shape has 1, 2 or 3 axes.
Function Convolution1D(const NDShape& filter_shape, size_t num_filters,
                       const ConvolutionLayerOptions& options = {});
Function Convolution2D(const NDShape& filter_shape, size_t num_filters,
                       const ConvolutionLayerOptions& options = {});
Function Convolution3D(const NDShape& filter_shape, size_t num_filters,
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
  DataType dtype = DataType::Float32;
  std::string name = {};
};

// activation(convolution_transpose(W, x) + b), W [C, num_filters, filter_shape...].
Function ConvolutionTranspose(const NDShape& filter_shape, size_t num_filters,
                              const ConvolutionTransposeLayerOptions& options = {});

}  // namespace loom
