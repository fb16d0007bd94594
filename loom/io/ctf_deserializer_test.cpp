#include "loom/io/ctf_deserializer.h"
#include "loom/core/error_test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "loom/core/random.h"
#include "loom/io/minibatch_source.h"

#include "loom/io/io_test_util.h"

namespace loom {
namespace {

const std::string kReaderTests = LOOM_SHARED_DIR "/cntk-testdata/Tests/UnitTests/ReaderTests";
const std::string kData = kReaderTests + "/Data/CNTKTextFormatReader/";
const std::string kControl = kReaderTests + "/Control/CNTKTextFormatReader/";

using testing_io::write_temp;

std::shared_ptr<CTFDeserializer> load(const std::string& name, const std::string& content,
                                      const StreamDefs& streams, CTFOptions options = {}) {
  return std::make_shared<CTFDeserializer>(write_temp(name, content), streams, options);
}

// Stream `stream` of sequence `seq` (in file order) as dense values.
std::vector<float> dense_values(Deserializer& d, size_t stream, size_t seq) {
  for (size_t k = 0; k < d.chunk_infos().size(); ++k) {
    auto chunk = d.load_chunk(k);
    if (seq >= chunk->sequences.size()) {
      seq -= chunk->sequences.size();
      continue;
    }
    const StreamChunkData& s = chunk->streams[stream];
    size_t dim = d.stream_infos()[stream].sample_shape.total_size();
    std::vector<float> out(s.length(seq) * dim);
    if (d.stream_infos()[stream].is_sparse()) {
      for (size_t i = 0; i < s.length(seq); ++i) {
        size_t sample = s.sample_begin[seq] + i;
        for (size_t j = s.nnz_begin[sample]; j < s.nnz_begin[sample + 1]; ++j)
          out[i * dim + s.indices[j]] += s.values_f32[j];
      }
    } else {
      auto first = s.values_f32.begin() + s.sample_begin[seq] * dim;
      std::copy(first, first + out.size(), out.begin());
    }
    return out;
  }
  ADD_FAILURE() << "no sequence " << seq;
  return {};
}

using V = std::vector<float>;

TEST(CTFDeserializer, SequencesSpanRowsAndStreamsHaveTheirOwnLengths) {
  auto d = load("seq.ctf",
                "7 |x 1 2 |y 3:1.5\n"
                "7 |x 3 4\n"
                "7\t|x 5 6 |# a comment |unknown 1 2 3\n"
                "8 |y |x 7 8\n",
                {{"x", StreamDef{.shape = 2}}, {"y", StreamDef{.shape = 4, .is_sparse = true}}});
  ASSERT_EQ(d->number_of_sequences(), 2u);
  auto infos = d->sequence_infos(0);
  EXPECT_EQ(infos[0].key, 7u);
  EXPECT_EQ(infos[0].num_samples, 3u);
  EXPECT_EQ(infos[1].key, 8u);
  EXPECT_EQ(infos[1].num_samples, 1u);
  EXPECT_EQ(dense_values(*d, 0, 0), (V{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(dense_values(*d, 1, 0), (V{0, 0, 0, 1.5}));
  EXPECT_EQ(dense_values(*d, 0, 1), (V{7, 8}));
  EXPECT_EQ(dense_values(*d, 1, 1), (V{0, 0, 0, 0}));  // an empty sparse sample is legal
  EXPECT_EQ(d->chunk_infos()[0].num_samples, 4u);
}

TEST(CTFDeserializer, DefinesMbSizeSetsTheSequenceLength) {
  std::string text = "0 |a 1 |b 1\n0 |a 2\n0 |a 3\n1 |b 2 |a 4\n1 |b 3\n";
  auto d =
      load("defines.ctf", text,
           {{"a", StreamDef{.shape = 1}}, {"b", StreamDef{.shape = 1, .defines_mb_size = true}}});
  auto infos = d->sequence_infos(0);
  EXPECT_EQ(infos[0].num_samples, 1u);
  EXPECT_EQ(infos[1].num_samples, 2u);
  EXPECT_EQ(dense_values(*d, 0, 0), (V{1, 2, 3}));
  EXPECT_THROW(load("defines2.ctf", text,
                    {{"a", StreamDef{.shape = 1, .defines_mb_size = true}},
                     {"b", StreamDef{.shape = 1, .defines_mb_size = true}}}),
               ArgumentError);
}

TEST(CTFDeserializer, LinesAreSequencesWhenTheFileStartsWithABar) {
  auto d = load("lines.ctf", "\xEF\xBB\xBF|x 1 |y 2\n|y 3 |x 4\n|x 5 |y 6",
                {{"x", StreamDef{.shape = 1}}, {"y", StreamDef{.field = "y", .shape = 1}}});
  ASSERT_EQ(d->number_of_sequences(), 3u);
  EXPECT_EQ(dense_values(*d, 0, 1), (V{4}));
  EXPECT_EQ(dense_values(*d, 1, 2), (V{6}));  // no trailing newline: still read
  EXPECT_EQ(d->sequence_infos(0)[2].key, 2u);
}

TEST(CTFDeserializer, SkipSequenceIdsMakesEveryLineASequence) {
  auto d = load("skipids.ctf", "1 |x 1\n1 |x 2\n", {{"x", StreamDef{.shape = 1}}},
                {.skip_sequence_ids = true});
  EXPECT_EQ(d->number_of_sequences(), 2u);
}

TEST(CTFDeserializer, ShortDenseSamplesAreZeroFilled) {
  auto d = load("short.ctf", "|x 1\n|x\n", {{"x", StreamDef{.shape = 3}}});
  EXPECT_EQ(dense_values(*d, 0, 0), (V{1, 0, 0}));
  EXPECT_EQ(dense_values(*d, 0, 1), (V{0, 0, 0}));
}

TEST(CTFDeserializer, NumberGrammar) {
  auto d = load("numbers.ctf", "|x 20. 02.0 -1e3 1E-2 +3 -0.5e+1 7\t8\n",
                {{"x", StreamDef{.shape = 8, .dtype = DataType::Float64}}});
  auto chunk = d->load_chunk(0);
  EXPECT_EQ(chunk->streams[0].values_f64, (std::vector<double>{20, 2, -1000, 0.01, 3, -5, 7, 8}));
  EXPECT_TRUE(chunk->streams[0].values_f32.empty());
  for (std::string bad : {".5", "2,0", "nan", "inf", "2.0f", "1e", "1e+", "-", "0x1"}) {
    std::string msg = message_of<DataError>([&] {
      load("bad_number.ctf", "|x 1\n|x " + bad + " 2\n", {{"x", StreamDef{.shape = 2}}});
    });
    EXPECT_NE(msg.find("bad_number.ctf"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("at offset "), std::string::npos) << bad << ": " << msg;
  }
}

// A value beyond the stream type's range is malformed, as `inf` is; underflow rounds to 0.
TEST(CTFDeserializer, ValuesThatOverflowTheStreamTypeAreMalformed) {
  const std::string zeros(400, '0');
  const std::vector<std::pair<std::string, DataType>> cases{{"1e999", DataType::Float32},
                                                            {"-1e999", DataType::Float32},
                                                            {"1e39", DataType::Float32},
                                                            {"-3.5e38", DataType::Float32},
                                                            {"1e309", DataType::Float64}};
  for (const auto& [bad, dtype] : cases) {
    const DataType type = dtype;  // for the lambda
    for (std::string text : {"|x " + bad + " 2\n", "|x 1 " + bad + "\n"}) {
      std::string msg = message_of<DataError>([&] {
        load("overflow.ctf", text, {{"x", StreamDef{.shape = 2, .dtype = type}}});
      });
      const size_t offset = text.find(bad);
      EXPECT_NE(msg.find("The floating point value '" + bad + "' at offset " +
                         std::to_string(offset) + " in the input file ("),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find(dtype == DataType::Float32 ? "overflows float32" : "overflows float64"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("overflow.ctf"), std::string::npos) << msg;
    }
  }
  std::string msg = message_of<DataError>([&] {
    load("overflow_digits.ctf", "|y 1:1" + zeros + "\n",
         {{"y", StreamDef{.shape = 2, .is_sparse = true}}});
  });
  EXPECT_NE(msg.find("overflows float32"), std::string::npos) << msg;
  // The largest float32 as printed with 8 digits rounds to it; tiny values round to 0.
  auto d = load("range.ctf", "|x 3.4028235e38 -1e-999 0e999 1e-46 0." + zeros + "1\n",
                {{"x", StreamDef{.shape = 5}}});
  EXPECT_EQ(d->load_chunk(0)->streams[0].values_f32,
            (std::vector<float>{std::numeric_limits<float>::max(), -0.0f, 0, 0, 0}));
}

TEST(CTFDeserializer, MalformedInputNamesFileAndOffset) {
  std::string msg = message_of<DataError>([] {
    load("malformed.ctf", "|x 1 2\n|x 1 ?\n", {{"x", StreamDef{.shape = 2}}});
  });
  EXPECT_NE(msg.find("Reached the maximum number of allowed errors while reading the input "
                     "file ("),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("Unexpected character ('?') in a floating point value at offset 12 in the "
                     "input file ("),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("malformed.ctf"), std::string::npos);
}

TEST(CTFDeserializer, TooManyValuesAndSparseIndexOutOfRange) {
  std::string msg = message_of<DataError>([] {
    load("toomany.ctf", "|x 1 2 3\n", {{"x", StreamDef{.shape = 2}}});
  });
  EXPECT_NE(msg.find("Dense sample (size = 3) at offset 8 in the input file ("), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("toomany.ctf"), std::string::npos);
  msg = message_of<DataError>([] {
    load("sparse_range.ctf", "|y 1:1 5:2\n", {{"y", StreamDef{.shape = 5, .is_sparse = true}}});
  });
  EXPECT_NE(msg.find("Sparse index value (5) at offset 8 in the input file ("), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("sparse_range.ctf"), std::string::npos);
}

// Numbers the file gives for sizes and positions stop before they overflow: sequence ids and
// sparse indices past 2^64 - 1 are malformed, and a sparse stream's dimension fits CSR's int32
// indices. (A sequence of over 2^32 - 1 bytes or samples is a DataError too; no test writes one.)
TEST(CTFDeserializer, IdsAndIndicesFromTheFileCannotOverflow) {
  const StreamDefs y{{"y", StreamDef{.shape = 5, .is_sparse = true}}};
  auto d = load("max_id.ctf", "18446744073709551615 |y 1:1\n", y);
  EXPECT_EQ(d->sequence_infos(0)[0].key, 18446744073709551615u);
  std::string msg = message_of<DataError>(
      [&] { load("big_id.ctf", "0 |y 1:1\n18446744073709551616 |y 1:1\n", y); });
  EXPECT_NE(msg.find("Overflow while reading a sequence id at offset 9 in the input file ("),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("big_id.ctf"), std::string::npos) << msg;
  msg = message_of<DataError>([&] { load("big_index.ctf", "|y 18446744073709551616:1\n", y); });
  EXPECT_NE(msg.find("Overflow while reading a uint64 value at offset"), std::string::npos) << msg;
  EXPECT_NE(msg.find("big_index.ctf"), std::string::npos) << msg;
  EXPECT_THROW(
      load("wide.ctf", "|y 1:1\n", {{"y", StreamDef{.shape = size_t(1) << 31, .is_sparse = true}}}),
      ArgumentError);
}

TEST(CTFDeserializer, ErrorBudgetCountsEachMalformedItem) {
  // Row 2's bad value costs three units: the sample, the row, and the short sequence.
  std::string text = "0 |x 1\n0 |x 2,0\n0 |x 3\n";
  StreamDefs x{{"x", StreamDef{.shape = 1}}};
  for (size_t budget : {0, 1, 2})
    EXPECT_THROW(load("budget.ctf", text, x, {.max_errors = budget, .trace_level = 0}), DataError);
  auto d = load("budget.ctf", text, x, {.max_errors = 3, .trace_level = 0});
  EXPECT_EQ(dense_values(*d, 0, 0), (V{1, 3}));
  EXPECT_EQ(d->sequence_infos(0)[0].num_samples, 2u);
}

TEST(CTFDeserializer, FileLevelErrors) {
  StreamDefs x{{"x", StreamDef{.shape = 1}}};
  std::string msg = message_of<IOError>([&] { CTFDeserializer("/nonexistent/dir/none.ctf", x); });
  EXPECT_NE(msg.find("/nonexistent/dir/none.ctf"), std::string::npos) << msg;
  msg = message_of<DataError>([&] { load("utf16.ctf", "\xFF\xFE|\0x\0", x); });
  EXPECT_NE(msg.find("UTF-16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("utf16.ctf"), std::string::npos) << msg;
  for (std::string empty : {std::string(), std::string("\xEF\xBB\xBF")}) {
    msg = message_of<DataError>([&] { load("empty.ctf", empty, x); });
    EXPECT_NE(msg.find("empty.ctf"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is empty"), std::string::npos) << msg;
    EXPECT_NE(msg.find("offset"), std::string::npos) << msg;
  }
  msg = message_of<DataError>([&] { load("noid.ctf", " |x 1\n", x); });
  EXPECT_NE(msg.find("Expected a sequence id at offset 0"), std::string::npos) << msg;
  // A stream with no sample in a sequence is fatal whatever the budget.
  msg = message_of<DataError>([&] {
    load("bail.ctf", "0 |x 1\n", {{"x", StreamDef{.shape = 1}}, {"y", StreamDef{.shape = 1}}},
         {.max_errors = 100});
  });
  EXPECT_NE(msg.find("Malformed input file. Bailing out."), std::string::npos) << msg;
  EXPECT_NE(msg.find("Input ('y') is empty in sequence (id = 0) at offset 7"), std::string::npos)
      << msg;
}

TEST(CTFDeserializer, BadStreamDefinitions) {
  EXPECT_THROW(load("defs.ctf", "|x 1\n", {}), ArgumentError);
  EXPECT_THROW(load("defs.ctf", "|x 1\n", {{"x", StreamDef{}}}), ArgumentError);
  EXPECT_THROW(
      load("defs.ctf", "|x 1\n", {{"x", StreamDef{.shape = 1}}, {"x", StreamDef{.shape = 1}}}),
      ArgumentError);
  EXPECT_THROW(load("defs.ctf", "|x 1\n",
                    {{"a", StreamDef{.field = "x", .shape = 1}},
                     {"b", StreamDef{.field = "x", .shape = 1}}}),
               ArgumentError);
}

TEST(CTFDeserializer, ChunksSplitAtSequenceBoundaries) {
  std::string text;
  for (int i = 0; i < 20; ++i) text += std::to_string(i) + " |x " + std::to_string(i) + "\n";
  auto d = load("chunks.ctf", text, {{"x", StreamDef{.shape = 1}}}, {.chunk_size_bytes = 20});
  EXPECT_GT(d->chunk_infos().size(), 5u);
  size_t seen = 0;
  for (size_t k = 0; k < d->chunk_infos().size(); ++k) {
    auto infos = d->sequence_infos(k);
    EXPECT_EQ(infos.size(), d->chunk_infos()[k].num_sequences);
    for (const SequenceInfo& s : infos) EXPECT_EQ(s.key, seen++);
  }
  EXPECT_EQ(seen, 20u);
  EXPECT_EQ(dense_values(*d, 0, 13), (V{13}));
}

// Random decimals (signs, up to 25 integral and 25 fraction digits, exponents) of orders of
// magnitude in [lowest, highest], as CTF lines of per_line values; the texts in order.
std::vector<std::string> random_decimals(RandomGenerator& rng, size_t count, long lowest,
                                         long highest) {
  auto below = [&](size_t n) { return size_t(rng.uniform() * double(n)); };
  std::vector<std::string> numbers;
  for (size_t i = 0; i < count; ++i) {
    std::string n = std::vector<std::string>{"", "+", "-"}[below(3)];
    const size_t integral = 1 + below(below(2) ? 3 : 25), fraction = below(3) ? below(25) : 0;
    for (size_t d = 0; d < integral; ++d) n += char('0' + below(10));
    const bool exponent_part = below(2);
    if (fraction > 0 || (!exponent_part && below(8) == 0)) n += '.';  // "1." but not "1.e5"
    for (size_t d = 0; d < fraction; ++d) n += char('0' + below(10));
    if (exponent_part) {
      const long exponent = lowest + long(below(size_t(highest - lowest + 1))) - long(integral);
      n += below(2) ? 'e' : 'E';
      n += exponent < 0 ? "-" : (below(2) ? "+" : "");
      n += std::to_string(std::labs(exponent));
    }
    numbers.push_back(n);
  }
  return numbers;
}

// The values of stream 0 of every chunk, in order.
template <typename T>
std::vector<T> all_values(Deserializer& d) {
  std::vector<T> out;
  for (size_t k = 0; k < d.chunk_infos().size(); ++k) {
    const std::shared_ptr<const Chunk> chunk = d.load_chunk(k);
    const auto& v = chunk->streams[0].values<T>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// A million random decimals read exactly as strtod reads them (subnormals to the largest
// doubles), and float32 streams get strtod's double rounded to float.
TEST(CTFDeserializer, NumbersAreReadAsStrtodReadsThem) {
  RandomGenerator rng(16);
  const size_t per_line = 1000;
  for (DataType dtype : {DataType::Float64, DataType::Float32}) {
    const bool f64 = dtype == DataType::Float64;
    // Orders of magnitude that the type holds (float32: 1e-50 rounds to 0).
    std::vector<std::string> numbers =
        random_decimals(rng, f64 ? 1000000 : 200000, f64 ? -330 : -50, f64 ? 300 : 36);
    std::string text;
    for (size_t i = 0; i < numbers.size(); ++i)
      text += (i % per_line == 0 ? "|x " : " ") + numbers[i] +
              (i % per_line + 1 == per_line ? "\n" : "");
    CTFDeserializer d(write_temp("strtod.ctf", text),
                      {{"x", StreamDef{.shape = per_line, .dtype = dtype}}});
    std::vector<double> got = f64 ? all_values<double>(d) : std::vector<double>();
    std::vector<float> got32 = f64 ? std::vector<float>() : all_values<float>(d);
    ASSERT_EQ(f64 ? got.size() : got32.size(), numbers.size());
    size_t wrong = 0;
    for (size_t i = 0; i < numbers.size(); ++i) {
      const double want = std::strtod(numbers[i].c_str(), nullptr);
      const bool same =
          f64 ? std::memcmp(&want, &got[i], sizeof want) == 0
              : float(want) == got32[i] && std::signbit(float(want)) == std::signbit(got32[i]);
      if (!same && ++wrong <= 10)
        ADD_FAILURE() << numbers[i] << ": strtod " << want << ", read "
                      << (f64 ? got[i] : double(got32[i]));
    }
    EXPECT_EQ(wrong, 0u) << to_string(dtype);
  }
}

// Chunks are cut into pieces that parse in parallel: what is read, printed and thrown is the
// same at any thread count.
TEST(CTFDeserializer, ThreadsDoNotChangeWhatIsReadPrintedOrThrown) {
  std::string text;
  for (int i = 0; i < 3000; ++i) {
    text += std::to_string(i) + " |x " + std::to_string(i) + " " + std::to_string(i % 7) +
            (i % 5 == 0 ? " |y 3:1\n" : " |y\n");
    if (i % 400 == 7) text += std::to_string(i) + " |x 1 ?\n";  // costs three errors
  }
  const std::string path = write_temp("threads.ctf", text);
  StreamDefs defs{{"x", StreamDef{.shape = 2}}, {"y", StreamDef{.shape = 4, .is_sparse = true}}};
  auto read = [&](size_t threads, size_t max_errors, std::string& printed) {
    testing::internal::CaptureStderr();
    std::string result;
    try {
      CTFDeserializer d(
          path, defs, {.max_errors = max_errors, .chunk_size_bytes = 5000, .num_threads = threads});
      for (size_t k = 0; k < d.chunk_infos().size(); ++k) {
        auto c = d.load_chunk(k);
        for (const SequenceInfo& s : c->sequences)
          result += std::to_string(s.key) + ":" + std::to_string(s.num_samples) + " ";
        for (const StreamChunkData& s : c->streams) {
          for (size_t b : s.sample_begin) result += std::to_string(b) + ",";
          for (size_t b : s.nnz_begin) result += std::to_string(b) + ",";
          for (int32_t i : s.indices) result += std::to_string(i) + ",";
          for (float v : s.values_f32) result += std::to_string(v) + ",";
          result += "|";
        }
      }
    } catch (const DataError& e) {
      result = std::string("DataError: ") + e.what();
    }
    printed = testing::internal::GetCapturedStderr();
    return result;
  };
  for (size_t max_errors : {size_t{100}, size_t{10}}) {
    std::string printed_one, printed_many;
    const std::string one = read(1, max_errors, printed_one);
    EXPECT_EQ(one.rfind("DataError", 0) == 0, max_errors == 10) << one.substr(0, 200);
    EXPECT_NE(printed_one.find("WARNING"), std::string::npos);
    for (size_t threads : {2, 5}) {
      EXPECT_EQ(read(threads, max_errors, printed_many), one) << threads << " threads";
      EXPECT_EQ(printed_many, printed_one) << threads << " threads";
    }
  }
}

// ---- CNTK conformance: Tests/UnitTests/ReaderTests (MANIFEST.md §1) ----

struct Stream {
  std::string name, alias;
  size_t dim;
  bool sparse = false;
};

struct ConformanceCase {
  std::string data, control;
  std::vector<Stream> streams;  // in output order: features1..N, labels1..M
  DataType dtype;
  size_t epoch_size, mb_size, epochs;
  bool randomize;
  int defining = 0;  // the stream carrying $defMBSize$, -1 if none
  CTFOptions options = {};
};

std::vector<std::string> tokens(std::istream& in) {
  return {std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
}

// Writes a stream's minibatch as CNTK's reader tests do: sequences packed into parallel rows
// first-fit (MBLayout::InitAsPackedSequences), then column t * rows + s, gaps skipped, each
// sample on a line, values printed with ostream defaults.
template <typename T>
void render(const Value& v, std::ostream& out) {
  size_t batch = v.num_sequences(), width = v.max_sequence_length();
  size_t dim = v.sample_shape().total_size();
  std::vector<size_t> lengths = v.sequence_lengths(), row_end;
  std::vector<std::vector<std::pair<size_t, size_t>>> at;  // [row][t] -> (sequence + 1, step)
  for (size_t b = 0; b < batch; ++b) {
    size_t row = 0;
    while (row < row_end.size() && row_end[row] + lengths[b] > width) ++row;
    if (row == row_end.size()) {
      row_end.push_back(0);
      at.emplace_back(width, std::make_pair(size_t{0}, size_t{0}));
    }
    for (size_t t = 0; t < lengths[b]; ++t) at[row][row_end[row] + t] = {b + 1, t};
    row_end[row] += lengths[b];
  }
  std::vector<T> values = v.data().to_vector<T>();
  for (size_t col = 0; col < width * row_end.size(); ++col) {
    auto [seq, step] = at[col % row_end.size()][col / row_end.size()];
    if (seq == 0) continue;
    for (size_t j = 0; j < dim; ++j)
      out << values[((seq - 1) * width + step) * dim + j] << (j + 1 == dim ? "\n" : " ");
  }
}

std::string run_case(const ConformanceCase& c, bool defines_mb_size) {
  StreamDefs defs;
  for (size_t i = 0; i < c.streams.size(); ++i)
    defs.push_back(
        {c.streams[i].name, StreamDef{.field = c.streams[i].alias,
                                      .shape = c.streams[i].dim,
                                      .is_sparse = c.streams[i].sparse,
                                      .dtype = c.dtype,
                                      .defines_mb_size = defines_mb_size && int(i) == c.defining}});
  MinibatchSource source(std::make_shared<CTFDeserializer>(kData + c.data, defs, c.options),
                         {.randomize = c.randomize, .max_samples = c.epoch_size * c.epochs});
  auto position = [&] {
    return size_t(source.get_checkpoint_state().get<uint64_t>("minibatchSourcePosition"));
  };
  std::ostringstream out;
  for (size_t epoch = 0; epoch < c.epochs; ++epoch) {
    size_t end = (epoch + 1) * c.epoch_size;
    // CNTK's helper reads at most 10 minibatches per epoch; minibatches end at epoch ends.
    for (int count = 0; count < 10 && position() < end; ++count) {
      auto mb = source.next_minibatch(std::min(c.mb_size, end - position()));
      for (const Stream& s : c.streams) {
        const Value& v = mb.at(source[s.name]).data;
        if (c.dtype == DataType::Float32)
          render<float>(v, out);
        else
          render<double>(v, out);
      }
    }
    EXPECT_EQ(position(), end) << c.data << ": epoch " << epoch << " ends elsewhere";
  }
  return out.str();
}

void expect_matches_control(const ConformanceCase& c, bool defines_mb_size) {
  SCOPED_TRACE(c.control + (defines_mb_size ? " (defines_mb_size)" : ""));
  std::istringstream produced(run_case(c, defines_mb_size));
  std::ifstream control(kControl + c.control);
  ASSERT_TRUE(control) << kControl + c.control;
  std::vector<std::string> want = tokens(control), got = tokens(produced);
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i)
    ASSERT_EQ(got[i], want[i]) << "first difference at token " << i;
  ASSERT_EQ(got.size(), want.size());
}

std::vector<Stream> mi_dense() {
  return {{"features1", "F1", 1},    {"features2", "F2", 10}, {"features3", "F3", 100},
          {"features4", "F4", 1000}, {"labels1", "L1", 1},    {"labels2", "L2", 10},
          {"labels3", "L3", 100}};
}

std::vector<Stream> mi_sparse() {
  return {
      {"features1", "F0", 2, true}, {"features2", "F1", 20, true}, {"features3", "F2", 200, true}};
}

const DataType F = DataType::Float32, D = DataType::Float64;

// randomize=true cases hold one sequence or identical ones, so CNTK's shuffle order is moot.
std::vector<ConformanceCase> conformance_cases() {
  return {
      {"Simple_dense.txt",
       "Simple_dense.txt",
       {{"features", "F", 2}, {"labels", "L", 2}},
       F,
       1000,
       250,
       10,
       false},
      {"Simple_dense.txt",
       "Simple_dense_single_stream.txt",
       {{"features", "F", 2}},
       F,
       1000,
       250,
       10,
       false},
      {"10x10_dense.txt", "10x10_dense.txt", {{"features", "F0", 5}}, F, 100, 100, 1, false},
      {"50x20_jagged_sequences_dense.txt",
       "50x20_jagged_sequences_dense.txt",
       {{"features", "F0", 3}},
       D,
       508,
       508,
       1,
       false},
      {"1x1_dense.txt", "1x1_1_dense.txt", {{"features", "F", 10000}}, D, 1, 1, 1, true},
      {"1x1_dense.txt", "1x1_2_dense.txt", {{"features", "F", 10000}}, D, 2, 1, 3, true},
      {"1x2_dense.txt", "1x2_dense.txt", {{"features", "F0", 100}}, D, 2, 2, 1, true},
      {"1x10_dense.txt", "1x10_dense.txt", {{"features", "F0", 10}}, F, 10, 10, 1, true},
      {"10x1_MI_dense.txt",
       "10x1_MI_1_dense.txt",
       mi_dense(),
       F,
       10,
       1,
       3,
       true,
       0,
       {.chunk_size_bytes = 50000}},
      {"10x1_MI_dense.txt",
       "10x1_MI_2_dense.txt",
       mi_dense(),
       F,
       7,
       3,
       3,
       true,
       0,
       {.chunk_size_bytes = 50000}},
      {"100x1_dense.txt",
       "100x1_1_dense.txt",
       {{"features", "F", 100}, {"labels", "L", 100}},
       D,
       10,
       1,
       10,
       true,
       1,
       {.chunk_size_bytes = 10000}},
      {"100x1_dense.txt",
       "100x1_2_dense.txt",
       {{"features", "F", 100}, {"labels", "L", 100}},
       D,
       5,
       3,
       4,
       true,
       1,
       {.chunk_size_bytes = 10000}},
      {"10x10_sparse.txt",
       "10x10_sparse.txt",
       {{"features", "F0", 100, true}},
       D,
       100,
       100,
       1,
       false},
      {"3x5_MI_sparse.txt", "3x5_MI_sparse.txt", mi_sparse(), F, 15, 15, 1, false},
      {"20x10_MI_jagged_samples_sparse.txt", "20x10_MI_jagged_samples_sparse.txt", mi_sparse(), F,
       200, 200, 1, false},
      {"50x20_jagged_sequences_sparse.txt",
       "50x20_jagged_sequences_sparse.txt",
       {{"features", "F0", 100, true}},
       F,
       564,
       564,
       1,
       false,
       -1},
      {"100x100_jagged_sparse.txt",
       "100x100_jagged_sparse.txt",
       {{"features", "F0", 20, true}},
       F,
       4887,
       4887,
       1,
       false,
       -1},
      {"1x1_sparse.txt", "1x1_sparse.txt", {{"features", "F0", 10000, true}}, F, 1, 1, 1, true},
      {"1x2_sparse.txt", "1x2_sparse.txt", {{"features", "F0", 1000, true}}, F, 2, 2, 1, true},
      {"1x10_sparse.txt", "1x10_sparse.txt", {{"features", "F0", 100, true}}, D, 10, 10, 1, true},
      {"space_separated.txt",
       "space_separated.txt",
       {{"features1", "F1", 15}, {"features2", "F2", 12}, {"features3", "F3", 1}},
       D,
       2,
       2,
       1,
       true},
      {"missing_trailing_newline.txt",
       "missing_trailing_newline.txt",
       {{"features", "features", 1}},
       D,
       2,
       2,
       1,
       true},
      // CNTK counted the blank row as a sample of sequence 1 (epoch size 3); it holds none.
      {"contains_blank_lines.txt",
       "blank_lines.txt",
       {{"features", "features", 1}},
       D,
       2,
       3,
       1,
       false,
       0,
       {.max_errors = 2, .trace_level = 0}},
      {"empty_samples.txt",
       "empty_samples.txt",
       {{"features", "F0", 10}, {"labels", "F1", 10, true}},
       F,
       6,
       6,
       1,
       false},
      {"ref_data_with_escape_sequences.txt",
       "ref_data_with_escape_sequences.txt",
       {{"features", "F0", 100, true}, {"labels", "F1", 3}},
       F,
       9,
       9,
       1,
       false},
  };
}

class Conformance : public testing::TestWithParam<size_t> {};

TEST_P(Conformance, MatchesCntkControlFile) {
  ConformanceCase c = conformance_cases()[GetParam()];
  c.options.trace_level = 0;
  expect_matches_control(c, false);
  if (c.defining >= 0) expect_matches_control(c, true);
}

INSTANTIATE_TEST_SUITE_P(CntkReaderTests, Conformance,
                         testing::Range(size_t{0}, conformance_cases().size()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           std::string name = conformance_cases()[info.param].control;
                           name = name.substr(0, name.find('.'));
                           for (char& ch : name)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return "case_" + name;
                         });

TEST(CntkReaderTests, BlankLinesAreSequencesWithoutSamples) {
  // skipSequenceIds=true makes the blank line a sequence of its own: an error with
  // maxErrors=0 (CNTK's CNTKTextFormatReader_blank_lines expects exactly this failure).
  StreamDefs defs{{"features", StreamDef{.shape = 1, .dtype = D}}};
  std::string msg = message_of<DataError>([&] {
    CTFDeserializer(kData + "contains_blank_lines.txt", defs,
                    {.trace_level = 0, .skip_sequence_ids = true});
  });
  EXPECT_EQ(msg.substr(0, msg.find('\n')),
            "Reached the maximum number of allowed errors while reading the input file (" + kData +
                "contains_blank_lines.txt).");
  // With definesMBSize, lines without that stream are not sequences at all.
  defs[0].second.defines_mb_size = true;
  ConformanceCase c{"contains_blank_lines.txt",
                    "blank_lines.txt",
                    {{"features", "features", 1}},
                    D,
                    2,
                    2,
                    1,
                    false,
                    0,
                    {.trace_level = 0, .skip_sequence_ids = true}};
  expect_matches_control(c, true);
}

TEST(CntkReaderTests, DuplicateInputsFail) {
  StreamDefs defs{{"features1", StreamDef{.field = "F1", .shape = 1, .dtype = D}},
                  {"features2", StreamDef{.field = "F2", .shape = 1, .dtype = D}}};
  const std::string& dir = testing_io::test_dir();  // this process's own folder
  std::ifstream in(kData + "duplicate_inputs.txt", std::ios::binary);
  std::ofstream(dir + "/duplicate_inputs.txt", std::ios::binary) << in.rdbuf();
  // CNTK names the file as configured: a path relative to the working directory.
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(dir.c_str()), 0);
  std::string msg = message_of<DataError>(
      [&] { CTFDeserializer("duplicate_inputs.txt", defs, {.trace_level = 0}); });
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_EQ(msg.substr(0, msg.find('\n')),
            "Reached the maximum number of allowed errors while reading the input file "
            "(duplicate_inputs.txt).");
  EXPECT_NE(msg.find("Input ('features2') contains more samples than expected (2 vs. 1) for "
                     "sequence (id = 1) at offset 26 in the input file (duplicate_inputs.txt)."),
            std::string::npos)
      << msg;
  // With features1 defining the sequence length, features2 may be longer.
  defs[0].second.defines_mb_size = true;
  CTFDeserializer ok(kData + "duplicate_inputs.txt", defs, {.trace_level = 0});
  EXPECT_EQ(ok.sequence_infos(0)[0].num_samples, 1u);
  EXPECT_EQ(ok.load_chunk(0)->streams[1].length(0), 2u);
}

TEST(CntkReaderTests, InvalidInputsWarnings) {
  StreamDefs defs{{"A", StreamDef{.shape = 1}}, {"B", StreamDef{.shape = 10, .is_sparse = true}}};
  std::string path = kData + "invalid_inputs.txt";
  testing::internal::CaptureStderr();
  CTFDeserializer d(path, defs, {.max_errors = 99999, .trace_level = 2});
  std::string err = testing::internal::GetCapturedStderr();
  for (size_t at; (at = err.find(path)) != std::string::npos;)
    err.replace(at, path.size(), "invalid_inputs.txt");
  std::ifstream control(kControl + "invalid_inputs_Control.txt");
  std::string want((std::istreambuf_iterator<char>(control)), std::istreambuf_iterator<char>());
  std::istringstream got_lines(err), want_lines(want);
  std::string got_line, want_line;
  for (int line = 1; std::getline(want_lines, want_line); ++line) {
    ASSERT_TRUE(std::getline(got_lines, got_line)) << "missing line " << line << ": " << want_line;
    ASSERT_EQ(got_line, want_line) << "line " << line;
  }
  EXPECT_FALSE(std::getline(got_lines, got_line)) << "extra line: " << got_line;
  EXPECT_EQ(d.number_of_sequences(), 7u);
}

}  // namespace
}  // namespace loom
