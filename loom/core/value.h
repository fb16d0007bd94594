// Value: the data bound to a variable for one evaluation: a batch of samples [B, sample...]
// or a batch of variable-length sequences, either padded to [B, T, sample...] with an NDMask
// saying which positions are real (CNTK's form), or packed: only the real steps, as rows
// [sum of lengths, sample...] in SequenceLayout's order, which the executor reads in place.
// Sparse data (e.g. one-hot) keeps CSR storage, one row per position, and is never packed.
// A Value's data is not written once made (copies share it; a packed Value's padded form is
// derived from its rows).
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/mask.h"
#include "loom/core/ndarray_view.h"
#include "loom/core/sequence_layout.h"

namespace loom {

class Value {
 public:
  // data is [B, sample...] when !is_sequence, else [B, T, sample...]; a sequence value
  // without a mask has all sequences of full length T.
  Value(NDArrayView data, bool is_sequence, std::optional<NDMask> mask = std::nullopt);

  // A batch of samples from row-major data holding B * sample_shape.total_size() values.
  template <typename T>
  static Value create_batch(const NDShape& sample_shape, const std::vector<T>& data);
  // Sequences held packed: dense rows [layout.rows(), sample...] in the order of layout (from
  // SequenceLayout::from_lengths; layout.begins says which sequences start in this minibatch).
  static Value packed(NDArrayView rows, SequenceLayout layout);
  // The same with a layout shared with its other users (the executor, other Values).
  static Value packed(NDArrayView rows, std::shared_ptr<const SequenceLayout> layout);
  // A batch of sequences, packed; each inner vector holds length * sample_shape.total_size()
  // values.
  template <typename T>
  static Value create_sequences(const NDShape& sample_shape,
                                const std::vector<std::vector<T>>& sequences);
  // Sequences of the given lengths, packed, from row-major data holding their steps back to
  // back (sum(lengths) * sample_shape.total_size() values).
  template <typename T>
  static Value create_sequences(const NDShape& sample_shape, const std::vector<T>& data,
                                const std::vector<size_t>& lengths);
  // A batch of sequences from one tensor per sequence, [length, sample...], as CNTK's
  // Value.create takes a list of arrays or of CSR matrices: all dense, or all sparse CSR (one
  // CSR row per position of the last axis), of one data type and sample shape. A false
  // sequence_starts[i] marks sequence i as the continuation of one cut off by the previous
  // minibatch (its mask begins Valid, not SequenceBegin); empty means all begin here. Dense
  // sequences are packed.
  static Value create(const std::vector<NDArrayView>& sequences,
                      const std::vector<bool>& sequence_starts = {});
  // Sparse one-hot samples of dimension dim, one per index; kOneHotSkip gives a zero vector.
  static Value one_hot(size_t dim, const std::vector<size_t>& indices,
                       DataType dtype = DataType::Float32);
  // Sparse one-hot sequences: one index per position (kOneHotSkip: a zero vector).
  static Value one_hot_sequences(size_t dim, const std::vector<std::vector<size_t>>& sequences,
                                 DataType dtype = DataType::Float32);
  // The index one_hot turns into a zero vector (CNTK's Value.ONE_HOT_SKIP).
  static constexpr size_t kOneHotSkip = static_cast<size_t>(-1);

  // [B, sample...], or padded sequences [B, T, sample...]: a packed Value pads its rows on the
  // first call (from any thread), once for all its copies.
  const NDArrayView& data() const;
  // data()'s shape, without padding a packed Value: [B, T (the longest sequence), sample...].
  NDShape shape() const;
  DataType dtype() const { return data_.dtype(); }
  DeviceDescriptor device() const { return data_.device(); }
  bool is_sequence() const { return is_sequence_; }
  bool is_sparse() const { return data_.is_sparse(); }
  // The padded data's mask (a packed Value makes it on the first call, as data()).
  const std::optional<NDMask>& mask() const;
  bool is_packed() const { return packed_ != nullptr; }
  // Whether this packed Value has made its padded form (data() was asked for, of any copy);
  // false for a Value that is not packed (its data are its own). Readers of the shape, the
  // lengths, one sequence or the rows leave it unmade.
  bool has_padded_form() const;
  // A packed Value's rows [number_of_samples(), sample...] (StateError for another Value).
  const NDArrayView& packed_rows() const;
  // A packed Value's layout, which the executor takes as it is (StateError for another Value).
  const std::shared_ptr<const SequenceLayout>& packed_layout() const;
  NDShape sample_shape() const { return data_.shape().sub_shape(is_sequence_ && !packed_ ? 2 : 1); }
  size_t num_sequences() const;
  size_t max_sequence_length() const;
  size_t sequence_length(size_t seq) const;
  // Whether sequence seq starts in this minibatch (not continuing one cut off by the previous).
  bool begins_sequence(size_t seq) const;
  std::vector<size_t> sequence_lengths() const;
  // Number of real (unmasked) samples: the count the loss is summed over.
  size_t number_of_samples() const;

  // Sequence b's steps [length, sample...] (a batch's sample b: [1, sample...]), padding
  // dropped, densified, in storage of its own.
  NDArrayView sequence(size_t b) const;
  // Each sequence's (or sample's) values, as sequence(b) gives them.
  template <typename T>
  std::vector<std::vector<T>> as_sequences() const;

  // Sample i (a sequence value: sequence i, padded to [T, sample...]), as data()[i].
  NDArrayView operator[](size_t i) const { return data()[i]; }
  // For each sample, padding skipped, the position of its largest element: the predicted
  // classes of a batch of scores (seed 002's `[z[i,:].argmax() for i in range(len(z))]`).
  std::vector<size_t> argmax() const;
  // The data as numpy prints it (NDArrayView::to_string).
  std::string to_string() const { return data().to_string(); }

 private:
  struct Packed;  // the layout, and the padded form once made

  NDArrayView data_;  // as data() gives it, or a packed Value's rows
  bool is_sequence_;
  std::optional<NDMask> mask_;
  std::shared_ptr<Packed> packed_;  // shared by copies
};

std::ostream& operator<<(std::ostream& out, const Value& v);

}  // namespace loom
