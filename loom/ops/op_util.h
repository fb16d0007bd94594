// Helpers shared by the op families in loom/ops/ (internal; not part of the public API).
#pragma once

#include <cstddef>
#include <cstring>

#include "loom/graph/op.h"
#include "loom/kernels/elementwise.h"
#include "loom/kernels/reduce.h"

namespace loom::op_util {

// Number of static axes of a packed tensor (its shape without the row axis).
inline size_t sample_rank(const Tensor& t) {
  return t.shape.rank() - (t.dynamic() ? 1 : 0);
}
// The gradient of an input that gets none through the op (hardmax, the random ops): zeros, and
// nothing to add when accumulating.
inline void zero_gradient(Tensor& g, bool accumulate) {
  if (!accumulate) std::memset(g.data, 0, g.size() * size_of(g.dtype));
}
// Elements per sample (Tensor::sample_size() without building the sample shape).
inline size_t sample_size(const Tensor& t) {
  size_t n = 1;
  for (size_t i = t.dynamic() ? 1 : 0; i < t.shape.rank(); ++i) n *= t.shape[i];
  return n;
}

// Kernels take dims as std::vector. Ops fill these thread-local buffers, whose capacity survives
// between calls, so a steady training loop does not allocate; one call uses distinct slots.
inline constexpr size_t kDimsSlots = 3;
kernels::Dims& dims_buffer(size_t slot);

// t's dims as an operand of a kernel over an output with `sample_rank` static axes: a leading
// row axis when `row_axis` (t's rows, or 1 for a tensor without dynamic axes, which broadcasts
// over the rows), then t's static axes right-aligned and padded with 1s in front (numpy rules).
const kernels::Dims& aligned_dims(size_t slot, const Tensor& t, size_t sample_rank, bool row_axis);

// The index of a static axis of input's sample shape (negative counts from the end), or a
// ShapeError naming op, the axis and the input.
size_t static_axis_index(const char* op, const Axis& axis, const Variable& input);
// The same for an axis index already checked by shape inference.
inline size_t static_axis_index(int64_t axis, size_t rank) {
  return size_t(axis < 0 ? axis + int64_t(rank) : axis);
}

// dst[i] = src[i] (accumulate: dst[i] += src[i]) for i < n.
template <typename T>
void copy_or_add(size_t n, const T* src, T* dst, bool accumulate) {
  if (accumulate) {
    kernels::axpy(n, T(1), src, dst);
  } else {
    kernels::unary(kernels::UnaryOp::Copy, n, src, dst);
  }
}

// An op whose value is one number for the minibatch (CNTK's minibatch-level criteria:
// lambda_rank, ndcg_at_1, edit_distance_error, forward_backward): its inputs' samples must
// agree, and its output is a scalar without dynamic axes or layout.
class MinibatchCriterionOp : public OpDef {
 public:
  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary& a,
                                      LayoutCache& layouts) const override {
    OpDef::output_layout(in, a, layouts);  // a ShapeError for inputs of other sample counts
    return nullptr;
  }

  // The scalar output; a ShapeError for operands on different dynamic axes.
  static std::vector<OutputSpec> scalar_output(const char* fn, const std::vector<Variable>& in) {
    common_dynamic_axes(fn, in);
    return {{NDShape{}, common_dtype(fn, in), {}, false}};
  }
  // Writes the minibatch's value into the scalar output.
  static void set_scalar(Tensor& out, double v) {
    dispatch(out.dtype, [&](auto zero) { *out.ptr<decltype(zero)>() = decltype(zero)(v); });
  }
};

}  // namespace loom::op_util
