#include "loom/layers/convolution.h"

#include "loom/ops/convolution.h"
#include "loom/ops/elementwise.h"

namespace loom {

namespace {

constexpr size_t kInf = NDShape::kInferred;

// The resolved options both layers share.
struct Resolved {
  Activation activation;
  Initializer init, init_bias;
  bool bias;
  std::vector<bool> pad;
};

// A kernel's initializer counts its fans as CNTK's does (output_rank -1, filter_rank = the
// filter's rank): the leading axis is the output, the trailing ones the receptive field.
Resolved resolve(const std::optional<Activation>& activation,
                 const std::optional<Initializer>& init, const std::optional<PadFlags>& pad,
                 const std::optional<bool>& bias, const std::optional<Initializer>& init_bias,
                 size_t filter_rank) {
  const ResolvedDefaults d = current_defaults();
  Initializer kernel_init = init.value_or(d.init);
  kernel_init.output_rank = -1;
  kernel_init.filter_rank = int(filter_rank);
  return {activation.value_or(d.activation), kernel_init, init_bias.value_or(d.init_bias),
          bias.value_or(d.bias), pad ? pad->flags : std::vector<bool>{d.pad}};
}

void check_filter_rank(const char* layer, const NDShape& filter_shape, size_t rank) {
  LOOM_CHECK(filter_shape.rank() == rank, ArgumentError, layer, ": filter_shape ",
             filter_shape.to_string(), " must have ", rank, " axes");
}

// [num_filters, 1, ...]: one bias per filter, broadcast over the spatial axes.
Parameter bias_parameter(size_t num_filters, size_t filter_rank, const Initializer& init,
                         DataType dtype) {
  std::vector<size_t> d(filter_rank + 1, 1);
  d[0] = num_filters;
  return parameter(NDShape(d), init, dtype, "b");
}

Function convolution_layer(const char* block, const NDShape& filter_shape, size_t num_filters,
                           const ConvolutionLayerOptions& o) {
  const size_t n = filter_shape.rank();
  LOOM_CHECK(n >= 1 && n <= 3 && !filter_shape.has_inferred(), ArgumentError, block,
             ": filter_shape ", filter_shape.to_string(), " must have 1 to 3 known axes");
  LOOM_CHECK(num_filters >= 1, ArgumentError, block, ": num_filters must be at least 1");
  const Resolved r = resolve(o.activation, o.init, o.pad, o.bias, o.init_bias, n);
  std::vector<size_t> w{num_filters, kInf};
  w.insert(w.end(), filter_shape.dims().begin(), filter_shape.dims().end());
  Parameter W = parameter(NDShape(w), r.init, o.dtype, "W");
  Variable x = placeholder("x");
  std::optional<Variable> b;
  if (r.bias) b = bias_parameter(num_filters, n, r.init_bias, o.dtype);
  Variable y = convolution(W, x,
                           {.strides = o.strides,
                            .sharing = o.sharing,
                            .auto_padding = r.pad,
                            .dilation = o.dilation,
                            .reduction_rank = o.reduction_rank,
                            .groups = o.groups,
                            .bias = b});
  return as_block({r.activation(y)}, block, o.name);
}

}  // namespace

Function Convolution(const NDShape& filter_shape, size_t num_filters,
                     const ConvolutionLayerOptions& options) {
  return convolution_layer("Convolution", filter_shape, num_filters, options);
}

Function Convolution1D(const NDShape& filter_shape, size_t num_filters,
                       const ConvolutionLayerOptions& options) {
  check_filter_rank("Convolution1D", filter_shape, 1);
  return convolution_layer("Convolution1D", filter_shape, num_filters, options);
}

Function Convolution2D(const NDShape& filter_shape, size_t num_filters,
                       const ConvolutionLayerOptions& options) {
  check_filter_rank("Convolution2D", filter_shape, 2);
  return convolution_layer("Convolution2D", filter_shape, num_filters, options);
}

Function Convolution3D(const NDShape& filter_shape, size_t num_filters,
                       const ConvolutionLayerOptions& options) {
  check_filter_rank("Convolution3D", filter_shape, 3);
  return convolution_layer("Convolution3D", filter_shape, num_filters, options);
}

Function ConvolutionTranspose(const NDShape& filter_shape, size_t num_filters,
                              const ConvolutionTransposeLayerOptions& o) {
  const size_t n = filter_shape.rank();
  LOOM_CHECK(n >= 1 && n <= 3 && !filter_shape.has_inferred(), ArgumentError,
             "ConvolutionTranspose: filter_shape ", filter_shape.to_string(),
             " must have 1 to 3 known axes");
  LOOM_CHECK(num_filters >= 1, ArgumentError,
             "ConvolutionTranspose: num_filters must be at least 1");
  const Resolved r = resolve(o.activation, o.init, o.pad, o.bias, o.init_bias, n);
  std::vector<size_t> w{kInf, num_filters};
  w.insert(w.end(), filter_shape.dims().begin(), filter_shape.dims().end());
  Parameter W = parameter(NDShape(w), r.init, o.dtype, "W");
  Variable x = placeholder("x");
  Variable y = convolution_transpose(W, x,
                                     {.strides = o.strides,
                                      .sharing = o.sharing,
                                      .auto_padding = r.pad,
                                      .output_shape = o.output_shape,
                                      .dilation = o.dilation,
                                      .reduction_rank = o.reduction_rank});
  if (r.bias) y = plus(y, bias_parameter(num_filters, n, r.init_bias, o.dtype));
  return as_block({r.activation(y)}, "ConvolutionTranspose", o.name);
}

}  // namespace loom
