#include "loom/graph/tensor.h"

#include <algorithm>
#include <cstring>

#include "loom/core/threads.h"

namespace loom {

const SequenceLayout* LayoutCache::batch(size_t n) {
  for (auto& l : layouts_)
    if (l->max_length() <= 1 && l->num_sequences() == n &&
        std::all_of(l->lengths.begin(), l->lengths.end(), [](size_t x) { return x == 1; }))
      return l.get();
  return add(SequenceLayout::from_lengths(std::vector<size_t>(n, 1)));
}

const SequenceLayout* LayoutCache::add(SequenceLayout layout) {
  layouts_.push_back(std::make_shared<const SequenceLayout>(std::move(layout)));
  return layouts_.back().get();
}

void* TensorStorage::ensure(size_t bytes) {
  if (!buffer_ || buffer_->bytes() < bytes) buffer_ = std::make_unique<Buffer>(bytes);
  return buffer_->data();
}

void pack_dense(const Value& value, const SequenceLayout& layout, void* dst) {
  size_t bytes = size_of(value.dtype()) * value.sample_shape().total_size();
  if (value.is_packed()) {  // the same rows, the lengths being the same (the order's only input)
    LOOM_CHECK(value.packed_layout()->lengths == layout.lengths, ShapeError,
               "pack_dense: the packed value's sequences are not of the layout's lengths");
    copy_bytes(dst, value.packed_rows().raw_data(), layout.rows() * bytes);
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
    copy_bytes(rows.raw_data(), t.data, l.rows() * bytes);
    std::shared_ptr<const SequenceLayout> shared = l.weak_from_this().lock();
    return Value::packed(std::move(rows),
                         shared ? std::move(shared) : std::make_shared<const SequenceLayout>(l));
  }
  NDArrayView out(t.dtype, sample.prepend(l.num_sequences()));
  copy_steps(l, 1, bytes, t.data, out.raw_data(), false);
  return Value(out, false);
}

}  // namespace loom
