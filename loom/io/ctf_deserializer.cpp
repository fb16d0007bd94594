#include "loom/io/ctf_deserializer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
#include <memory>
#include <span>
#include <string_view>

#include "loom/io/reader_threads.h"

namespace loom {

namespace {

constexpr int kTraceWarning = 1;
constexpr int kTraceInfo = 2;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_value_delimiter(char c) {
  return c == ' ' || c == '\t';
}
// Control characters end names and values; bytes >= 0x80 (UTF-8) are ordinary text.
bool is_non_printable(char c) {
  return static_cast<unsigned char>(c) < ' ';
}
bool is_column_delimiter(char c) {
  return is_value_delimiter(c) || (is_non_printable(c) && c != '\n');
}

// Bytes [begin, end) of the file (up to end of file).
std::string read_range(const std::string& path, size_t begin, size_t end) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  LOOM_CHECK(f != nullptr, IOError, "Cannot open the input file (", path,
             "): ", std::strerror(errno));
  std::string text(end - begin, '\0');
  bool failed = fseeko(f, off_t(begin), SEEK_SET) != 0;
  if (!failed) {
    text.resize(std::fread(text.data(), 1, text.size(), f));
    failed = std::ferror(f) != 0;
  }
  std::fclose(f);
  LOOM_CHECK(!failed, IOError, "Cannot read the input file (", path, ") at offset ", begin);
  return text;
}

// A sequence as the index finds it before parsing: its byte range in the file, its id and the
// rows it should hold. 24 bytes: a sequence's bytes and rows are checked to fit 32 bits.
struct RawSequence {
  uint64_t begin;  // offset from the file's start
  uint64_t key;
  uint32_t bytes;
  uint32_t rows;

  size_t end() const { return begin + bytes; }
};

// The sizes of a stream's chunk data before a sample, to undo the sample.
struct Mark {
  size_t nnz, values;
};

struct StreamSpec {
  std::string name;
  size_t dim;
  bool sparse;
  DataType dtype;
  bool defines;
};

// What parsing a chunk reported, replayed in file order once every chunk is parsed, so that
// chunks parse in parallel and still print and fail exactly as one pass over the file would.
struct ParseLog {
  struct Event {
    bool counts;       // one unit of max_errors (text: the last warning), else a line to print
    std::string text;  // the line, or the last warning
  };
  std::vector<Event> events;
  std::exception_ptr failure;  // what ended parsing of the chunk early
};

// Numbers are scanned into a decimal (up to 19 significant digits) and converted exactly:
// one IEEE multiplication or division when the digits and the power of ten are both exact
// doubles (Clinger's fast path), std::from_chars (correctly rounded, as strtod) otherwise.
struct Decimal {
  uint64_t mantissa = 0;   // the first significant digits
  int digits = 0;          // how many of them
  bool truncated = false;  // nonzero digits followed the first 19
  int64_t exponent = 0;    // the power of ten of mantissa's last digit

  static constexpr int kMaxDigits = 19;

  void integral_digit(char c) {
    if (mantissa == 0 && c == '0') return;
    if (digits < kMaxDigits) {
      mantissa = mantissa * 10 + uint64_t(c - '0');
      ++digits;
    } else {
      ++exponent;
      truncated = truncated || c != '0';
    }
  }
  void fraction_digit(char c) {
    if (mantissa == 0 && c == '0') {
      --exponent;
    } else if (digits < kMaxDigits) {
      mantissa = mantissa * 10 + uint64_t(c - '0');
      ++digits;
      --exponent;
    } else {
      truncated = truncated || c != '0';
    }
  }

  // The nearest double to the number text [first, last) holds (as scanned into this).
  double value(bool negative, int64_t exp10, const char* first, const char* last) const {
    static constexpr double kPowers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                         1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                         1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (mantissa == 0) return negative ? -0.0 : 0.0;  // 0e999 is 0
    const int64_t e = exponent + exp10;
    double v;
    if (!truncated && mantissa <= (uint64_t{1} << 53) && e >= -22 && e <= 22) {
      v = double(mantissa);
      v = e < 0 ? v / kPowers[-e] : v * kPowers[e];
    } else {
      if (*first == '+') ++first;  // from_chars takes no plus sign
      auto [end, error] = std::from_chars(first, last, v);
      LOOM_CHECK(end == last && (error == std::errc() || error == std::errc::result_out_of_range),
                 StateError, "CTF number parser: from_chars stopped at '", std::string(first, last),
                 "'");
      // Out of range: beyond the largest double (magnitude >= 1), or below the smallest.
      if (error == std::errc::result_out_of_range)
        v = e + digits > 0 ? std::numeric_limits<double>::infinity() : 0.0;
      else
        return v;
    }
    return negative ? -v : v;
  }
};

// Parses the sequences of one chunk, following CNTK's TextParser (control flow, warnings and
// error accounting), so that malformed files fail or recover as they did there.
class Parser {
 public:
  // text holds the file's bytes from offset text_offset on.
  Parser(const std::string& path, const std::string& text, size_t text_offset,
         const std::vector<StreamSpec>& streams,
         const std::vector<std::pair<std::string, size_t>>& aliases, const CTFOptions& options,
         ParseLog& log)
      : path_(path),
        base_(text.data()),
        base_offset_(text_offset),
        streams_(streams),
        aliases_(aliases),
        options_(options),
        log_(log),
        counts_(streams_.size()) {
    for (const auto& [alias, id] : aliases_) max_alias_ = std::max(max_alias_, alias.size());
    for (const StreamSpec& s : streams_) has_defining_ = has_defining_ || s.defines;
  }

  // Parses seq and appends it to chunk.
  void parse_sequence(const RawSequence& seq, Chunk& chunk) {
    pos_ = base_ + (seq.begin - base_offset_);
    end_ = base_ + (seq.end() - base_offset_);
    chunk_ = &chunk;
    std::fill(counts_.begin(), counts_.end(), 0);
    size_t rows_read = 0, expected = seq.rows;
    for (size_t row = 1; pos_ < end_; ++row) {
      if (read_row()) {
        ++rows_read;
      } else {
        warn("Could not read a row (# ", row, ") while loading sequence (id = ", seq.key, ") ",
             where(), ".");
        count_error();
      }
    }
    if (rows_read < expected)
      warn("Exhausted all input expected for the current sequence (id = ", seq.key, ") ", where(),
           ", but only read ", rows_read, " out of ", expected, " expected rows.");

    std::string empty_input;
    bool duplicates = false;
    size_t length = 0;
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (counts_[i] == 0) {
        empty_input = concat("Input ('", streams_[i].name,
                             "') is empty in sequence (id = ", seq.key, ") ", where(), ".");
        log_.events.push_back({false, "ERROR: " + empty_input});
      }
      if (has_defining_ && !streams_[i].defines) continue;
      length = std::max(length, counts_[i]);
      if (counts_[i] > expected) {
        duplicates = true;
        warn("Input ('", streams_[i].name, "') contains more samples than expected (", counts_[i],
             " vs. ", expected, ") for sequence (id = ", seq.key, ") ", where(), ".");
      }
    }
    LOOM_CHECK(empty_input.empty(), DataError, "Malformed input file. Bailing out. ", empty_input);
    if (duplicates) {
      count_error();
    } else if (length < expected) {
      warn("Number of samples for sequence (id = ", seq.key, ") ", where(),
           " is less than expected (", length, " vs. ", expected, ").");
      count_error();
    }
    info("Finished loading sequence (id = ", seq.key, ") ", where(), ", successfully read ",
         rows_read, " out of expected ", expected, " rows.");

    for (size_t i = 0; i < streams_.size(); ++i) {
      StreamChunkData& d = chunk.streams[i];
      d.sample_begin.push_back(d.sample_begin.back() + counts_[i]);
    }
    chunk.sequences.push_back({length, seq.key});
  }

 private:
  template <typename... Parts>
  static std::string concat(const Parts&... parts) {
    return detail::concat(parts...);
  }

  std::string where() const { return where(pos_); }
  std::string where(const char* at) const {
    return concat("at offset ", base_offset_ + size_t(at - base_), " in the input file (", path_,
                  ")");
  }

  template <typename... Parts>
  void warn(const Parts&... parts) {
    last_warning_ = concat(parts...);
    if (options_.trace_level >= kTraceWarning)
      log_.events.push_back({false, "WARNING: " + last_warning_});
  }

  template <typename... Parts>
  void info(const Parts&... parts) {
    if (options_.trace_level >= kTraceInfo)
      log_.events.push_back({false, concat("INFO: ", parts...)});
  }

  // One more malformed item: the replay fails once the budget of max_errors is spent.
  void count_error() { log_.events.push_back({true, last_warning_}); }

  Mark mark(size_t id) const {
    const StreamChunkData& d = chunk_->streams[id];
    return {d.nnz_begin.size(),
            streams_[id].dtype == DataType::Float32 ? d.values_f32.size() : d.values_f64.size()};
  }

  void rollback(size_t id, const Mark& m) {
    StreamChunkData& d = chunk_->streams[id];
    d.nnz_begin.resize(m.nnz);
    if (streams_[id].sparse) d.indices.resize(m.values);
    d.values_f32.resize(streams_[id].dtype == DataType::Float32 ? m.values : 0);
    d.values_f64.resize(streams_[id].dtype == DataType::Float64 ? m.values : 0);
  }

  void push_value(size_t id, double v) {
    StreamChunkData& d = chunk_->streams[id];
    if (streams_[id].dtype == DataType::Float32)
      d.values_f32.push_back(static_cast<float>(v));
    else
      d.values_f64.push_back(v);
  }

  // One line of a sequence; true when it held at least one sample.
  bool read_row() {
    while (pos_ < end_ && is_digit(*pos_)) ++pos_;  // the sequence id
    size_t samples = 0;
    while (pos_ < end_) {
      char c = *pos_;
      if (c == '\n') {
        ++pos_;
        if (samples == 0)
          warn("Empty input row ", where(), ".");
        else if (samples > streams_.size())
          warn("Input row ", where(), " contains more samples than expected (", samples, " vs. ",
               streams_.size(), ").");
        return samples > 0;
      }
      if (is_column_delimiter(c)) {
        ++pos_;
        continue;
      }
      if (read_sample())
        ++samples;
      else
        skip_to_next_input();
    }
    warn("Exhausted all input expected for the current sequence while reading an input row ",
         where(), ". Possibly, a trailing newline is missing.");
    return true;
  }

  // One '|name values' sample (or a '|#' comment, which yields no sample).
  bool read_sample() {
    if (*pos_ != '|') {
      warn("Unexpected character('", *pos_, "') in place of a name prefix ('|') in an input name ",
           where(), ".");
      count_error();
      return false;
    }
    ++pos_;
    if (pos_ < end_ && *pos_ == '#') {
      ++pos_;
      return false;
    }
    size_t id = 0;
    if (!read_input_id(id)) return false;
    Mark m = mark(id);
    bool ok = streams_[id].sparse ? read_sparse(id) : read_dense(id);
    if (!ok) {
      rollback(id, m);
      count_error();
      return false;
    }
    ++counts_[id];
    if (streams_[id].sparse) {
      StreamChunkData& d = chunk_->streams[id];
      d.nnz_begin.push_back(d.indices.size());
    }
    return true;
  }

  bool read_input_id(size_t& id) {
    const char* name = pos_;
    while (pos_ < end_) {
      char c = *pos_;
      if (is_value_delimiter(c) || c == '|' || is_non_printable(c)) {
        if (pos_ > name) {
          std::string_view alias(name, size_t(pos_ - name));
          for (const auto& [known, known_id] : aliases_) {
            if (alias == known) {
              id = known_id;
              return true;
            }
          }
          info("Skipping unknown input ('", alias, "') ", where(), ". Input name '", alias,
               "' was not specified in the reader config section.");
          return false;
        }
        warn("Input name prefix ('|') is followed by an invalid character ('", c, "') ", where(),
             ".");
        count_error();
        return false;
      }
      if (size_t(pos_ - name) == max_alias_) {
        info("Skipping unknown input ", where(), ". Input name (with the ", max_alias_,
             "-character prefix '", std::string_view(name, max_alias_),
             "') exceeds the maximum expected length (", max_alias_, ").");
        return false;
      }
      ++pos_;
    }
    warn("Exhausted all input expected for the current sequence while reading an input name ",
         where(), ".");
    count_error();
    return false;
  }

  bool read_dense(size_t id) {
    size_t dim = streams_[id].dim, count = 0;
    while (pos_ < end_) {
      char c = *pos_;
      if (is_value_delimiter(c)) {
        ++pos_;
        continue;
      }
      if (is_non_printable(c) || c == '|') return finish_dense(id, count, dim);
      double v;
      if (!read_value(id, v)) return false;
      push_value(id, v);
      ++count;
    }
    warn("Exhausted all input expected for the current sequence while reading a dense sample ",
         where(), ".");
    return count > 0 && finish_dense(id, count, dim);
  }

  bool finish_dense(size_t id, size_t count, size_t dim) {
    if (count > dim) {
      warn("Dense sample (size = ", count, ") ", where(), " exceeds the expected size (", dim,
           ").");
      return false;
    }
    if (count < dim) {
      // A dense sample may omit its all-zero tail (CNTK calls it a sparse suffix).
      warn("A dense sample ", where(), " has a sparse suffix (expected size = ", dim,
           ", actual size = ", count, ").");
      for (; count < dim; ++count) push_value(id, 0.0);
    }
    return true;
  }

  bool read_sparse(size_t id) {
    StreamChunkData& d = chunk_->streams[id];
    size_t first = d.indices.size(), dim = streams_[id].dim;
    while (pos_ < end_) {
      char c = *pos_;
      if (is_value_delimiter(c)) {
        ++pos_;
        continue;
      }
      if (is_non_printable(c) || c == '|') return true;  // '|y' alone is an empty sample
      uint64_t index;
      if (!read_index(index)) return false;
      if (index >= dim) {
        warn("Sparse index value (", index, ") ", where(), " exceeds the maximum expected value (",
             dim - 1, ").");
        return false;
      }
      if (*pos_ != ':') {
        warn("Unexpected character('", *pos_,
             "') in place of the index delimiter (':') after a sparse value index (", index, ") ",
             where(), ".");
        return false;
      }
      ++pos_;
      double v;
      if (!read_value(id, v)) return false;
      d.indices.push_back(static_cast<int32_t>(index));
      push_value(id, v);
    }
    warn("Exhausted all input expected for the current sequence while reading a sparse sample ",
         where(), ".");
    return d.indices.size() > first;
  }

  bool read_index(uint64_t& value) {
    value = 0;
    bool found = false;
    while (pos_ < end_) {
      char c = *pos_;
      if (!is_digit(c)) {
        if (!found) warn("Expected a uint64 value, but none found ", where(), ".");
        return found;
      }
      found = true;
      uint64_t digit = uint64_t(c - '0');
      if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        warn("Overflow while reading a uint64 value ", where(), ".");
        return false;
      }
      value = value * 10 + digit;
      ++pos_;
    }
    warn("Exhausted all input expected for the current sequence while reading a uint64 value ",
         where(), ".");
    return false;  // a well-formed sequence cannot end with an index
  }

  // A number that stream id's type holds: one whose magnitude rounds past the type's largest
  // finite value (1e999; 1e39 in float32) is malformed, as the text `inf` is
  // (docs/decisions.md, Reader).
  bool read_value(size_t id, double& value) {
    const char* start = pos_;
    if (!read_number(value)) return false;
    const bool f32 = streams_[id].dtype == DataType::Float32;
    if (std::isfinite(f32 ? double(static_cast<float>(value)) : value)) return true;
    warn("The floating point value '", std::string_view(start, size_t(pos_ - start)), "' ",
         where(start), " overflows ", f32 ? "float32" : "float64", " (largest magnitude ",
         f32 ? double(std::numeric_limits<float>::max()) : std::numeric_limits<double>::max(),
         ").");
    return false;
  }

  // [+-]digits[.digits][(e|E)[+-]digits] (CNTK's grammar, its warnings at the same places),
  // read as the nearest double, as strtod reads it (docs/decisions.md, Reader).
  bool read_number(double& value) {
    const char* first = pos_;
    Decimal d;
    bool negative = false, exp_negative = false;
    int64_t exp10 = 0;
    // Where the scan stopped: a valid end (the number is read) or an error.
    auto done = [&] {
      value = d.value(negative, exp_negative ? -exp10 : exp10, first, pos_);
      return true;
    };
    auto exhausted = [&](bool valid) {
      warn("Exhausted all input expected for the current sequence while reading an input row ",
           where(), ". Possibly, a trailing newline is missing.");
      if (valid) return done();
      warn("Reached an invalid state while reading a floating point value ", where(), ".");
      return false;
    };
    if (pos_ == end_) return exhausted(false);
    if (*pos_ == '+' || *pos_ == '-') {
      negative = *pos_++ == '-';
      if (pos_ == end_) return exhausted(false);
      if (!is_digit(*pos_)) {
        warn("A sign symbol is followed by an invalid character('", *pos_,
             "') in a floating point value ", where(), ".");
        return false;
      }
    } else if (!is_digit(*pos_)) {
      warn("Unexpected character ('", *pos_, "') in a floating point value ", where(), ".");
      return false;
    }
    while (pos_ < end_ && is_digit(*pos_)) d.integral_digit(*pos_++);
    if (pos_ == end_) return exhausted(true);
    if (*pos_ == '.') {
      ++pos_;
      if (pos_ == end_) return exhausted(true);
      if (!is_digit(*pos_)) return done();  // "2." ends here, even before an 'e'
      while (pos_ < end_ && is_digit(*pos_)) d.fraction_digit(*pos_++);
      if (pos_ == end_) return exhausted(true);
    }
    if (*pos_ != 'e' && *pos_ != 'E') return done();
    ++pos_;
    if (pos_ == end_) return exhausted(false);
    if (*pos_ == '+' || *pos_ == '-') {
      exp_negative = *pos_++ == '-';
      if (pos_ == end_) return exhausted(false);
      if (!is_digit(*pos_)) {
        warn("An exponent sign symbol followed by an unexpected character('", *pos_,
             "') in a floating point value ", where(), ".");
        return false;
      }
    } else if (!is_digit(*pos_)) {
      warn("An exponent symbol is followed by an invalid character('", *pos_,
           "') in a floating point value ", where(), ".");
      return false;
    }
    constexpr int64_t kExponentCap = int64_t{1} << 40;  // far past any double's range
    for (; pos_ < end_ && is_digit(*pos_); ++pos_)
      exp10 = std::min(exp10 * 10 + (*pos_ - '0'), kExponentCap);
    if (pos_ == end_) return exhausted(true);
    return done();
  }

  void skip_to_next_input() {
    while (pos_ < end_ && *pos_ != '|' && *pos_ != '\n') ++pos_;
  }

  const std::string& path_;
  const char* base_;    // the text
  size_t base_offset_;  // its offset in the file
  const std::vector<StreamSpec>& streams_;
  const std::vector<std::pair<std::string, size_t>>& aliases_;
  const CTFOptions& options_;
  ParseLog& log_;
  size_t max_alias_ = 0;
  bool has_defining_ = false;

  const char* pos_ = nullptr;
  const char* end_ = nullptr;
  Chunk* chunk_ = nullptr;
  std::vector<size_t> counts_;  // samples of each stream in the current sequence
  std::string last_warning_;
};

// One chunk of the pieces that hold its sequences, in order (moved when there is one).
std::shared_ptr<const Chunk> join(std::span<Chunk> pieces) {
  if (pieces.size() == 1) return std::make_shared<const Chunk>(std::move(pieces[0]));
  auto chunk = std::make_shared<Chunk>();
  chunk->streams.resize(pieces[0].streams.size());
  for (size_t i = 0; i < chunk->streams.size(); ++i) {
    StreamChunkData& d = chunk->streams[i];
    size_t samples = 0, nnz = 0, f32 = 0, f64 = 0;
    for (const Chunk& piece : pieces) {
      const StreamChunkData& p = piece.streams[i];
      samples += p.sample_begin.size() - 1;
      nnz += p.nnz_begin.size() - 1;
      f32 += p.values_f32.size();
      f64 += p.values_f64.size();
    }
    d.sample_begin.reserve(samples + 1);
    d.nnz_begin.reserve(nnz + 1);
    d.indices.reserve(nnz);
    d.values_f32.reserve(f32);
    d.values_f64.reserve(f64);
    for (const Chunk& piece : pieces) {
      const StreamChunkData& p = piece.streams[i];
      const size_t sample_base = d.sample_begin.back(), nnz_base = d.indices.size();
      for (size_t j = 1; j < p.sample_begin.size(); ++j)
        d.sample_begin.push_back(sample_base + p.sample_begin[j]);
      for (size_t j = 1; j < p.nnz_begin.size(); ++j)
        d.nnz_begin.push_back(nnz_base + p.nnz_begin[j]);
      d.indices.insert(d.indices.end(), p.indices.begin(), p.indices.end());
      d.values_f32.insert(d.values_f32.end(), p.values_f32.begin(), p.values_f32.end());
      d.values_f64.insert(d.values_f64.end(), p.values_f64.begin(), p.values_f64.end());
    }
  }
  for (const Chunk& piece : pieces)
    chunk->sequences.insert(chunk->sequences.end(), piece.sequences.begin(), piece.sequences.end());
  return chunk;
}

// Splits the file into sequences, reading it a block at a time: by id column, or one per
// line. With a stream that defines the minibatch size, only lines naming it count as rows, and
// sequences without such a line are dropped (as CNTK's index does).
class Indexer {
 public:
  Indexer(const std::string& path, bool skip_ids, const std::string& defining_alias)
      : path_(path),
        skip_ids_(skip_ids),
        pattern_(defining_alias.empty() ? "" : "|" + defining_alias) {}

  std::vector<RawSequence> run() {
    constexpr size_t kBlockBytes = size_t{16} << 20;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path_.c_str(), "rb"),
                                                      &std::fclose);
    LOOM_CHECK(f != nullptr, IOError, "Cannot open the input file (", path_,
               "): ", std::strerror(errno));
    // Blocks of at most the bytes left, so that a small file costs its size, not a block.
    struct stat st;
    size_t left = ::fstat(::fileno(f.get()), &st) == 0 && S_ISREG(st.st_mode)
                      ? size_t(st.st_size)
                      : std::numeric_limits<size_t>::max();
    std::string block;
    size_t offset = 0;  // file offset of block[0]
    bool first = true, last = false;
    std::vector<RawSequence> out;
    while (!last) {
      const size_t kept = block.size(), want = std::min(kBlockBytes, left);
      block.resize(kept + want);
      const size_t got = std::fread(block.data() + kept, 1, want, f.get());
      block.resize(kept + got);
      LOOM_CHECK(std::ferror(f.get()) == 0, IOError, "Cannot read the input file (", path_, ")");
      left -= std::min(left, got);
      last = got < want || left == 0;
      size_t start = 0;
      if (first) {
        auto starts_with = [&](const char* bom) {
          return block.compare(0, std::strlen(bom), bom) == 0;
        };
        LOOM_CHECK(!starts_with("\xFF\xFE") && !starts_with("\xFE\xFF"), DataError,
                   "Found a UTF-16 BOM at offset 0 in the input file (", path_,
                   "). UTF-16 encoding is not supported; convert the file to UTF-8.");
        start = starts_with("\xEF\xBB\xBF") ? 3 : 0;
        LOOM_CHECK(start < block.size(), DataError, "The input file (", path_,
                   ") is empty: no data at offset ", start, ".");
        by_line_ = skip_ids_ || block[start] == '|';
        first = false;
      }
      // Only whole lines are indexed until the last block.
      const size_t limit = last ? block.size() : block.rfind('\n') + 1;
      const size_t done = by_line_ ? lines(block, start, limit, offset, out)
                                   : sequences(block, start, limit, offset, last, out);
      block.erase(0, done);
      offset += done;
    }
    file_size_ = offset + block.size();
    return out;
  }

  size_t file_size() const { return file_size_; }

 private:
  // Whether the line [b, e) of text counts as a row.
  bool counts(const std::string& text, size_t b, size_t e) const {
    if (pattern_.empty()) return true;
    for (size_t at = text.find(pattern_, b); at != std::string::npos && at + pattern_.size() <= e;
         at = text.find(pattern_, at + 1)) {
      size_t next = at + pattern_.size();
      if (next == e || is_value_delimiter(text[next]) || text[next] == '|' ||
          is_non_printable(text[next]))
        return true;
    }
    return false;
  }
  // The sequence of bytes [begin, end) of the file; it holds at most as many rows as bytes.
  RawSequence sequence(size_t begin, size_t end, uint64_t key, uint32_t rows) const {
    LOOM_CHECK(end - begin <= std::numeric_limits<uint32_t>::max(), DataError,
               "The sequence at offset ", begin, " in the input file (", path_, ") holds ",
               end - begin, " bytes; the index holds at most 2^32 - 1 bytes a sequence.");
    return {begin, key, uint32_t(end - begin), rows};
  }
  static size_t line_end(const std::string& text, size_t b, size_t limit) {
    size_t e = text.find('\n', b);
    return e == std::string::npos || e >= limit ? limit : e + 1;
  }

  // Every line of [start, limit) is a sequence; returns where indexing stopped.
  size_t lines(const std::string& text, size_t start, size_t limit, size_t offset,
               std::vector<RawSequence>& out) {
    size_t b = start;
    for (; b < limit; ++line_) {
      size_t e = line_end(text, b, limit);
      if (counts(text, b, e)) out.push_back(sequence(offset + b, offset + e, line_, 1));
      b = e;
    }
    return b;
  }

  // Lines with the same id form a sequence; the last one of a block may go on in the next, so
  // it is indexed again with that block. Returns where indexing stopped.
  size_t sequences(const std::string& text, size_t start, size_t limit, size_t offset, bool last,
                   std::vector<RawSequence>& out) {
    const size_t first = out.size();
    for (size_t b = start; b < limit;) {
      size_t p = b, e = line_end(text, b, limit);
      uint64_t id = 0;
      for (; p < limit && is_digit(text[p]); ++p) {
        uint64_t digit = uint64_t(text[p] - '0');
        LOOM_CHECK(id <= (std::numeric_limits<uint64_t>::max() - digit) / 10, DataError,
                   "Overflow while reading a sequence id at offset ", offset + b,
                   " in the input file (", path_, ").");
        id = id * 10 + digit;
      }
      bool has_id = p > b;
      LOOM_CHECK(has_id || out.size() > first, DataError, "Expected a sequence id at offset ",
                 offset + b, " in the input file (", path_, "), none was found.");
      if (has_id && (out.size() == first || out.back().key != id)) {
        if (out.size() > first) out.back().bytes = uint32_t(offset + b - out.back().begin);
        out.push_back(sequence(offset + b, offset + limit, id, 0));
      }
      out.back().rows += counts(text, b, e);
      b = e;
    }
    size_t done = std::max(limit, start);
    if (!last && out.size() > first) {
      done = out.back().begin - offset;
      out.pop_back();
    }
    std::erase_if(out, [](const RawSequence& s) { return s.rows == 0; });
    return done;
  }

  const std::string& path_;
  const bool skip_ids_;
  const std::string pattern_;
  bool by_line_ = false;
  size_t line_ = 0;  // lines indexed so far (by-line keys)
  size_t file_size_ = 0;
};

// Replays what parsing reported, in order: prints the lines (when print), spends one unit of
// errors_left per error, and rethrows what ended parsing early.
void replay(const std::vector<ParseLog>& logs, size_t& errors_left, bool print,
            const std::string& path) {
  for (const ParseLog& log : logs) {
    for (const ParseLog::Event& e : log.events) {
      if (!e.counts) {
        if (print) std::cerr << e.text << "\n";
        continue;
      }
      LOOM_CHECK(errors_left > 0, DataError,
                 "Reached the maximum number of allowed errors while reading the input file (",
                 path, ").\nLast error: ", e.text);
      --errors_left;
    }
    if (log.failure) std::rethrow_exception(log.failure);
  }
}

}  // namespace

// What the constructor learned about the file, to parse any chunk again later: 28 bytes a
// sequence (its RawSequence and its length), the rest per chunk or per stream.
struct CTFDeserializer::Index {
  std::string path;
  CTFOptions options;
  std::vector<StreamSpec> specs;
  std::vector<std::pair<std::string, size_t>> aliases;  // field -> stream id
  std::vector<RawSequence> sequences;
  std::vector<uint32_t> samples;       // by sequence, as parsed (SequenceInfo::num_samples)
  std::vector<size_t> first_sequence;  // chunk k: sequences [first[k], first[k + 1])

  // The chunks [first, last) parsed: one Chunk per piece of about kPieceBytes of whole
  // sequences (pieces parse in parallel; chunks alone would leave threads idle on a file of
  // few chunks), what each piece reported, and the first piece of each chunk (and the end).
  struct Parsed {
    std::vector<Chunk> pieces;
    std::vector<ParseLog> logs;
    std::vector<size_t> first_piece;
  };
  Parsed parse(size_t first, size_t last) const {
    constexpr size_t kPieceBytes = size_t{1} << 20;
    const size_t begin = sequences[first_sequence[first]].begin;
    const std::string text = read_range(path, begin, sequences[first_sequence[last] - 1].end());
    struct Range {
      size_t first, last;  // sequences
    };
    std::vector<Range> ranges;
    Parsed out;
    auto bytes_of = [&](size_t i) { return size_t{sequences[i].bytes}; };
    for (size_t k = first; k < last; ++k) {
      out.first_piece.push_back(ranges.size());
      for (size_t i = first_sequence[k]; i < first_sequence[k + 1];) {
        Range range{i, i};
        for (size_t bytes = 0;
             i < first_sequence[k + 1] && (i == range.first || bytes + bytes_of(i) <= kPieceBytes);
             ++i)
          bytes += bytes_of(i);
        range.last = i;
        ranges.push_back(range);
      }
    }
    out.first_piece.push_back(ranges.size());
    out.pieces.resize(ranges.size());
    out.logs.resize(ranges.size());
    for_each_item(ranges.size(), reader_threads(options.num_threads), [&](size_t p) {
      out.pieces[p].streams.resize(specs.size());
      Parser parser(path, text, begin, specs, aliases, options, out.logs[p]);
      try {
        for (size_t i = ranges[p].first; i < ranges[p].last; ++i)
          parser.parse_sequence(sequences[i], out.pieces[p]);
      } catch (...) {
        out.logs[p].failure = std::current_exception();
      }
    });
    return out;
  }
};

CTFDeserializer::CTFDeserializer(const std::string& path, const StreamDefs& streams,
                                 CTFOptions options) {
  LOOM_CHECK(!streams.empty(), ArgumentError, "CTFDeserializer(", path, "): no streams given");
  LOOM_CHECK(options.chunk_size_bytes > 0, ArgumentError, "CTFDeserializer(", path,
             "): chunk_size_bytes must be positive");
  std::vector<StreamSpec> specs;
  std::vector<std::pair<std::string, size_t>> aliases;  // field -> stream id
  std::string defining, defining_alias;
  size_t num_defining = 0;
  for (const auto& [name, def] : streams) {
    const std::string& alias = def.field.empty() ? name : def.field;
    LOOM_CHECK(def.shape > 0, ArgumentError, "CTFDeserializer(", path, "): stream '", name,
               "' needs a positive shape (dimension)");
    LOOM_CHECK(!def.is_sparse || def.shape <= size_t(std::numeric_limits<int32_t>::max()),
               ArgumentError, "CTFDeserializer(", path, "): sparse stream '", name,
               "' has dimension ", def.shape, ", more than CSR indices can address");
    LOOM_CHECK(alias.find_first_of("| \t\n") == std::string::npos, ArgumentError,
               "CTFDeserializer(", path, "): stream field '", alias, "' contains a delimiter");
    for (const StreamInformation& s : streams_)
      LOOM_CHECK(s.name != name, ArgumentError, "CTFDeserializer(", path, "): stream '", name,
                 "' is defined twice");
    for (const auto& known : aliases)
      LOOM_CHECK(known.first != alias, ArgumentError, "CTFDeserializer(", path,
                 "): two streams read the field '", alias, "'");
    aliases.emplace_back(alias, specs.size());
    if (def.defines_mb_size) {
      defining += (num_defining++ ? ", " : "") + name;
      defining_alias = alias;
    }
    streams_.push_back({name, specs.size(),
                        def.is_sparse ? StorageFormat::SparseCSR : StorageFormat::Dense, def.dtype,
                        NDShape{def.shape}, def.defines_mb_size});
    specs.push_back({name, def.shape, def.is_sparse, def.dtype, def.defines_mb_size});
  }
  LOOM_CHECK(num_defining <= 1, ArgumentError,
             "Only a single stream is allowed to define the minibatch size, but ", num_defining,
             " found: ", defining, ".");

  auto index = std::make_unique<Index>();
  index->path = path;
  index->options = options;
  index->specs = std::move(specs);
  index->aliases = std::move(aliases);
  Indexer indexer(path, options.skip_sequence_ids, defining_alias);
  index->sequences = indexer.run();
  const std::vector<RawSequence>& sequences = index->sequences;
  // A chunk takes whole sequences up to chunk_size_bytes (at least one sequence).
  std::vector<size_t>& first_sequence = index->first_sequence;
  for (size_t i = 0, bytes = 0; i < sequences.size(); ++i) {
    size_t size = sequences[i].bytes;
    if (i == 0 || bytes + size > options.chunk_size_bytes) {
      first_sequence.push_back(i);
      bytes = 0;
    }
    bytes += size;
  }
  first_sequence.push_back(sequences.size());
  const size_t num_chunks = first_sequence.size() - 1;
  LOOM_CHECK(num_chunks > 0, DataError, "The input file (", path,
             ") holds no sequence with the stream that defines the minibatch size ('", defining,
             "'); its data ends at offset ", indexer.file_size(), ".");

  // Every chunk is parsed once now, a group of about kGroupBytes at a time, so that every
  // warning prints and every error surfaces here, in file order, and the lengths are exact;
  // the data is dropped and parsed again when a chunk is loaded.
  constexpr size_t kGroupBytes = size_t{64} << 20;
  size_t errors_left = options.max_errors;
  for (size_t first = 0; first < num_chunks;) {
    size_t last = first + 1;
    while (last < num_chunks &&
           sequences[first_sequence[last + 1] - 1].end() - sequences[first_sequence[first]].begin <=
               kGroupBytes)
      ++last;
    Index::Parsed parsed = index->parse(first, last);
    replay(parsed.logs, errors_left, true, path);
    for (size_t k = first; k < last; ++k) {
      ChunkInfo info;
      for (size_t p = parsed.first_piece[k - first]; p < parsed.first_piece[k - first + 1]; ++p)
        for (const SequenceInfo& s : parsed.pieces[p].sequences) {
          LOOM_CHECK(s.num_samples <= std::numeric_limits<uint32_t>::max(), DataError,
                     "Sequence (id = ", s.key, ") of the input file (", path, ") holds ",
                     s.num_samples, " samples; the index holds at most 2^32 - 1 a sequence.");
          index->samples.push_back(uint32_t(s.num_samples));
          info.num_samples += s.num_samples;
          ++info.num_sequences;
        }
      chunk_infos_.push_back(info);
    }
    first = last;
  }
  index_ = std::move(index);
}

CTFDeserializer::~CTFDeserializer() = default;

std::vector<SequenceInfo> CTFDeserializer::sequence_infos(size_t chunk) const {
  LOOM_CHECK(chunk < chunk_infos_.size(), ArgumentError, "CTFDeserializer: chunk ", chunk,
             " does not exist (", chunk_infos_.size(), " chunks)");
  std::vector<SequenceInfo> infos;
  for (size_t i = index_->first_sequence[chunk]; i < index_->first_sequence[chunk + 1]; ++i)
    infos.push_back({index_->samples[i], index_->sequences[i].key});
  return infos;
}

std::shared_ptr<const Chunk> CTFDeserializer::load_chunk(size_t chunk) {
  LOOM_CHECK(chunk < chunk_infos_.size(), ArgumentError, "CTFDeserializer: chunk ", chunk,
             " does not exist (", chunk_infos_.size(), " chunks)");
  Index::Parsed parsed = index_->parse(chunk, chunk + 1);
  // The constructor printed the warnings; errors are counted again, so a file changed since
  // fails as it would have there.
  size_t errors_left = index_->options.max_errors;
  replay(parsed.logs, errors_left, false, index_->path);
  std::shared_ptr<const Chunk> out = join(parsed.pieces);
  const size_t first = index_->first_sequence[chunk];
  for (size_t i = 0; i < chunk_infos_[chunk].num_sequences; ++i) {
    const RawSequence& seq = index_->sequences[first + i];
    LOOM_CHECK(i < out->sequences.size() &&
                   out->sequences[i].num_samples == index_->samples[first + i] &&
                   out->sequences[i].key == seq.key,
               DataError, "The input file (", index_->path,
               ") changed after it was indexed: sequence (id = ", seq.key, ") at offset ",
               seq.begin, " now reads otherwise");
  }
  return out;
}

}  // namespace loom
