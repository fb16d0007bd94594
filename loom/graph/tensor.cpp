#include "loom/graph/tensor.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "loom/core/threads.h"

namespace loom {

SequenceLayout SequenceLayout::from_lengths(std::vector<size_t> lengths, std::vector<bool> begins) {
  SequenceLayout l;
  size_t n = lengths.size();
  l.order.resize(n);
  std::iota(l.order.begin(), l.order.end(), size_t{0});
  std::stable_sort(l.order.begin(), l.order.end(),
                   [&](size_t a, size_t b) { return lengths[a] > lengths[b]; });
  l.rank_of.resize(n);
  for (size_t r = 0; r < n; ++r) l.rank_of[l.order[r]] = r;
  size_t max_len = n ? lengths[l.order[0]] : 0;
  l.step_offsets.assign(max_len + 1, 0);
  size_t active = n;
  for (size_t t = 0; t < max_len; ++t) {
    while (active > 0 && lengths[l.order[active - 1]] <= t) --active;
    l.step_offsets[t + 1] = l.step_offsets[t] + active;
  }
  l.begins = begins.empty() ? std::vector<bool>(n, true) : std::move(begins);
  l.lengths = std::move(lengths);
  return l;
}

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
// Copies every step of every sequence of l from a padded buffer [sequence, T, sample] into l's
// packed rows (samples of `bytes`) when from_padded, else from the rows into the padded buffer.
// The sequences split across threads when the copy is large (a minibatch of long sequences is
// tens of MB, where one thread's memcpy leaves bandwidth unused); each row is written once.
void copy_steps(const SequenceLayout& l, size_t T, size_t bytes, const void* from, void* to,
                bool from_padded) {
  const char* src = static_cast<const char*>(from);
  char* dst = static_cast<char*>(to);
  const size_t n = l.num_sequences();
  for_each_piece(n, std::min(n, byte_pieces(n * T * bytes)), [&](size_t, size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b)
      for (size_t step = 0; step < l.lengths[b]; ++step) {
        const size_t padded = (b * T + step) * bytes, row = l.row(b, step) * bytes;
        std::memcpy(dst + (from_padded ? row : padded), src + (from_padded ? padded : row), bytes);
      }
  });
}
}  // namespace

void pack_dense(const Value& value, const SequenceLayout& layout, void* dst) {
  size_t bytes = size_of(value.dtype()) * value.sample_shape().total_size();
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
  size_t T = as_sequence ? l.max_length() : 1;
  NDArrayView out(t.dtype, as_sequence ? sample.prepend(T).prepend(l.num_sequences())
                                       : sample.prepend(l.num_sequences()));
  copy_steps(l, T, bytes, t.data, out.raw_data(), false);
  if (!as_sequence) return Value(out, false);
  NDMask mask(l.num_sequences(), T);
  for (size_t b = 0; b < l.num_sequences(); ++b) {
    mask.invalidate_from(b, l.lengths[b]);
    if (!l.begins[b] && l.lengths[b]) mask.set(b, 0, MaskKind::Valid);
  }
  return Value(out, true, std::move(mask));
}

}  // namespace loom
