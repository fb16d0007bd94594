#include "loom/layers/convolution.h"

#include "loom/ops/convolution.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/recurrence_ops.h"
#include "loom/ops/sequence_ops.h"
#include "loom/ops/shape_ops.h"

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

// A per-axis option as one value per filter axis (CNTK's _pad_to_shape): one value repeats.
template <typename T>
std::vector<T> per_filter_axis(const char* block, const char* option, const std::vector<T>& v,
                               size_t n) {
  LOOM_CHECK(v.size() == 1 || v.size() == n, ArgumentError, block, ": ", option, " has ", v.size(),
             " values; give one, or one per axis of the filter_shape (", n, ")");
  return v.size() == 1 ? std::vector<T>(n, v[0]) : v;
}

// The block of x -> y, named op_name when given.
Function conv_block(const Variable& y, const char* block, const ConvolutionLayerOptions& o) {
  return as_layer({y}, o.op_name.empty() ? block : o.op_name, o.name);
}

// Static axes [begin, end) of y, all of extent 1, removed (end 0: to the end).
Variable drop_unit_axes(const Variable& y, int begin, int end) {
  return reshape(y, NDShape{},
                 ReshapeOptions{.begin_axis = begin,
                                .end_axis = end ? std::optional<int>(end) : std::nullopt});
}

Function convolution_layer(const char* block, const NDShape& filter_shape,
                           std::optional<size_t> num_filters, const ConvolutionLayerOptions& o,
                           bool sequential, bool sequential_layer) {
  const size_t n = filter_shape.rank();
  LOOM_CHECK(n >= 1 && n <= 3 && !filter_shape.has_inferred(), ArgumentError, block,
             ": filter_shape ", filter_shape.to_string(), " must have 1 to 3 known axes");
  LOOM_CHECK(!num_filters || *num_filters >= 1, ArgumentError, block,
             ": num_filters must be at least 1 (leave it unset for no output channel axis)");
  LOOM_CHECK(!o.transpose_weight, ArgumentError, block,
             ": transpose_weight is not supported (CNTK's layer refuses it too); use "
             "ConvolutionTranspose for a transposed convolution");
  LOOM_CHECK(o.reduction_rank <= 1, ArgumentError, block, ": reduction_rank ", o.reduction_rank,
             " must be 0 or 1");
  LOOM_CHECK(o.groups >= 1, ArgumentError, block, ": groups must be strictly positive");
  const Resolved r = resolve(o.activation, o.init, o.pad, o.bias, o.init_bias, n);
  const size_t K = num_filters.value_or(1);
  std::vector<size_t> w{K, kInf};
  w.insert(w.end(), filter_shape.dims().begin(), filter_shape.dims().end());
  Parameter W = parameter(NDShape(w), r.init, o.dtype, "W");
  // SequentialConvolution's bias has no unit axis for the sequence (CNTK's bias_filter_rank).
  std::optional<Variable> b;
  if (r.bias) b = bias_parameter(K, sequential_layer ? n - 1 : n, r.init_bias, o.dtype);
  Variable x = placeholder("x");
  const int spatial = int(n);  // the filter's axes, the emulated sequence axis among them
  ConvolutionOptions conv{.strides = o.strides,
                          .sharing = o.sharing,
                          .auto_padding = r.pad,
                          .dilation = o.dilation,
                          .reduction_rank = o.reduction_rank,
                          .groups = o.groups,
                          .bias = b};
  if (!sequential) {
    Variable y = convolution(W, x, conv);
    if (!num_filters) y = drop_unit_axes(y, -spatial - 1, -spatial);
    return conv_block(r.activation(y), block, o);
  }
  // Sequential: the sequence window on a new axis in front of the other filter axes (and a
  // unit channel axis in front of it with reduction_rank 0), as CNTK's layer builds it.
  const std::vector<bool> pad = per_filter_axis(block, "pad", r.pad, n);
  conv.strides = per_filter_axis(block, "strides", o.strides, n);
  conv.dilation = per_filter_axis(block, "dilation", o.dilation, n);
  LOOM_CHECK(conv.strides[0] == 1 && conv.dilation[0] == 1, ArgumentError, block,
             ": a sequential convolution's stride and dilation along the sequence must be 1");
  const int rest = spatial - 1;  // filter axes after the sequence's
  const size_t inserted = 1 + (o.reduction_rank == 0 ? 1 : 0);
  // Each shifted copy of x gets the unit axes (shifting x itself: the graph infers a delay's
  // type at a call only when it reads the layer's argument directly).
  auto with_window_axis = [&](const Variable& v) {
    if (rest > 0)
      return Variable(reshape(v, NDShape(std::vector<size_t>(inserted, 1)),
                              ReshapeOptions{.begin_axis = -rest, .end_axis = -rest}));
    if (o.reduction_rank == 0) return Variable(reshape(v, NDShape{1, 1}));  // a scalar per step
    return Variable(reshape(v, NDShape{kInf, 1}, ReshapeOptions{.begin_axis = -1}));
  };
  const int fs = int(filter_shape[0]);
  const int lpad = (fs - 1) / 2;  // even extents take one more from the future
  std::vector<Variable> window;
  for (int t = -lpad; t < fs - lpad; ++t)
    window.push_back(with_window_axis(t < 0    ? Variable(sequence::past_value(x, size_t(-t)))
                                      : t == 0 ? x
                                               : Variable(sequence::future_value(x, size_t(t)))));
  conv.auto_padding = pad;
  conv.auto_padding[0] = false;  // the window is valid along the sequence: it reduces to one
  conv.reduction_rank = 1;       // the channel axis is there now
  if (sequential_layer) conv.bias = std::nullopt;
  Variable y = convolution(W, splice(window, Axis(-spatial)), conv);
  if (!pad[0]) y = sequence::slice(y, lpad, -(fs - 1 - lpad));
  y = drop_unit_axes(y, -rest - 1, -rest);  // the sequence window's axis
  if (sequential_layer && b) y = plus(y, *b);
  if (!num_filters) y = drop_unit_axes(y, -rest - 1, -rest);
  return conv_block(r.activation(y), block, o);
}

}  // namespace

Function Convolution(const NDShape& filter_shape, std::optional<size_t> num_filters,
                     const ConvolutionLayerOptions& options) {
  return convolution_layer("Convolution", filter_shape, num_filters, options, options.sequential,
                           false);
}

Function SequentialConvolution(const NDShape& filter_shape, std::optional<size_t> num_filters,
                               const ConvolutionLayerOptions& options) {
  return convolution_layer("Convolution", filter_shape, num_filters, options, true, true);
}

Function Convolution1D(const NDShape& filter_shape, std::optional<size_t> num_filters,
                       const ConvolutionLayerOptions& options) {
  check_filter_rank("Convolution1D", filter_shape, 1);
  return convolution_layer("Convolution1D", filter_shape, num_filters, options, false, false);
}

Function Convolution2D(const NDShape& filter_shape, std::optional<size_t> num_filters,
                       const ConvolutionLayerOptions& options) {
  check_filter_rank("Convolution2D", filter_shape, 2);
  return convolution_layer("Convolution2D", filter_shape, num_filters, options, false, false);
}

Function Convolution3D(const NDShape& filter_shape, std::optional<size_t> num_filters,
                       const ConvolutionLayerOptions& options) {
  check_filter_rank("Convolution3D", filter_shape, 3);
  return convolution_layer("Convolution3D", filter_shape, num_filters, options, false, false);
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
  return as_layer({r.activation(y)}, "ConvolutionTranspose", o.name);
}

Function ConvolutionTranspose1D(const NDShape& filter_shape, size_t num_filters,
                                const ConvolutionTransposeLayerOptions& options) {
  check_filter_rank("ConvolutionTranspose1D", filter_shape, 1);
  return ConvolutionTranspose(filter_shape, num_filters, options);
}

Function ConvolutionTranspose2D(const NDShape& filter_shape, size_t num_filters,
                                const ConvolutionTransposeLayerOptions& options) {
  check_filter_rank("ConvolutionTranspose2D", filter_shape, 2);
  return ConvolutionTranspose(filter_shape, num_filters, options);
}

Function ConvolutionTranspose3D(const NDShape& filter_shape, size_t num_filters,
                                const ConvolutionTransposeLayerOptions& options) {
  check_filter_rank("ConvolutionTranspose3D", filter_shape, 3);
  return ConvolutionTranspose(filter_shape, num_filters, options);
}

}  // namespace loom
