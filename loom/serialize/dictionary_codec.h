// Binary encoding of Dictionary values: the payload of a model file's graph section and of a
// checkpoint's state sections. Little-endian, self-describing (one tag byte per value), with
// no references, so a decoder needs no more than the bytes in front of it. See
// docs/file-format.md for the layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "loom/core/dictionary.h"

namespace loom {

// The tag byte in front of each value. Stable: files keep them.
enum class ValueTag : uint8_t {
  None = 0,
  Bool = 1,
  Int64 = 2,
  UInt64 = 3,
  Double = 4,
  String = 5,
  Shape = 6,
  Vector = 7,
  Map = 8,
  Tensor = 9,
};

// Limits a decoder applies on top of the bytes it has: every count and size is also checked
// against the bytes left before anything is allocated.
struct DecodeLimits {
  size_t max_depth = 64;  // nesting of vectors and maps
  size_t max_rank = 64;   // axes of a shape
  // Values in all (an in-memory value is larger than its encoding; this bounds the total), or one
  // per 16 bytes of the input where that is more: the memory a decoding takes stays a small
  // multiple of its input's size, and a graph of a million ops (about 400 bytes and 17 values
  // each) loads.
  size_t max_values = size_t(1) << 24;
};

// Where an encoding goes, in order.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void* data, size_t n) = 0;
};

// Appends what it is given to out.
class VectorSink final : public ByteSink {
 public:
  explicit VectorSink(std::vector<uint8_t>& out) : out_(out) {}
  void write(const void* data, size_t n) override;

 private:
  std::vector<uint8_t>& out_;
};

// Writes an encoding value by value, for a writer that has no Dictionary at hand (a model's
// graph, model_file.cpp): a map is begin_map(n), then n times key(k) and the value, with the
// keys in increasing order (std::map's, which the decoder checks); a vector is begin_vector(n)
// and its n values. The small fields gather in a buffer of 64 KiB that flush() passes on; tensor
// data goes straight from the tensor's memory to the sink, uncopied.
class Encoder {
 public:
  explicit Encoder(ByteSink& sink) : sink_(sink) {}
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  void begin_map(size_t size);
  void key(std::string_view key);
  void begin_vector(size_t size);
  void put(const DictionaryValue& value);
  void put(const DictionaryMap& map);
  void put_bool(bool v);
  void put_int64(int64_t v);
  void put_uint64(uint64_t v);
  void put_double(double v);
  void put_string(std::string_view v);
  void put_shape(const NDShape& v);
  void put_tensor(const NDArrayView& v);
  // Passes what the buffer holds on to the sink (call it after the last value).
  void flush();

 private:
  template <typename T>
  void raw(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    raw_bytes(&v, sizeof(T));
  }
  void raw_bytes(const void* data, size_t n);
  void raw_string(std::string_view s);
  void raw_shape(const NDShape& shape);

  ByteSink& sink_;
  size_t used_ = 0;
  uint8_t buffer_[size_t(1) << 16];
};

// Streams the encoding into out through an Encoder.
void encode_value(const DictionaryValue& value, ByteSink& out);
void encode_dictionary(const Dictionary& dictionary, ByteSink& out);
// Appends the encoding of value to out.
void encode_value(const DictionaryValue& value, std::vector<uint8_t>& out);
std::vector<uint8_t> encode_dictionary(const Dictionary& dictionary);

// One value of an encoding left undecoded: its bytes (from its tag byte) and their offset in
// the file. decode_value, decode_dictionary and decode_dictionary_views decode it.
struct EncodedValue {
  std::span<const uint8_t> bytes;
  uint64_t offset = 0;
};

// The entries of an encoded map (keys in order, as decode_dictionary checks them) and the items
// of an encoded vector, each left encoded: for a reader that decodes a large value piece by
// piece (a model's graph, one function at a time), so that one piece's Dictionary is in memory
// at a time. The pieces' tags, counts, lengths and nesting are checked here, what they hold
// when they are decoded; damage is a DataError as decode_value's.
std::vector<std::pair<std::string, EncodedValue>> encoded_entries(const EncodedValue& map,
                                                                  const std::string& where,
                                                                  const DecodeLimits& limits = {});
std::vector<EncodedValue> encoded_items(const EncodedValue& vector, const std::string& where,
                                        const DecodeLimits& limits = {});

// Decodes one value that fills bytes exactly. On any malformation a DataError that starts with
// `where` (the file and section) and names the byte offset (base_offset + position in bytes)
// and what is wrong.
DictionaryValue decode_value(std::span<const uint8_t> bytes, const std::string& where,
                             uint64_t base_offset = 0, const DecodeLimits& limits = {});
// As decode_value, for bytes that hold a dictionary (a Map value).
Dictionary decode_dictionary(std::span<const uint8_t> bytes, const std::string& where,
                             uint64_t base_offset = 0, const DecodeLimits& limits = {});
// As decode_dictionary (the same checks), but each dense tensor is a view of its bytes instead
// of a copy, and owner keeps the bytes alive as long as a view lives. For a caller that copies
// the values out and drops the rest (Trainer::restore_from_checkpoint, over a mapped file):
// the views' memory may be read-only and their data unaligned, so they are read with memcpy
// only (their raw_data()), and nothing else gets them without with_own_tensors.
Dictionary decode_dictionary_views(std::span<const uint8_t> bytes, const std::string& where,
                                   uint64_t base_offset, std::shared_ptr<const void> owner,
                                   const DecodeLimits& limits = {});
// d with every tensor in it deep-cloned: a dictionary a caller may keep and write.
Dictionary with_own_tensors(const Dictionary& d);

}  // namespace loom
