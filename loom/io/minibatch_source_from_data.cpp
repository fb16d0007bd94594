#include "loom/io/minibatch_source_from_data.h"

#include <algorithm>

namespace loom {

ArrayDeserializer::ArrayDeserializer(const DataStreams& streams, ChunkingOptions chunking) {
  LOOM_CHECK(!streams.empty(), ArgumentError, "MinibatchSourceFromData: no streams given");
  size_t num_sequences = streams.front().second.value.num_sequences(), total_bytes = 0;
  for (const auto& [name, array] : streams) {
    const Value& v = array.value;
    LOOM_CHECK(!name.empty(), ArgumentError, "MinibatchSourceFromData: a stream has no name");
    for (const StreamInformation& s : streams_)
      LOOM_CHECK(s.name != name, ArgumentError, "MinibatchSourceFromData: stream '", name,
                 "' is given twice");
    LOOM_CHECK(v.num_sequences() == num_sequences, ShapeError, "MinibatchSourceFromData: stream '",
               name, "' holds ", v.num_sequences(), " sequences, stream '", streams.front().first,
               "' holds ", num_sequences, "; all streams must hold equally many");
    // CSR keeps one row per sample only when the sample has a single axis.
    LOOM_CHECK(!v.is_sparse() || v.sample_shape().rank() == 1, ShapeError,
               "MinibatchSourceFromData: sparse stream '", name, "' has samples of shape ",
               v.sample_shape().to_string(), "; sparse samples must be vectors [dim]");
    StreamInformation info;
    info.name = name;
    info.id = streams_.size();
    info.storage = v.is_sparse() ? StorageFormat::SparseCSR : StorageFormat::Dense;
    info.dtype = v.dtype();
    info.sample_shape = v.sample_shape();
    streams_.push_back(std::move(info));
    data_.push_back(v);
    lengths_.push_back(v.sequence_lengths());
    total_bytes += v.is_sparse()
                       ? v.data().nnz() * (sizeof(int32_t) + size_of(v.dtype()))
                       : v.number_of_samples() * v.sample_shape().total_size() * size_of(v.dtype());
  }
  length_.assign(num_sequences, 0);
  for (const auto& lengths : lengths_)
    for (size_t s = 0; s < num_sequences; ++s) length_[s] = std::max(length_[s], lengths[s]);
  for (size_t s = 0; s < num_sequences; ++s)
    LOOM_CHECK(length_[s] > 0, ArgumentError, "MinibatchSourceFromData: sequence ", s,
               " is empty in every stream");
  per_chunk_ = sequences_per_chunk(chunking, num_sequences, total_bytes);
  chunk_infos_ = make_chunks(num_sequences, per_chunk_, length_);
}

std::vector<SequenceInfo> ArrayDeserializer::sequence_infos(size_t chunk) const {
  std::vector<SequenceInfo> out;
  size_t first = chunk * per_chunk_;
  for (size_t s = first; s < first + chunk_infos_.at(chunk).num_sequences; ++s)
    out.push_back({length_[s], s});
  return out;
}

std::shared_ptr<const Chunk> ArrayDeserializer::load_chunk(size_t chunk) {
  auto out = std::make_shared<Chunk>();
  out->sequences = sequence_infos(chunk);
  size_t first = chunk * per_chunk_, last = first + out->sequences.size();
  for (size_t id = 0; id < streams_.size(); ++id) {
    const Value& v = data_[id];
    // A packed stream is read from its rows in its own layout (its padded form is never made).
    const NDArrayView& a = v.is_packed() ? v.packed_rows() : v.data();
    const SequenceLayout* layout = v.is_packed() ? v.packed_layout().get() : nullptr;
    size_t dim = streams_[id].sample_shape.total_size(), max_length = v.max_sequence_length();
    StreamChunkData& d = out->streams.emplace_back();
    dispatch(streams_[id].dtype, [&](auto zero) {
      using T = decltype(zero);
      std::vector<T>& values = values_of<T>(d);
      for (size_t s = first; s < last; ++s) {
        size_t length = lengths_[id][s], row = s * max_length;  // the sequence's first sample
        d.sample_begin.push_back(d.sample_begin.back() + length);
        if (layout) {
          values.resize(values.size() + length * dim);
          copy_sequence(*layout, s, dim * sizeof(T), a.raw_data(),
                        values.data() + values.size() - length * dim, false);
          continue;
        }
        if (!a.is_sparse()) {
          const T* begin = a.data<T>() + row * dim;
          values.insert(values.end(), begin, begin + length * dim);
          continue;
        }
        const std::vector<int32_t>& offsets = a.csr_row_offsets();
        size_t nnz_first = size_t(offsets[row]), nnz_last = size_t(offsets[row + length]);
        for (size_t r = row; r < row + length; ++r)
          d.nnz_begin.push_back(d.nnz_begin.back() + size_t(offsets[r + 1] - offsets[r]));
        d.indices.insert(d.indices.end(), a.csr_col_indices().begin() + ptrdiff_t(nnz_first),
                         a.csr_col_indices().begin() + ptrdiff_t(nnz_last));
        values.insert(values.end(), a.csr_values<T>() + nnz_first, a.csr_values<T>() + nnz_last);
      }
    });
  }
  return out;
}

MinibatchSource MinibatchSourceFromData(const DataStreams& streams, MinibatchSourceConfig config,
                                        ChunkingOptions chunking) {
  return MinibatchSource(std::make_shared<ArrayDeserializer>(streams, chunking), config);
}

}  // namespace loom
