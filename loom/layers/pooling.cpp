#include "loom/layers/pooling.h"

#include "loom/ops/pooling.h"

namespace loom {

namespace {

Function pooling_layer(const char* block, PoolingType type, const NDShape& filter_shape,
                       const PoolingLayerOptions& o) {
  const std::vector<bool> pad = o.pad ? o.pad->flags : std::vector<bool>{current_defaults().pad};
  Variable x = placeholder("x");
  Variable y = pooling(x, type, filter_shape, {.strides = o.strides, .auto_padding = pad});
  return as_layer({y}, block, o.name);
}

Function global_pooling_layer(const char* block, PoolingType type, const std::string& name) {
  Variable x = placeholder("x");
  return as_layer({global_pooling(x, type)}, block, name);
}

}  // namespace

Function MaxPooling(const NDShape& filter_shape, const PoolingLayerOptions& options) {
  return pooling_layer("MaxPooling", PoolingType::Max, filter_shape, options);
}

Function AveragePooling(const NDShape& filter_shape, const PoolingLayerOptions& options) {
  return pooling_layer("AveragePooling", PoolingType::Average, filter_shape, options);
}

Function MaxUnpooling(const NDShape& filter_shape, const PoolingLayerOptions& o) {
  Variable x = placeholder("x"), pooling_input = placeholder("y");
  Variable y = unpooling(
      x, pooling_input, PoolingType::Max, filter_shape,
      {.strides = o.strides, .auto_padding = o.pad ? o.pad->flags : std::vector<bool>{false}});
  return as_layer({y}, "MaxUnpooling", o.name, {x, pooling_input});
}

Function GlobalMaxPooling(const std::string& name) {
  return global_pooling_layer("GlobalMaxPooling", PoolingType::Max, name);
}

Function GlobalAveragePooling(const std::string& name) {
  return global_pooling_layer("GlobalAveragePooling", PoolingType::Average, name);
}

}  // namespace loom
