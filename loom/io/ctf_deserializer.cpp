#include "loom/io/ctf_deserializer.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
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

std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  LOOM_CHECK(f != nullptr, IOError, "Cannot open the input file (", path,
             "): ", std::strerror(errno));
  std::string text;
  bool failed = std::fseek(f, 0, SEEK_END) != 0;
  long size = failed ? -1 : std::ftell(f);
  failed = size < 0 || std::fseek(f, 0, SEEK_SET) != 0;
  if (!failed) {
    text.resize(static_cast<size_t>(size));
    failed = std::fread(text.data(), 1, text.size(), f) != text.size() || std::ferror(f) != 0;
  }
  std::fclose(f);
  LOOM_CHECK(!failed, IOError, "Cannot read the input file (", path, ")");
  return text;
}

// A sequence's byte range in the file, as the index finds it before parsing.
struct RawSequence {
  size_t begin, end;
  uint64_t key;
  size_t rows;
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
  Parser(const std::string& path, const std::string& text, const std::vector<StreamSpec>& streams,
         const std::vector<std::pair<std::string, size_t>>& aliases, const CTFOptions& options,
         ParseLog& log)
      : path_(path),
        base_(text.data()),
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
    pos_ = base_ + seq.begin;
    end_ = base_ + seq.end;
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
    return concat("at offset ", size_t(at - base_), " in the input file (", path_, ")");
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
  const char* base_;
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

// Splits the text into sequences: by id column, or one per line. With a stream that defines
// the minibatch size, only lines naming it count as rows, and sequences without such a line
// are dropped (as CNTK's index does).
std::vector<RawSequence> index_sequences(const std::string& path, const std::string& text,
                                         size_t start, bool skip_ids,
                                         const std::string& defining_alias) {
  std::vector<RawSequence> out;
  auto line_end = [&](size_t b) {
    size_t e = text.find('\n', b);
    return e == std::string::npos ? text.size() : e + 1;
  };
  std::string pattern = "|" + defining_alias;
  auto counts = [&](size_t b, size_t e) {
    if (defining_alias.empty()) return true;
    for (size_t at = text.find(pattern, b); at != std::string::npos && at + pattern.size() <= e;
         at = text.find(pattern, at + 1)) {
      size_t next = at + pattern.size();
      if (next == e || is_value_delimiter(text[next]) || text[next] == '|' ||
          is_non_printable(text[next]))
        return true;
    }
    return false;
  };
  if (skip_ids || text[start] == '|') {
    for (size_t b = start, line = 0; b < text.size(); ++line) {
      size_t e = line_end(b);
      if (counts(b, e)) out.push_back({b, e, line, 1});
      b = e;
    }
    return out;
  }
  for (size_t b = start; b < text.size();) {
    size_t p = b, e = line_end(b);
    uint64_t id = 0;
    for (; p < text.size() && is_digit(text[p]); ++p) {
      uint64_t digit = uint64_t(text[p] - '0');
      LOOM_CHECK(id <= (std::numeric_limits<uint64_t>::max() - digit) / 10, DataError,
                 "Overflow while reading a sequence id at offset ", b, " in the input file (", path,
                 ").");
      id = id * 10 + digit;
    }
    bool has_id = p > b;
    LOOM_CHECK(has_id || !out.empty(), DataError, "Expected a sequence id at offset ", b,
               " in the input file (", path, "), none was found.");
    if (has_id && (out.empty() || out.back().key != id)) {
      if (!out.empty()) out.back().end = b;
      out.push_back({b, text.size(), id, 0});
    }
    out.back().rows += counts(b, e);
    b = e;
  }
  std::erase_if(out, [](const RawSequence& s) { return s.rows == 0; });
  return out;
}

}  // namespace

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

  std::string text = read_file(path);
  auto starts_with = [&](const char* bom) { return text.compare(0, std::strlen(bom), bom) == 0; };
  LOOM_CHECK(!starts_with("\xFF\xFE") && !starts_with("\xFE\xFF"), DataError,
             "Found a UTF-16 BOM at offset 0 in the input file (", path,
             "). UTF-16 encoding is not supported; convert the file to UTF-8.");
  size_t start = starts_with("\xEF\xBB\xBF") ? 3 : 0;
  LOOM_CHECK(start < text.size(), DataError, "The input file (", path,
             ") is empty: no data at offset ", start, ".");

  std::vector<RawSequence> sequences =
      index_sequences(path, text, start, options.skip_sequence_ids, defining_alias);
  // A chunk takes whole sequences up to chunk_size_bytes (at least one sequence).
  std::vector<size_t> first_sequence;
  for (size_t i = 0, bytes = 0; i < sequences.size(); ++i) {
    size_t size = sequences[i].end - sequences[i].begin;
    if (i == 0 || bytes + size > options.chunk_size_bytes) {
      first_sequence.push_back(i);
      bytes = 0;
    }
    bytes += size;
  }
  first_sequence.push_back(sequences.size());
  const size_t num_chunks = first_sequence.size() - 1;

  // Chunks split into pieces of whole sequences, about kPieceBytes each, that parse in
  // parallel (chunks alone would leave threads idle on a file of few chunks); what each piece
  // reported is replayed in file order, then each chunk joins its pieces.
  constexpr size_t kPieceBytes = size_t{1} << 20;
  struct Piece {
    size_t chunk, first, last;  // sequences [first, last) of the chunk
  };
  std::vector<Piece> pieces;
  auto bytes_of = [&](size_t i) { return sequences[i].end - sequences[i].begin; };
  for (size_t k = 0; k < num_chunks; ++k) {
    for (size_t i = first_sequence[k]; i < first_sequence[k + 1];) {
      Piece piece{k, i, i};
      for (size_t bytes = 0;
           i < first_sequence[k + 1] && (i == piece.first || bytes + bytes_of(i) <= kPieceBytes);
           ++i)
        bytes += bytes_of(i);
      piece.last = i;
      pieces.push_back(piece);
    }
  }
  const size_t threads = reader_threads(options.num_threads);
  std::vector<Chunk> parts(pieces.size());
  std::vector<ParseLog> logs(pieces.size());
  for_each_item(pieces.size(), threads, [&](size_t p) {
    parts[p].streams.resize(specs.size());
    Parser parser(path, text, specs, aliases, options, logs[p]);
    try {
      for (size_t i = pieces[p].first; i < pieces[p].last; ++i)
        parser.parse_sequence(sequences[i], parts[p]);
    } catch (...) {
      logs[p].failure = std::current_exception();
    }
  });
  size_t errors_left = options.max_errors;
  for (const ParseLog& log : logs) {
    for (const ParseLog::Event& e : log.events) {
      if (!e.counts) {
        std::cerr << e.text << "\n";
        continue;
      }
      LOOM_CHECK(errors_left > 0, DataError,
                 "Reached the maximum number of allowed errors while reading the input file (",
                 path, ").\nLast error: ", e.text);
      --errors_left;
    }
    if (log.failure) std::rethrow_exception(log.failure);
  }
  std::vector<size_t> first_piece(num_chunks + 1, pieces.size());
  for (size_t p = pieces.size(); p-- > 0;) first_piece[pieces[p].chunk] = p;
  chunks_.resize(num_chunks);
  for_each_item(num_chunks, threads, [&](size_t k) {
    chunks_[k] =
        join(std::span(parts).subspan(first_piece[k], first_piece[k + 1] - first_piece[k]));
  });
  for (const auto& chunk : chunks_) {
    ChunkInfo info{chunk->sequences.size(), 0};
    for (const SequenceInfo& s : chunk->sequences) info.num_samples += s.num_samples;
    chunk_infos_.push_back(info);
  }
  LOOM_CHECK(!chunks_.empty(), DataError, "The input file (", path,
             ") holds no sequence with the stream that defines the minibatch size ('", defining,
             "'); its data ends at offset ", text.size(), ".");
}

std::vector<SequenceInfo> CTFDeserializer::sequence_infos(size_t chunk) const {
  LOOM_CHECK(chunk < chunks_.size(), ArgumentError, "CTFDeserializer: chunk ", chunk,
             " does not exist (", chunks_.size(), " chunks)");
  return chunks_[chunk]->sequences;
}

std::shared_ptr<const Chunk> CTFDeserializer::load_chunk(size_t chunk) {
  LOOM_CHECK(chunk < chunks_.size(), ArgumentError, "CTFDeserializer: chunk ", chunk,
             " does not exist (", chunks_.size(), " chunks)");
  return chunks_[chunk];
}

}  // namespace loom
