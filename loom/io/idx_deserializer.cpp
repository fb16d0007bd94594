#include "loom/io/idx_deserializer.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>

namespace loom {

namespace {

uint32_t big_endian32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// Bytes per value of an IDX type code; 0 for an unknown code.
size_t value_bytes(uint8_t type) {
  switch (type) {
    case 0x08:
    case 0x09:
      return 1;
    case 0x0B:
      return 2;
    case 0x0C:
    case 0x0D:
      return 4;
    case 0x0E:
      return 8;
    default:
      return 0;
  }
}

const char* type_name(uint8_t type) {
  switch (type) {
    case 0x08:
      return "uint8";
    case 0x09:
      return "int8";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    default:
      return "float64";
  }
}

bool is_integral(uint8_t type) {
  return type != 0x0D && type != 0x0E;
}

// The value at p of an IDX type (big-endian).
double decode(uint8_t type, const uint8_t* p) {
  switch (type) {
    case 0x08:
      return p[0];
    case 0x09:
      return int8_t(p[0]);
    case 0x0B:
      return int16_t(uint16_t(p[0] << 8 | p[1]));
    case 0x0C:
      return int32_t(big_endian32(p));
    case 0x0D: {
      uint32_t bits = big_endian32(p);
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    default: {
      uint64_t bits = uint64_t(big_endian32(p)) << 32 | big_endian32(p + 4);
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
  }
}

// The whole file, gunzipped when it starts with gzip's magic bytes (zlib reads plain files
// as they are); `gzip` tells which.
std::vector<uint8_t> read_bytes(const std::string& path, bool& gzip) {
  gzFile f = gzopen(path.c_str(), "rb");
  LOOM_CHECK(f != nullptr, IOError, "Cannot open the IDX file (", path,
             "): ", std::strerror(errno));
  gzbuffer(f, 1 << 17);
  std::vector<uint8_t> bytes;
  int n = 0;
  do {
    size_t old = bytes.size();
    bytes.resize(old + (1 << 20));
    n = gzread(f, bytes.data() + old, 1 << 20);
    bytes.resize(old + size_t(std::max(n, 0)));
  } while (n > 0);
  int code = Z_OK;
  std::string message = gzerror(f, &code);
  gzip = gzdirect(f) == 0;
  gzclose(f);
  LOOM_CHECK(n == 0 && (code == Z_OK || code == Z_STREAM_END), IOError,
             "Cannot read the IDX file (", path,
             "): ", code == Z_ERRNO ? std::strerror(errno) : message.c_str(),
             code == Z_BUF_ERROR ? " (the gzip stream is truncated)" : "");
  return bytes;
}

}  // namespace

std::string IDXDeserializer::File::offset(size_t byte) const {
  return detail::concat("byte offset ", byte, gzip ? " of the uncompressed data" : "");
}

size_t IDXDeserializer::File::item_offset(size_t item) const {
  return header_bytes + item * item_values * value_bytes;
}

IDXDeserializer::File IDXDeserializer::read(const std::string& path) {
  File f;
  std::vector<uint8_t> bytes = read_bytes(path, f.gzip);
  LOOM_CHECK(bytes.size() >= 4 && bytes[0] == 0 && bytes[1] == 0, DataError, "The file (", path,
             ") is not an IDX file: it must start with two zero bytes, a type code and the number "
             "of dimensions");
  f.type = bytes[2];
  f.value_bytes = value_bytes(f.type);
  LOOM_CHECK(f.value_bytes > 0, DataError, "The IDX file (", path, ") has at ", f.offset(2),
             " the unknown type code 0x", std::hex, int(f.type),
             "; known: 0x08 uint8, 0x09 int8, 0x0b int16, 0x0c int32, 0x0d float32, 0x0e float64");
  const size_t rank = bytes[3];
  f.header_bytes = 4 + 4 * rank;
  LOOM_CHECK(rank > 0, DataError, "The IDX file (", path, ") has no dimensions (0 at ", f.offset(3),
             ")");
  LOOM_CHECK(bytes.size() >= f.header_bytes, DataError, "The IDX file (", path,
             ") is truncated: ", bytes.size(), " bytes, its header of ", rank, " dimensions needs ",
             f.header_bytes);
  f.item_values = 1;
  bool overflow = false;
  for (size_t i = 0; i < rank; ++i) {
    f.dims.push_back(big_endian32(bytes.data() + 4 + 4 * i));
    LOOM_CHECK(f.dims[i] > 0, DataError, "The IDX file (", path, ") has dimension ", i,
               " of size 0 at ", f.offset(4 + 4 * i),
               i == 0 ? ": it holds no items, and a source needs at least one" : "");
    if (i > 0) overflow |= __builtin_mul_overflow(f.item_values, f.dims[i], &f.item_values);
  }
  size_t values = 0, expected = 0;
  overflow = overflow || __builtin_mul_overflow(f.dims[0], f.item_values, &values) ||
             __builtin_mul_overflow(values, f.value_bytes, &expected);
  LOOM_CHECK(!overflow, DataError, "The IDX file (", path, ") announces ",
             NDShape(f.dims).to_string(), " ", type_name(f.type),
             " values, more bytes than can be addressed");
  const size_t data = bytes.size() - f.header_bytes;
  const size_t item_bytes = f.item_values * f.value_bytes;
  LOOM_CHECK(data >= expected, DataError, "The IDX file (", path, ") is truncated: ", data,
             " bytes of data after the header, which announces ", f.dims[0], " items of ",
             f.item_values, " ", type_name(f.type), " values (", expected, " bytes); item ",
             data / item_bytes, " starting at ", f.offset(f.item_offset(data / item_bytes)),
             " is cut at ", f.offset(bytes.size()));
  LOOM_CHECK(data == expected, DataError, "The IDX file (", path, ") has ", data - expected,
             " bytes after the ", expected, " bytes of data its header announces, from ",
             f.offset(f.header_bytes + expected));
  f.bytes.assign(bytes.begin() + ptrdiff_t(f.header_bytes), bytes.end());
  return f;
}

IDXDeserializer::IDXDeserializer(const IDXStreamDefs& streams, ChunkingOptions chunking) {
  LOOM_CHECK(!streams.empty(), ArgumentError, "IDXDeserializer: no streams given");
  size_t total_bytes = 0;
  for (const auto& [name, def] : streams) {
    LOOM_CHECK(!name.empty(), ArgumentError, "IDXDeserializer: a stream has no name");
    for (const StreamInformation& s : streams_)
      LOOM_CHECK(s.name != name, ArgumentError, "IDXDeserializer: stream '", name,
                 "' is defined twice");
    LOOM_CHECK(def.num_classes > 0 || !def.is_sparse, ArgumentError, "IDXDeserializer: stream '",
               name, "' is sparse, which needs num_classes (one-hot data)");
    File f = read(def.path);
    if (!files_.empty())
      LOOM_CHECK(f.dims[0] == files_[0].dims[0], DataError, "The IDX file (", def.path,
                 ") of stream '", name, "' holds ", f.dims[0], " items, the file (", defs_[0].path,
                 ") of stream '", streams_[0].name, "' holds ", files_[0].dims[0],
                 "; item i of every file forms sample i, so the counts must agree");
    StreamInformation info;
    info.name = name;
    info.id = streams_.size();
    info.dtype = def.dtype;
    if (def.num_classes > 0) {
      LOOM_CHECK(is_integral(f.type) && f.item_values == 1, DataError, "The IDX file (", def.path,
                 ") of one-hot stream '", name, "' must hold one integer class index per item; it ",
                 "holds ", f.item_values, " ", type_name(f.type), " values per item");
      LOOM_CHECK(def.shape.empty() || def.shape == NDShape{def.num_classes}, ArgumentError,
                 "IDXDeserializer: one-hot stream '", name, "' has samples of shape [",
                 def.num_classes, "], not ", def.shape.to_string());
      for (size_t i = 0; i < f.dims[0]; ++i) {
        double c = decode(f.type, f.bytes.data() + i * f.value_bytes);
        LOOM_CHECK(c >= 0 && c < double(def.num_classes), DataError, "The IDX file (", def.path,
                   ") holds class ", c, " at item ", i, " (", f.offset(f.item_offset(i)),
                   "), outside [0, ", def.num_classes, ") of stream '", name, "'");
      }
      info.storage = def.is_sparse ? StorageFormat::SparseCSR : StorageFormat::Dense;
      info.sample_shape = NDShape{def.num_classes};
    } else {
      std::vector<size_t> item(f.dims.begin() + 1, f.dims.end());
      info.sample_shape = !def.shape.empty() ? def.shape
                          : item.empty()     ? NDShape{1}
                                             : NDShape(item);
      LOOM_CHECK(info.sample_shape.total_size() == f.item_values, ArgumentError,
                 "IDXDeserializer: stream '", name, "' has samples of shape ",
                 info.sample_shape.to_string(), " (", info.sample_shape.total_size(),
                 " values), but the items of the file (", def.path, ") hold ", f.item_values);
    }
    size_t sample_bytes = info.is_sparse() ? sizeof(int32_t) + size_of(def.dtype)
                                           : info.sample_shape.total_size() * size_of(def.dtype);
    total_bytes += f.dims[0] * sample_bytes;
    streams_.push_back(std::move(info));
    defs_.push_back(def);
    files_.push_back(std::move(f));
  }
  per_chunk_ = sequences_per_chunk(chunking, files_[0].dims[0], total_bytes);
  chunk_infos_ = make_chunks(files_[0].dims[0], per_chunk_);
}

std::vector<SequenceInfo> IDXDeserializer::sequence_infos(size_t chunk) const {
  std::vector<SequenceInfo> out;
  size_t first = chunk * per_chunk_;
  for (size_t s = first; s < first + chunk_infos_.at(chunk).num_sequences; ++s)
    out.push_back({1, s});
  return out;
}

std::shared_ptr<const Chunk> IDXDeserializer::load_chunk(size_t chunk) {
  auto out = std::make_shared<Chunk>();
  out->sequences = sequence_infos(chunk);
  size_t first = chunk * per_chunk_, count = out->sequences.size();
  for (size_t id = 0; id < streams_.size(); ++id) {
    const File& f = files_[id];
    const IDXStreamDef& def = defs_[id];
    StreamChunkData& d = out->streams.emplace_back();
    for (size_t s = 1; s <= count; ++s) d.sample_begin.push_back(s);
    const uint8_t* items = f.bytes.data() + first * f.item_values * f.value_bytes;
    if (def.num_classes == 0 && f.type == 0x08) {  // unsigned bytes (images): kept as bytes
      d.values_u8.assign(items, items + count * f.item_values);
      d.byte_scale = def.scale;
      continue;
    }
    dispatch(def.dtype, [&](auto zero) {
      using T = decltype(zero);
      std::vector<T>& values = values_of<T>(d);
      if (def.num_classes == 0) {
        values.resize(count * f.item_values);
        for (size_t i = 0; i < values.size(); ++i)
          values[i] = T(decode(f.type, items + i * f.value_bytes) * def.scale);
        return;
      }
      if (!def.is_sparse) values.resize(count * def.num_classes);
      for (size_t i = 0; i < count; ++i) {
        auto c = size_t(decode(f.type, items + i * f.value_bytes));  // checked on reading
        if (!def.is_sparse) {
          values[i * def.num_classes + c] = T(1);
          continue;
        }
        d.indices.push_back(int32_t(c));
        values.push_back(T(1));
        d.nnz_begin.push_back(i + 1);
      }
    });
  }
  return out;
}

}  // namespace loom
