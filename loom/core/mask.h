// NDMask: which positions of a padded batch of sequences [B, T] hold data. A sequence
// occupies positions 0..length-1 of its row; the rest are Invalid padding. The first
// position is SequenceBegin, or just Valid when the sequence continues one cut off by the
// previous minibatch (truncated back-propagation through time), so recurrent state carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom {

enum class MaskKind : uint8_t { Invalid = 0, Valid = 1, SequenceBegin = 2 };

class NDMask {
 public:
  // num_sequences rows of max_length positions, all valid, each starting a sequence.
  NDMask(size_t num_sequences, size_t max_length);
  // Sequences of the given lengths padded to max_length, each starting (SequenceBegin) unless
  // begins says it continues (then its first position, if any, is Valid); empty begins: all
  // start.
  static NDMask of_lengths(const std::vector<size_t>& lengths, size_t max_length,
                           const std::vector<bool>& begins = {});

  size_t num_sequences() const { return rows_; }
  size_t max_length() const { return cols_; }
  MaskKind at(size_t seq, size_t pos) const { return kinds_[seq * cols_ + pos]; }
  void set(size_t seq, size_t pos, MaskKind kind) { kinds_[seq * cols_ + pos] = kind; }
  // Marks positions [pos, max_length) of a sequence as padding.
  void invalidate_from(size_t seq, size_t pos);
  // Number of valid positions of a sequence (they are a prefix of its row).
  size_t sequence_length(size_t seq) const;
  // Whether a sequence starts in this minibatch; true for every sequence of a mask without
  // positions (a batch of empty sequences).
  bool begins_sequence(size_t seq) const {
    return cols_ == 0 || at(seq, 0) == MaskKind::SequenceBegin;
  }
  const std::vector<MaskKind>& kinds() const { return kinds_; }

  bool operator==(const NDMask&) const = default;

 private:
  size_t rows_, cols_;
  std::vector<MaskKind> kinds_;
};

}  // namespace loom
