#include "loom/layers/normalization.h"

#include "loom/graph/graph_impl.h"
#include "loom/ops/normalization.h"

namespace loom {

namespace {
// A Constant of zeros whose shape, like a parameter's, is inferred at the first call (the
// public constant() takes a value, so its shape is always known).
Constant inferred_zeros(DataType dtype, const std::string& name) {
  auto v = std::make_shared<VariableImpl>();
  v->kind = VariableKind::Constant;
  v->shape = NDShape{NDShape::kInferred};
  v->dtype = dtype;
  v->name = name;
  v->uid = new_uid("Constant");
  v->init = zeros();
  return Constant(Variable(v));
}
}  // namespace

Function BatchNormalization(const BatchNormalizationOptions& o) {
  LOOM_CHECK(!o.map_rank || *o.map_rank == 1, ArgumentError, "BatchNormalization: map_rank ",
             *o.map_rank, " is not supported; use 1 (per channel) or leave it unset");
  const NDShape inferred{NDShape::kInferred};
  Parameter scale = parameter(inferred, constant_initializer(o.init_scale), o.dtype, "scale");
  Parameter bias = parameter(inferred, zeros(), o.dtype, "bias");
  Variable x = placeholder("x");
  Variable y = batch_normalization(
      x, scale, bias, inferred_zeros(o.dtype, "aggregate_mean"),
      inferred_zeros(o.dtype, "aggregate_variance"), constant(0.0, o.dtype, "aggregate_count"),
      o.map_rank.has_value(), o.normalization_time_constant, o.blend_time_constant, o.epsilon);
  return as_layer({y}, "BatchNormalization", o.name);
}

Function LayerNormalization(const LayerNormalizationOptions& o) {
  const NDShape inferred{NDShape::kInferred};
  Parameter scale = parameter(inferred, constant_initializer(o.initial_scale), o.dtype, "scale");
  Parameter bias = parameter(inferred, constant_initializer(o.initial_bias), o.dtype, "bias");
  Variable x = placeholder("x");
  return as_layer({layer_normalization(x, scale, bias, o.epsilon)}, "LayerNormalization", o.name);
}

}  // namespace loom
