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

// One stream's part of a minibatch: a sequence Value [B, T, sample...] with a mask.
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
