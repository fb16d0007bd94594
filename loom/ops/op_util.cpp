#include "loom/ops/op_util.h"

namespace loom::op_util {

kernels::Dims& dims_buffer(size_t slot) {
  thread_local kernels::Dims buffers[kDimsSlots];
  return buffers[slot];
}

const kernels::Dims& aligned_dims(size_t slot, const Tensor& t, size_t sample_rank, bool row_axis) {
  kernels::Dims& d = dims_buffer(slot);
  const size_t own = op_util::sample_rank(t);
  const size_t first = t.dynamic() ? 1 : 0;
  d.assign(sample_rank + (row_axis ? 1 : 0), 1);
  if (row_axis) d[0] = t.rows();
  for (size_t i = 0; i < own; ++i) d[d.size() - own + i] = t.shape[first + i];
  return d;
}

size_t static_axis_index(const char* op, const Axis& axis, const Variable& input) {
  LOOM_CHECK(axis.is_static(), ShapeError, op, ": axis ", axis.to_string(),
             " is not a static axis; input ", input.type_string(),
             " can be indexed by static axes only here");
  const int64_t rank = int64_t(input.shape().rank());
  const int64_t i = axis.static_index();
  LOOM_CHECK(i >= -rank && i < rank, ShapeError, op, ": static axis ", i,
             " is out of range for input ", input.type_string(), " of rank ", rank);
  return static_axis_index(i, size_t(rank));
}

}  // namespace loom::op_util
