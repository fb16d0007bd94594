// Deserializer: the interface a MinibatchSource reads data through. Data comes in chunks
// (CTF: about chunk_size_bytes of text each), so a randomizer can shuffle chunks and keep
// only a window of them in memory; a chunk holds whole sequences, each stream's samples
// stored contiguously. A deserializer describes its chunks and their sequences without
// loading them, and loads a chunk on request.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "loom/core/error.h"
#include "loom/io/stream.h"

namespace loom {

struct ChunkInfo {
  size_t num_sequences = 0;
  size_t num_samples = 0;
};

struct SequenceInfo {
  // Length in samples: the longest stream, or the stream that defines the minibatch size.
  size_t num_samples = 0;
  // The sequence's id in its source (CTF: the id column, or the line number).
  uint64_t key = 0;
};

// One stream's samples for all sequences of a chunk, in sequence order.
struct StreamChunkData {
  // Sequence i holds samples [sample_begin[i], sample_begin[i + 1]).
  std::vector<size_t> sample_begin{0};
  // Sparse streams: sample s holds entries [nnz_begin[s], nnz_begin[s + 1]) of indices/values.
  // Dense streams: sample s holds values [s * dim, (s + 1) * dim).
  std::vector<size_t> nnz_begin{0};
  std::vector<int32_t> indices;
  // The values, in the stream's dtype: exactly one of the three is used. A dense stream whose
  // values are bytes times a scale (IDX images) may keep the bytes, a quarter of the floats'
  // memory and of the bytes a minibatch gathers: value = T(double(byte) * byte_scale).
  std::vector<float> values_f32;
  std::vector<double> values_f64;
  std::vector<uint8_t> values_u8;
  double byte_scale = 1;

  size_t length(size_t seq) const { return sample_begin[seq + 1] - sample_begin[seq]; }
  // Dense streams: values [first, first + n) as T, whichever way they are kept.
  template <typename T>
  void copy_values(size_t first, size_t n, T* to) const {
    if (values_u8.empty()) {
      std::copy_n(values<T>().begin() + first, n, to);
      return;
    }
    const uint8_t* from = values_u8.data() + first;
    const double scale = byte_scale;
    for (size_t i = 0; i < n; ++i) to[i] = T(double(from[i]) * scale);  // vectorizes
  }
  // Dense streams: the memory that holds values [first, first + n).
  template <typename T>
  std::span<const std::byte> value_bytes(size_t first, size_t n) const {
    if (values_u8.empty()) return std::as_bytes(std::span(values<T>()).subspan(first, n));
    return std::as_bytes(std::span(values_u8).subspan(first, n));
  }
  template <typename T>
  const std::vector<T>& values() const {
    if constexpr (std::is_same_v<T, float>)
      return values_f32;
    else
      return values_f64;
  }
};

struct Chunk {
  std::vector<SequenceInfo> sequences;
  // Indexed by the deserializer's stream id.
  std::vector<StreamChunkData> streams;
};

class Deserializer {
 public:
  virtual ~Deserializer() = default;

  // The streams, in id order (ids 0..n-1).
  virtual const std::vector<StreamInformation>& stream_infos() const = 0;
  virtual const std::vector<ChunkInfo>& chunk_infos() const = 0;
  // The sequences of a chunk, in chunk order, without loading its data.
  virtual std::vector<SequenceInfo> sequence_infos(size_t chunk) const = 0;
  virtual std::shared_ptr<const Chunk> load_chunk(size_t chunk) = 0;
  // The chunk as read in `sweep` (0, 1, ...) by a source of randomization seed `seed`: a
  // deserializer whose data differs from sweep to sweep (random image transforms) overrides
  // this; the others deliver load_chunk(chunk). A MinibatchSource calls it from its reader
  // threads, several chunks at once: it must be safe to call concurrently.
  virtual std::shared_ptr<const Chunk> load_chunk_in_sweep(size_t chunk, size_t sweep,
                                                           uint64_t seed) {
    (void)sweep;
    (void)seed;
    return load_chunk(chunk);
  }
  // Whether load_chunk_in_sweep delivers the same data in every sweep: a MinibatchSource then
  // keeps a chunk from one sweep to the next when the next one's window reads it, instead of
  // loading it again.
  virtual bool same_in_every_sweep() const { return true; }
  // Whether stream `stream` holds samples, one per sequence, rather than sequences: a
  // MinibatchSource delivers such a stream as a batch [N, sample...] (CNTK's
  // MinibatchSourceFromData over arrays). Files' deserializers hold sequences, a sample being a
  // sequence of one step, delivered [N, T, sample...] as CNTK's readers deliver them.
  virtual bool holds_samples(size_t stream) const {
    (void)stream;
    return false;
  }

  size_t number_of_sequences() const {
    size_t n = 0;
    for (const ChunkInfo& c : chunk_infos()) n += c.num_sequences;
    return n;
  }
};

}  // namespace loom
