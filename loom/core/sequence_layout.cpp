#include "loom/core/sequence_layout.h"

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

namespace {
// copy_sequence for the steps [begin, end) of sequence seq, on the calling thread.
void copy_sequence_steps(const SequenceLayout& l, size_t seq, size_t begin, size_t end,
                         size_t bytes, const char* from, char* to, bool from_dense) {
  for (size_t t = begin; t < end; ++t) {
    const size_t dense = t * bytes, row = l.row(seq, t) * bytes;
    std::memcpy(to + (from_dense ? row : dense), from + (from_dense ? dense : row), bytes);
  }
}
}  // namespace

// The sequences split across threads when the copy is large (a minibatch of long sequences is
// tens of MB, where one thread's memcpy leaves bandwidth unused); each row is written once.
void copy_steps(const SequenceLayout& l, size_t T, size_t bytes, const void* from, void* to,
                bool from_padded) {
  const char* src = static_cast<const char*>(from);
  char* dst = static_cast<char*>(to);
  const size_t n = l.num_sequences();
  for_each_piece(n, std::min(n, byte_pieces(n * T * bytes)), [&](size_t, size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b) {
      const size_t padded = b * T * bytes;  // sequence b's first step in the padded buffer
      copy_sequence_steps(l, b, 0, l.lengths[b], bytes, src + (from_padded ? padded : 0),
                          dst + (from_padded ? 0 : padded), from_padded);
    }
  });
}

void copy_sequence(const SequenceLayout& l, size_t seq, size_t bytes, const void* from, void* to,
                   bool from_dense) {
  const size_t length = l.lengths.at(seq);
  for_each_piece(length, std::min(length, byte_pieces(length * bytes)),
                 [&](size_t, size_t begin, size_t end) {
                   copy_sequence_steps(l, seq, begin, end, bytes, static_cast<const char*>(from),
                                       static_cast<char*>(to), from_dense);
                 });
}

}  // namespace loom
