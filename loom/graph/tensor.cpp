#include "loom/graph/tensor.h"

#include <algorithm>
#include <cstring>

namespace loom {

const SequenceLayout* LayoutCache::batch(size_t n) {
  for (auto& l : layouts_)
    if (l->max_length() <= 1 && l->num_sequences() == n &&
        std::all_of(l->lengths.begin(), l->lengths.end(), [](size_t x) { return x == 1; }))
      return l.get();
  return add(SequenceLayout::from_lengths(std::vector<size_t>(n, 1)));
}

const SequenceLayout* LayoutCache::add(SequenceLayout layout) {
  layouts_.push_back(std::make_unique<SequenceLayout>(std::move(layout)));
  return layouts_.back().get();
}

void* TensorStorage::ensure(size_t bytes) {
  if (!buffer_ || buffer_->bytes() < bytes) buffer_ = std::make_unique<Buffer>(bytes);
  return buffer_->data();
}

namespace {
// A view of elements that someone else owns (a tensor's buffer): the buffer's owner is a
// handle that owns nothing (the aliasing constructor), so the buffer frees nothing.
NDArrayView borrow(DataType dtype, const NDShape& shape, void* data) {
  std::shared_ptr<const void> nobody(std::shared_ptr<const void>(), data);
  return NDArrayView::over(
      dtype, shape,
      std::make_shared<Buffer>(data, shape.total_size() * size_of(dtype), std::move(nobody)));
}
}  // namespace

void pack_dense(const Value& value, const SequenceLayout& layout, void* dst) {
  size_t bytes = size_of(value.dtype()) * value.sample_shape().total_size();
  if (value.is_packed()) {  // the same rows, the lengths being the same (the order's only input)
    LOOM_CHECK(value.sequence_lengths() == layout.lengths, ShapeError,
               "pack_dense: the packed value's sequences are not of the layout's lengths");
    const NDArrayView& rows = value.packed_rows();
    borrow(rows.dtype(), rows.shape(), dst).copy_from(rows);
    return;
  }
  size_t T = value.max_sequence_length();
  copy_steps(layout, T, bytes, value.data().raw_data(), dst, true);
}

Value to_value(const Tensor& t, bool as_sequence) {
  size_t bytes = t.sample_size() * size_of(t.dtype);
  NDShape sample = t.sample_shape();
  if (!t.dynamic()) {
    NDArrayView out(t.dtype, sample.prepend(1));
    std::memcpy(out.raw_data(), t.data, bytes);
    return Value(out, false);
  }
  const SequenceLayout& l = *t.layout;
  if (as_sequence) {
    NDArrayView rows = NDArrayView::uninitialized(t.dtype, t.shape);
    rows.copy_from(borrow(t.dtype, t.shape, t.data));
    return Value::packed(std::move(rows), l);
  }
  NDArrayView out(t.dtype, sample.prepend(l.num_sequences()));
  copy_steps(l, 1, bytes, t.data, out.raw_data(), false);
  return Value(out, false);
}

}  // namespace loom
