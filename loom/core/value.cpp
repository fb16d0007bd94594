#include "loom/core/value.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>

#include "loom/core/threads.h"

namespace loom {

struct Value::Packed {
  std::shared_ptr<const SequenceLayout> layout;
  std::once_flag padded_once, mask_once;
  std::optional<NDArrayView> padded;
  std::atomic<bool> padded_made{false};  // padded is set (readable without the once_flag)
  std::optional<NDMask> mask;
};

Value::Value(NDArrayView data, bool is_sequence, std::optional<NDMask> mask)
    : data_(std::move(data)), is_sequence_(is_sequence), mask_(std::move(mask)) {
  const NDShape& s = data_.shape();
  LOOM_CHECK(s.rank() >= (is_sequence ? 2u : 1u), ShapeError, "Value: data of shape ",
             s.to_string(), " has no ", is_sequence ? "[batch, sequence]" : "batch",
             " axes in front of the sample shape");
  if (mask_) {
    LOOM_CHECK(is_sequence, ShapeError, "Value: a mask needs sequence data");
    LOOM_CHECK(mask_->num_sequences() == s[0] && mask_->max_length() == s[1], ShapeError,
               "Value: mask of ", mask_->num_sequences(), "x", mask_->max_length(),
               " does not match data of shape ", s.to_string());
    for (size_t b = 0; b < s[0]; ++b) {
      size_t len = mask_->sequence_length(b);
      for (size_t t = len; t < s[1]; ++t)
        LOOM_CHECK(mask_->at(b, t) == MaskKind::Invalid, ShapeError, "Value: sequence ", b,
                   " has a valid position after padding at ", len);
    }
  }
}

Value Value::packed(NDArrayView rows, SequenceLayout layout) {
  return packed(std::move(rows), std::make_shared<const SequenceLayout>(std::move(layout)));
}

Value Value::packed(NDArrayView rows, std::shared_ptr<const SequenceLayout> layout) {
  LOOM_CHECK(layout, ArgumentError, "Value::packed: no layout");
  LOOM_CHECK(!rows.is_sparse(), ArgumentError,
             "Value::packed: sparse rows (only dense sequences are packed)");
  LOOM_CHECK(rows.shape().rank() >= 1 && rows.shape()[0] == layout->rows(), ShapeError,
             "Value::packed: rows of shape ", rows.shape().to_string(), " are not the ",
             layout->rows(), " steps of the layout's sequences");
  LOOM_CHECK(layout->begins.size() == layout->num_sequences(), ArgumentError,
             "Value::packed: ", layout->begins.size(), " sequence starts for ",
             layout->num_sequences(), " sequences");
  Value v(std::move(rows), false);
  v.is_sequence_ = true;
  v.packed_ = std::make_shared<Packed>();
  v.packed_->layout = std::move(layout);
  return v;
}

const NDArrayView& Value::data() const {
  if (!packed_) return data_;
  std::call_once(packed_->padded_once, [&] {
    const SequenceLayout& l = *packed_->layout;
    NDArrayView padded(dtype(), shape());
    copy_steps(l, l.max_length(), sample_shape().total_size() * size_of(dtype()), data_.raw_data(),
               padded.raw_data(), false);
    packed_->padded = std::move(padded);
    packed_->padded_made = true;
  });
  return *packed_->padded;
}

bool Value::has_padded_form() const {
  return packed_ && packed_->padded_made;
}

NDShape Value::shape() const {
  if (!packed_) return data_.shape();
  return sample_shape().prepend(max_sequence_length()).prepend(num_sequences());
}

const std::optional<NDMask>& Value::mask() const {
  if (!packed_) return mask_;
  std::call_once(packed_->mask_once, [&] {
    const SequenceLayout& l = *packed_->layout;
    packed_->mask = NDMask::of_lengths(l.lengths, l.max_length(), l.begins);
  });
  return packed_->mask;
}

const NDArrayView& Value::packed_rows() const {
  LOOM_CHECK(packed_, StateError, "packed_rows of a Value that is not packed (is_packed())");
  return data_;
}

const std::shared_ptr<const SequenceLayout>& Value::packed_layout() const {
  LOOM_CHECK(packed_, StateError, "packed_layout of a Value that is not packed (is_packed())");
  return packed_->layout;
}

size_t Value::num_sequences() const {
  return packed_ ? packed_->layout->num_sequences() : data_.shape()[0];
}

size_t Value::max_sequence_length() const {
  if (packed_) return packed_->layout->max_length();
  return is_sequence_ ? data_.shape()[1] : 1;
}

bool Value::begins_sequence(size_t seq) const {
  if (packed_) return packed_->layout->begins.at(seq);
  return !mask_ || mask_->begins_sequence(seq);
}

namespace {
// Dense sequences packed: the steps of sequence b lie back to back at steps(b).
Value pack(DataType dtype, const NDShape& sample, std::vector<size_t> lengths,
           std::vector<bool> begins, const std::function<const void*(size_t)>& steps) {
  SequenceLayout l = SequenceLayout::from_lengths(std::move(lengths), std::move(begins));
  NDArrayView rows = NDArrayView::uninitialized(dtype, sample.prepend(l.rows()));
  const size_t bytes = sample.total_size() * size_of(dtype);
  for (size_t b = 0; b < l.num_sequences(); ++b)
    copy_sequence(l, b, bytes, steps(b), rows.raw_data(), true);
  return Value::packed(std::move(rows), std::move(l));
}

// The CSR rows of a sparse sample of this shape: one per position of all axes but the last.
size_t csr_rows_per_sample(const NDShape& sample) {
  size_t rows = 1;
  for (size_t i = 0; i + 1 < sample.rank(); ++i) rows *= sample[i];
  return rows;
}
}  // namespace

template <typename T>
Value Value::create_batch(const NDShape& sample_shape, const std::vector<T>& data) {
  size_t n = sample_shape.total_size();
  LOOM_CHECK(n > 0 && data.size() % n == 0, ShapeError, "create_batch: ", data.size(),
             " values are not a whole number of samples of shape ", sample_shape.to_string());
  return Value(NDArrayView::from_vector<T>(sample_shape.prepend(data.size() / n), data), false);
}

template <typename T>
Value Value::create_sequences(const NDShape& sample_shape,
                              const std::vector<std::vector<T>>& sequences) {
  size_t n = sample_shape.total_size();
  std::vector<size_t> lengths;
  for (size_t b = 0; b < sequences.size(); ++b) {
    LOOM_CHECK(n > 0 && sequences[b].size() % n == 0, ShapeError, "create_sequences: sequence ", b,
               " has ", sequences[b].size(), " values, not a whole number of samples of shape ",
               sample_shape.to_string());
    lengths.push_back(sequences[b].size() / n);
  }
  return pack(data_type_of<T>(), sample_shape, std::move(lengths), {},
              [&](size_t b) { return sequences[b].data(); });
}

template <typename T>
Value Value::create_sequences(const NDShape& sample_shape, const std::vector<T>& data,
                              const std::vector<size_t>& lengths) {
  const size_t n = sample_shape.total_size();
  std::vector<size_t> first{0};  // each sequence's first step
  for (size_t len : lengths) first.push_back(first.back() + len);
  LOOM_CHECK(first.back() * n == data.size(), ShapeError, "create_sequences: ", data.size(),
             " values are not the ", first.back(), " steps of shape ", sample_shape.to_string(),
             " that the lengths add up to");
  return pack(data_type_of<T>(), sample_shape, lengths, {},
              [&](size_t b) { return data.data() + first[b] * n; });
}

namespace {
// The CSR parts of sparse sequences [length, sample...] stacked into [N, T_max, sample...], the
// padding as empty rows.
template <typename T>
NDArrayView stack_sparse(const std::vector<NDArrayView>& sequences, const NDShape& shape,
                         size_t rows_per_step) {
  std::vector<int32_t> offsets{0}, cols;
  std::vector<T> values;
  const size_t padded_rows = shape[1] * rows_per_step;
  for (const NDArrayView& s : sequences) {
    const auto& off = s.csr_row_offsets();
    const auto& col = s.csr_col_indices();
    const T* v = s.csr_values<T>();
    for (size_t r = 0; r + 1 < off.size(); ++r) {
      for (int32_t k = off[r]; k < off[r + 1]; ++k) {
        cols.push_back(col[size_t(k)]);
        values.push_back(v[k]);
      }
      offsets.push_back(int32_t(cols.size()));
    }
    offsets.resize(offsets.size() + padded_rows - s.csr_rows(), int32_t(cols.size()));
  }
  return NDArrayView::sparse_csr<T>(shape, std::move(offsets), std::move(cols), values);
}
}  // namespace

Value Value::create(const std::vector<NDArrayView>& sequences,
                    const std::vector<bool>& sequence_starts) {
  LOOM_CHECK(!sequences.empty(), ArgumentError,
             "Value::create: no sequences (the sample shape comes from them)");
  LOOM_CHECK(sequence_starts.empty() || sequence_starts.size() == sequences.size(), ArgumentError,
             "Value::create: ", sequence_starts.size(), " sequence starts for ", sequences.size(),
             " sequences");
  const NDArrayView& first = sequences[0];
  LOOM_CHECK(first.shape().rank() >= 1, ShapeError,
             "Value::create: sequence 0 has no length axis (shape ", first.shape().to_string(),
             ")");
  const NDShape sample = first.shape().sub_shape(1);
  LOOM_CHECK(!first.is_sparse() || sample.rank() >= 1, ShapeError,
             "Value::create: sparse sequences need a sample axis (sequence 0 has shape ",
             first.shape().to_string(), ")");
  std::vector<size_t> lengths;
  for (size_t b = 0; b < sequences.size(); ++b) {
    const NDArrayView& s = sequences[b];
    LOOM_CHECK(s.shape().rank() >= 1 && s.shape().sub_shape(1) == sample &&
                   s.dtype() == first.dtype() && s.is_sparse() == first.is_sparse(),
               ShapeError, "Value::create: sequence ", b, " is ", s.is_sparse() ? "sparse " : "",
               loom::to_string(s.dtype()), " of shape ", s.shape().to_string(),
               " but sequence 0 is ", first.is_sparse() ? "sparse " : "",
               loom::to_string(first.dtype()), " of shape ", first.shape().to_string(),
               ": all need one type and sample shape [length, ", sample.to_string(), "...]");
    lengths.push_back(s.shape()[0]);
  }
  if (!first.is_sparse())
    return pack(first.dtype(), sample, std::move(lengths), sequence_starts,
                [&](size_t b) { return sequences[b].raw_data(); });
  const size_t max_len = *std::max_element(lengths.begin(), lengths.end());
  NDArrayView data = dispatch(first.dtype(), [&](auto zero) {
    return stack_sparse<decltype(zero)>(sequences, sample.prepend(max_len).prepend(lengths.size()),
                                        csr_rows_per_sample(sample));
  });
  return Value(std::move(data), true, NDMask::of_lengths(lengths, max_len, sequence_starts));
}

namespace {
template <typename T>
NDArrayView one_hot_rows(size_t dim, size_t rows,
                         const std::vector<const std::vector<size_t>*>& seqs, size_t max_len,
                         const NDShape& shape) {
  std::vector<int32_t> offsets(rows + 1, 0), cols;
  std::vector<T> values;
  size_t r = 0;
  for (const auto* seq : seqs) {
    for (size_t t = 0; t < max_len; ++t, ++r) {
      if (t < seq->size() && (*seq)[t] != Value::kOneHotSkip) {
        size_t idx = (*seq)[t];
        LOOM_CHECK(idx < dim, ArgumentError, "one_hot: index ", idx,
                   " is out of range for dimension ", dim);
        cols.push_back(static_cast<int32_t>(idx));
        values.push_back(T(1));
      }
      offsets[r + 1] = static_cast<int32_t>(cols.size());
    }
  }
  return NDArrayView::sparse_csr<T>(shape, std::move(offsets), std::move(cols), values);
}
}  // namespace

Value Value::one_hot(size_t dim, const std::vector<size_t>& indices, DataType dtype) {
  std::vector<std::vector<size_t>> singles;
  singles.reserve(indices.size());
  for (size_t i : indices) singles.push_back({i});
  std::vector<const std::vector<size_t>*> seqs;
  for (auto& s : singles) seqs.push_back(&s);
  NDShape shape{indices.size(), dim};
  return Value(dispatch(dtype,
                        [&](auto zero) {
                          return one_hot_rows<decltype(zero)>(dim, indices.size(), seqs, 1, shape);
                        }),
               false);
}

Value Value::one_hot_sequences(size_t dim, const std::vector<std::vector<size_t>>& sequences,
                               DataType dtype) {
  size_t max_len = 0;
  std::vector<const std::vector<size_t>*> seqs;
  for (auto& s : sequences) {
    max_len = std::max(max_len, s.size());
    seqs.push_back(&s);
  }
  NDShape shape{sequences.size(), max_len, dim};
  NDArrayView data = dispatch(dtype, [&](auto zero) {
    return one_hot_rows<decltype(zero)>(dim, sequences.size() * max_len, seqs, max_len, shape);
  });
  std::vector<size_t> lengths;
  for (const auto& s : sequences) lengths.push_back(s.size());
  return Value(std::move(data), true, NDMask::of_lengths(lengths, max_len));
}

size_t Value::sequence_length(size_t seq) const {
  if (!is_sequence_) return 1;
  if (packed_) return packed_->layout->lengths.at(seq);
  return mask_ ? mask_->sequence_length(seq) : data_.shape()[1];
}

std::vector<size_t> Value::sequence_lengths() const {
  if (packed_) return packed_->layout->lengths;
  std::vector<size_t> out(num_sequences());
  for (size_t b = 0; b < out.size(); ++b) out[b] = sequence_length(b);
  return out;
}

size_t Value::number_of_samples() const {
  if (!is_sequence_) return num_sequences();
  if (packed_) return packed_->layout->rows();
  size_t n = 0;
  for (size_t b = 0; b < num_sequences(); ++b) n += sequence_length(b);
  return n;
}

std::vector<size_t> Value::argmax() const {
  const size_t n = sample_shape().total_size();
  std::vector<size_t> out;
  for (const auto& sequence : as_sequences<double>())
    for (auto it = sequence.begin(); it != sequence.end(); it += ptrdiff_t(n))
      out.push_back(size_t(std::max_element(it, it + ptrdiff_t(n)) - it));
  return out;
}

std::ostream& operator<<(std::ostream& out, const Value& v) {
  return out << v.to_string();
}

NDArrayView Value::sequence(size_t b) const {
  LOOM_CHECK(b < num_sequences(), ArgumentError, "sequence ", b, " of a Value of ", num_sequences(),
             is_sequence_ ? " sequences" : " samples");
  const NDShape sample = sample_shape(), steps = sample.prepend(sequence_length(b));
  const size_t bytes = sample.total_size() * size_of(dtype());
  if (packed_) {
    NDArrayView out = NDArrayView::uninitialized(dtype(), steps);
    copy_sequence(*packed_->layout, b, bytes, data_.raw_data(), out.raw_data(), false);
    return out;
  }
  const size_t first = b * max_sequence_length();  // the position of its first step in data_
  if (!is_sparse()) {
    // Its steps lie back to back.
    NDArrayView out = NDArrayView::uninitialized(dtype(), steps);
    copy_bytes(out.raw_data(), static_cast<const char*>(data_.raw_data()) + first * bytes,
               steps[0] * bytes);
    return out;
  }
  NDArrayView out = NDArrayView::uninitialized(dtype(), steps);
  const size_t per_step = csr_rows_per_sample(sample);
  data_.csr_rows_to_dense(first * per_step, steps[0] * per_step, out.raw_data());
  return out;
}

template <typename T>
std::vector<std::vector<T>> Value::as_sequences() const {
  std::vector<std::vector<T>> out(num_sequences());
  for (size_t b = 0; b < out.size(); ++b) out[b] = sequence(b).to_vector<T>();
  return out;
}

#define LOOM_INSTANTIATE(T)                                                                      \
  template Value Value::create_batch<T>(const NDShape&, const std::vector<T>&);                  \
  template Value Value::create_sequences<T>(const NDShape&, const std::vector<std::vector<T>>&); \
  template Value Value::create_sequences<T>(const NDShape&, const std::vector<T>&,               \
                                            const std::vector<size_t>&);                         \
  template std::vector<std::vector<T>> Value::as_sequences<T>() const;
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom
