#include "loom/io/cbf_deserializer.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <type_traits>

namespace loom {

// Values are copied from the file's bytes as they lie: CBF is little-endian.
static_assert(std::endian::native == std::endian::little,
              "CBFDeserializer reads little-endian files on a little-endian machine only");

namespace {

constexpr uint64_t kMagic = 0x636e746b5f62696eULL;
constexpr uint32_t kVersion = 1;
// The magic number and version at the start, and the header's offset at the end.
constexpr uint64_t kPrefixBytes = 12, kTrailerBytes = 8;
// A chunk table entry: int64 offset, uint32 sequences, uint32 samples.
constexpr uint64_t kTableEntryBytes = 16;
// The least a stream header takes: encoding, name length, element type, dim.
constexpr uint64_t kMinStreamHeaderBytes = 1 + 4 + 1 + 4;

// Reads bytes [begin, end) of a file in order; every read is checked against what is left
// before anything is allocated, and a failure names the file, what was expected and where.
class FileCursor {
 public:
  FileCursor(std::ifstream& in, const std::string& path, uint64_t begin, uint64_t end,
             const char* region)
      : in_(in), path_(path), pos_(begin), end_(end), region_(region) {
    in_.seekg(std::streamoff(begin));
  }

  uint64_t position() const { return pos_; }
  uint64_t left() const { return end_ - pos_; }

  // Fails unless `count` items of `size` bytes each are left.
  void need(uint64_t count, uint64_t size, const std::string& what) const {
    LOOM_CHECK(size == 0 || count <= left() / size, DataError, "CBF file (", path_,
               ") is damaged or cut short: expected ", what, " (", count, " x ", size,
               " bytes) at byte offset ", pos_, ", but the ", region_, " has ", left(),
               " bytes left there");
  }

  template <typename T>
  T get(const std::string& what) {
    T value;
    read(&value, sizeof(T), what);
    return value;
  }

  std::string get_string(uint64_t size, const std::string& what) {
    need(size, 1, what);
    std::string out(size, '\0');
    read(out.data(), size, what);
    return out;
  }

  template <typename T>
  std::vector<T> get_array(uint64_t count, const std::string& what) {
    need(count, sizeof(T), what);
    std::vector<T> out(count);
    read(out.data(), count * sizeof(T), what);
    return out;
  }

  void seek(uint64_t pos) {
    pos_ = pos;
    in_.seekg(std::streamoff(pos));
  }

 private:
  void read(void* to, uint64_t size, const std::string& what) {
    need(1, size, what);
    in_.read(static_cast<char*>(to), std::streamsize(size));
    LOOM_CHECK(uint64_t(in_.gcount()) == size, DataError, "CBF file (", path_,
               ") is cut short: expected ", what, " (", size, " bytes) at byte offset ", pos_,
               ", read ", in_.gcount(), " bytes (did the file change?)");
    pos_ += size;
  }

  std::ifstream& in_;
  const std::string& path_;
  uint64_t pos_, end_;
  const char* region_;
};

// Parses a chunk's data, read into memory; `base` is the file offset of its first byte.
class ChunkCursor {
 public:
  ChunkCursor(const std::vector<uint8_t>& bytes, uint64_t base, const std::string& path,
              size_t chunk)
      : bytes_(bytes), base_(base), path_(path), chunk_(chunk) {}

  uint64_t offset() const { return base_ + pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }

  void need(uint64_t count, uint64_t size, const std::string& what) const {
    LOOM_CHECK(size == 0 || count <= left() / size, DataError, "CBF file (", path_,
               ") is damaged: expected ", what, " (", count, " x ", size, " bytes) at byte offset ",
               offset(), ", but chunk ", chunk_, " has ", left(), " bytes left there");
  }

  template <typename T>
  T get(const std::string& what) {
    need(1, sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  // The next count * size bytes, checked to be there.
  const uint8_t* take(uint64_t count, uint64_t size, const std::string& what) {
    need(count, size, what);
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += count * size;
    return p;
  }

  [[noreturn]] void fail(uint64_t at, const std::string& why) const {
    throw DataError(detail::concat("CBF file (", path_, ") is damaged: ", why, " at byte offset ",
                                   at, " (chunk ", chunk_, ")"));
  }

 private:
  const std::vector<uint8_t>& bytes_;
  uint64_t base_;
  const std::string& path_;
  size_t chunk_;
  uint64_t pos_ = 0;
};

// Appends n values of the file (float32 or float64) to the stream's values in its dtype.
void append_values(StreamChunkData& data, DataType dtype, const uint8_t* p, size_t n,
                   bool doubles) {
  auto append = [&](auto& to) {
    using T = typename std::remove_reference_t<decltype(to)>::value_type;
    const size_t at = to.size();
    to.resize(at + n);
    if (doubles == std::is_same_v<T, double>) {
      std::memcpy(to.data() + at, p, n * sizeof(T));
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      if (doubles) {
        double v;
        std::memcpy(&v, p + i * sizeof(double), sizeof(double));
        to[at + i] = T(v);
      } else {
        float v;
        std::memcpy(&v, p + i * sizeof(float), sizeof(float));
        to[at + i] = T(v);
      }
    }
  };
  if (dtype == DataType::Float64)
    append(data.values_f64);
  else
    append(data.values_f32);
}

}  // namespace

CBFDeserializer::CBFDeserializer(const std::string& path, const StreamDefs& streams) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in.good(), IOError, "CBFDeserializer: cannot open the file (", path, ")");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  LOOM_CHECK(!ec, IOError, "CBFDeserializer: cannot read the size of the file (", path,
             "): ", ec.message());
  LOOM_CHECK(size >= kPrefixBytes + kTrailerBytes, DataError, "CBF file (", path, ") holds ", size,
             " bytes; a CBF file holds at least ", kPrefixBytes + kTrailerBytes,
             " (magic number, version and header offset)");

  FileCursor prefix(in, path, 0, size, "file");
  LOOM_CHECK(prefix.get<uint64_t>("the magic number") == kMagic, DataError, "CBF file (", path,
             ") does not start with the CBF magic number 0x636e746b5f62696e at byte offset 0: "
             "it is not a CNTK binary format file");
  const uint32_t version = prefix.get<uint32_t>("the format version");
  LOOM_CHECK(version == kVersion, DataError, "CBF file (", path, ") has format version ", version,
             " at byte offset 8; this reader reads version ", kVersion);

  // The header's offset, in the file's last 8 bytes.
  FileCursor trailer(in, path, size - kTrailerBytes, size, "file");
  const auto header = trailer.get<int64_t>("the header offset");
  const uint64_t table_end = size - kTrailerBytes;
  LOOM_CHECK(header >= int64_t(kPrefixBytes) && uint64_t(header) + 16 <= table_end, DataError,
             "CBF file (", path, ") is damaged or cut short: the header offset at byte offset ",
             table_end, " is ", header,
             "; expected a header of at least 16 bytes between byte "
             "offsets ",
             kPrefixBytes, " and ", table_end);

  FileCursor h(in, path, uint64_t(header), table_end, "header");
  LOOM_CHECK(h.get<uint64_t>("the header's magic number") == kMagic, DataError, "CBF file (", path,
             ") is damaged: expected the magic number 0x636e746b5f62696e at byte offset ", header,
             ", where the file's last 8 bytes place the header");
  const uint32_t num_chunks = h.get<uint32_t>("the number of chunks");
  const uint64_t streams_at = h.position();
  const uint32_t num_streams = h.get<uint32_t>("the number of streams");
  LOOM_CHECK(num_streams > 0, DataError, "CBF file (", path,
             ") is damaged: the header at byte offset ", header, " lists no stream");
  h.need(num_streams, kMinStreamHeaderBytes,
         "the headers of " + std::to_string(num_streams) + " streams (number at byte offset " +
             std::to_string(streams_at) + ")");
  for (uint32_t s = 0; s < num_streams; ++s) {
    const std::string which = "stream " + std::to_string(s);
    FileStream f;
    const uint64_t encoding_at = h.position();
    const auto encoding = h.get<uint8_t>("the encoding of " + which);
    LOOM_CHECK(encoding <= 1, DataError, "CBF file (", path, ") is damaged: ", which,
               " has encoding ", int(encoding), " at byte offset ", encoding_at,
               "; expected 0 (dense) or 1 (sparse)");
    f.sparse = encoding == 1;
    const uint64_t length_at = h.position();
    const auto length = h.get<uint32_t>("the name length of " + which);
    LOOM_CHECK(length > 0, DataError, "CBF file (", path, ") is damaged: ", which,
               " has an empty name (length at byte offset ", length_at, ")");
    f.name = h.get_string(length, "the name of " + which);
    const uint64_t type_at = h.position();
    const auto type = h.get<uint8_t>("the element type of " + which);
    LOOM_CHECK(type <= 1, DataError, "CBF file (", path, ") is damaged: stream '", f.name,
               "' has element type ", int(type), " at byte offset ", type_at,
               "; expected 0 (float32) or 1 (float64)");
    f.doubles = type == 1;
    const uint64_t dim_at = h.position();
    f.dim = h.get<uint32_t>("the dim of stream '" + f.name + "'");
    LOOM_CHECK(f.dim > 0 && (!f.sparse || f.dim <= uint32_t(std::numeric_limits<int32_t>::max())),
               DataError, "CBF file (", path, ") is damaged: stream '", f.name, "' has dim ", f.dim,
               " at byte offset ", dim_at, "; expected 1 to 2^31 - 1");
    for (const FileStream& other : file_streams_)
      LOOM_CHECK(other.name != f.name, DataError, "CBF file (", path, ") is damaged: stream '",
                 f.name, "' is listed twice in the header (second at byte offset ", length_at, ")");
    file_streams_.push_back(std::move(f));
  }

  // The chunk table fills the rest of the header, up to the trailer.
  const uint64_t table_at = h.position();
  LOOM_CHECK(h.left() == uint64_t(num_chunks) * kTableEntryBytes, DataError, "CBF file (", path,
             ") is damaged or cut short: the header lists ", num_chunks,
             " chunks, so the chunk table at byte offset ", table_at, " should take ",
             uint64_t(num_chunks) * kTableEntryBytes,
             " bytes up to the header offset at byte "
             "offset ",
             table_end, ", but ", h.left(), " bytes are there");
  struct TableEntry {
    int64_t offset;
    uint32_t sequences, samples;
  };
  std::vector<TableEntry> table(num_chunks);
  for (uint32_t k = 0; k < num_chunks; ++k) {
    table[k].offset = h.get<int64_t>("the offset of chunk " + std::to_string(k));
    table[k].sequences = h.get<uint32_t>("the sequences of chunk " + std::to_string(k));
    table[k].samples = h.get<uint32_t>("the samples of chunk " + std::to_string(k));
  }
  for (uint32_t k = 0; k < num_chunks; ++k) {
    const int64_t begin = table[k].offset;
    const int64_t end = k + 1 < num_chunks ? table[k + 1].offset : header;
    LOOM_CHECK(begin >= int64_t(kPrefixBytes) && begin <= end, DataError, "CBF file (", path,
               ") is damaged: chunk ", k, " (table entry at byte offset ",
               table_at + k * kTableEntryBytes, ") starts at byte offset ", begin,
               "; expected chunks in file order between byte offsets ", kPrefixBytes,
               " and the header at ", header, " (the next begins at ", end, ")");
    FileCursor chunk(in, path, uint64_t(begin), uint64_t(end), "chunk");
    const std::string what = "the lengths of the " + std::to_string(table[k].sequences) +
                             " sequences of chunk " + std::to_string(k);
    std::vector<uint32_t> lengths = chunk.get_array<uint32_t>(table[k].sequences, what);
    uint64_t samples = 0;
    for (uint32_t l : lengths) samples += l;
    LOOM_CHECK(samples == table[k].samples, DataError, "CBF file (", path,
               ") is damaged: the chunk table says chunk ", k, " holds ", table[k].samples,
               " samples, its sequence lengths at byte offset ", begin, " add up to ", samples);
    if (lengths.empty()) continue;
    FileChunk c{.data_begin = chunk.position(),
                .end = uint64_t(end),
                .first_sequence = lengths_.size(),
                .num_sequences = lengths.size(),
                .index = k};
    chunks_.push_back(c);
    chunk_infos_.push_back({lengths.size(), size_t(samples)});
    lengths_.insert(lengths_.end(), lengths.begin(), lengths.end());
  }
  LOOM_CHECK(!chunks_.empty(), DataError, "CBF file (", path, ") holds no sequence (", num_chunks,
             " chunks listed in the chunk table at byte offset ", table_at, ")");

  // The delivered streams: the file's, renamed as CNTK's stream configurations say.
  std::vector<std::string> names;
  std::vector<DataType> dtypes;
  for (const FileStream& f : file_streams_) {
    names.push_back(f.name);
    dtypes.push_back(f.doubles ? DataType::Float64 : DataType::Float32);
  }
  std::vector<bool> renamed(file_streams_.size(), false);
  for (const auto& [name, def] : streams) {
    const std::string& field = def.field.empty() ? name : def.field;
    const std::string where = "CBFDeserializer(" + path + "): stream '" + name + "'";
    size_t s = 0;
    while (s < file_streams_.size() && file_streams_[s].name != field) ++s;
    if (s == file_streams_.size()) {
      std::string known;
      for (const FileStream& f : file_streams_)
        known += (known.empty() ? "'" : ", '") + f.name + "'";
      throw ArgumentError(where + " reads the field '" + field + "', which the file does not " +
                          "hold; its streams are " + known);
    }
    LOOM_CHECK(!renamed[s], ArgumentError, where, ": two streams read the field '", field, "'");
    LOOM_CHECK(def.shape == 0 || def.shape == file_streams_[s].dim, ArgumentError, where,
               " has shape ", def.shape, ", but the file's stream '", field, "' has dim ",
               file_streams_[s].dim);
    LOOM_CHECK(!def.defines_mb_size, ArgumentError, where,
               ": defines_mb_size is not supported; a CBF file fixes each sequence's length (the "
               "longest of its streams) when it is written");
    LOOM_CHECK(def.dtype == DataType::Float32 || def.dtype == DataType::Float64, ArgumentError,
               where, ": dtype must be float32 or float64");
    renamed[s] = true;
    names[s] = name;
    dtypes[s] = def.dtype;
  }
  for (size_t s = 0; s < file_streams_.size(); ++s) {
    for (size_t t = 0; t < s; ++t)
      LOOM_CHECK(names[t] != names[s], ArgumentError, "CBFDeserializer(", path,
                 "): two streams would be named '", names[s], "' (the file's streams '",
                 file_streams_[t].name, "' and '", file_streams_[s].name, "'); rename one of them");
    streams_.push_back(
        {.name = names[s],
         .id = s,
         .storage = file_streams_[s].sparse ? StorageFormat::SparseCSR : StorageFormat::Dense,
         .dtype = dtypes[s],
         .sample_shape = NDShape{size_t(file_streams_[s].dim)}});
  }
}

CBFDeserializer::~CBFDeserializer() = default;

std::vector<SequenceInfo> CBFDeserializer::sequence_infos(size_t chunk) const {
  LOOM_CHECK(chunk < chunks_.size(), ArgumentError, "CBFDeserializer: chunk ", chunk,
             " does not exist (", chunks_.size(), " chunks)");
  const FileChunk& c = chunks_[chunk];
  std::vector<SequenceInfo> out;
  out.reserve(c.num_sequences);
  for (size_t i = c.first_sequence; i < c.first_sequence + c.num_sequences; ++i)
    out.push_back({lengths_[i], i});
  return out;
}

std::shared_ptr<const Chunk> CBFDeserializer::load_chunk(size_t chunk) {
  LOOM_CHECK(chunk < chunks_.size(), ArgumentError, "CBFDeserializer: chunk ", chunk,
             " does not exist (", chunks_.size(), " chunks)");
  const FileChunk& c = chunks_[chunk];
  std::vector<uint8_t> bytes;
  {
    std::ifstream in(path_, std::ios::binary);
    LOOM_CHECK(in.good(), IOError, "CBFDeserializer: cannot open the file (", path_, ")");
    FileCursor file(in, path_, c.data_begin, c.end, "chunk");
    bytes = file.get_array<uint8_t>(c.end - c.data_begin,
                                    "the data of chunk " + std::to_string(c.index));
  }
  ChunkCursor cursor(bytes, c.data_begin, path_, c.index);

  auto out = std::make_shared<Chunk>();
  out->sequences = sequence_infos(chunk);
  // The longest stream of each sequence must be the length the chunk's header gives.
  std::vector<uint32_t> longest(c.num_sequences, 0);
  out->streams.resize(streams_.size());
  for (size_t s = 0; s < streams_.size(); ++s) {
    const FileStream& f = file_streams_[s];
    StreamChunkData& data = out->streams[s];
    const uint64_t value_bytes = f.doubles ? 8 : 4;
    data.sample_begin.reserve(c.num_sequences + 1);
    for (size_t i = 0; i < c.num_sequences; ++i) {
      const std::string of =
          "sequence " + std::to_string(c.first_sequence + i) + " of stream '" + f.name + "'";
      const uint64_t samples_at = cursor.offset();
      const auto samples = cursor.get<uint32_t>("the sample count of " + of);
      const uint32_t length = lengths_[c.first_sequence + i];
      if (samples > length)
        cursor.fail(samples_at,
                    detail::concat(of, " holds ", samples,
                                   " samples, more than the sequence's length ", length));
      longest[i] = std::max(longest[i], samples);
      data.sample_begin.push_back(data.sample_begin.back() + samples);
      if (!f.sparse) {
        const uint8_t* values =
            cursor.take(samples, uint64_t(f.dim) * value_bytes, "the values of " + of);
        append_values(data, streams_[s].dtype, values, size_t(samples) * f.dim, f.doubles);
        continue;
      }
      const uint64_t nnz_at = cursor.offset();
      const auto nnz = cursor.get<int32_t>("the nnz count of " + of);
      if (nnz < 0) cursor.fail(nnz_at, detail::concat(of, " has a negative nnz count ", nnz));
      const uint8_t* values = cursor.take(uint64_t(nnz), value_bytes, "the values of " + of);
      const uint64_t indices_at = cursor.offset();
      const uint8_t* indices = cursor.take(uint64_t(nnz), 4, "the indices of " + of);
      const uint64_t counts_at = cursor.offset();
      const uint8_t* counts = cursor.take(samples, 4, "the per-sample nnz counts of " + of);
      const size_t first_index = data.indices.size();
      data.indices.resize(first_index + size_t(nnz));
      std::memcpy(data.indices.data() + first_index, indices, size_t(nnz) * 4);
      for (size_t j = 0; j < size_t(nnz); ++j) {
        const int32_t index = data.indices[first_index + j];
        if (index < 0 || uint32_t(index) >= f.dim)
          cursor.fail(indices_at + 4 * j, detail::concat("index ", index, " of ", of,
                                                         " lies outside [0, ", f.dim, ")"));
      }
      uint64_t total = 0;
      for (size_t j = 0; j < samples; ++j) {
        int32_t count;
        std::memcpy(&count, counts + 4 * j, 4);
        if (count < 0)
          cursor.fail(counts_at + 4 * j, detail::concat("sample ", j, " of ", of,
                                                        " has a negative nnz count ", count));
        total += uint64_t(count);
        if (total > uint64_t(nnz))
          cursor.fail(counts_at + 4 * j,
                      detail::concat("the per-sample nnz counts of ", of,
                                     " exceed the sequence's nnz count ", nnz, " at sample ", j));
        data.nnz_begin.push_back(data.nnz_begin.back() + size_t(count));
      }
      if (total != uint64_t(nnz))
        cursor.fail(counts_at, detail::concat("the per-sample nnz counts of ", of, " add up to ",
                                              total, ", its nnz count is ", nnz));
      append_values(data, streams_[s].dtype, values, size_t(nnz), f.doubles);
    }
  }
  for (size_t i = 0; i < c.num_sequences; ++i)
    if (longest[i] != lengths_[c.first_sequence + i])
      cursor.fail(c.data_begin - 4 * (c.num_sequences - i),
                  detail::concat("sequence ", c.first_sequence + i, " has length ",
                                 lengths_[c.first_sequence + i],
                                 " in its chunk's header, but its longest stream holds ",
                                 longest[i], " samples"));
  if (cursor.left() != 0)
    cursor.fail(cursor.offset(),
                detail::concat(cursor.left(),
                               " bytes follow the last stream's data, up to byte "
                               "offset ",
                               c.end, " where the next chunk or the header begins"));
  return out;
}

}  // namespace loom
