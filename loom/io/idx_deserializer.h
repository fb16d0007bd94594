// IDXDeserializer: reads IDX files (the MNIST and Fashion-MNIST format), plain or gzip, one
// file per stream; item i of every file forms sequence i (of one sample):
//
//   IDXDeserializer d({{"features", {.path = "train-images-idx3-ubyte.gz", .shape = {784},
//                                    .scale = 1.0 / 255}},
//                      {"labels", {.path = "train-labels-idx1-ubyte.gz", .num_classes = 10,
//                                  .is_sparse = true}}});
//
// An IDX file is: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
// 0x0D float32, 0x0E float64), the number of dimensions, each dimension as a big-endian
// uint32 (the first counts the items), then the items' values, big-endian. CNTK had no such
// reader; this one follows CTFDeserializer: the user names the streams, every error surfaces
// in the constructor, and chunks let MinibatchSource randomize as over CTF data.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom/io/chunking.h"
#include "loom/io/deserializer.h"

namespace loom {

struct IDXStreamDef {
  std::string path{};
  // The delivered sample shape: empty keeps the file's item shape ([28,28]; [1] for a file of
  // scalars); else the same number of values in another shape ([1,28,28], [784]).
  NDShape shape = {};
  // Values are multiplied by scale (1.0 / 255 maps pixels to [0,1]).
  double scale = 1;
  // > 0: the file holds one integer class index per item, delivered as a one-hot vector of
  // this dimension (shape and scale do not apply).
  size_t num_classes = 0;
  // One-hot vectors as CSR (else dense); only with num_classes.
  bool is_sparse = false;
  DataType dtype = DataType::Float32;
};

// Stream name -> definition, in the order given; the order fixes the stream ids.
using IDXStreamDefs = std::vector<std::pair<std::string, IDXStreamDef>>;

class IDXDeserializer : public Deserializer {
 public:
  // Reads every file now. IOError when a file cannot be opened or read (or its gzip stream is
  // damaged), DataError (naming the file and the byte offset) when a file is not IDX, holds no
  // items, announces more data than this machine's memory, is truncated, has bytes past its
  // data, holds a class index outside
  // [0, num_classes), or holds another number of items than the first stream's file;
  // ArgumentError for bad definitions.
  explicit IDXDeserializer(const IDXStreamDefs& streams, ChunkingOptions chunking = {});

  const std::vector<StreamInformation>& stream_infos() const override { return streams_; }
  const std::vector<ChunkInfo>& chunk_infos() const override { return chunk_infos_; }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override;
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;

 private:
  struct File {
    uint8_t type;                // the IDX type code
    size_t value_bytes;          // bytes of one value
    size_t item_values;          // values per item
    std::vector<size_t> dims;    // from the header
    std::vector<uint8_t> bytes;  // the data after the header, big-endian as in the file
    size_t header_bytes;         // where the data starts in the file
    bool gzip;                   // whether the file is compressed

    // "byte offset N" in the file, in its uncompressed data when gzip.
    std::string offset(size_t byte) const;
    // Where item i starts in the file.
    size_t item_offset(size_t item) const;
  };
  static File read(const std::string& path);

  std::vector<StreamInformation> streams_;
  std::vector<IDXStreamDef> defs_;
  std::vector<File> files_;
  std::vector<ChunkInfo> chunk_infos_;
  size_t per_chunk_ = 1;  // sequences per chunk
};

}  // namespace loom
