// Value: the data bound to a variable for one evaluation: a batch of samples [B, sample...]
// or a batch of variable-length sequences padded to [B, T, sample...] with an NDMask saying
// which positions are real. Sparse data (e.g. one-hot) keeps CSR storage, one row per position.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/mask.h"
#include "loom/core/ndarray_view.h"

namespace loom {

class Value {
 public:
  // data is [B, sample...] when !is_sequence, else [B, T, sample...]; a sequence value
  // without a mask has all sequences of full length T.
  Value(NDArrayView data, bool is_sequence, std::optional<NDMask> mask = std::nullopt);

  // A batch of samples from row-major data holding B * sample_shape.total_size() values.
  template <typename T>
  static Value create_batch(const NDShape& sample_shape, const std::vector<T>& data);
  // A batch of sequences; each inner vector holds length * sample_shape.total_size() values.
  template <typename T>
  static Value create_sequences(const NDShape& sample_shape,
                                const std::vector<std::vector<T>>& sequences);
  // Sequences of the given lengths from row-major data holding their steps back to back
  // (sum(lengths) * sample_shape.total_size() values).
  template <typename T>
  static Value create_sequences(const NDShape& sample_shape, const std::vector<T>& data,
                                const std::vector<size_t>& lengths);
  // A batch of sequences from one tensor per sequence, [length, sample...], as CNTK's
  // Value.create takes a list of arrays or of CSR matrices: all dense, or all sparse CSR (one
  // CSR row per position of the last axis), of one data type and sample shape. A false
  // sequence_starts[i] marks sequence i as the continuation of one cut off by the previous
  // minibatch (its mask begins Valid, not SequenceBegin); empty means all begin here.
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

  const NDArrayView& data() const { return data_; }
  DataType dtype() const { return data_.dtype(); }
  bool is_sequence() const { return is_sequence_; }
  bool is_sparse() const { return data_.is_sparse(); }
  const std::optional<NDMask>& mask() const { return mask_; }
  NDShape sample_shape() const { return data_.shape().sub_shape(is_sequence_ ? 2 : 1); }
  size_t num_sequences() const { return data_.shape()[0]; }
  size_t max_sequence_length() const { return is_sequence_ ? data_.shape()[1] : 1; }
  size_t sequence_length(size_t seq) const;
  std::vector<size_t> sequence_lengths() const;
  // Number of real (unmasked) samples: the count the loss is summed over.
  size_t number_of_samples() const;

  // Each sequence's (or sample's) values, padding dropped, densified.
  template <typename T>
  std::vector<std::vector<T>> as_sequences() const;

  // Sample i (a sequence value: sequence i, padded to [T, sample...]), as data()[i].
  NDArrayView operator[](size_t i) const { return data_[i]; }
  // For each sample, padding skipped, the position of its largest element: the predicted
  // classes of a batch of scores (seed 002's `[z[i,:].argmax() for i in range(len(z))]`).
  std::vector<size_t> argmax() const;
  // The data as numpy prints it (NDArrayView::to_string).
  std::string to_string() const { return data_.to_string(); }

 private:
  NDArrayView data_;
  bool is_sequence_;
  std::optional<NDMask> mask_;
};

std::ostream& operator<<(std::ostream& out, const Value& v);

}  // namespace loom
