#include "loom/ops/convolution.h"

#include <algorithm>
#include <cstring>

#include "loom/core/precision.h"
#include "loom/graph/op.h"
#include "loom/ops/dynamic_axes.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/sequence_ops.h"
#include "loom/ops/shape_ops.h"

namespace loom {

namespace conv_detail {

kernels::SpatialAxis window_axis(const char* op, size_t input, size_t kernel, size_t stride,
                                 size_t dilation, bool auto_pad, size_t lower_pad, size_t upper_pad,
                                 bool ceil_out_dim) {
  LOOM_CHECK(kernel >= 1 && stride >= 1 && dilation >= 1, ShapeError, op,
             ": kernel extents, strides and dilations must be at least 1 (kernel ", kernel,
             ", stride ", stride, ", dilation ", dilation, ")");
  kernels::SpatialAxis a{input, kernel, 1, stride, dilation, 0, 0};
  // An axis of extent 0 (a sequential convolution over a minibatch of empty sequences) has no
  // windows: an output of extent 0.
  if (input == 0) return {0, kernel, 0, stride, dilation, 0, 0};
  const long extent = long((kernel - 1) * dilation + 1);
  if (auto_pad) {
    // CNTK's ConvolveGeometry: the window centre (offset (extent - 1) / 2 into it) visits
    // extra / 2, then every stride.
    a.output = (input + stride - 1) / stride;
    const long cells = long((a.output - 1) * stride + 1), extra = long(input) - cells;
    a.pad_lower = (extent - 1) / 2 - extra / 2;
  } else {
    const long padded = long(input + lower_pad + upper_pad);
    LOOM_CHECK(padded >= extent, ShapeError, op, ": an input extent of ", input, " padded by ",
               lower_pad, " and ", upper_pad, " is smaller than the window extent ", extent,
               " (kernel ", kernel, ", dilation ", dilation, ")");
    const long round_up = ceil_out_dim ? long(stride) - 1 : 0;
    a.output = size_t((padded - extent + round_up) / long(stride) + 1);
    a.pad_lower = long(lower_pad);
  }
  a.pad_upper = long((a.output - 1) * stride) + extent - long(input) - a.pad_lower;
  // The floor above may leave some of upper_pad unused.
  if (!auto_pad && !ceil_out_dim) a.pad_upper = long(upper_pad);
  return a;
}

std::optional<SpatialTransform> window_centres(const std::vector<kernels::SpatialAxis>& axes) {
  if (axes.size() < 2) return std::nullopt;
  SpatialTransform t;
  for (size_t k = 0; k < 2; ++k) {
    const kernels::SpatialAxis& a = axes[axes.size() - 2 + k];
    t[k] = {double(a.stride), double(long(a.kernel - 1) / 2 - a.pad_lower)};
  }
  return t;
}

std::vector<size_t> per_axis(const char* op, const char* option, const std::vector<size_t>& v,
                             size_t rank) {
  if (v.size() == rank + 1) return std::vector<size_t>(v.begin() + 1, v.end());
  LOOM_CHECK(!v.empty() && v.size() <= rank, ShapeError, op, ": ", option, " has ", v.size(),
             " values for ", rank, " spatial axes (give 1 to ", rank + 1, ")");
  std::vector<size_t> all(rank - v.size(), v[0]);
  all.insert(all.end(), v.begin(), v.end());
  return all;
}

DictionaryValue sizes_attribute(const std::vector<size_t>& sizes) {
  return int_list_attribute(std::vector<int64_t>(sizes.begin(), sizes.end()));
}

std::vector<size_t> attribute_sizes(const char* function, const Dictionary& attributes,
                                    const char* option) {
  std::vector<size_t> sizes;
  for (int64_t i : attribute_ints(attributes.at(option))) {
    LOOM_CHECK(i >= 0, ArgumentError, function, ": ", option, " holds the negative value ", i,
               "; give one size for every axis or one per axis");
    sizes.push_back(size_t(i));
  }
  return sizes;
}

}  // namespace conv_detail

namespace {

using conv_detail::attribute_sizes;
using conv_detail::per_axis;
using conv_detail::sizes_attribute;

NDShape to_shape(const std::vector<size_t>& v) {
  return NDShape(v);
}
NDShape to_shape(const std::vector<bool>& v) {
  return NDShape(std::vector<size_t>(v.begin(), v.end()));
}
const std::vector<size_t>& option(const Dictionary& a, const char* key) {
  return a.get<NDShape>(key).dims();
}

// The spatial axes of W (after O and, with reduction rank 1, its input channels).
size_t spatial_rank(const char* op, const NDShape& w, size_t reduction_rank) {
  const size_t lead = 1 + reduction_rank;
  LOOM_CHECK(w.rank() > lead && w.rank() - lead <= 3, ShapeError, op, ": the kernel of shape ",
             w.to_string(), " must have ", lead, " leading axes and 1 to 3 spatial axes");
  return w.rank() - lead;
}

// With reduction_rank 0 a kernel may keep the shape CNTK's layers give it, with the emulated
// channel axis of extent 1 (axis 1 of a convolution's [O, 1, kernel...], axis 0 of a transposed
// one's [1, O, kernel...]); the ops see the kernel without it.
NDShape kernel_of(const NDShape& x, const NDShape& w, size_t reduction_rank, size_t channel_axis) {
  if (reduction_rank != 0 || w.rank() != x.rank() + 2 || w[channel_axis] != 1) return w;
  std::vector<size_t> d = w.dims();
  d.erase(d.begin() + std::ptrdiff_t(channel_axis));
  return NDShape(d);
}

// The convolution from the sample x to the sample y under the attributes: for Convolution x
// is the operand; for ConvolutionTranspose x is the output (the convolution's input) whose
// spatial extents `transpose_out` gives, and the operand is checked against the result.
kernels::ConvShape geometry(const char* op, const NDShape& x, const NDShape& kernel,
                            const Dictionary& a, const std::vector<size_t>* transpose_out) {
  const size_t rr = size_t(a.get<int64_t>("reduction_rank"));
  const NDShape w = kernel_of(x, kernel, rr, transpose_out ? 0 : 1);
  const size_t n = spatial_rank(op, w, rr);
  LOOM_CHECK(x.rank() == n + rr, ShapeError, op, ": the operand of shape ", x.to_string(),
             " must have ", n + rr, " axes for the kernel of shape ", w.to_string(),
             rr ? " (channels, then the spatial axes)" : " (reduction_rank 0: spatial axes only)");
  for (bool s : option(a, "sharing"))
    LOOM_CHECK(s, ShapeError, op, ": sharing=False is not supported (as in CNTK)");
  const auto strides = per_axis(op, "strides", option(a, "strides"), n),
             dilation = per_axis(op, "dilation", option(a, "dilation"), n),
             auto_pad = per_axis(op, "auto_padding", option(a, "auto_padding"), n),
             lower = per_axis(op, "lower_pad", option(a, "lower_pad"), n),
             upper = per_axis(op, "upper_pad", option(a, "upper_pad"), n);
  kernels::ConvShape s;
  s.groups = size_t(a.get<int64_t>("groups"));
  const size_t C = rr ? x[0] : 1;
  const size_t first_kernel_axis = w.rank() - n;
  for (size_t i = 0; i < n; ++i) {
    const size_t in = transpose_out ? (*transpose_out)[i] : x[rr + i];
    if (in == NDShape::kFree) {  // each minibatch's (a sequential convolution's steps)
      s.axes.push_back({in, w[first_kernel_axis + i], NDShape::kFree, strides[i], dilation[i]});
      continue;
    }
    s.axes.push_back(conv_detail::window_axis(op, in, w[first_kernel_axis + i], strides[i],
                                              dilation[i], auto_pad[i] != 0, lower[i], upper[i]));
  }
  if (transpose_out) {
    // W [C, O, kernel...] is the weight of the convolution from the output (O channels) to x.
    s.in_channels = rr ? w[1] : w[0];
    s.out_channels = C;
    LOOM_CHECK(!rr || w[0] == C, ShapeError, op, ": the kernel of shape ", w.to_string(),
               " must have the operand's ", C, " channels first");
    for (size_t i = 0; i < n; ++i)
      LOOM_CHECK(s.axes[i].output == x[rr + i], ShapeError, op, ": an output extent of ",
                 (*transpose_out)[i], " does not convolve back to the operand's extent ", x[rr + i],
                 " on spatial axis ", i);
  } else {
    s.in_channels = C;
    s.out_channels = w[0];
    LOOM_CHECK(s.groups >= 1 && C % s.groups == 0 && w[0] % s.groups == 0, ShapeError, op,
               ": groups=", s.groups, " must divide the operand's ", C, " channels and the ", w[0],
               " filters");
    LOOM_CHECK(!rr || w[1] == C / s.groups, ShapeError, op, ": the kernel of shape ", w.to_string(),
               " must have ", C / s.groups, " input channels (the operand of shape ", x.to_string(),
               " has ", C, " channels in ", s.groups, " group(s))");
  }
  if (!x.has_free()) kernels::check_conv_shape(s, op);  // else when a minibatch decides it
  return s;
}

NDShape spatial_output(const kernels::ConvShape& s, size_t channels) {
  std::vector<size_t> d{channels};
  for (const kernels::SpatialAxis& ax : s.axes) d.push_back(ax.output);
  return NDShape(d);
}
NDShape spatial_input(const kernels::ConvShape& s, size_t channels) {
  std::vector<size_t> d{channels};
  for (const kernels::SpatialAxis& ax : s.axes) d.push_back(ax.input);
  return NDShape(d);
}

// The output extents of a transposed convolution (see ConvolutionTransposeOptions).
std::vector<size_t> transpose_extents(const char* op, const NDShape& x, const NDShape& kernel,
                                      const Dictionary& a) {
  const size_t rr = size_t(a.get<int64_t>("reduction_rank"));
  const NDShape w = kernel_of(x, kernel, rr, 0);
  const size_t n = spatial_rank(op, w, rr);
  LOOM_CHECK(x.rank() == n + rr, ShapeError, op, ": the operand of shape ", x.to_string(),
             " must have ", n + rr, " axes for the kernel of shape ", w.to_string());
  const NDShape& given = a.get<NDShape>("output_shape");
  if (!given.empty()) {
    LOOM_CHECK(given.rank() == n || given.rank() == n + 1, ShapeError, op, ": output_shape ",
               given.to_string(), " must give the ", n, " spatial extents (or channels too)");
    return given.sub_shape(given.rank() - n).dims();
  }
  const auto strides = per_axis(op, "strides", option(a, "strides"), n),
             dilation = per_axis(op, "dilation", option(a, "dilation"), n),
             auto_pad = per_axis(op, "auto_padding", option(a, "auto_padding"), n),
             lower = per_axis(op, "lower_pad", option(a, "lower_pad"), n),
             upper = per_axis(op, "upper_pad", option(a, "upper_pad"), n);
  std::vector<size_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const long in = long(x[rr + i]), extent = long((w[w.rank() - n + i] - 1) * dilation[i] + 1);
    const long base = (in - 1) * long(strides[i]);
    const long e = auto_pad[i] ? base + 1 : base + extent - long(lower[i] + upper[i]);
    LOOM_CHECK(e >= 1, ShapeError, op, ": padding leaves no output on spatial axis ", i);
    out[i] = size_t(e);
  }
  return out;
}

// The batch of a call's operand t, and the calling thread's compute precision for float.
void set_batch(kernels::ConvShape& s, const Tensor& t) {
  s.batch = t.rows();
  s.bf16 = t.dtype == DataType::Float32 && compute_in_bf16();
}

// Inputs W, x and, from the Convolution layers, the bias b (one per output channel), which
// oneDNN adds in the convolution and whose gradient it takes in the weights' pass.
class ConvolutionOp : public OpDef {
 public:
  OpTraits traits(const Dictionary&) const override { return {.backward_reads_output = false}; }
  const char* name() const override { return "Convolution"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable &W = in[0], &x = in[1];
    LOOM_CHECK(!W.has_batch_axis(), ShapeError, "Convolution: the kernel '", W.name(),
               "' must not have dynamic axes");
    LOOM_CHECK(W.dtype() == x.dtype(), ShapeError, "Convolution: kernel and operand have types ",
               to_string(W.dtype()), " and ", to_string(x.dtype()));
    NDShape ws = W.shape();
    const size_t rr = size_t(a.get<int64_t>("reduction_rank"));
    if (ws.has_inferred()) {
      LOOM_CHECK(W.is_parameter() && ws.rank() > 2 && ws[1] == NDShape::kInferred &&
                     !ws.sub_shape(2).has_inferred() && ws[0] != NDShape::kInferred,
                 ShapeError, "Convolution: only the input-channel axis of a parameter kernel ",
                 "can be inferred (kernel shape ", ws.to_string(), ")");
      const size_t groups = size_t(a.get<int64_t>("groups"));
      LOOM_CHECK(rr == 0 || (x.shape().rank() >= 1 && groups >= 1 && x.shape()[0] % groups == 0),
                 ShapeError,
                 "Convolution: cannot infer the kernel's input channels from an operand of shape ",
                 x.shape().to_string(), " in ", groups, " group(s)");
      ws[1] = rr == 0 ? 1 : x.shape()[0] / groups;
      geometry(name(), x.shape(), ws, a, nullptr);  // checked before W is fixed
      resolve_parameter_shape(W, ws);
    }
    const kernels::ConvShape s = geometry(name(), x.shape(), ws, a, nullptr);
    if (in.size() == 3) {
      const Variable& b = in[2];
      const NDShape& bs = b.shape();
      LOOM_CHECK(!b.has_batch_axis() && b.dtype() == x.dtype() && !bs.has_inferred() &&
                     bs.rank() >= 1 && bs[0] == s.out_channels &&
                     bs.total_size() == s.out_channels && bs.rank() <= s.axes.size() + 1,
                 ShapeError, "Convolution: the bias '", b.name(), "' of shape ", bs.to_string(),
                 " must hold one ", to_string(x.dtype()), " per output channel: (", s.out_channels,
                 "), or (", s.out_channels, ", 1, ...) with at most ", s.axes.size(),
                 " ones, without dynamic axes");
    }
    return {{spatial_output(s, s.out_channels), x.dtype(), x.dynamic_axes(), false}};
  }

  // The operand's positions go to the outputs whose windows they centre.
  std::optional<SpatialTransform> spatial_transform(size_t index, const std::vector<Variable>& in,
                                                    const Dictionary& a) const override {
    if (index != 1 || in[1].shape().has_free()) return std::nullopt;
    auto t = conv_detail::window_centres(
        geometry(name(), in[1].shape(), in[0].shape(), a, nullptr).axes);
    return t ? std::optional(inverse(*t)) : std::nullopt;
  }

  BlockedInput blocked_input(size_t index, const std::vector<Variable>& in,
                             const Dictionary& a) const override {
    if (index != 1 || in[1].dtype() != DataType::Float32 || a.get<int64_t>("reduction_rank") == 0 ||
        in[1].shape().has_free())
      return BlockedInput::No;
    const kernels::ConvShape s = geometry(name(), in[1].shape(), in[0].shape(), a, nullptr);
    return kernels::can_block(s, s.in_channels) ? BlockedInput::Yes : BlockedInput::No;
  }
  bool blocked_output(const std::vector<Variable>& in, const Dictionary& a,
                      const std::vector<bool>&) const override {
    if (in[1].dtype() != DataType::Float32 || in[1].shape().has_free()) return false;
    const kernels::ConvShape s = geometry(name(), in[1].shape(), in[0].shape(), a, nullptr);
    return kernels::can_block(s, s.out_channels);
  }

  kernels::ConvShape shape_of(const OpCall& call) const {
    const Tensor &W = *call.inputs[0], &x = *call.inputs[1];
    kernels::ConvShape s = geometry(name(), x.sample_shape(), W.shape, call.attributes, nullptr);
    set_batch(s, x);
    s.input_blocked = x.blocked;
    s.output_blocked = call.output->blocked;
    s.bias = call.inputs.size() == 3;
    return s;
  }

  void forward(OpCall& call) const override {
    if (call.output->size() == 0) return;  // an axis of extent 0: no windows
    const Tensor &W = *call.inputs[0], &x = *call.inputs[1];
    const kernels::ConvShape s = shape_of(call);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* b = s.bias ? call.inputs[2]->ptr<T>() : nullptr;
      kernels::convolution_forward<T>(s, x.ptr<T>(), W.ptr<T>(), b, call.output->ptr<T>());
    });
  }

  // The weights' pass also takes the bias gradient when that is wanted (into scratch, for the
  // call for input 2 that follows).
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &W = *call.inputs[0], &x = *call.inputs[1];
    if (call.output->size() == 0) {  // no windows: nothing flows back
      if (!accumulate) std::memset(g.data, 0, g.size() * size_of(g.dtype));
      return;
    }
    kernels::ConvShape s = shape_of(call);
    const bool bias_wanted = s.bias && (*call.gradient_wanted)[2];
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      T* db_scratch =
          bias_wanted ? static_cast<T*>(call.scratch->ensure(s.out_channels * sizeof(T))) : nullptr;
      if (index == 0) {
        s.bias = bias_wanted;
        if (bias_wanted) std::fill_n(db_scratch, s.out_channels, T(0));
        kernels::convolution_backward_weights<T>(s, x.ptr<T>(), dy, g.ptr<T>(), db_scratch,
                                                 accumulate);
      } else if (index == 1) {
        kernels::convolution_backward_data<T>(s, dy, W.ptr<T>(), g.ptr<T>(), accumulate);
      } else if ((*call.gradient_wanted)[0]) {
        T* db = g.ptr<T>();
        for (size_t c = 0; c < s.out_channels; ++c)
          db[c] = accumulate ? db[c] + db_scratch[c] : db_scratch[c];
      } else {
        kernels::convolution_backward_bias<T>(s, dy, g.ptr<T>(), accumulate);
      }
    });
  }
};

class ConvolutionTransposeOp : public OpDef {
 public:
  const char* name() const override { return "ConvolutionTranspose"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable &W = in[0], &x = in[1];
    LOOM_CHECK(!W.has_batch_axis(), ShapeError, "ConvolutionTranspose: the kernel '", W.name(),
               "' must not have dynamic axes");
    LOOM_CHECK(W.dtype() == x.dtype(), ShapeError,
               "ConvolutionTranspose: kernel and operand have types ", to_string(W.dtype()),
               " and ", to_string(x.dtype()));
    NDShape ws = W.shape();
    const size_t rr = size_t(a.get<int64_t>("reduction_rank"));
    if (ws.has_inferred()) {
      LOOM_CHECK(W.is_parameter() && ws.rank() > 2 && ws[0] == NDShape::kInferred &&
                     !ws.sub_shape(1).has_inferred() && x.shape().rank() >= 1,
                 ShapeError, "ConvolutionTranspose: only the input-channel axis (the first) of ",
                 "a parameter kernel can be inferred (kernel shape ", ws.to_string(), ")");
      ws[0] = rr == 0 ? 1 : x.shape()[0];
      const auto out = transpose_extents(name(), x.shape(), ws, a);
      geometry(name(), x.shape(), ws, a, &out);
      resolve_parameter_shape(W, ws);
    }
    const auto out = transpose_extents(name(), x.shape(), ws, a);
    const kernels::ConvShape s = geometry(name(), x.shape(), ws, a, &out);
    const NDShape& given = a.get<NDShape>("output_shape");
    LOOM_CHECK(given.rank() != out.size() + 1 || given[0] == s.in_channels, ShapeError,
               "ConvolutionTranspose: output_shape ", given.to_string(), " has ", given[0],
               " channels, the kernel of shape ", ws.to_string(), " ", s.in_channels);
    return {{spatial_input(s, s.in_channels), x.dtype(), x.dynamic_axes(), false}};
  }

  // The operand's positions are the forward convolution's outputs: they go to the centres of
  // their windows.
  std::optional<SpatialTransform> spatial_transform(size_t index, const std::vector<Variable>& in,
                                                    const Dictionary& a) const override {
    if (index != 1) return std::nullopt;
    const auto out = transpose_extents(name(), in[1].shape(), in[0].shape(), a);
    return conv_detail::window_centres(
        geometry(name(), in[1].shape(), in[0].shape(), a, &out).axes);
  }

  kernels::ConvShape shape_of(const OpCall& call) const {
    const Tensor &W = *call.inputs[0], &x = *call.inputs[1];
    const NDShape sample = x.sample_shape();
    const auto out = transpose_extents(name(), sample, W.shape, call.attributes);
    kernels::ConvShape s = geometry(name(), sample, W.shape, call.attributes, &out);
    set_batch(s, x);
    return s;
  }

  // The transposed convolution's output is the convolution's input and its operand the
  // convolution's output.
  void forward(OpCall& call) const override {
    const Tensor &W = *call.inputs[0], &x = *call.inputs[1];
    const kernels::ConvShape s = shape_of(call);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::convolution_backward_data<T>(s, x.ptr<T>(), W.ptr<T>(), call.output->ptr<T>(),
                                            false);
    });
  }

  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &W = *call.inputs[0], &x = *call.inputs[1];
    const kernels::ConvShape s = shape_of(call);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      if (index == 0)
        kernels::convolution_backward_weights<T>(s, dy, x.ptr<T>(), g.ptr<T>(), nullptr,
                                                 accumulate);
      else
        kernels::convolution_forward<T>(s, dy, W.ptr<T>(), nullptr, g.ptr<T>(), accumulate);
    });
  }
};

const ConvolutionOp kConvolution;
const ConvolutionTransposeOp kConvolutionTranspose;

// CNTK's convolution_map without an output-channel axis, of the operand's rank (its docstring
// examples' [C, kernel...]), has one output channel: the map reshaped with an axis of 1 at
// `axis` (in front for a convolution, after a transposed one's input channels).
Variable with_output_channel(const Variable& map, const Variable& operand, size_t axis) {
  const NDShape& w = map.shape();
  if (w.rank() != operand.shape().rank() || w.has_inferred()) return map;
  std::vector<size_t> d = w.dims();
  d.insert(d.begin() + std::ptrdiff_t(axis), 1);
  return reshape(map, NDShape(d));
}

Dictionary window_attributes(const std::vector<size_t>& strides, const std::vector<bool>& sharing,
                             const std::vector<bool>& auto_padding,
                             const std::vector<size_t>& lower_pad,
                             const std::vector<size_t>& upper_pad,
                             const std::vector<size_t>& dilation, size_t reduction_rank) {
  LOOM_CHECK(reduction_rank <= 1, ArgumentError, "convolution: reduction_rank ", reduction_rank,
             " is not supported (0 or 1, as in CNTK)");
  Dictionary a;
  a["strides"] = to_shape(strides);
  a["sharing"] = to_shape(sharing);
  a["auto_padding"] = to_shape(auto_padding);
  a["lower_pad"] = to_shape(lower_pad);
  a["upper_pad"] = to_shape(upper_pad);
  a["dilation"] = to_shape(dilation);
  a["reduction_rank"] = int64_t(reduction_rank);
  return a;
}

// An Int attribute that counts (reduction_rank, groups): an ArgumentError naming function for a
// negative one.
size_t count_attribute(const char* function, const Dictionary& a, const char* key) {
  const int64_t n = a.get<int64_t>(key);
  LOOM_CHECK(n >= 0, ArgumentError, function, ": ", key, " is ", n, "; give a count >= 0");
  return size_t(n);
}

// CNTK's parameters of convolution and convolution_transpose, with `own` (sequential,
// output_shape) where CNTK has it: the per-axis options and reduction_rank, the options'
// defaults; then max_temp_mem_size_in_samples, which CNTK's engines read and Loom's do not.
template <typename Options>
std::vector<OpParam> convolution_params(const Options& o, OpParam own,
                                        std::vector<OpParam> more = {}) {
  std::vector<OpParam> params{{"convolution_map"},
                              {"operand"},
                              {"strides", ParamType::Ints, sizes_attribute(o.strides)},
                              {.name = "sharing",
                               .type = ParamType::Bools,
                               .default_value = bool_list_attribute(o.sharing),
                               .list_default = true},
                              {.name = "auto_padding",
                               .type = ParamType::Bools,
                               .default_value = bool_list_attribute(o.auto_padding),
                               .list_default = true},
                              own,
                              {"dilation", ParamType::Ints, sizes_attribute(o.dilation)},
                              {"reduction_rank", ParamType::Int, int64_t(o.reduction_rank)}};
  params.insert(params.end(), more.begin(), more.end());
  params.push_back({"max_temp_mem_size_in_samples", ParamType::Int, int64_t{0}});
  return params;
}

// The options those parameters give (by their names).
template <typename Options>
Options convolution_options(const char* function, const Dictionary& a, const std::string& name) {
  Options o;
  o.strides = attribute_sizes(function, a, "strides");
  o.sharing = attribute_bools(a.at("sharing"));
  o.auto_padding = attribute_bools(a.at("auto_padding"));
  o.dilation = attribute_sizes(function, a, "dilation");
  o.reduction_rank = count_attribute(function, a, "reduction_rank");
  o.name = name;
  return o;
}

}  // namespace

std::vector<OpSchema> convolution_schemas() {
  // Kernels (O, C, kh, kw) over (C, H, W) images: 3x3 with same padding; 2x2 at stride 2 without
  // padding, with a bias (the layers' input, which Python does not give); two groups with a
  // dilated kernel; sequential.
  auto options = [](int64_t stride, bool pad, int64_t dilation) {
    return Dictionary({{"strides", int_list_attribute({stride})},
                       {"auto_padding", bool_list_attribute({pad})},
                       {"dilation", int_list_attribute({dilation})}});
  };
  auto grouped = [&](Dictionary a, int64_t groups) {
    a["groups"] = groups;
    return a;
  };
  const ConformanceInput image{NDShape{2, 5, 6}};
  const ConvolutionOptions conv;
  const ConvolutionTransposeOptions transposed;
  return {
      {.op = &kConvolution,
       .min_inputs = 2,
       .max_inputs = 3,  // and the layers' bias
       .python = "convolution",
       .params = convolution_params(conv, {"sequential", ParamType::Bool, conv.sequential},
                                    {{"groups", ParamType::Int, int64_t(conv.groups)}}),
       .doc = "the convolution of operand (C, spatial...) with convolution_map (O, C / groups, "
              "kernel...): (O, out...). strides, sharing (only True), auto_padding (centred, "
              "zero padded, ceil(input / stride) outputs) and dilation take one value for every "
              "spatial axis, one per spatial axis, or one more in front for the channel axis. "
              "reduction_rank 0: operand has no channel axis. sequential=True: operand is a "
              "sequence and convolution_map (O, C / groups, kT, kernel...) convolves along its "
              "steps too (the options' first spatial axis), giving sequences on a new sequence "
              "axis, each as long as its steps convolve to. max_temp_mem_size_in_samples is "
              "accepted and not used",
       .onnx = {"Conv"},
       .conformance = {{{{NDShape{3, 2, 3, 3}, false}, image}, options(1, true, 1)},
                       {{{NDShape{3, 2, 2, 2}, false}, image, {NDShape{3, 1, 1}, false}},
                        options(2, false, 1)},
                       {{{NDShape{4, 1, 2, 2}, false}, image}, grouped(options(1, true, 2), 2)},
                       // Along the sequence too (stride 1 there: each sequence's windows are
                       // its own, whichever the minibatch's longest), its empty one included.
                       {.inputs = {{NDShape{3, 2, 3, 3}, false}, {NDShape{2, 4}}},
                        .attributes = Dictionary({{"sequential", true}}),
                        .batch = false,
                        .onnx = false}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             auto o = convolution_options<ConvolutionOptions>("convolution", a, name);
             o.sequential = a.get<bool>("sequential");
             o.groups = count_attribute("convolution", a, "groups");
             if (in.size() > 2) o.bias = in[2];
             return convolution(in[0], in[1], o);
           }},
      {.op = &kConvolutionTranspose,
       .min_inputs = 2,
       .max_inputs = 2,
       .python = "convolution_transpose",
       .params = convolution_params(
           transposed, {.name = "output_shape", .type = ParamType::Shape, .none_default = true}),
       .doc = "the transposed convolution of operand (I, spatial...) with convolution_map (I, O, "
              "kernel...): (O, out...), the shape a convolution with the same map takes back to "
              "operand's. output_shape: the spatial extents (or (O, extents...)) where several "
              "would do; None: the smallest. The options are convolution()'s",
       .onnx = {"ConvTranspose"},
       // Transposed kernels (C, O, kh, kw): 3x3 with same padding; 2x2 at stride 2.
       .conformance = {{{{NDShape{2, 3, 3, 3}, false}, image}, options(1, true, 1)},
                       {{{NDShape{2, 3, 2, 2}, false}, image}, options(2, false, 1)}},
       .build = [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
         auto o =
             convolution_options<ConvolutionTransposeOptions>("convolution_transpose", a, name);
         if (a.contains("output_shape")) o.output_shape = a.get<NDShape>("output_shape");
         return convolution_transpose(in[0], in[1], o);
       }}};
}

namespace {

constexpr const char* kSequentialAxisPrefix = "ConvOverSequenceAxisPrefix";  // CNTK's

// A sequential convolution's operand: a sequence of steps [C, spatial...] ([spatial...] at
// reduction rank 0).
void check_sequential_operand(const Variable& operand, const ConvolutionOptions& o) {
  LOOM_CHECK(operand.has_sequence_axis(), ShapeError, "convolution: sequential=True convolves ",
             "along the sequence axis, but the operand ", operand.describe(), " has none");
  LOOM_CHECK(operand.shape().rank() >= o.reduction_rank, ShapeError, "convolution: the operand ",
             operand.describe(), " has no channel axis (reduction_rank ", o.reduction_rank, ")");
}

}  // namespace

Function convolution_sequence_lengths(const Variable& convolution_map, const Variable& operand,
                                      const ConvolutionOptions& o) {
  check_sequential_operand(operand, o);
  const size_t spatial = operand.shape().rank() - o.reduction_rank + 1;
  const NDShape& w = convolution_map.shape();
  LOOM_CHECK(w.rank() >= spatial && w[w.rank() - spatial] != NDShape::kInferred, ShapeError,
             "convolution: sequential=True needs a kernel with ", spatial,
             " filter axes, the sequence's first; ", convolution_map.describe(), " has not");
  auto first = [&](const char* option, std::vector<size_t> v) {
    return conv_detail::per_axis("convolution", option, v, spatial)[0];
  };
  const size_t kernel = w[w.rank() - spatial], stride = first("strides", o.strides),
               dilation = first("dilation", o.dilation);
  const bool auto_pad =
      first("auto_padding", std::vector<size_t>(o.auto_padding.begin(), o.auto_padding.end())) != 0;
  const DataType dtype = operand.dtype();
  const Variable length = sequence::reduce_sum(sequence::broadcast_as(1.0, operand));
  auto add = [&](const Variable& x, double v) { return Variable(plus(x, constant(v, dtype))); };
  // ceil(L / s) with automatic padding, else floor((L + pads - extent) / s) + 1, at least 0.
  const double extent = double((kernel - 1) * dilation + 1);
  const double shift =
      auto_pad ? double(stride) - 1
               : double(first("lower_pad", o.lower_pad) + first("upper_pad", o.upper_pad)) - extent;
  Variable out = floor(element_divide(add(length, shift), constant(double(stride), dtype)));
  if (!auto_pad) out = relu(add(out, 1));
  return stop_gradient(out, o.name.empty() ? "" : o.name + "_sequence_shape");
}

Function convolution(const Variable& convolution_map, const Variable& operand,
                     const ConvolutionOptions& o) {
  if (o.sequential) {
    check_sequential_operand(operand, o);
    // [T, C, spatial...] per sequence, then the channel in front: [C, T, spatial...].
    Variable steps = sequence::unpack(operand, 0.0, true);
    if (o.reduction_rank == 1) steps = swapaxes(steps, {.axis1 = 0, .axis2 = 1});
    ConvolutionOptions static_axes = o;
    static_axes.sequential = false;
    static_axes.name.clear();
    const Variable y = convolution(convolution_map, steps, static_axes);  // [O, T', out...]
    return to_sequence(swapaxes(y, {.axis1 = 0, .axis2 = 1}),
                       convolution_sequence_lengths(convolution_map, operand, o),
                       kSequentialAxisPrefix, o.name);
  }
  Dictionary a = window_attributes(o.strides, o.sharing, o.auto_padding, o.lower_pad, o.upper_pad,
                                   o.dilation, o.reduction_rank);
  a["groups"] = int64_t(o.groups);
  std::vector<Variable> inputs{with_output_channel(convolution_map, operand, 0), operand};
  if (o.bias) inputs.push_back(*o.bias);
  return make_primitive(kConvolution, std::move(inputs), std::move(a), o.name);
}

Function convolution_transpose(const Variable& convolution_map, const Variable& operand,
                               const ConvolutionTransposeOptions& o) {
  Dictionary a = window_attributes(o.strides, o.sharing, o.auto_padding, o.lower_pad, o.upper_pad,
                                   o.dilation, o.reduction_rank);
  a["groups"] = int64_t(1);
  a["output_shape"] = o.output_shape.value_or(NDShape());
  return make_primitive(kConvolutionTranspose,
                        {with_output_channel(convolution_map, operand, o.reduction_rank), operand},
                        std::move(a), o.name);
}

}  // namespace loom
