// Streams: what a data source delivers. A StreamDef says how to read one stream from a file
// (CNTK's StreamDef), a StreamInformation describes a stream a source delivers, and a
// MinibatchData is one stream's part of a minibatch.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/data_type.h"
#include "loom/core/shape.h"
#include "loom/core/value.h"
#include "loom/io/image_transforms.h"

namespace loom {

// How to read one stream: StreamDef{.field = "xy", .shape = 2}.
struct StreamDef {
  // The name of the stream in the file (CTF: the text after '|'); empty means the stream's name.
  std::string field = {};
  // Dimension of one sample.
  size_t shape = 0;
  bool is_sparse = false;
  // Image streams of an ImageDeserializer: the transforms, in order (image_transforms.h).
  std::vector<ImageTransform> transforms = {};
  DataType dtype = DataType::Float32;
  // The stream whose sample count is a sequence's length (CNTK's definesMBSize); at most one.
  bool defines_mb_size = false;
  // HTK feature streams (HTKFeatureDeserializer): frames of left and right context appended to
  // each frame, the SCP files listing the feature files, and broadcast (one vector per
  // utterance, repeated over the sequence).
  std::pair<size_t, size_t> context = {0, 0};
  std::vector<std::string> scp = {};
  // HTK label streams (HTKMLFDeserializer): the master label files (CNTK: sparse).
  std::vector<std::string> mlf = {};
  bool broadcast = false;
  // Sequences longer than this are skipped (HTK deserializers).
  size_t max_sequence_length = 65535;
};

// CNTK's low-level StreamConfiguration of a text or binary format reader: the stream `name`
// of dimension `dim` is read from the file's stream `stream_alias` (empty: `name`).
struct StreamConfiguration {
  std::string name;
  size_t dim = 0;
  bool is_sparse = false;
  std::string stream_alias = {};
  bool defines_mb_size = false;

  StreamDef stream_def() const {
    return {.field = stream_alias,
            .shape = dim,
            .is_sparse = is_sparse,
            .defines_mb_size = defines_mb_size};
  }
};

// Stream name -> definition, in the order given; the order fixes the stream ids.
using StreamDefs = std::vector<std::pair<std::string, StreamDef>>;

enum class StorageFormat : uint8_t { Dense, SparseCSR };

struct StreamInformation {
  std::string name{};
  size_t id = 0;
  StorageFormat storage = StorageFormat::Dense;
  DataType dtype = DataType::Float32;
  NDShape sample_shape{};
  bool defines_mb_size = false;

  bool is_sparse() const { return storage == StorageFormat::SparseCSR; }
  bool operator==(const StreamInformation&) const = default;
};

// One stream's part of a minibatch: a sequence Value [B, T, sample...] with a mask, or a batch
// [B, sample...] for a stream of samples (Deserializer::holds_samples).
struct MinibatchData {
  Value data;
  size_t number_of_sequences = 0;
  size_t number_of_samples = 0;
  // True on the minibatch that reaches the end of a sweep over the data.
  bool sweep_end = false;
};

}  // namespace loom

template <>
struct std::hash<loom::StreamInformation> {
  size_t operator()(const loom::StreamInformation& s) const noexcept {
    return std::hash<std::string>()(s.name) ^ (std::hash<size_t>()(s.id) << 1);
  }
};
