#include "loom/layers/dense.h"

#include "loom/ops/elementwise.h"
#include "loom/ops/linear.h"

namespace loom {

Function Dense(const NDShape& shape, const DenseOptions& o) {
  LOOM_CHECK(!(o.input_rank && o.map_rank), ArgumentError,
             "Dense: input_rank and map_rank are exclusive");
  ResolvedDefaults d = current_defaults();
  Activation activation = o.activation.value_or(d.activation);
  Initializer init = o.init.value_or(d.init);
  init.output_rank = int(shape.rank());
  bool bias = o.bias.value_or(d.bias);
  // One inferred axis stands for all input axes unless input_rank says how many.
  int infer_map = o.input_rank ? -1 : o.map_rank ? int(*o.map_rank) : 0;
  std::vector<size_t> w_dims(o.input_rank.value_or(1), NDShape::kInferred);
  w_dims.insert(w_dims.end(), shape.dims().begin(), shape.dims().end());
  Parameter W = parameter(NDShape(w_dims), init, o.dtype, "W");
  Variable x = placeholder("x");
  Variable r = times(x, W, shape.rank(), infer_map);
  if (bias) r = plus(r, parameter(shape, o.init_bias.value_or(d.init_bias), o.dtype, "b"));
  r = activation(r);
  return as_layer({r}, "Dense", o.name);
}

}  // namespace loom
