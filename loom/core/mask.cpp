#include "loom/core/mask.h"

#include "loom/core/error.h"

namespace loom {

NDMask::NDMask(size_t num_sequences, size_t max_length)
    : rows_(num_sequences), cols_(max_length), kinds_(num_sequences * max_length, MaskKind::Valid) {
  if (max_length)
    for (size_t s = 0; s < rows_; ++s) set(s, 0, MaskKind::SequenceBegin);
}

NDMask NDMask::of_lengths(const std::vector<size_t>& lengths, size_t max_length,
                          const std::vector<bool>& begins) {
  NDMask mask(lengths.size(), max_length);
  for (size_t b = 0; b < lengths.size(); ++b) {
    mask.invalidate_from(b, lengths[b]);
    if (!begins.empty() && !begins[b] && lengths[b] > 0) mask.set(b, 0, MaskKind::Valid);
  }
  return mask;
}

void NDMask::invalidate_from(size_t seq, size_t pos) {
  LOOM_CHECK(seq < rows_ && pos <= cols_, ArgumentError, "invalidate_from(", seq, ", ", pos,
             ") is outside a mask of ", rows_, " sequences of length ", cols_);
  for (size_t t = pos; t < cols_; ++t) set(seq, t, MaskKind::Invalid);
}

size_t NDMask::sequence_length(size_t seq) const {
  size_t n = 0;
  while (n < cols_ && at(seq, n) != MaskKind::Invalid) ++n;
  return n;
}

}  // namespace loom
