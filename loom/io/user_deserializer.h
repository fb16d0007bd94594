// UserDeserializer: a deserializer whose data comes from code the program writes (CNTK's
// cntk.io.UserDeserializer), read through the ordinary MinibatchSource, so chunk
// randomization, windows, frame mode, truncation, partitions, checkpoints and sweeps behave as
// for files. A subclass says which streams it delivers, how many chunks it has and what each
// chunk holds:
//
//   class Squares : public UserDeserializer {
//     std::vector<StreamInformation> declared_stream_infos() override { return {x}; }
//     size_t num_chunks() override { return 4; }
//     DataStreams get_chunk(size_t id) override { return {{"x", samples_of_chunk(id)}}; }
//   };
//
// A chunk holds, for every declared stream, a DataArray (minibatch_source_from_data.h): a
// dense [N, sample...] or CSR [N, dim] array (sample mode: N sequences of one sample) or a
// sequence Value (sequence mode); all streams hold equally many sequences. get_chunk must give
// the same data whenever it is asked for a chunk: the source asks for each chunk once when it
// is made (to learn the sequences' lengths, as CNTK's randomizer does) and again whenever it
// reads the chunk, from its reader threads, possibly several chunks at once.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/io/deserializer.h"
#include "loom/io/minibatch_source_from_data.h"

namespace loom {

class UserDeserializer : public Deserializer {
 public:
  // What a subclass implements: its streams (at least one; names unique; stream ids are their
  // positions), its number of chunks (at least one), and the data of chunk `chunk_id`.
  virtual std::vector<StreamInformation> declared_stream_infos() = 0;
  virtual size_t num_chunks() = 0;
  virtual DataStreams get_chunk(size_t chunk_id) = 0;

  // Deserializer. The first call of either of the first two asks the subclass for its streams,
  // its chunks and each chunk's data (ArgumentError or DataError naming the method and the
  // chunk when they do not fit together).
  const std::vector<StreamInformation>& stream_infos() const override;
  const std::vector<ChunkInfo>& chunk_infos() const override;
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override;
  // get_chunk(chunk), checked against the streams and the lengths first seen (DataError naming
  // the chunk and the stream otherwise).
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;

 protected:
  // The streams as declared, for get_chunk (which must not call stream_infos(): the first call
  // of that asks for the chunks).
  const std::vector<StreamInformation>& declared_streams() const { return streams_; }

 private:
  void describe() const;
  std::shared_ptr<Chunk> checked_chunk(size_t chunk, bool first_time);

  mutable std::once_flag described_;
  mutable std::vector<StreamInformation> streams_;
  mutable std::vector<ChunkInfo> chunk_infos_;
  mutable std::vector<std::vector<SequenceInfo>> sequences_;  // by chunk
};

}  // namespace loom
