#include "loom/graph/tensor.h"

#include <algorithm>
#include <numeric>

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

}  // namespace loom
