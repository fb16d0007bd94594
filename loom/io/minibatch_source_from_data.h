// MinibatchSourceFromData: in-memory arrays as named streams (CNTK's MinibatchSourceFromData),
// delivered through the ordinary MinibatchSource, so randomization, max_samples, max_sweeps,
// partitions and checkpoints behave exactly as for files:
//
//   MinibatchSource source = MinibatchSourceFromData({{"features", X}, {"labels", Y}},
//                                                    {.randomize = false, .max_samples = 1000});
//
// X is a dense NDArrayView [N, sample...], Y a CSR NDArrayView [N, dim] (e.g. one-hot labels)
// or dense; either may instead be a sequence Value [N, T, sample...] with its mask, for
// variable-length sequences. Sequence i of every stream forms sequence i of the source.
// CNTK's MinibatchSourceFromData reads in order; MinibatchSourceConfig randomizes by default, so
// pass .randomize = false for CNTK's behaviour.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom/io/chunking.h"
#include "loom/io/deserializer.h"
#include "loom/io/minibatch_source.h"

namespace loom {

// One stream's data. The source shares the arrays' storage (no copy is made): leave them
// unchanged while it is in use.
struct DataArray {
  // N samples [N, sample...] (dense) or [N, dim] (CSR): N sequences of one sample each.
  DataArray(NDArrayView samples) : value(std::move(samples), false) {}
  // A batch of samples, or of sequences [N, T, sample...] whose mask gives each length.
  DataArray(Value data) : value(std::move(data)) {}

  Value value;
};

// Stream name -> data, in the order given; the order fixes the stream ids.
using DataStreams = std::vector<std::pair<std::string, DataArray>>;

// A Deserializer over in-memory arrays; chunks of consecutive sequences (chunking.h).
class ArrayDeserializer : public Deserializer {
 public:
  // ArgumentError/ShapeError for no streams, duplicate or empty names, streams holding
  // different numbers of sequences, sparse data with more than one sample axis, or a sequence
  // empty in every stream.
  explicit ArrayDeserializer(const DataStreams& streams, ChunkingOptions chunking = {});

  const std::vector<StreamInformation>& stream_infos() const override { return streams_; }
  const std::vector<ChunkInfo>& chunk_infos() const override { return chunk_infos_; }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override;
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;
  // A stream given as samples (not as a sequence Value) is delivered as a batch.
  bool holds_samples(size_t stream) const override { return !data_.at(stream).is_sequence(); }

 private:
  std::vector<StreamInformation> streams_;
  std::vector<Value> data_;                   // by stream id
  std::vector<size_t> length_;                // by sequence: the longest stream's length
  std::vector<std::vector<size_t>> lengths_;  // by stream, then sequence
  std::vector<ChunkInfo> chunk_infos_;
  size_t per_chunk_ = 1;  // sequences per chunk
};

// A MinibatchSource over an ArrayDeserializer of these streams.
MinibatchSource MinibatchSourceFromData(const DataStreams& streams,
                                        MinibatchSourceConfig config = {},
                                        ChunkingOptions chunking = {});

}  // namespace loom
