// Ops that move whole rows of a packed tensor (internal to loom/ops/): the sequence ops that pick
// steps (first, last, slice, gather, scatter, broadcast_as) and the ops that move data between
// static and dynamic axes (to_sequence, reconcile_dynamic_axes). A row here is one sample's
// elements: an input row may be a slice of a larger sample (to_sequence reads the steps of a
// [T, ...] sample as T rows).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "loom/graph/op.h"
#include "loom/kernels/permute.h"
#include "loom/ops/op_util.h"

namespace loom::row_map {

constexpr size_t kNoRow = kernels::kNoRow;

// Row i of dst = row map[i] of src (accumulate: +=); a kNoRow row is zeroed (accumulate: kept).
template <typename T>
void gather_rows(std::span<const size_t> map, size_t n, const T* src, T* dst, bool accumulate) {
  kernels::gather_rows(map.size(), n, map.data(), src, dst, accumulate);
}

// Row map[i] of dst += row i of src, over dst_rows rows of dst that start at zero unless
// accumulate. The transpose of gather_rows.
template <typename T>
void scatter_rows(std::span<const size_t> map, size_t n, const T* src, T* dst, size_t dst_rows,
                  bool accumulate) {
  if (!accumulate) std::fill_n(dst, dst_rows * n, T(0));
  for (size_t i = 0; i < map.size(); ++i)
    if (map[i] != kNoRow) op_util::copy_or_add(n, src + i * n, dst + map[i] * n, true);
}

// An op that moves whole rows of its input 0, rows of the output's sample size: each output row
// is a copy of one input row (Direction::Gather: first, last, slice, gather, broadcast_as,
// to_sequence) or each input row is added into one output row (Direction::Scatter: scatter).
// Forward computes the row map into the scratch space, backward moves the gradient rows the
// other way with it. Only input 0 has a gradient.
class RowMapOp : public OpDef {
 public:
  enum class Direction { Gather, Scatter };
  constexpr explicit RowMapOp(Direction d) : direction_(d) {}

  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::only(0),
            .backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false,
            .runs_step_by_step = false};
  }

  void forward(OpCall& call) const override {
    const std::span<size_t> map = row_map(call);
    fill_map(call, map);
    const Tensor& x = *call.inputs[0];
    Tensor& y = *call.output;
    const size_t n = op_util::sample_size(y);
    if (n == 0) return;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      if (direction_ == Direction::Gather) {
        gather_rows<T>(map, n, x.ptr<T>(), y.ptr<T>(), false);
      } else {
        scatter_rows<T>(map, n, x.ptr<T>(), y.ptr<T>(), y.size() / n, false);
      }
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const std::span<const size_t> map = row_map(call);
    const size_t n = op_util::sample_size(*call.output);
    if (n == 0) return;  // dx has no elements either
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      if (direction_ == Direction::Gather) {
        scatter_rows<T>(map, n, dy, dx.ptr<T>(), dx.size() / n, accumulate);
      } else {
        gather_rows<T>(map, n, dy, dx.ptr<T>(), accumulate);
      }
    });
  }

 protected:
  // Fills the map: per output row the input row (Gather; kNoRow: zeros), or per input row the
  // output row (Scatter).
  virtual void fill_map(const OpCall& call, std::span<size_t> map) const = 0;

 private:
  // The map kept in scratch between forward and backward.
  std::span<size_t> row_map(const OpCall& call) const {
    const size_t rows =
        direction_ == Direction::Gather ? call.output->rows() : call.inputs[0]->rows();
    return {static_cast<size_t*>(call.scratch->ensure(rows * sizeof(size_t))), rows};
  }

  Direction direction_;
};

// Broadcasting x along the rows of `layout` (sequence::broadcast_as, reconcile_dynamic_axes):
// x without dynamic axes is every row; x with layout's sequence lengths is copied row for row;
// x with one sample per sequence of layout (a batch) is each of its sequence's steps.
// broadcast_layout checks that x is one of these (a ShapeError naming op and the operands
// otherwise) and returns layout; fill_broadcast_map writes the rows of x that each row of layout
// reads.
const SequenceLayout* broadcast_layout(const char* op, const Tensor& x, const char* x_name,
                                       const SequenceLayout& layout, const char* layout_name);
void fill_broadcast_map(const Tensor& x, const SequenceLayout& layout, std::span<size_t> map);

}  // namespace loom::row_map
