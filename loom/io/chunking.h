// Helpers of the in-memory deserializers (IDX files, MinibatchSourceFromData): how they cut
// their sequences into chunks, and how they fill a chunk. Both follow one rule, so the same data
// read either way gets the same chunks and therefore, for the same seed, the same randomized
// minibatches.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "loom/io/deserializer.h"

namespace loom {

struct ChunkingOptions {
  // Target size of a chunk's delivered data (CNTK's 32 MB); used when sequences_per_chunk is 0.
  size_t chunk_size_bytes = size_t{32} << 20;
  // Sequences per chunk (the last chunk may hold fewer); 0: derived from chunk_size_bytes.
  size_t sequences_per_chunk = 0;
};

// Chunks of consecutive sequences. total_bytes is the size of all delivered data (dense: the
// values; sparse: indices and values), spread evenly over the sequences for the byte rule.
inline size_t sequences_per_chunk(const ChunkingOptions& options, size_t num_sequences,
                                  size_t total_bytes) {
  LOOM_CHECK(options.chunk_size_bytes > 0 || options.sequences_per_chunk > 0, ArgumentError,
             "chunking: chunk_size_bytes or sequences_per_chunk must be positive");
  if (options.sequences_per_chunk > 0) return options.sequences_per_chunk;
  size_t bytes_per_sequence = std::max<size_t>(1, total_bytes / std::max<size_t>(1, num_sequences));
  return std::max<size_t>(1, options.chunk_size_bytes / bytes_per_sequence);
}

// The ChunkInfos of num_sequences sequences of the given lengths (empty: all of length 1), per
// chunks of `per_chunk` consecutive sequences.
inline std::vector<ChunkInfo> make_chunks(size_t num_sequences, size_t per_chunk,
                                          const std::vector<size_t>& lengths = {}) {
  std::vector<ChunkInfo> chunks;
  for (size_t first = 0; first < num_sequences; first += per_chunk) {
    ChunkInfo c;
    c.num_sequences = std::min(per_chunk, num_sequences - first);
    for (size_t s = first; s < first + c.num_sequences; ++s)
      c.num_samples += lengths.empty() ? 1 : lengths[s];
    chunks.push_back(c);
  }
  return chunks;
}

// The value vector of a chunk's stream that holds T (deserializer.h: exactly one is used).
template <typename T>
std::vector<T>& values_of(StreamChunkData& d) {
  if constexpr (std::is_same_v<T, float>)
    return d.values_f32;
  else
    return d.values_f64;
}

}  // namespace loom
