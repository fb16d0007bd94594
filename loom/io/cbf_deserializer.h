// CBFDeserializer: reads CNTK Binary Format (CBF) files, as CNTK 2.7's CNTKBinaryReader
// (cntk.io.CBFDeserializer). CNTK's Scripts/ctf2bin.py and loom.io.ctf_to_cbf write them from
// CTF files. The layout, all numbers little-endian:
//
//   offset 0      uint64 magic 0x636e746b5f62696e ("cntk_bin" as a big-endian number; the
//                 file's bytes read "nib_ktnc"), uint32 version 1
//   chunks        one after another, each: a uint32 per sequence (its length in samples: the
//                 longest of its streams), then every stream's sequences, stream after stream:
//                   dense:  uint32 samples, samples * dim values
//                   sparse: uint32 samples, int32 nnz, nnz values, nnz int32 indices (ctf2bin
//                           writes them ascending within a sample; they are delivered as they
//                           are), samples int32 counts (the nnz of each sample)
//                 values are float32 or float64, as the stream's header says
//   header        uint64 magic, uint32 chunks, uint32 streams; per stream: uint8 encoding
//                 (0 dense, 1 sparse), uint32 name length, the name, uint8 element type
//                 (0 float32, 1 float64), uint32 dim
//   chunk table   per chunk: int64 offset of the chunk, uint32 sequences, uint32 samples
//   last 8 bytes  int64 offset of the header
//
// The file's chunks are the deserializer's chunks (CBF fixes them when it is written; chunks
// without sequences are left out), and a sequence's key is its index in the file. Everything
// but the chunks' data is read and checked when the deserializer is made; a chunk is read when
// it is loaded. A damaged or cut short file is a DataError naming the file, what was expected
// and the byte offset, found before anything is allocated for it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/io/deserializer.h"

namespace loom {

class CBFDeserializer : public Deserializer {
 public:
  // streams: CNTK renames the file's streams with them and delivers every stream of the file
  // (with none given: under the names in the file). A stream {name, def} delivers the file's
  // stream def.field (empty: `name`) as `name`, in def.dtype; a def.shape other than 0 must be
  // the stream's dim in the file. Whether a stream is sparse is the file's choice (def.is_sparse
  // is not used). Streams not named keep their names and the file's element type. Stream ids
  // follow the file's order. ArgumentError for a field the file does not hold, two streams
  // reading one field, a name given twice, a shape that differs or defines_mb_size (a CBF file
  // fixes the sequences' lengths). IOError when the file cannot be opened.
  explicit CBFDeserializer(const std::string& path, const StreamDefs& streams = {});
  ~CBFDeserializer() override;

  const std::vector<StreamInformation>& stream_infos() const override { return streams_; }
  const std::vector<ChunkInfo>& chunk_infos() const override { return chunk_infos_; }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override;
  // Reads and checks the chunk's bytes; safe to call concurrently.
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;

 private:
  struct FileStream {
    bool sparse = false;
    bool doubles = false;  // the file's values: float64, else float32
    uint32_t dim = 0;
    std::string name;  // in the file
  };
  struct FileChunk {
    uint64_t data_begin = 0, end = 0;  // the streams' data: [data_begin, end) of the file
    size_t first_sequence = 0;         // into lengths_
    size_t num_sequences = 0;
    size_t index = 0;  // the chunk's place in the file's chunk table
  };

  std::string path_;
  std::vector<FileStream> file_streams_;
  std::vector<StreamInformation> streams_;
  std::vector<ChunkInfo> chunk_infos_;
  std::vector<FileChunk> chunks_;  // the chunks delivered, in file order
  std::vector<uint32_t> lengths_;  // every sequence's length, in file order
};

}  // namespace loom
