#include "loom/io/ctf_deserializer.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <unordered_map>

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
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  bool failed = std::ferror(f) != 0;
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

// Parses the sequences of one file into chunks, following CNTK's TextParser (control flow,
// warnings and error accounting), so that malformed files fail or recover as they did there.
class Parser {
 public:
  Parser(const std::string& path, const std::string& text, std::vector<StreamSpec> streams,
         std::unordered_map<std::string, size_t> alias_to_id, const CTFOptions& options)
      : path_(path),
        base_(text.data()),
        streams_(std::move(streams)),
        alias_to_id_(std::move(alias_to_id)),
        options_(options),
        errors_left_(options.max_errors),
        counts_(streams_.size()) {
    for (const auto& [alias, id] : alias_to_id_) max_alias_ = std::max(max_alias_, alias.size());
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
        warn(concat("Could not read a row (# ", row, ") while loading sequence (id = ", seq.key,
                    ") ", where(), "."));
        count_error();
      }
    }
    if (rows_read < expected)
      warn(concat("Exhausted all input expected for the current sequence (id = ", seq.key, ") ",
                  where(), ", but only read ", rows_read, " out of ", expected, " expected rows."));

    std::string empty_input;
    bool duplicates = false;
    size_t length = 0;
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (counts_[i] == 0) {
        empty_input = concat("Input ('", streams_[i].name,
                             "') is empty in sequence (id = ", seq.key, ") ", where(), ".");
        std::cerr << "ERROR: " << empty_input << "\n";
      }
      if (has_defining_ && !streams_[i].defines) continue;
      length = std::max(length, counts_[i]);
      if (counts_[i] > expected) {
        duplicates = true;
        warn(concat("Input ('", streams_[i].name, "') contains more samples than expected (",
                    counts_[i], " vs. ", expected, ") for sequence (id = ", seq.key, ") ", where(),
                    "."));
      }
    }
    LOOM_CHECK(empty_input.empty(), DataError, "Malformed input file. Bailing out. ", empty_input);
    if (duplicates) {
      count_error();
    } else if (length < expected) {
      warn(concat("Number of samples for sequence (id = ", seq.key, ") ", where(),
                  " is less than expected (", length, " vs. ", expected, ")."));
      count_error();
    }
    info(concat("Finished loading sequence (id = ", seq.key, ") ", where(), ", successfully read ",
                rows_read, " out of expected ", expected, " rows."));

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

  void warn(std::string message) {
    if (options_.trace_level >= kTraceWarning) std::cerr << "WARNING: " << message << "\n";
    last_warning_ = std::move(message);
  }

  void info(const std::string& message) const {
    if (options_.trace_level >= kTraceInfo) std::cerr << "INFO: " << message << "\n";
  }

  // One more malformed item: fails once the budget of max_errors is spent.
  void count_error() {
    LOOM_CHECK(errors_left_ > 0, DataError,
               "Reached the maximum number of allowed errors while reading the input file (", path_,
               ").\nLast error: ", last_warning_);
    --errors_left_;
  }

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
          warn(concat("Empty input row ", where(), "."));
        else if (samples > streams_.size())
          warn(concat("Input row ", where(), " contains more samples than expected (", samples,
                      " vs. ", streams_.size(), ")."));
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
    warn(concat("Exhausted all input expected for the current sequence while reading an input row ",
                where(), ". Possibly, a trailing newline is missing."));
    return true;
  }

  // One '|name values' sample (or a '|#' comment, which yields no sample).
  bool read_sample() {
    if (*pos_ != '|') {
      warn(concat("Unexpected character('", *pos_,
                  "') in place of a name prefix ('|') in an input name ", where(), "."));
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
          std::string alias(name, pos_);
          auto it = alias_to_id_.find(alias);
          if (it != alias_to_id_.end()) {
            id = it->second;
            return true;
          }
          info(concat("Skipping unknown input ('", alias, "') ", where(), ". Input name '", alias,
                      "' was not specified in the reader config section."));
          return false;
        }
        warn(concat("Input name prefix ('|') is followed by an invalid character ('", c, "') ",
                    where(), "."));
        count_error();
        return false;
      }
      if (size_t(pos_ - name) == max_alias_) {
        info(concat("Skipping unknown input ", where(), ". Input name (with the ", max_alias_,
                    "-character prefix '", std::string(name, max_alias_),
                    "') exceeds the maximum expected length (", max_alias_, ")."));
        return false;
      }
      ++pos_;
    }
    warn(
        concat("Exhausted all input expected for the current sequence while reading an input name ",
               where(), "."));
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
    warn(concat(
        "Exhausted all input expected for the current sequence while reading a dense sample ",
        where(), "."));
    return count > 0 && finish_dense(id, count, dim);
  }

  bool finish_dense(size_t id, size_t count, size_t dim) {
    if (count > dim) {
      warn(concat("Dense sample (size = ", count, ") ", where(), " exceeds the expected size (",
                  dim, ")."));
      return false;
    }
    if (count < dim) {
      // A dense sample may omit its all-zero tail (CNTK calls it a sparse suffix).
      warn(concat("A dense sample ", where(), " has a sparse suffix (expected size = ", dim,
                  ", actual size = ", count, ")."));
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
        warn(concat("Sparse index value (", index, ") ", where(),
                    " exceeds the maximum expected value (", dim - 1, ")."));
        return false;
      }
      if (*pos_ != ':') {
        warn(concat("Unexpected character('", *pos_,
                    "') in place of the index delimiter (':') after a sparse value index (", index,
                    ") ", where(), "."));
        return false;
      }
      ++pos_;
      double v;
      if (!read_value(id, v)) return false;
      d.indices.push_back(static_cast<int32_t>(index));
      push_value(id, v);
    }
    warn(concat(
        "Exhausted all input expected for the current sequence while reading a sparse sample ",
        where(), "."));
    return d.indices.size() > first;
  }

  bool read_index(uint64_t& value) {
    value = 0;
    bool found = false;
    while (pos_ < end_) {
      char c = *pos_;
      if (!is_digit(c)) {
        if (!found) warn(concat("Expected a uint64 value, but none found ", where(), "."));
        return found;
      }
      found = true;
      uint64_t digit = uint64_t(c - '0');
      if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        warn(concat("Overflow while reading a uint64 value ", where(), "."));
        return false;
      }
      value = value * 10 + digit;
      ++pos_;
    }
    warn(concat(
        "Exhausted all input expected for the current sequence while reading a uint64 value ",
        where(), "."));
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
    warn(
        concat("The floating point value '", std::string(start, pos_), "' ", where(start),
               " overflows ", f32 ? "float32" : "float64", " (largest magnitude ",
               f32 ? double(std::numeric_limits<float>::max()) : std::numeric_limits<double>::max(),
               ")."));
    return false;
  }

  // [+-]digits[.digits][(e|E)[+-]digits], accumulated in double exactly as CNTK does (digit
  // by digit, fraction divided once, exponent through pow), so values round as they did there.
  bool read_number(double& value) {
    enum {
      Init,
      Sign,
      Integral,
      Period,
      Fraction,
      TheLetterE,
      ExponentSign,
      Exponent
    } state = Init;
    double coefficient = 0, number = 0, divider = 0;
    bool negative = false;
    auto result = [&]() {
      switch (state) {
        case Integral:
        case Period:
          value = negative ? -number : number;
          return true;
        case Fraction:
          coefficient += number / divider;
          value = negative ? -coefficient : coefficient;
          return true;
        case Exponent:  // 0e999 is 0, not 0 * inf
          value = coefficient == 0 ? coefficient
                                   : coefficient * std::pow(10.0, negative ? -number : number);
          return true;
        default:
          return false;
      }
    };
    for (; pos_ < end_; ++pos_) {
      char c = *pos_;
      switch (state) {
        case Init:
          if (is_digit(c)) {
            state = Integral;
            number = c - '0';
          } else if (c == '+' || c == '-') {
            state = Sign;
            negative = c == '-';
          } else {
            warn(concat("Unexpected character ('", c, "') in a floating point value ", where(),
                        "."));
            return false;
          }
          break;
        case Sign:
          if (!is_digit(c)) {
            warn(concat("A sign symbol is followed by an invalid character('", c,
                        "') in a floating point value ", where(), "."));
            return false;
          }
          state = Integral;
          number = c - '0';
          break;
        case Integral:
          if (is_digit(c)) {
            number = number * 10 + (c - '0');
          } else if (c == '.') {
            state = Period;
          } else if (c == 'e' || c == 'E') {
            state = TheLetterE;
            coefficient = negative ? -number : number;
            number = 0;
          } else {
            return result();
          }
          break;
        case Period:
          if (!is_digit(c)) return result();
          state = Fraction;
          coefficient = number;
          number = c - '0';
          divider = 10;
          break;
        case Fraction:
          if (is_digit(c)) {
            number = number * 10 + (c - '0');
            divider *= 10;
          } else if (c == 'e' || c == 'E') {
            state = TheLetterE;
            coefficient += number / divider;
            if (negative) coefficient = -coefficient;
          } else {
            return result();
          }
          break;
        case TheLetterE:
          if (is_digit(c)) {
            state = Exponent;
            negative = false;
            number = c - '0';
          } else if (c == '+' || c == '-') {
            state = ExponentSign;
            negative = c == '-';
          } else {
            warn(concat("An exponent symbol is followed by an invalid character('", c,
                        "') in a floating point value ", where(), "."));
            return false;
          }
          break;
        case ExponentSign:
          if (!is_digit(c)) {
            warn(concat("An exponent sign symbol followed by an unexpected character('", c,
                        "') in a floating point value ", where(), "."));
            return false;
          }
          state = Exponent;
          number = c - '0';
          break;
        case Exponent:
          if (!is_digit(c)) return result();
          number = number * 10 + (c - '0');
          break;
      }
    }
    warn(concat("Exhausted all input expected for the current sequence while reading an input row ",
                where(), ". Possibly, a trailing newline is missing."));
    if (result()) return true;
    warn(concat("Reached an invalid state while reading a floating point value ", where(), "."));
    return false;
  }

  void skip_to_next_input() {
    while (pos_ < end_ && *pos_ != '|' && *pos_ != '\n') ++pos_;
  }

  std::string path_;
  const char* base_;
  std::vector<StreamSpec> streams_;
  std::unordered_map<std::string, size_t> alias_to_id_;
  CTFOptions options_;
  size_t errors_left_;
  size_t max_alias_ = 0;
  bool has_defining_ = false;

  const char* pos_ = nullptr;
  const char* end_ = nullptr;
  Chunk* chunk_ = nullptr;
  std::vector<size_t> counts_;  // samples of each stream in the current sequence
  std::string last_warning_;
};

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
  std::unordered_map<std::string, size_t> alias_to_id;
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
    LOOM_CHECK(alias_to_id.emplace(alias, specs.size()).second, ArgumentError, "CTFDeserializer(",
               path, "): two streams read the field '", alias, "'");
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
  Parser parser(path, text, specs, std::move(alias_to_id), options);
  for (size_t i = 0; i < sequences.size();) {
    // A chunk takes whole sequences up to chunk_size_bytes (at least one sequence).
    auto chunk = std::make_shared<Chunk>();
    chunk->streams.resize(specs.size());
    for (size_t bytes = 0; i < sequences.size(); ++i) {
      size_t size = sequences[i].end - sequences[i].begin;
      if (bytes > 0 && bytes + size > options.chunk_size_bytes) break;
      bytes += size;
      parser.parse_sequence(sequences[i], *chunk);
    }
    ChunkInfo info{chunk->sequences.size(), 0};
    for (const SequenceInfo& s : chunk->sequences) info.num_samples += s.num_samples;
    chunk_infos_.push_back(info);
    chunks_.push_back(std::move(chunk));
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
