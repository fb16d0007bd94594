#include "loom/io/cbf_deserializer.h"
#include "loom/core/error_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "loom/io/ctf_deserializer.h"
#include "loom/io/io_test_util.h"
#include "loom/io/minibatch_source.h"

namespace loom {
namespace {

using namespace testing_io;

// CTF text of `count` sequences: x dense (dim 3) and y sparse (dim 7, 1 to 3 entries, indices
// ascending as ctf2bin writes them) on every line, z dense (dim 1) on the first line only;
// sequence i holds 1 + (7 i) % 5 lines.
std::string ctf_text(size_t count) {
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    const size_t length = 1 + (7 * i) % 5;
    for (size_t t = 0; t < length; ++t) {
      text += std::to_string(i) + " |x";
      for (size_t k = 0; k < 3; ++k) text += " " + std::to_string(0.25 * double(i * 10 + t) + k);
      text += " |y";
      std::map<size_t, double> entries;  // index -> value; 2 e < 7 keeps the indices apart
      for (size_t e = 0; e < 1 + (i + t) % 3; ++e) entries[(i + t + 2 * e) % 7] = double(e) + 0.5;
      for (const auto& [index, value] : entries)
        text += " " + std::to_string(index) + ":" + std::to_string(value);
      if (t == 0) text += " |z " + std::to_string(i % 4);
      text += "\n";
    }
  }
  return text;
}

StreamDefs ctf_streams(DataType dtype = DataType::Float32) {
  return {{"x", StreamDef{.shape = 3, .dtype = dtype}},
          {"y", StreamDef{.shape = 7, .is_sparse = true, .dtype = dtype}},
          {"z", StreamDef{.shape = 1, .dtype = dtype}}};
}

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
void put_values(std::string& out, const StreamChunkData& data, size_t first, size_t n,
                bool doubles) {
  for (size_t i = first; i < first + n; ++i) {
    const T v = data.values<T>()[i];
    if (doubles)
      put(out, double(v));
    else
      put(out, float(v));
  }
}

// Writes every chunk of `d` as a chunk of a CBF file (so both have the same chunks), the
// streams under their names, values as float64 or float32; returns the file's path.
std::string write_cbf(Deserializer& d, const std::string& name, bool doubles = false) {
  std::string out;
  put(out, uint64_t{0x636e746b5f62696e});
  put(out, uint32_t{1});
  struct Entry {
    int64_t offset;
    uint32_t sequences, samples;
  };
  std::vector<Entry> table;
  const auto& streams = d.stream_infos();
  for (size_t k = 0; k < d.chunk_infos().size(); ++k) {
    auto chunk = d.load_chunk(k);
    table.push_back({int64_t(out.size()), uint32_t(chunk->sequences.size()),
                     uint32_t(d.chunk_infos()[k].num_samples)});
    for (const SequenceInfo& s : chunk->sequences) put(out, uint32_t(s.num_samples));
    for (size_t id = 0; id < streams.size(); ++id) {
      const StreamChunkData& data = chunk->streams[id];
      const size_t dim = streams[id].sample_shape.total_size();
      const bool f64 = streams[id].dtype == DataType::Float64;
      for (size_t i = 0; i < chunk->sequences.size(); ++i) {
        const size_t first = data.sample_begin[i], samples = data.length(i);
        put(out, uint32_t(samples));
        if (!streams[id].is_sparse()) {
          f64 ? put_values<double>(out, data, first * dim, samples * dim, doubles)
              : put_values<float>(out, data, first * dim, samples * dim, doubles);
          continue;
        }
        const size_t nnz_first = data.nnz_begin[first],
                     nnz = data.nnz_begin[first + samples] - nnz_first;
        put(out, int32_t(nnz));
        f64 ? put_values<double>(out, data, nnz_first, nnz, doubles)
            : put_values<float>(out, data, nnz_first, nnz, doubles);
        for (size_t j = nnz_first; j < nnz_first + nnz; ++j) put(out, data.indices[j]);
        for (size_t s = first; s < first + samples; ++s)
          put(out, int32_t(data.nnz_begin[s + 1] - data.nnz_begin[s]));
      }
    }
  }
  const auto header = int64_t(out.size());
  put(out, uint64_t{0x636e746b5f62696e});
  put(out, uint32_t(table.size()));
  put(out, uint32_t(streams.size()));
  for (const StreamInformation& s : streams) {
    put(out, uint8_t(s.is_sparse() ? 1 : 0));
    put(out, uint32_t(s.name.size()));
    out += s.name;
    put(out, uint8_t(doubles ? 1 : 0));
    put(out, uint32_t(s.sample_shape.total_size()));
  }
  for (const Entry& e : table) {
    put(out, e.offset);
    put(out, e.sequences);
    put(out, e.samples);
  }
  put(out, header);
  return write_temp(name, out);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Loads every chunk, as a source would.
void load_all(CBFDeserializer& d) {
  for (size_t k = 0; k < d.chunk_infos().size(); ++k) d.load_chunk(k);
}

// Two minibatches hold the same data, stream by stream.
void expect_same(const Minibatch<StreamInformation>& a, const MinibatchSource& sa,
                 const Minibatch<StreamInformation>& b, const MinibatchSource& sb,
                 const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  if (a.empty()) return;  // both sources ended
  for (const StreamInformation& info : sa.stream_infos()) {
    SCOPED_TRACE(where + ", stream " + info.name);
    const MinibatchData& x = a.at(info);
    const MinibatchData& y = b.at(sb[info.name]);
    EXPECT_EQ(x.number_of_sequences, y.number_of_sequences);
    EXPECT_EQ(x.number_of_samples, y.number_of_samples);
    EXPECT_EQ(x.sweep_end, y.sweep_end);
    EXPECT_EQ(x.data.sequence_lengths(), y.data.sequence_lengths());
    const NDArrayView &u = x.data.data(), &v = y.data.data();
    ASSERT_EQ(u.shape(), v.shape());
    ASSERT_EQ(u.is_sparse(), v.is_sparse());
    if (u.is_sparse()) {
      EXPECT_EQ(u.csr_row_offsets(), v.csr_row_offsets());
      EXPECT_EQ(u.csr_col_indices(), v.csr_col_indices());
    }
    if (info.dtype == DataType::Float64)
      EXPECT_EQ(u.to_dense().to_vector<double>(), v.to_dense().to_vector<double>());
    else
      EXPECT_EQ(u.to_dense().to_vector<float>(), v.to_dense().to_vector<float>());
  }
}

// A CTF file and the CBF file written from its chunks.
struct Files {
  std::string ctf, cbf;
  std::shared_ptr<CTFDeserializer> text;
};

Files files(const std::string& name, size_t sequences, bool doubles = false,
            DataType dtype = DataType::Float32) {
  Files f;
  f.ctf = write_temp(name + ".ctf", ctf_text(sequences));
  f.text = std::make_shared<CTFDeserializer>(f.ctf, ctf_streams(dtype),
                                             CTFOptions{.chunk_size_bytes = 600});
  f.cbf = write_cbf(*f.text, name + ".cbf", doubles);
  return f;
}

TEST(CbfDeserializer, ChunksSequencesAndStreamsAreTheFiles) {
  Files f = files("layout", 60);
  CBFDeserializer d(f.cbf);
  ASSERT_GE(d.chunk_infos().size(), 5u);
  ASSERT_EQ(d.chunk_infos().size(), f.text->chunk_infos().size());
  size_t key = 0;
  for (size_t k = 0; k < d.chunk_infos().size(); ++k) {
    EXPECT_EQ(d.chunk_infos()[k].num_sequences, f.text->chunk_infos()[k].num_sequences);
    EXPECT_EQ(d.chunk_infos()[k].num_samples, f.text->chunk_infos()[k].num_samples);
    auto text = f.text->sequence_infos(k);
    auto binary = d.sequence_infos(k);
    ASSERT_EQ(binary.size(), text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      EXPECT_EQ(binary[i].num_samples, text[i].num_samples);
      EXPECT_EQ(binary[i].key, key++);  // the sequence's index in the file
    }
  }
  EXPECT_EQ(key, 60u);
  ASSERT_EQ(d.stream_infos().size(), 3u);
  EXPECT_EQ(d.stream_infos()[0], f.text->stream_infos()[0]);
  EXPECT_EQ(d.stream_infos()[1], f.text->stream_infos()[1]);
  EXPECT_EQ(d.stream_infos()[2], f.text->stream_infos()[2]);
  EXPECT_TRUE(d.stream_infos()[1].is_sparse());

  // A chunk holds each stream's samples as the CTF chunk does: z one sample a sequence.
  auto binary = d.load_chunk(1);
  auto text = f.text->load_chunk(1);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(binary->streams[s].sample_begin, text->streams[s].sample_begin);
    EXPECT_EQ(binary->streams[s].nnz_begin, text->streams[s].nnz_begin);
    EXPECT_EQ(binary->streams[s].indices, text->streams[s].indices);
    EXPECT_EQ(binary->streams[s].values_f32, text->streams[s].values_f32);
  }
  EXPECT_EQ(binary->streams[2].sample_begin.back(), binary->sequences.size());
}

TEST(CbfDeserializer, DeliversTheCtfMinibatchesRandomizedOrNotAndAfterRestore) {
  Files f = files("same", 60);
  auto binary = std::make_shared<CBFDeserializer>(f.cbf);
  const std::vector<MinibatchSourceConfig> configs = {
      {.randomize = false},
      {.randomization_seed = 7, .randomization_window_in_chunks = 2},
      {.randomization_seed = 3},
      {.randomization_seed = 5,
       .randomization_window_in_chunks = 0,
       .randomization_window_in_samples = 40},
      {.max_samples = 150, .randomization_seed = 9}};
  size_t compared = 0;
  for (size_t c = 0; c < configs.size(); ++c) {
    MinibatchSource text(f.text, configs[c]), cbf(binary, configs[c]);
    const size_t sizes[] = {5, 13, 8, 21};
    Dictionary state;
    for (size_t step = 0; step < 24; ++step) {
      if (step == 9) state = cbf.get_checkpoint_state();
      const size_t n = sizes[step % 4];
      expect_same(text.next_minibatch(n), text, cbf.next_minibatch(n), cbf,
                  "config " + std::to_string(c) + ", step " + std::to_string(step));
      ++compared;
    }
    // Restored at minibatch 9, a new CBF source goes on as the CTF source did from there.
    MinibatchSource again(f.text, configs[c]), restored(binary, configs[c]);
    for (size_t step = 0; step < 9; ++step) again.next_minibatch(sizes[step % 4]);
    restored.restore_from_checkpoint(state);
    for (size_t step = 9; step < 24; ++step) {
      const size_t n = sizes[step % 4];
      expect_same(again.next_minibatch(n), again, restored.next_minibatch(n), restored,
                  "config " + std::to_string(c) + ", restored, step " + std::to_string(step));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 5u * (24 + 15));
}

TEST(CbfDeserializer, Float64FilesAndDtypes) {
  // A float64 file written from float64 CTF data: delivered as float64 by default, and as
  // float32 when its StreamDefs say so (as CTF read into float32 rounds the same numbers).
  Files f = files("doubles", 30, true, DataType::Float64);
  auto binary = std::make_shared<CBFDeserializer>(f.cbf);
  for (const StreamInformation& s : binary->stream_infos()) EXPECT_EQ(s.dtype, DataType::Float64);
  MinibatchSource text(f.text, {.randomization_seed = 2}), cbf(binary, {.randomization_seed = 2});
  for (size_t step = 0; step < 8; ++step)
    expect_same(text.next_minibatch(11), text, cbf.next_minibatch(11), cbf,
                "float64 step " + std::to_string(step));

  auto as_floats = std::make_shared<CBFDeserializer>(f.cbf, ctf_streams());
  for (const StreamInformation& s : as_floats->stream_infos())
    EXPECT_EQ(s.dtype, DataType::Float32);
  auto text32 =
      std::make_shared<CTFDeserializer>(f.ctf, ctf_streams(), CTFOptions{.chunk_size_bytes = 600});
  MinibatchSource t(text32, {.randomize = false}), b(as_floats, {.randomize = false});
  for (size_t step = 0; step < 8; ++step)
    expect_same(t.next_minibatch(11), t, b.next_minibatch(11), b,
                "float32 step " + std::to_string(step));
}

TEST(CbfDeserializer, StreamsRenameAsCntkAndBadStreamsAreArgumentErrors) {
  Files f = files("rename", 10);
  // CNTK: the given streams rename the file's; the others keep their names, in file order.
  CBFDeserializer d(f.cbf, {{"labels", {.field = "z", .shape = 1}}, {"features", {.field = "x"}}});
  ASSERT_EQ(d.stream_infos().size(), 3u);
  EXPECT_EQ(d.stream_infos()[0].name, "features");
  EXPECT_EQ(d.stream_infos()[1].name, "y");
  EXPECT_EQ(d.stream_infos()[2].name, "labels");
  EXPECT_EQ(d.stream_infos()[0].sample_shape, NDShape{3});
  // A stream named as the field reads it (StreamConfiguration without an alias).
  EXPECT_EQ(CBFDeserializer(f.cbf, {{"y", {}}}).stream_infos()[1].name, "y");

  auto message = [&](const StreamDefs& defs) {
    try {
      CBFDeserializer bad(f.cbf, defs);
    } catch (const ArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("no ArgumentError");
  };
  EXPECT_NE(message({{"w", {.field = "nope"}}})
                .find("'nope', which the file does not hold; its "
                      "streams are 'x', 'y', 'z'"),
            std::string::npos);
  EXPECT_NE(message({{"x", {.shape = 4}}}).find("has shape 4, but the file's stream 'x' has dim 3"),
            std::string::npos);
  EXPECT_NE(message({{"a", {.field = "x"}}, {"b", {.field = "x"}}})
                .find("two streams read the field 'x'"),
            std::string::npos);
  EXPECT_NE(message({{"y", {.field = "x"}}}).find("two streams would be named 'y'"),
            std::string::npos);
  EXPECT_NE(message({{"x", {.defines_mb_size = true}}}).find("defines_mb_size is not supported"),
            std::string::npos);
  try {
    CBFDeserializer missing(test_dir() + "/no_such.cbf");
    ADD_FAILURE() << "no IOError";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("no_such.cbf"), std::string::npos);
  }
}

TEST(CbfDeserializer, DamagedFilesNameTheFileWhatWasExpectedAndTheOffset) {
  Files f = files("damaged", 12);
  const std::string good = read_file(f.cbf);
  // A new file each time: truncating a file in place is slow on some file systems.
  auto with = [&](const std::string& bytes) {
    std::filesystem::remove(test_dir() + "/damaged_copy.cbf");
    return write_temp("damaged_copy.cbf", bytes);
  };
  auto patch = [&](size_t at, auto value) {
    std::string bytes = good;
    std::memcpy(bytes.data() + at, &value, sizeof(value));
    return with(bytes);
  };
  int64_t header;
  std::memcpy(&header, good.data() + good.size() - 8, 8);
  const size_t h = size_t(header);

  auto error = [&](const std::string& path) {
    return message_of<DataError>([&] {
      CBFDeserializer d(path);
      load_all(d);
    });
  };
  EXPECT_NE(error(patch(0, uint64_t{42})).find("does not start with the CBF magic number"),
            std::string::npos);
  EXPECT_NE(error(patch(8, uint32_t{2})).find("format version 2 at byte offset 8"),
            std::string::npos);
  EXPECT_NE(error(patch(good.size() - 8, int64_t{1} << 40))
                .find("the header offset at byte "
                      "offset " +
                      std::to_string(good.size() - 8)),
            std::string::npos);
  // Counts that would allocate gigabytes are refused by the bytes left.
  EXPECT_NE(error(patch(h + 12, uint32_t{0xFFFFFFFF}))
                .find("expected the headers of 4294967295 streams (number at byte offset " +
                      std::to_string(h + 12) + ") (4294967295 x 10 bytes) at byte offset " +
                      std::to_string(h + 16)),
            std::string::npos);
  EXPECT_NE(error(patch(h + 8, uint32_t{0xFFFFFFFF})).find("the header lists 4294967295 chunks"),
            std::string::npos);
  EXPECT_NE(
      error(patch(h + 16, uint8_t{7})).find("encoding 7 at byte offset " + std::to_string(h + 16)),
      std::string::npos);
  // The first chunk's first sequence says it has 1000 samples.
  EXPECT_NE(error(patch(12, uint32_t{1000})).find("byte offset 12 add up to"), std::string::npos);

  // Chunk 0's data: the x stream's first sequence holds samples 1..5; its sample count is right
  // after the lengths.
  CBFDeserializer d(f.cbf);
  const size_t n0 = d.chunk_infos()[0].num_sequences;
  const size_t x_count = 12 + 4 * n0;
  EXPECT_NE(error(patch(x_count, uint32_t{99}))
                .find("sequence 0 of stream 'x' holds 99 samples, "
                      "more than the sequence's length 1 at byte "
                      "offset " +
                      std::to_string(x_count)),
            std::string::npos);
  // y's first sequence: after all of x's sequences of chunk 0.
  size_t y_at = x_count;
  for (const SequenceInfo& s : d.sequence_infos(0)) y_at += 4 + 12 * s.num_samples;
  EXPECT_NE(error(patch(y_at + 4, int32_t{-3})).find("negative nnz count -3"), std::string::npos);
  EXPECT_NE(error(patch(y_at + 4, int32_t{1} << 30))
                .find("expected the values of sequence 0 of stream 'y' (1073741824 x 4 bytes) at "
                      "byte offset " +
                      std::to_string(y_at + 8)),
            std::string::npos);
  int32_t nnz;
  std::memcpy(&nnz, good.data() + y_at + 4, 4);
  const size_t index_at = y_at + 8 + 4 * size_t(nnz);
  EXPECT_NE(error(patch(index_at, int32_t{7}))
                .find("index 7 of sequence 0 of stream 'y' lies "
                      "outside [0, 7) at byte offset " +
                      std::to_string(index_at)),
            std::string::npos);
  EXPECT_NE(error(patch(index_at + 4 * size_t(nnz), int32_t{nnz + 1}))
                .find("exceed the sequence's nnz count"),
            std::string::npos);

  // Every truncation fails with a DataError naming the file (and, past the first 20 bytes, the
  // byte offset); so does every byte flipped where it matters, and none crashes.
  size_t truncations = 0;
  for (size_t size = 0; size < good.size(); ++size) {
    const std::string path = with(good.substr(0, size));
    const std::string message = error(path);
    ASSERT_NE(message.find(path), std::string::npos) << "cut at " << size << ": " << message;
    if (size >= 20) {
      EXPECT_NE(message.find("byte offset"), std::string::npos) << message;
    }
    ++truncations;
  }
  EXPECT_EQ(truncations, good.size());
  size_t failed = 0;
  for (size_t at = 0; at < good.size(); ++at) {
    std::string bytes = good;
    bytes[at] = char(~bytes[at]);
    const std::string path = with(bytes);
    try {
      CBFDeserializer flipped(path);
      load_all(flipped);
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      ++failed;
    }
  }
  // Values and stream names may change without damage; counts, offsets, indices may not.
  EXPECT_GT(failed, good.size() / 4);
}

}  // namespace
}  // namespace loom
