#include "loom/io/idx_deserializer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "loom/io/idx_test_util.h"
#include "loom/io/minibatch_source.h"

namespace loom {
namespace {

using namespace testing_io;

// Five 2x3 images (pixels()) and their labels 3, 1, 4, 1, 5; plain or gzip.
struct Files {
  std::string images, labels;
};
Files five_items(bool gzip) {
  std::string images = idx_bytes(0x08, {5, 2, 3}, pixels(5, 2, 3));
  std::string labels = idx_bytes(0x08, {5}, {3, 1, 4, 1, 5});
  std::string suffix = gzip ? ".gz" : "";
  auto write = gzip ? write_gzip : write_temp;
  return {write("five-images" + suffix, images), write("five-labels" + suffix, labels)};
}

IDXStreamDefs defs(const Files& f, IDXStreamDef features = {}, IDXStreamDef labels = {}) {
  features.path = f.images;
  labels.path = f.labels;
  if (labels.num_classes == 0) labels.num_classes = 6;
  return {{"features", features}, {"labels", labels}};
}

// The error message of constructing a deserializer, which must throw E.
template <typename E>
std::string error_of(const IDXStreamDefs& streams) {
  try {
    IDXDeserializer d(streams);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "other exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception";
  return "";
}

TEST(IDXDeserializer, PlainAndGzipFilesGiveTheSameSamples) {
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    auto d = std::make_shared<IDXDeserializer>(defs(five_items(gzip), {}, {.is_sparse = true}),
                                               ChunkingOptions{.sequences_per_chunk = 2});
    ASSERT_EQ(d->stream_infos().size(), 2u);
    EXPECT_EQ(d->stream_infos()[0].sample_shape, (NDShape{2, 3}));
    EXPECT_EQ(d->stream_infos()[0].storage, StorageFormat::Dense);
    EXPECT_EQ(d->stream_infos()[1].sample_shape, NDShape{6});
    EXPECT_EQ(d->stream_infos()[1].storage, StorageFormat::SparseCSR);
    ASSERT_EQ(d->chunk_infos().size(), 3u);
    EXPECT_EQ(d->chunk_infos()[2].num_sequences, 1u);
    EXPECT_EQ(d->number_of_sequences(), 5u);
    std::vector<SequenceInfo> infos = d->sequence_infos(1);
    ASSERT_EQ(infos.size(), 2u);
    EXPECT_EQ(infos[1].key, 3u);
    EXPECT_EQ(infos[1].num_samples, 1u);

    MinibatchSource source(d, {.randomize = false});
    Minibatch<StreamInformation> mb = source.next_minibatch(5);
    const Value& x = mb.at(source["features"]).data;
    EXPECT_EQ(x.data().shape(), (NDShape{5, 1, 2, 3}));  // the sample shape is kept
    std::vector<float> expected;
    for (uint8_t p : pixels(5, 2, 3)) expected.push_back(p);
    EXPECT_EQ(x.data().to_vector<float>(), expected);
    const Value& y = mb.at(source["labels"]).data;
    ASSERT_TRUE(y.is_sparse());
    EXPECT_EQ(y.data().shape(), (NDShape{5, 1, 6}));
    EXPECT_EQ(y.data().csr_col_indices(), (std::vector<int32_t>{3, 1, 4, 1, 5}));
    EXPECT_EQ(y.data().csr_row_offsets(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  }
}

TEST(IDXDeserializer, ShapeScaleDenseOneHotAndFloat64) {
  IDXDeserializer d(defs(five_items(false), {.shape = {1, 6}, .scale = 0.5},
                         {.num_classes = 6, .dtype = DataType::Float64}));
  EXPECT_EQ(d.stream_infos()[0].sample_shape, (NDShape{1, 6}));
  EXPECT_EQ(d.stream_infos()[1].storage, StorageFormat::Dense);
  EXPECT_EQ(d.stream_infos()[1].dtype, DataType::Float64);
  ASSERT_EQ(d.chunk_infos().size(), 1u);  // 5 small items fit one 32 MB chunk
  auto chunk = d.load_chunk(0);
  // Byte images stay bytes in the chunk (a quarter of the floats' memory) and become floats
  // as they are copied out.
  EXPECT_TRUE(chunk->streams[0].values_f32.empty());
  EXPECT_EQ(chunk->streams[0].values_u8, pixels(5, 2, 3));
  EXPECT_EQ(chunk->streams[0].byte_scale, 0.5);
  std::vector<float> expected, got(28);
  for (uint8_t p : pixels(5, 2, 3)) expected.push_back(float(p) * 0.5f);
  chunk->streams[0].copy_values(2, 28, got.data());
  EXPECT_EQ(got, std::vector<float>(expected.begin() + 2, expected.begin() + 30));
  EXPECT_EQ(chunk->streams[0].value_bytes<float>(6, 12).data(),
            reinterpret_cast<const std::byte*>(chunk->streams[0].values_u8.data() + 6));
  EXPECT_EQ(chunk->streams[0].value_bytes<float>(6, 12).size(), 12u);
  const std::vector<double>& y = chunk->streams[1].values_f64;
  ASSERT_EQ(y.size(), 30u);
  EXPECT_EQ(std::vector<double>(y.begin() + 6, y.begin() + 12),
            (std::vector<double>{0, 1, 0, 0, 0, 0}));  // item 1: class 1
  EXPECT_EQ(std::accumulate(y.begin(), y.end(), 0.0), 5.0);
  EXPECT_EQ(chunk->streams[1].sample_begin, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
}

TEST(IDXDeserializer, WideTypesAreBigEndian) {
  // int16 -2 and 258; float32 1.5 and -0.25; int32 labels 0 and 2.
  std::string shorts = write_temp("shorts.idx", idx_bytes(0x0B, {2}, {0xff, 0xfe, 0x01, 0x02}));
  std::string floats =
      write_temp("floats.idx", idx_bytes(0x0D, {2, 1}, {0x3f, 0xc0, 0, 0, 0xbe, 0x80, 0, 0}));
  std::string ints = write_temp("ints.idx", idx_bytes(0x0C, {2}, {0, 0, 0, 0, 0, 0, 0, 2}));
  IDXDeserializer d({{"s", {.path = shorts}},
                     {"f", {.path = floats, .scale = 2}},
                     {"c", {.path = ints, .num_classes = 3, .is_sparse = true}}});
  EXPECT_EQ(d.stream_infos()[0].sample_shape, NDShape{1});
  auto chunk = d.load_chunk(0);
  EXPECT_EQ(chunk->streams[0].values_f32, (std::vector<float>{-2, 258}));
  EXPECT_EQ(chunk->streams[1].values_f32, (std::vector<float>{3, -0.5f}));
  EXPECT_EQ(chunk->streams[2].indices, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(chunk->streams[2].nnz_begin, (std::vector<size_t>{0, 1, 2}));
}

TEST(IDXDeserializer, DamagedFilesNameTheFileAndTheProblem) {
  Files good = five_items(false);
  std::string images = idx_bytes(0x08, {5, 2, 3}, pixels(5, 2, 3));

  std::string missing = test_dir() + "/no-such-file.idx";
  std::string msg = error_of<IOError>(defs({missing, good.labels}));
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("Cannot open"), std::string::npos) << msg;

  std::string bad_magic = images;
  bad_magic[0] = 1;
  std::string path = write_temp("bad-magic.idx", bad_magic);
  msg = error_of<DataError>(defs({path, good.labels}));
  EXPECT_NE(msg.find(path + ") is not an IDX file"), std::string::npos) << msg;

  std::string bad_type = images;
  bad_type[2] = 0x0A;
  path = write_temp("bad-type.idx", bad_type);
  msg = error_of<DataError>(defs({path, good.labels}));
  EXPECT_NE(msg.find("unknown type code 0xa"), std::string::npos) << msg;

  path = write_temp("short-header.idx", images.substr(0, 9));
  msg = error_of<DataError>(defs({path, good.labels}));
  EXPECT_NE(msg.find("truncated: 9 bytes, its header of 3 dimensions needs 16"), std::string::npos)
      << msg;

  path = write_temp("truncated.idx", images.substr(0, images.size() - 1));
  msg = error_of<DataError>(defs({path, good.labels}));
  EXPECT_NE(msg.find(path + ") is truncated: 29 bytes of data after the header, which announces "
                            "5 items of 6 uint8 values (30 bytes); item 4 starting at byte offset "
                            "40 is cut at byte offset 45"),
            std::string::npos)
      << msg;

  path = write_temp("trailing.idx", images + "xy");
  msg = error_of<DataError>(defs({path, good.labels}));
  EXPECT_NE(msg.find("has 2 bytes after the 30 bytes of data its header announces, from byte "
                     "offset 46"),
            std::string::npos)
      << msg;

  // A gzip stream cut short: zlib notices the missing end.
  std::string gz_path = write_gzip("cut.gz", images);
  std::string gz;
  {
    std::ifstream in(gz_path, std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  path = write_temp("cut-short.gz", gz.substr(0, gz.size() - 12));
  msg = error_of<IOError>(defs({path, good.labels}));
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  path = write_temp("four-labels.idx", idx_bytes(0x08, {4}, {1, 2, 3, 4}));
  msg = error_of<DataError>(defs({good.images, path}));
  EXPECT_NE(msg.find(path + ") of stream 'labels' holds 4 items, the file (" + good.images +
                     ") of stream 'features' holds 5"),
            std::string::npos)
      << msg;

  msg = error_of<DataError>(defs(good, {}, {.num_classes = 5}));
  EXPECT_NE(msg.find("holds class 5 at item 4 (byte offset 12), outside [0, 5)"), std::string::npos)
      << msg;
  path = write_gzip("five-labels-bad.gz", idx_bytes(0x08, {5}, {3, 1, 9, 1, 5}));
  msg = error_of<DataError>(defs({good.images, path}));
  EXPECT_NE(msg.find("holds class 9 at item 2 (byte offset 10 of the uncompressed data)"),
            std::string::npos)
      << msg;

  msg = error_of<DataError>(defs({good.images, good.images}));
  EXPECT_NE(msg.find("must hold one integer class index per item"), std::string::npos) << msg;

  msg = error_of<ArgumentError>(defs(good, {.shape = {5}}));
  EXPECT_NE(msg.find("has samples of shape [5] (5 values), but the items of the file"),
            std::string::npos)
      << msg;
  msg = error_of<ArgumentError>(defs(good, {.is_sparse = true}));
  EXPECT_NE(msg.find("needs num_classes"), std::string::npos) << msg;
  EXPECT_THROW(IDXDeserializer({}), ArgumentError);
}

// CTF's rule (an empty input file is an error): a file of no items fails when it is opened,
// naming itself, rather than as an empty source later.
TEST(IDXDeserializer, FilesWithoutItemsFailAtOpen) {
  for (bool gzip : {false, true}) {
    std::string images = idx_bytes(0x08, {0, 2, 3}, {});
    std::string labels = idx_bytes(0x08, {0}, {});
    Files empty =
        gzip ? Files{write_gzip("none-images.gz", images), write_gzip("none-labels.gz", labels)}
             : Files{write_temp("none-images.idx", images), write_temp("none-labels.idx", labels)};
    std::string msg = error_of<DataError>(defs(empty));
    EXPECT_NE(
        msg.find("The IDX file (" + empty.images + ") has dimension 0 of size 0 at byte offset 4"),
        std::string::npos)
        << msg;
    EXPECT_NE(msg.find("it holds no items"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("uncompressed") != std::string::npos, gzip) << msg;
  }
}

// A header whose sizes multiply past what size_t counts is reported as such, never with a
// wrapped-around byte count.
TEST(IDXDeserializer, OversizedHeaderIsReportedWithoutOverflow) {
  Files good = five_items(false);
  std::string path = write_temp("huge.idx", idx_bytes(0x0E, {0xFFFFFFFF, 0xFFFFFFFF}, {}));
  std::string msg = error_of<DataError>(defs({path, good.labels}));
  EXPECT_NE(msg.find(path + ") announces [4294967295,4294967295] float64 values, more bytes "
                            "than can be addressed"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("18446744"), std::string::npos) << msg;
  // Large but addressable: truncated, with the real byte count.
  path = write_temp("big.idx", idx_bytes(0x0E, {0xFFFFFFFF, 4}, {1, 2, 3}));
  msg = error_of<DataError>(defs({path, good.labels}));
  EXPECT_NE(msg.find(path + ") is truncated: 3 bytes of data after the header, which announces "
                            "4294967295 items of 4 float64 values (137438953440 bytes); item 0 "
                            "starting at byte offset 12 is cut at byte offset 15"),
            std::string::npos)
      << msg;
  // Compressed, the size of the data is known only by reading it: the header's announcement is
  // checked against the machine's memory first.
  path = write_gzip("big.gz", idx_bytes(0x0E, {0xFFFFFFFF, 4}, {1, 2, 3}));
  msg = error_of<DataError>(defs({path, good.labels}));
  EXPECT_NE(msg.find(path + ") announces [4294967295,4] float64 values (137438953440 bytes), "
                            "more than this machine's memory ("),
            std::string::npos)
      << msg;
}

// A small gzip file that unpacks to far more than its header announces (64 MiB of zeros after
// five items) is an error, and what follows the data is counted, never held.
// The process's peak resident memory in KiB (Linux's VmHWM); 0 where /proc does not say.
size_t peak_memory_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoul(line.substr(6));
  return 0;
}

TEST(IDXDeserializer, GzipBombIsAnErrorWithoutHoldingIt) {
  Files good = five_items(false);
  std::string path;
  {
    std::string bytes = idx_bytes(0x08, {5}, {3, 1, 4, 1, 5});
    bytes.append(size_t(64) << 20, '\0');
    path = write_gzip("bomb.gz", bytes);
  }
  // The peak from here on (writing 5 to clear_refs sets it to the resident memory now).
  const bool measured = bool(std::ofstream("/proc/self/clear_refs") << "5");
  const size_t before = peak_memory_kib();
  const std::string msg = error_of<DataError>(defs({good.images, path}));
  EXPECT_NE(msg.find(path + ") has 67108864 bytes after the 5 bytes of data its header "
                            "announces, from byte offset 13 of the uncompressed data"),
            std::string::npos)
      << msg;
  // Holding what follows the data (as reading the whole stream did) would add 64 MiB or more.
  if (measured && before > 0) {
    EXPECT_LT(peak_memory_kib() - before, 32u * 1024);
  }
}

// 100 items of 2x2 pixels in 7 chunks of 16: randomized sweeps, and a restored checkpoint
// continues exactly where the source was.
TEST(IDXDeserializer, RandomizedMinibatchSourceCheckpointsExactly) {
  std::string images =
      write_gzip("hundred-images.gz", idx_bytes(0x08, {100, 2, 2}, pixels(100, 2, 2)));
  std::vector<uint8_t> classes(100);
  for (size_t i = 0; i < 100; ++i) classes[i] = uint8_t(i % 10);
  std::string labels = write_temp("hundred-labels.idx", idx_bytes(0x08, {100}, classes));
  auto make = [&] {
    return std::make_shared<IDXDeserializer>(
        IDXStreamDefs{{"x", {.path = images}},
                      {"y", {.path = labels, .num_classes = 10, .is_sparse = true}}},
        ChunkingOptions{.sequences_per_chunk = 16});
  };
  MinibatchSourceConfig config{.randomization_seed = 7, .randomization_window_in_chunks = 2};
  auto describe = [](MinibatchSource& s, const Minibatch<StreamInformation>& mb) {
    std::ostringstream out;
    for (float v : mb.at(s["x"]).data.data().to_vector<float>()) out << v << ",";
    for (int32_t c : mb.at(s["y"]).data.data().csr_col_indices()) out << c << ";";
    return out.str();
  };

  MinibatchSource source(make(), config);
  ASSERT_EQ(make()->chunk_infos().size(), 7u);
  // One sweep: every item once, in an order other than the file's; labels stay with pixels.
  std::vector<int> items;
  for (int i = 0; i < 10; ++i) {
    Minibatch<StreamInformation> mb = source.next_minibatch(10);
    std::vector<float> x = mb.at(source["x"]).data.data().to_vector<float>();
    std::vector<int32_t> y = mb.at(source["y"]).data.data().csr_col_indices();
    for (size_t b = 0; b < y.size(); ++b) {
      // pixels(): the first pixel of item k is 7k + 4k (mod 256).
      int k = -1;
      for (int c = 0; c < 100; ++c)
        if (float((11 * c) % 256) == x[b * 4]) k = c;
      ASSERT_GE(k, 0);
      items.push_back(k);
      EXPECT_EQ(y[b], k % 10);
    }
    EXPECT_EQ(mb.at(source["x"]).sweep_end, i == 9);
  }
  std::vector<int> sorted = items, all(100);
  std::sort(sorted.begin(), sorted.end());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_NE(items, all);

  source.next_minibatch(33);
  Dictionary state = source.get_checkpoint_state();
  std::vector<std::string> after;
  for (int i = 0; i < 8; ++i) after.push_back(describe(source, source.next_minibatch(17)));

  MinibatchSource restored(make(), config);
  restored.restore_from_checkpoint(state);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(describe(restored, restored.next_minibatch(17)), after[size_t(i)]) << i;
}

TEST(IDXDeserializer, FashionMnistTestSet) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!std::filesystem::exists(dir + "t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  auto d = std::make_shared<IDXDeserializer>(
      IDXStreamDefs{{"features", {.path = dir + "t10k-images-idx3-ubyte.gz", .scale = 1.0 / 255}},
                    {"labels", {.path = dir + "t10k-labels-idx1-ubyte.gz", .num_classes = 10}}});
  EXPECT_EQ(d->number_of_sequences(), 10000u);
  EXPECT_EQ(d->stream_infos()[0].sample_shape, (NDShape{28, 28}));
  MinibatchSource source(d, {.max_sweeps = 1});
  std::vector<double> histogram(10);
  float lo = 1, hi = 0;
  size_t samples = 0;
  for (Minibatch<StreamInformation> mb; !(mb = source.next_minibatch(1000)).empty();) {
    std::vector<float> y = mb.at(source["labels"]).data.data().to_vector<float>();
    for (size_t i = 0; i < y.size(); ++i) histogram[i % 10] += y[i];
    std::vector<float> x = mb.at(source["features"]).data.data().to_vector<float>();
    lo = std::min(lo, *std::min_element(x.begin(), x.end()));
    hi = std::max(hi, *std::max_element(x.begin(), x.end()));
    samples += mb.at(source["labels"]).number_of_samples;
  }
  EXPECT_EQ(samples, 10000u);
  EXPECT_EQ(histogram, std::vector<double>(10, 1000));
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
}

}  // namespace
}  // namespace loom
