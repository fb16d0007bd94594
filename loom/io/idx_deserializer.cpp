#include "loom/io/idx_deserializer.h"

#include <zlib.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

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

// A file read through zlib: gunzipped when it starts with gzip's magic bytes, as it is
// otherwise.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
    LOOM_CHECK(f_ != nullptr, IOError, "Cannot open the IDX file (", path,
               "): ", std::strerror(errno));
    gzbuffer(f_, 1 << 17);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;
  ~GzReader() { gzclose(f_); }

  bool gzip() const { return gzdirect(f_) == 0; }

  // Up to n bytes into out; fewer only at the end of the file.
  size_t read(uint8_t* out, size_t n) {
    size_t got = 0;
    while (got < n) {
      const int r = gzread(f_, out + got, unsigned(std::min<size_t>(n - got, 1 << 20)));
      if (r < 0 || (r == 0 && !gzeof(f_))) fail();
      if (r == 0) break;
      got += size_t(r);
    }
    if (got < n) {  // a gzip stream cut short reads as an end of file with a Z_BUF_ERROR
      int code = Z_OK;
      gzerror(f_, &code);
      if (code != Z_OK && code != Z_STREAM_END) fail();
    }
    return got;
  }

  // Reads to the end, keeping nothing: the number of bytes left.
  size_t skip_rest() {
    std::vector<uint8_t> piece(1 << 16);
    size_t total = 0;
    for (size_t n; (n = read(piece.data(), piece.size())) > 0;) total += n;
    return total;
  }

 private:
  [[noreturn]] void fail() {
    int code = Z_OK;
    const std::string message = gzerror(f_, &code);
    throw IOError(detail::concat("Cannot read the IDX file (", path_,
                                 "): ", code == Z_ERRNO ? std::strerror(errno) : message.c_str(),
                                 code == Z_BUF_ERROR ? " (the gzip stream is truncated)" : ""));
  }

  std::string path_;
  gzFile f_;
};

// The memory of this machine: no IDX file announcing more data is read.
size_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : SIZE_MAX;
}

}  // namespace

std::string IDXDeserializer::File::offset(size_t byte) const {
  return detail::concat("byte offset ", byte, gzip ? " of the uncompressed data" : "");
}

size_t IDXDeserializer::File::item_offset(size_t item) const {
  return header_bytes + item * item_values * value_bytes;
}

IDXDeserializer::File IDXDeserializer::read(const std::string& path) {
  // The header first, then exactly the data it announces: a file costs no more memory than its
  // header says, and that is checked against the machine's memory before the data is read (a
  // damaged header or a small gzip file that unpacks to far more is an error, not an
  // allocation).
  GzReader in(path);
  File f;
  uint8_t head[4];
  size_t got = in.read(head, 4);
  f.gzip = in.gzip();
  LOOM_CHECK(got == 4 && head[0] == 0 && head[1] == 0, DataError, "The file (", path,
             ") is not an IDX file: it must start with two zero bytes, a type code and the number "
             "of dimensions");
  f.type = head[2];
  f.value_bytes = value_bytes(f.type);
  LOOM_CHECK(f.value_bytes > 0, DataError, "The IDX file (", path, ") has at ", f.offset(2),
             " the unknown type code 0x", std::hex, int(f.type),
             "; known: 0x08 uint8, 0x09 int8, 0x0b int16, 0x0c int32, 0x0d float32, 0x0e float64");
  const size_t rank = head[3];
  f.header_bytes = 4 + 4 * rank;
  LOOM_CHECK(rank > 0, DataError, "The IDX file (", path, ") has no dimensions (0 at ", f.offset(3),
             ")");
  std::vector<uint8_t> dims(4 * rank);
  got = 4 + in.read(dims.data(), dims.size());
  LOOM_CHECK(got == f.header_bytes, DataError, "The IDX file (", path, ") is truncated: ", got,
             " bytes, its header of ", rank, " dimensions needs ", f.header_bytes);
  f.item_values = 1;
  bool overflow = false;
  for (size_t i = 0; i < rank; ++i) {
    f.dims.push_back(big_endian32(dims.data() + 4 * i));
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
  const size_t item_bytes = f.item_values * f.value_bytes;
  auto truncated = [&](size_t data) {
    throw DataError(detail::concat("The IDX file (", path, ") is truncated: ", data,
                                   " bytes of data after the header, which announces ", f.dims[0],
                                   " items of ", f.item_values, " ", type_name(f.type), " values (",
                                   expected, " bytes); item ", data / item_bytes, " starting at ",
                                   f.offset(f.item_offset(data / item_bytes)), " is cut at ",
                                   f.offset(f.header_bytes + data)));
  };
  if (!f.gzip) {  // a plain file's size says whether it holds the data
    std::error_code error;
    const size_t size = std::filesystem::file_size(path, error);
    if (!error && size - f.header_bytes < expected) truncated(size - f.header_bytes);
  }
  const size_t memory = physical_memory();
  LOOM_CHECK(expected <= memory, DataError, "The IDX file (", path, ") announces ",
             NDShape(f.dims).to_string(), " ", type_name(f.type), " values (", expected,
             " bytes), more than this machine's memory (", memory, " bytes)");
  // The data, read in pieces (a gzip file's size says nothing of what it unpacks to).
  while (f.bytes.size() < expected) {
    const size_t old = f.bytes.size(), piece = std::min<size_t>(expected - old, 1 << 24);
    f.bytes.resize(old + piece);
    got = in.read(f.bytes.data() + old, piece);
    f.bytes.resize(old + got);
    if (got < piece) truncated(f.bytes.size());
  }
  const size_t extra = in.skip_rest();
  LOOM_CHECK(extra == 0, DataError, "The IDX file (", path, ") has ", extra, " bytes after the ",
             expected, " bytes of data its header announces, from ",
             f.offset(f.header_bytes + expected));
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
