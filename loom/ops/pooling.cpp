#include "loom/ops/pooling.h"

#include "loom/graph/op.h"
#include "loom/kernels/pooling.h"
#include "loom/ops/convolution.h"
#include "loom/ops/op_schema.h"

namespace loom {

namespace {

constexpr const char* kOp = "Pooling";

kernels::PoolKind kind_of(const Dictionary& a) {
  if (PoolingType(a.get<int64_t>("pooling_type")) == PoolingType::Max)
    return kernels::PoolKind::Max;
  return a.get<bool>("include_pad") ? kernels::PoolKind::AverageIncludePad
                                    : kernels::PoolKind::Average;
}

// The pooling of sample x: the leading axes are channels, the window covers the rest.
kernels::PoolShape geometry(const NDShape& x, const Dictionary& a) {
  const NDShape& given = a.get<NDShape>("window");
  const bool global = a.get<bool>("global");
  LOOM_CHECK(!global || x.rank() >= 1, ShapeError, kOp, ": global pooling of a scalar");
  const NDShape window = global ? x.sub_shape(x.rank() > 1 ? 1 : 0) : given;
  const size_t n = window.rank();
  LOOM_CHECK(n >= 1 && n <= 3 && n <= x.rank(), ShapeError, kOp, ": a window of shape ",
             window.to_string(), " cannot pool an operand of shape ", x.to_string(),
             " (1 to 3 window axes, at most the operand's rank)");
  const size_t rank = x.rank();
  const auto strides = conv_detail::per_axis(kOp, "strides", a.get<NDShape>("strides").dims(), n);
  const auto pad =
      conv_detail::per_axis(kOp, "auto_padding", a.get<NDShape>("auto_padding").dims(), n);
  kernels::PoolShape s;
  for (size_t i = 0; i < rank - n; ++i) s.channels *= x[i];
  for (size_t i = 0; i < n; ++i)
    s.axes.push_back(conv_detail::window_axis(kOp, x[rank - n + i], window[i], strides[i], 1,
                                              !global && pad[i] != 0, 0, 0));
  kernels::check_pool_shape(s, kOp);
  return s;
}

class PoolingOp : public OpDef {
 public:
  const char* name() const override { return kOp; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const NDShape& x = in[0].shape();
    const kernels::PoolShape s = geometry(x, a);
    std::vector<size_t> out = x.sub_shape(0, x.rank() - s.axes.size()).dims();
    for (const kernels::SpatialAxis& ax : s.axes) out.push_back(ax.output);
    return {{NDShape(out), in[0].dtype(), in[0].dynamic_axes(), false}};
  }

  // The operand's positions go to the outputs whose windows they centre.
  std::optional<SpatialTransform> spatial_transform(size_t, const std::vector<Variable>& in,
                                                    const Dictionary& a) const override {
    auto t = conv_detail::window_centres(geometry(in[0].shape(), a).axes);
    return t ? std::optional(inverse(*t)) : std::nullopt;
  }

  // Blocked where the operand is [C, spatial...] with C filling whole channel blocks.
  BlockedInput blocked_input(size_t, const std::vector<Variable>& in,
                             const Dictionary& a) const override {
    const kernels::PoolShape s = geometry(in[0].shape(), a);
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
    kernels::PoolShape s = geometry(x.sample_shape(), call.attributes);
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

Function make_pooling(const Variable& operand, PoolingType type, const NDShape& window,
                      const PoolingOptions& o, bool global) {
  Dictionary a;
  a["pooling_type"] = int64_t(type);
  a["window"] = window;
  a["global"] = global;
  a["strides"] = NDShape(o.strides);
  a["auto_padding"] = NDShape(std::vector<size_t>(o.auto_padding.begin(), o.auto_padding.end()));
  a["include_pad"] = o.include_pad;
  return make_primitive(kPooling, {operand}, std::move(a), o.name);
}

}  // namespace

std::vector<OpSchema> pooling_schemas() {
  return {{&kPooling, 1, 1}};
}

Function pooling(const Variable& operand, PoolingType type, const NDShape& pooling_window_shape,
                 const PoolingOptions& options) {
  LOOM_CHECK(!pooling_window_shape.empty() && !pooling_window_shape.has_inferred(), ShapeError, kOp,
             ": the window shape ", pooling_window_shape.to_string(),
             " must be given (use global_pooling to pool whole axes)");
  return make_pooling(operand, type, pooling_window_shape, options, false);
}

Function global_pooling(const Variable& operand, PoolingType type, const std::string& name) {
  return make_pooling(operand, type, NDShape(), {.name = name}, true);
}

}  // namespace loom
