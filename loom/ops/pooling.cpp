#include "loom/ops/pooling.h"

#include <cmath>

#include "loom/graph/op.h"
#include "loom/kernels/pooling.h"
#include "loom/ops/convolution.h"
#include "loom/ops/op_schema.h"

namespace loom {

namespace {

constexpr const char* kOp = "Pooling";

// A flag that older models' attributes may lack (false then).
bool flag(const Dictionary& a, const char* key) {
  return a.contains(key) && a.get<bool>(key);
}

kernels::PoolKind kind_of(const Dictionary& a) {
  if (PoolingType(a.get<int64_t>("pooling_type")) == PoolingType::Max)
    return kernels::PoolKind::Max;
  return a.get<bool>("include_pad") ? kernels::PoolKind::AverageIncludePad
                                    : kernels::PoolKind::Average;
}

// The pooling of sample x by op (Pooling, or Unpooling for the pooling it reverses): the
// leading axes are channels, the window covers the rest.
kernels::PoolShape geometry(const char* op, const NDShape& x, const Dictionary& a) {
  const NDShape& given = a.get<NDShape>("window");
  const bool global = flag(a, "global");
  LOOM_CHECK(!global || x.rank() >= 1, ShapeError, op, ": global pooling of a scalar");
  const NDShape window = global ? x.sub_shape(x.rank() > 1 ? 1 : 0) : given;
  const size_t n = window.rank();
  LOOM_CHECK(n >= 1 && n <= 3 && n <= x.rank(), ShapeError, op, ": a window of shape ",
             window.to_string(), " cannot pool an operand of shape ", x.to_string(),
             " (1 to 3 window axes, at most the operand's rank)");
  const size_t rank = x.rank();
  const auto strides = conv_detail::per_axis(op, "strides", a.get<NDShape>("strides").dims(), n);
  const auto pad =
      conv_detail::per_axis(op, "auto_padding", a.get<NDShape>("auto_padding").dims(), n);
  kernels::PoolShape s;
  for (size_t i = 0; i < rank - n; ++i) s.channels *= x[i];
  for (size_t i = 0; i < n; ++i)
    s.axes.push_back(conv_detail::window_axis(op, x[rank - n + i], window[i], strides[i], 1,
                                              !global && pad[i] != 0, 0, 0,
                                              flag(a, "ceil_out_dim")));
  kernels::check_pool_shape(s, op);
  return s;
}

// The sample shape of pooling x with geometry s.
NDShape pooled_shape(const NDShape& x, const kernels::PoolShape& s) {
  std::vector<size_t> out = x.sub_shape(0, x.rank() - s.axes.size()).dims();
  for (const kernels::SpatialAxis& ax : s.axes) out.push_back(ax.output);
  return NDShape(out);
}

class PoolingOp : public OpDef {
 public:
  const char* name() const override { return kOp; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const int64_t type = a.get<int64_t>("pooling_type");
    LOOM_CHECK(type == int64_t(PoolingType::Max) || type == int64_t(PoolingType::Average),
               ArgumentError, "pooling: pooling_type ", type,
               " is neither MAX_POOLING (0) nor AVG_POOLING (1)");
    const NDShape& x = in[0].shape();
    return {{pooled_shape(x, geometry(kOp, x, a)), in[0].dtype(), in[0].dynamic_axes(), false}};
  }

  // The operand's positions go to the outputs whose windows they centre.
  std::optional<SpatialTransform> spatial_transform(size_t, const std::vector<Variable>& in,
                                                    const Dictionary& a) const override {
    auto t = conv_detail::window_centres(geometry(kOp, in[0].shape(), a).axes);
    return t ? std::optional(inverse(*t)) : std::nullopt;
  }

  // Blocked where the operand is [C, spatial...] with C filling whole channel blocks.
  BlockedInput blocked_input(size_t, const std::vector<Variable>& in,
                             const Dictionary& a) const override {
    const kernels::PoolShape s = geometry(kOp, in[0].shape(), a);
    const bool one_channel_axis = in[0].shape().rank() == s.axes.size() + 1;
    return in[0].dtype() == DataType::Float32 && one_channel_axis && kernels::can_block(s)
               ? BlockedInput::Yes
               : BlockedInput::No;
  }
  bool blocked_output(const std::vector<Variable>&, const Dictionary&,
                      const std::vector<bool>& inputs_blocked) const override {
    return inputs_blocked[0];
  }

  // Max pooling: padding never wins, and a window entirely in the padding gives 0 before and
  // after relu alike.
  OpTraits traits(const Dictionary& a) const override {
    return {.selects_max = kind_of(a) == kernels::PoolKind::Max};
  }

  kernels::PoolShape shape_of(const OpCall& call) const {
    const Tensor& x = *call.inputs[0];
    kernels::PoolShape s = geometry(kOp, x.sample_shape(), call.attributes);
    s.batch = x.rows();
    s.input_blocked = x.blocked;
    s.output_blocked = call.output->blocked;
    return s;
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    const kernels::PoolShape s = shape_of(call);
    const kernels::PoolKind kind = kind_of(call.attributes);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      // Training keeps where each maximum came from for backward.
      void* workspace = nullptr;
      if (call.is_training && call.scratch)
        workspace = call.scratch->ensure(kernels::pooling_workspace_bytes<T>(s, kind));
      kernels::pooling_forward<T>(s, kind, x.ptr<T>(), call.output->ptr<T>(), workspace);
    });
  }

  void backward(OpCall& call, size_t, Tensor& g, bool accumulate) const override {
    const Tensor& x = *call.inputs[0];
    const kernels::PoolShape s = shape_of(call);
    const kernels::PoolKind kind = kind_of(call.attributes);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const void* workspace = nullptr;
      if (kind == kernels::PoolKind::Max) {
        LOOM_CHECK(call.scratch, StateError, kOp, ": backward without the forward's workspace");
        workspace = call.scratch->ensure(kernels::pooling_workspace_bytes<T>(s, kind));
      }
      kernels::pooling_backward<T>(s, kind, call.output_gradient->ptr<T>(), workspace, g.ptr<T>(),
                                   accumulate);
    });
  }
};

const PoolingOp kPooling;

// The window's attributes, shared by Pooling and Unpooling.
Dictionary window_attributes(const NDShape& window, const std::vector<size_t>& strides,
                             const std::vector<bool>& auto_padding) {
  Dictionary a;
  a["window"] = window;
  a["strides"] = NDShape(strides);
  a["auto_padding"] = NDShape(std::vector<size_t>(auto_padding.begin(), auto_padding.end()));
  return a;
}

Function make_pooling(const Variable& operand, PoolingType type, const NDShape& window,
                      const PoolingOptions& o, bool global) {
  Dictionary a = window_attributes(window, o.strides, o.auto_padding);
  a["pooling_type"] = int64_t(type);
  a["global"] = global;
  a["include_pad"] = o.include_pad;
  a["ceil_out_dim"] = o.ceil_out_dim;
  return make_primitive(kPooling, {operand}, std::move(a), o.name);
}

// ---- unpooling ----

constexpr const char* kUnpool = "Unpooling";

// Inputs: the operand (pooled) and the pooling's input. Attributes: "unpooling_type" (int),
// "window", "strides" and "auto_padding" (as Pooling's). call.scratch holds where forward put
// each operand element.
class UnpoolingOp : public OpDef {
 public:
  const char* name() const override { return kUnpool; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    LOOM_CHECK(PoolingType(a.get<int64_t>("unpooling_type")) == PoolingType::Max, ArgumentError,
               "unpooling: unpooling_type ", a.get<int64_t>("unpooling_type"),
               " is not supported; only MAX_UNPOOLING is (as in CNTK)");
    const Variable &x = in[0], &pooling_input = in[1];
    LOOM_CHECK(x.dtype() == pooling_input.dtype(), ShapeError, kUnpool,
               ": the operand and the pooling input have types ", to_string(x.dtype()), " and ",
               to_string(pooling_input.dtype()));
    LOOM_CHECK(x.dynamic_axes() == pooling_input.dynamic_axes(), ShapeError, kUnpool,
               ": the operand ", x.describe(), " and the pooling input ", pooling_input.describe(),
               " must have the same dynamic axes");
    const NDShape pooled =
        pooled_shape(pooling_input.shape(), geometry(kUnpool, pooling_input.shape(), a));
    LOOM_CHECK(x.shape() == pooled, ShapeError, kUnpool, ": the operand ", x.describe(),
               " must have the shape ", pooled.to_string(), " that pooling the pooling input ",
               pooling_input.describe(), " gives");
    return {{pooling_input.shape(), x.dtype(), x.dynamic_axes(), false}};
  }

  // The operand's positions are the pooling's outputs: they go to their windows' centres
  // (CNTK's MaxUnpoolingNode).
  std::optional<SpatialTransform> spatial_transform(size_t index, const std::vector<Variable>& in,
                                                    const Dictionary& a) const override {
    if (index != 0) return std::nullopt;
    return conv_detail::window_centres(geometry(kUnpool, in[1].shape(), a).axes);
  }

  // Not the pooling input, which only says where the values go.
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::only(0),
            .backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false};
  }

  kernels::PoolShape shape_of(const OpCall& call) const {
    const Tensor& x = *call.inputs[1];
    kernels::PoolShape s = geometry(kUnpool, x.sample_shape(), call.attributes);
    s.batch = x.rows();
    return s;
  }
  static kernels::ArgMax* where(const OpCall& call, const kernels::PoolShape& s) {
    return static_cast<kernels::ArgMax*>(
        call.scratch->ensure(s.output_size() * sizeof(kernels::ArgMax)));
  }

  void forward(OpCall& call) const override {
    const kernels::PoolShape s = shape_of(call);
    dispatch(call.output->dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::max_unpooling_forward<T>(s, call.inputs[0]->ptr<T>(), call.inputs[1]->ptr<T>(),
                                        call.output->ptr<T>(), where(call, s));
    });
  }

  void backward(OpCall& call, size_t, Tensor& g, bool accumulate) const override {
    const kernels::PoolShape s = shape_of(call);
    dispatch(g.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::max_unpooling_backward<T>(s, call.output_gradient->ptr<T>(), where(call, s),
                                         g.ptr<T>(), accumulate);
    });
  }
};

const UnpoolingOp kUnpooling;

// ---- ROI pooling ----

constexpr const char* kRoi = "ROIPooling";

// Inputs: the feature map [C, H, W] and the regions [R, 4]. Attributes: "pooling_type" (int),
// "roi_output_shape" ([PH, PW]), "spatial_scale" (double). call.scratch holds each output's
// maximum's position.
class RoiPoolingOp : public OpDef {
 public:
  const char* name() const override { return kRoi; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    LOOM_CHECK(PoolingType(a.get<int64_t>("pooling_type")) == PoolingType::Max, ArgumentError,
               "roipooling: pooling_type ", a.get<int64_t>("pooling_type"),
               " is not supported; only MAX_POOLING is (as in CNTK)");
    const NDShape& out = a.get<NDShape>("roi_output_shape");
    const double scale = a.get<double>("spatial_scale");
    LOOM_CHECK(scale > 0 && std::isfinite(scale), ArgumentError, "roipooling: spatial_scale ",
               scale, " must be finite and > 0");
    const Variable &x = in[0], &rois = in[1];
    const NDShape &xs = x.shape(), &rs = rois.shape();
    LOOM_CHECK(out.rank() == 2 && !out.has_inferred() && out[0] >= 1 && out[1] >= 1, ShapeError,
               kRoi, ": roi_output_shape ", out.to_string(),
               " must be (height, width), each at least 1");
    LOOM_CHECK(xs.rank() == 3 && xs[0] >= 1, ShapeError, kRoi, ": the operand ", x.describe(),
               " must be a feature map (channels, height, width)");
    LOOM_CHECK(xs[1] >= out[0] && xs[2] >= out[1], ShapeError, kRoi, ": the operand ", x.describe(),
               " is smaller than roi_output_shape ", out.to_string());
    LOOM_CHECK(rs.rank() == 2 && rs[1] == 4 && rs[0] >= 1, ShapeError, kRoi, ": the rois ",
               rois.describe(), " must be (rois per image, 4): rows of (x1, y1, x2, y2)");
    LOOM_CHECK(x.dtype() == rois.dtype(), ShapeError, kRoi,
               ": the operand and the rois have types ", to_string(x.dtype()), " and ",
               to_string(rois.dtype()));
    LOOM_CHECK(x.dynamic_axes() == rois.dynamic_axes(), ShapeError, kRoi, ": the operand ",
               x.describe(), " and the rois ", rois.describe(), " must have the same dynamic axes");
    return {{NDShape{rs[0], xs[0], out[0], out[1]}, x.dtype(), x.dynamic_axes(), false}};
  }

  // Not the regions.
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::only(0),
            .backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false};
  }

  kernels::RoiPoolShape shape_of(const OpCall& call) const {
    const NDShape x = call.inputs[0]->sample_shape(), rois = call.inputs[1]->sample_shape();
    const NDShape& out = call.attributes.get<NDShape>("roi_output_shape");
    return {call.inputs[0]->rows(),
            x[0],
            x[1],
            x[2],
            rois[0],
            out[0],
            out[1],
            call.attributes.get<double>("spatial_scale")};
  }
  static kernels::ArgMax* where(const OpCall& call, const kernels::RoiPoolShape& s) {
    return static_cast<kernels::ArgMax*>(
        call.scratch->ensure(s.output_size() * sizeof(kernels::ArgMax)));
  }

  void forward(OpCall& call) const override {
    const kernels::RoiPoolShape s = shape_of(call);
    dispatch(call.output->dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::roi_pooling_forward<T>(s, call.inputs[0]->ptr<T>(), call.inputs[1]->ptr<T>(),
                                      call.output->ptr<T>(), where(call, s));
    });
  }

  void backward(OpCall& call, size_t, Tensor& g, bool accumulate) const override {
    const kernels::RoiPoolShape s = shape_of(call);
    dispatch(g.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::roi_pooling_backward<T>(s, call.output_gradient->ptr<T>(), where(call, s),
                                       g.ptr<T>(), accumulate);
    });
  }
};

const RoiPoolingOp kROIPooling;

// CNTK's parameters of pooling and unpooling: `lead`, then the per-axis options with the
// options' defaults, then `more`; and the options they give (by their names).
std::vector<OpParam> window_params(std::vector<OpParam> lead, const std::vector<OpParam>& more) {
  const PoolingOptions o;
  lead.push_back({"strides", ParamType::Ints, conv_detail::sizes_attribute(o.strides)});
  lead.push_back({.name = "auto_padding",
                  .type = ParamType::Bools,
                  .default_value = bool_list_attribute(o.auto_padding),
                  .list_default = true});
  lead.insert(lead.end(), more.begin(), more.end());
  return lead;
}
PoolingOptions window_options(const char* function, const Dictionary& a, const std::string& name) {
  return {.strides = conv_detail::attribute_sizes(function, a, "strides"),
          .auto_padding = attribute_bools(a.at("auto_padding")),
          .name = name};
}

}  // namespace

std::vector<OpSchema> pooling_schemas() {
  OpSchema roi{&kROIPooling, 2, 2};
  roi.python = "roipooling";
  roi.params = {{"operand"},
                {"rois"},
                {"pooling_type", ParamType::Int},
                {"roi_output_shape", ParamType::Shape},
                {"spatial_scale", ParamType::Double}};
  roi.doc =
      "max pooling of each region of interest (x1, y1, x2, y2) * spatial_scale of the feature map "
      "(C, H, W) into roi_output_shape (PH, PW) cells: (rois, C, PH, PW)";
  roi.onnx.none_because =
      "ONNX's MaxRoiPool takes the regions of a whole batch with their images' indices, not "
      "each sample's own";
  roi.conformance = {{{{NDShape{2, 4, 5}}, {NDShape{3, 4}, true, 0, 4}},
                      Dictionary({{"pooling_type", int64_t(PoolingType::Max)},
                                  {"roi_output_shape", NDShape{2, 2}},
                                  {"spatial_scale", 1.0}})}};
  // The window's attributes as the parameters give them.
  auto window = [](NDShape window, int64_t stride, bool pad) {
    return Dictionary({{"strides", int_list_attribute({stride})},
                       {"auto_padding", bool_list_attribute({pad})},
                       {"window", window}});
  };
  auto unpool = [&](NDShape shape, int64_t stride, bool pad) {
    Dictionary a = window(std::move(shape), stride, pad);
    a["unpooling_type"] = int64_t(PoolingType::Max);
    return a;
  };
  auto pool = [&](PoolingType type, NDShape shape, int64_t stride, bool pad, bool include_pad,
                  bool ceil_out_dim) {
    Dictionary a = window(std::move(shape), stride, pad);
    a["pooling_type"] = int64_t(type);
    a["include_pad"] = include_pad;
    a["ceil_out_dim"] = ceil_out_dim;
    return a;
  };
  const PoolingOptions defaults;
  const ConformanceInput image{NDShape{2, 5, 6}};
  return {
      {.op = &kPooling,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "pooling",
       .params = window_params({{"operand"},
                                {"pooling_type", ParamType::Int},
                                {"pooling_window_shape", ParamType::Shape, {}, "window"}},
                               {{"ceil_out_dim", ParamType::Bool, defaults.ceil_out_dim},
                                {"include_pad", ParamType::Bool, defaults.include_pad}}),
       .doc = "MAX_POOLING or AVG_POOLING of the trailing axes of operand (C..., spatial...) in "
              "windows of pooling_window_shape, each channel on its own. strides and "
              "auto_padding: one value or one per window axis. Average pooling divides by the "
              "window's elements inside the input unless include_pad; ceil_out_dim (without "
              "auto_padding) adds the window that overhangs the input's end",
       .onnx = {"MaxPool"},  // or AveragePool
       // Max over 2x2 windows at stride 2; average over 3x3 ones with padding, counted with and
       // without the pad; max over 3x3 windows at stride 2 with the last window cut
       // (ceil_out_dim).
       .conformance = {{{image}, pool(PoolingType::Max, NDShape{2, 2}, 2, false, false, false)},
                       {{image}, pool(PoolingType::Average, NDShape{3, 3}, 1, true, false, false)},
                       {{image}, pool(PoolingType::Average, NDShape{3, 3}, 1, true, true, false)},
                       {{image}, pool(PoolingType::Max, NDShape{3, 3}, 2, false, false, true)},
                       {{image}, pool(PoolingType::Average, NDShape{3, 3}, 2, false, true, true)},
                       {{image}, pool(PoolingType::Average, NDShape{3, 3}, 2, false, false, true)}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             PoolingOptions o = window_options("pooling", a, name);
             o.include_pad = a.get<bool>("include_pad");
             o.ceil_out_dim = a.get<bool>("ceil_out_dim");
             return pooling(in[0], PoolingType(a.get<int64_t>("pooling_type")),
                            a.get<NDShape>("window"), o);
           }},
      {.op = &kUnpooling,
       .min_inputs = 2,
       .max_inputs = 2,
       .python = "unpooling",
       .params = window_params({{"operand"},
                                {"pooling_input"},
                                {"unpooling_type", ParamType::Int},
                                {"unpooling_window_shape", ParamType::Shape, {}, "window"}},
                               {}),
       .doc = "the inverse of max pooling pooling_input (MAX_UNPOOLING only): operand has the "
              "pooled shape; the result, pooling_input's shape, is 0 but where the pooling with "
              "these options finds its maxima, which take operand's values",
       // MaxPool's Indices, then MaxUnpool (loom/deploy's own code exports and imports them).
       .onnx = {.op_type = "MaxUnpool"},
       // 2x2 windows at stride 2; and overlapping 3x3 ones with automatic padding.
       .conformance = {{{{NDShape{2, 2, 2}}, {NDShape{2, 4, 4}}}, unpool(NDShape{2, 2}, 2, false)},
                       {{{NDShape{1, 3, 3}}, {NDShape{1, 5, 5}}}, unpool(NDShape{3, 3}, 2, true)}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             return unpooling(in[0], in[1], PoolingType(a.get<int64_t>("unpooling_type")),
                              a.get<NDShape>("window"), window_options("unpooling", a, name));
           }},
      roi};
}

Function pooling(const Variable& operand, PoolingType type, const NDShape& pooling_window_shape,
                 const PoolingOptions& options) {
  LOOM_CHECK(!pooling_window_shape.empty() && !pooling_window_shape.has_inferred(), ShapeError, kOp,
             ": the window shape ", pooling_window_shape.to_string(),
             " must be given (use global_pooling to pool whole axes)");
  return make_pooling(operand, type, pooling_window_shape, options, false);
}

Function unpooling(const Variable& operand, const Variable& pooling_input,
                   PoolingType unpooling_type, const NDShape& unpooling_window_shape,
                   const PoolingOptions& options) {
  LOOM_CHECK(!options.include_pad && !options.ceil_out_dim, ArgumentError,
             "unpooling: include_pad and ceil_out_dim do not apply to unpooling");
  Dictionary a = window_attributes(unpooling_window_shape, options.strides, options.auto_padding);
  a["unpooling_type"] = int64_t(unpooling_type);
  return make_primitive(kUnpooling, {operand, pooling_input}, std::move(a), options.name);
}

Function roipooling(const Variable& operand, const Variable& rois, PoolingType pooling_type,
                    const NDShape& roi_output_shape, double spatial_scale,
                    const std::string& name) {
  Dictionary a;
  a["pooling_type"] = int64_t(pooling_type);
  a["roi_output_shape"] = roi_output_shape;
  a["spatial_scale"] = spatial_scale;
  return make_primitive(kROIPooling, {operand, rois}, std::move(a), name);
}

Function global_pooling(const Variable& operand, PoolingType type, const std::string& name) {
  return make_pooling(operand, type, NDShape(), {.name = name}, true);
}

}  // namespace loom
