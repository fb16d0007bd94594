// SequenceLayout: how a minibatch of variable-length sequences lies packed, without padding:
// one row per (sequence, step), time-major, sequences sorted by decreasing length (stable), as
// in PyTorch's PackedSequence. Step t of all sequences still running is one contiguous block,
// which is what a recurrent loop needs. The order depends on the lengths alone. A layout held by
// a shared_ptr (the executor's, a packed Value's) is shared by the Values made on it
// (shared_from_this) rather than copied.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace loom {

struct SequenceLayout : std::enable_shared_from_this<SequenceLayout> {
  // Declared, so that `SequenceLayout x = {}` value-initializes (an aggregate's {} would need
  // enable_shared_from_this's protected constructor).
  SequenceLayout() = default;

  std::vector<size_t> lengths;       // per sequence, in the minibatch's order
  std::vector<size_t> order;         // rank -> sequence, by decreasing length (stable)
  std::vector<size_t> rank_of;       // sequence -> rank
  std::vector<size_t> step_offsets;  // first row of step t; max_length + 1 entries
  std::vector<bool> begins;          // per sequence: starts in this minibatch (not a continuation)

  // A layout for sequences of the given lengths; all begin unless begins is given.
  static SequenceLayout from_lengths(std::vector<size_t> lengths, std::vector<bool> begins = {});

  size_t num_sequences() const { return lengths.size(); }
  size_t rows() const { return step_offsets.back(); }
  size_t max_length() const { return step_offsets.size() - 1; }
  // Row of step t of sequence seq (t < lengths[seq]).
  size_t row(size_t seq, size_t t) const { return step_offsets[t] + rank_of[seq]; }
  // Sequences still running at step t (they are the ranks 0..active(t)-1).
  size_t active(size_t t) const { return step_offsets[t + 1] - step_offsets[t]; }
  bool same_shape_as(const SequenceLayout& o) const { return lengths == o.lengths; }
};

// Copies every step of every sequence of l, samples of `bytes`, from a padded buffer
// [sequence, T, sample] into l's packed rows when from_padded, else from the rows into the
// padded buffer (whose padding it leaves as it is).
void copy_steps(const SequenceLayout& l, size_t T, size_t bytes, const void* from, void* to,
                bool from_padded);
// Copies the steps of sequence seq of l, samples of `bytes`, from a dense buffer holding them back
// to back [length, sample] into l's packed rows when from_dense, else from the rows into the
// dense buffer; a long sequence splits over threads.
void copy_sequence(const SequenceLayout& l, size_t seq, size_t bytes, const void* from, void* to,
                   bool from_dense);

}  // namespace loom
