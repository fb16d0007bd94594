// ImageDeserializer: reads images listed in CNTK's map files, one "path<TAB>label" line per
// image (a relative path is relative to the map file's folder), as CNTK's ImageDeserializer:
//
//   ImageDeserializer d("train_map.txt",
//                       {{"features", {.field = "image",
//                                      .transforms = {transforms::scale(224, 224, 3)}}},
//                        {"labels", {.field = "label", .shape = 1000}}});
//
// The stream with field "image" delivers each image as a dense [channels, height, width]
// tensor of pixel values 0..255 (color images in OpenCV's BGR channel order, as CNTK), after its
// transforms (image_transforms.h; a scale transform fixes the size and the channels); the
// stream with field "label" delivers the label as a one-hot vector of its shape, always sparse
// (CSR), as CNTK. JPEG and PNG (and whatever else OpenCV decodes) are read when a chunk loads,
// on reader threads; an image whose header declares more than kMaxImagePixels pixels
// (image_header.h) is refused before it is decoded. Each image is a sequence of one sample; its
// key is its map file line (0-based). With a multiview10 crop each image is 10 sequences in a
// row, its 10 views, all keyed by its line (CNTK's copies).
//
// Base64ImageDeserializer (CNTK's, cntk.io.Base64ImageDeserializer) reads the images from the
// map file itself, one per line:
//
//   [sequence key<TAB>]label<TAB>base64-encoded image file (JPEG, PNG, ...)
//
// The key column is there when the file's first line has three tab-separated fields (CNTK's
// rule). Characters other than base64's at the end of a line (spaces, tabs) are dropped, as
// CNTK does; the rest must be standard base64 (A-Z a-z 0-9 + /, '=' padding, a multiple of 4
// characters), checked when the map file is read. It takes the same streams, transforms and
// options and decodes and transforms the images with the same code, so a map file of the same
// images in the same order delivers the same minibatches as an ImageDeserializer of image
// files. Keys are map file lines, as there (CNTK keys sequences by the key column's text).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/io/chunking.h"
#include "loom/io/deserializer.h"

namespace loom {

struct ImageOptions {
  // Bad map lines (no tab, a path with a NUL byte, a label that is not a number or is out of
  // range) and missing, undecodable or too large images (over kMaxImagePixels) tolerated, each
  // skipped with a WARNING naming the file and line and counted in number_of_skipped(); the next
  // one fails. With max_errors > 0 the constructor decodes every image once to find the
  // undecodable ones.
  size_t max_errors = 0;
  // Threads that decode a chunk's images at once (0: as many as compute uses).
  size_t num_threads = 0;
  ChunkingOptions chunking = {};
};

class ImageDeserializer : public Deserializer {
 public:
  // Reads the map file and checks that every image exists (and, with max_errors > 0, decodes).
  // IOError when the map file cannot be read; DataError naming the map file and line for a
  // malformed line (a path with a NUL byte included), a label outside [0, label dimension), a
  // missing image or (max_errors > 0) one that cannot be decoded; ArgumentError for
  // streams other than one "image" and one "label" field, an image stream without exactly one
  // scale transform (after every crop), a mean before the scale or bad transform options;
  // IOError or DataError for a mean or intensity file that cannot be read or does not fit.
  ImageDeserializer(const std::string& map_file, const StreamDefs& streams,
                    ImageOptions options = {});
  ~ImageDeserializer() override;

  const std::vector<StreamInformation>& stream_infos() const override { return streams_; }
  const std::vector<ChunkInfo>& chunk_infos() const override { return chunk_infos_; }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override;
  // The chunk as read in sweep 0 with seed 0.
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;
  // Decodes and transforms the chunk's images as in `sweep`: random transforms draw from a
  // generator of (seed, sweep, map line, view), so they differ from sweep to sweep and a source
  // restored from a checkpoint draws them again alike. DataError naming the image and its map
  // file line when one cannot be read or decoded, declares more than kMaxImagePixels pixels
  // (image_header.h: refused before decoding) or fails in OpenCV.
  std::shared_ptr<const Chunk> load_chunk_in_sweep(size_t chunk, size_t sweep,
                                                   uint64_t seed) override;
  // True when no transform draws at random (no random crop or flip, color or intensity
  // change): a one-window source then keeps the decoded images from sweep to sweep.
  bool same_in_every_sweep() const override;

  // Map lines and images skipped under max_errors.
  size_t number_of_skipped() const { return skipped_; }

 protected:
  // Where the map file's lines have the images: paths of image files, or the images themselves,
  // base64-encoded (Base64ImageDeserializer).
  enum class MapFormat { paths, base64 };
  ImageDeserializer(const std::string& map_file, const StreamDefs& streams, ImageOptions options,
                    MapFormat format);

 private:
  struct Entry {
    std::string path;  // MapFormat::paths: the image file, as resolved
    // MapFormat::base64: the encoded image, bytes [offset, offset + size) of the map file
    uint64_t offset = 0, size = 0;
    size_t label;
    size_t line;  // 0-based line of the map file
  };
  struct Pipeline;  // the image stream's transforms, prepared (OpenCV inside the .cpp)

  // The entry's image file bytes (for base64: decoded); empty when they cannot be read.
  std::vector<uint8_t> read_image(const Entry& e) const;
  // "the image '<path>' in line <n> of the map file (<map file>)", for messages.
  std::string describe(const Entry& e) const;

  // The class's name, for messages.
  std::string name_;
  MapFormat format_ = MapFormat::paths;
  std::string map_file_;
  std::vector<StreamInformation> streams_;
  size_t image_stream_ = 0, label_stream_ = 0;
  std::unique_ptr<Pipeline> pipeline_;
  ImageOptions options_;
  std::vector<Entry> entries_;
  std::vector<ChunkInfo> chunk_infos_;
  size_t per_chunk_ = 1;
  size_t skipped_ = 0;
};

class Base64ImageDeserializer : public ImageDeserializer {
 public:
  // As ImageDeserializer's, for a map file of base64-encoded images (above). A line that is
  // not "[key<TAB>]label<TAB>base64" or whose image is not base64 is a DataError naming the
  // map file and line (a WARNING and skipped under options.max_errors).
  Base64ImageDeserializer(const std::string& map_file, const StreamDefs& streams,
                          ImageOptions options = {})
      : ImageDeserializer(map_file, streams, options, MapFormat::base64) {}
};

}  // namespace loom
