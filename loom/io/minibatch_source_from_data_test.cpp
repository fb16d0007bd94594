#include "loom/io/minibatch_source_from_data.h"

#include <gtest/gtest.h>

#include <cstring>

#include "loom/io/idx_deserializer.h"
#include "loom/io/idx_test_util.h"

namespace loom {
namespace {

using namespace testing_io;

// Everything in a minibatch but its form (files give sequences of one sample, arrays of samples
// a batch), byte for byte: per stream its counts, flags, sample shape, sequences and data.
std::string bytes_of(MinibatchSource& source, const Minibatch<StreamInformation>& mb) {
  if (mb.empty()) return "end";
  std::string out;
  for (const StreamInformation& s : source.stream_infos()) {
    const MinibatchData& d = mb.at(s);
    const NDArrayView& a = d.data.data();
    out += s.name + ":" + std::to_string(d.number_of_sequences) + "/" +
           std::to_string(d.number_of_samples) + "/" + std::to_string(d.sweep_end) +
           d.data.sample_shape().to_string();
    for (size_t length : d.data.sequence_lengths()) out += std::to_string(length) + ",";
    auto append = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
    if (a.is_sparse()) {
      append(a.csr_row_offsets().data(), a.csr_row_offsets().size() * sizeof(int32_t));
      append(a.csr_col_indices().data(), a.csr_col_indices().size() * sizeof(int32_t));
      append(a.csr_values<float>(), a.nnz() * sizeof(float));
    } else {
      append(a.raw_data(), a.size() * size_of(a.dtype()));
    }
  }
  return out;
}

TEST(MinibatchSourceFromData, DenseAndSparseSamplesInOrder) {
  NDArrayView x = NDArrayView::from_vector<float>({4, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  MinibatchSource source =
      MinibatchSourceFromData({{"x", x}, {"y", Value::one_hot(3, {2, 0, 1, 2}).data()}},
                              {.randomize = false, .max_samples = 6});
  EXPECT_EQ(source["x"].sample_shape, (NDShape{1, 2}));
  EXPECT_EQ(source["y"].storage, StorageFormat::SparseCSR);
  // Samples come as a batch (CNTK's MinibatchSourceFromData makes Value(batch)).
  Minibatch<StreamInformation> mb = source.next_minibatch(3);
  EXPECT_FALSE(mb.at(source["x"]).data.is_sequence());
  EXPECT_EQ(mb.at(source["x"]).data.data().shape(), (NDShape{3, 1, 2}));
  EXPECT_EQ(mb.at(source["y"]).data.data().shape(), (NDShape{3, 3}));
  EXPECT_EQ(mb.at(source["x"]).data.data().to_vector<float>(),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(mb.at(source["y"]).data.data().csr_col_indices(), (std::vector<int32_t>{2, 0, 1}));
  mb = source.next_minibatch(3);  // crosses the sweep end: samples 3, 0, 1
  EXPECT_TRUE(mb.at(source["x"]).sweep_end);
  EXPECT_EQ(mb.at(source["x"]).data.data().to_vector<float>(),
            (std::vector<float>{7, 8, 1, 2, 3, 4}));
  EXPECT_EQ(mb.at(source["y"]).data.data().csr_col_indices(), (std::vector<int32_t>{2, 2, 0}));
  EXPECT_TRUE(source.next_minibatch(3).empty());  // max_samples = 6
}

TEST(MinibatchSourceFromData, SequencesKeepTheirLengths) {
  // Sequences of 3, 2 and 1 samples of shape [2], and one tag per sequence.
  const std::vector<std::vector<double>> steps{{1, 1, 2, 2, 3, 3}, {4, 4, 5, 5}, {6, 6}};
  Value packed = Value::create_sequences<double>({2}, steps);
  ASSERT_TRUE(packed.is_packed());
  const Value padding = Value::create_sequences<double>({2}, steps);
  // Read from the packed rows (never padded), or from the same sequences padded: the same
  // minibatches.
  for (const Value& seqs : {packed, Value(padding.data(), true, padding.mask())}) {
    Value tags = Value::one_hot_sequences(4, {{3}, {2}, {1}});
    MinibatchSource source =
        MinibatchSourceFromData({{"s", seqs}, {"t", tags}}, {.randomize = false, .max_sweeps = 1});
    Minibatch<StreamInformation> mb = source.next_minibatch(5);
    const MinibatchData& s = mb.at(source["s"]);
    EXPECT_TRUE(s.data.is_packed());
    EXPECT_EQ(s.number_of_sequences, 2u);
    EXPECT_EQ(s.number_of_samples, 5u);
    EXPECT_EQ(s.data.dtype(), DataType::Float64);
    EXPECT_EQ(s.data.data().shape(), (NDShape{2, 3, 2}));
    EXPECT_EQ(s.data.as_sequences<double>(),
              (std::vector<std::vector<double>>{{1, 1, 2, 2, 3, 3}, {4, 4, 5, 5}}));
    const MinibatchData& t = mb.at(source["t"]);
    EXPECT_EQ(t.number_of_samples, 2u);
    EXPECT_EQ(t.data.data().csr_col_indices(), (std::vector<int32_t>{3, 2}));
    mb = source.next_minibatch(5);
    EXPECT_EQ(mb.at(source["s"]).data.as_sequences<double>(),
              (std::vector<std::vector<double>>{{6, 6}}));
    EXPECT_TRUE(mb.at(source["s"]).sweep_end);
    EXPECT_TRUE(source.next_minibatch(5).empty());
  }
  EXPECT_FALSE(packed.has_padded_form());
}

TEST(MinibatchSourceFromData, BadArraysAreRejected) {
  NDArrayView four(DataType::Float32, {4, 2}), three(DataType::Float32, {3, 2});
  EXPECT_THROW(MinibatchSourceFromData({}), ArgumentError);
  EXPECT_THROW(MinibatchSourceFromData({{"a", four}, {"a", four}}), ArgumentError);
  EXPECT_THROW(MinibatchSourceFromData({{"", four}}), ArgumentError);
  try {
    MinibatchSourceFromData({{"a", four}, {"b", three}});
    FAIL() << "no exception";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("stream 'b' holds 3 sequences, stream 'a' holds 4"),
              std::string::npos)
        << e.what();
  }
  NDArrayView sparse_2d =
      NDArrayView::sparse_csr<float>({2, 2, 3}, {0, 1, 1, 1, 2}, {0, 2}, {1, 1});
  EXPECT_THROW(MinibatchSourceFromData({{"s", sparse_2d}}), ShapeError);
  Value empty = Value::create_sequences<float>({1}, {{1}, {}});
  EXPECT_THROW(MinibatchSourceFromData({{"e", empty}}), ArgumentError);
}

// The same pixels and labels read from IDX files and given as arrays: same chunks, so the
// same randomized minibatches for the same seed, byte for byte, and the same checkpoints.
TEST(MinibatchSourceFromData, MatchesTheIdxSourceByteForByte) {
  const size_t n = 300;
  std::vector<uint8_t> raw = pixels(n, 4, 4), classes(n);
  for (size_t i = 0; i < n; ++i) classes[i] = uint8_t((i * 7) % 10);
  std::string images = write_gzip("same-images.gz", idx_bytes(0x08, {uint32_t(n), 4, 4}, raw));
  std::string labels = write_temp("same-labels.idx", idx_bytes(0x08, {uint32_t(n)}, classes));
  const double scale = 1.0 / 255;
  // Chunks by the byte rule: 16 floats + one (index, value) pair = 72 bytes a sample.
  ChunkingOptions chunking{.chunk_size_bytes = 72 * 40};
  auto idx = std::make_shared<IDXDeserializer>(
      IDXStreamDefs{{"features", {.path = images, .shape = {1, 4, 4}, .scale = scale}},
                    {"labels", {.path = labels, .num_classes = 10, .is_sparse = true}}},
      chunking);
  ASSERT_EQ(idx->chunk_infos().size(), 8u);

  std::vector<float> x;
  for (uint8_t p : raw) x.push_back(float(p * scale));
  std::vector<size_t> y(classes.begin(), classes.end());
  DataStreams arrays{{"features", NDArrayView::from_vector<float>({n, 1, 4, 4}, x)},
                     {"labels", Value::one_hot(10, y).data()}};
  auto in_memory = std::make_shared<ArrayDeserializer>(arrays, chunking);
  ASSERT_EQ(in_memory->chunk_infos().size(), 8u);

  MinibatchSourceConfig config{
      .max_samples = 2000, .randomization_seed = 3, .randomization_window_in_chunks = 3};
  MinibatchSource from_file(idx, config), from_data(in_memory, config);
  for (int i = 0; i < 12; ++i)
    ASSERT_EQ(bytes_of(from_file, from_file.next_minibatch(64)),
              bytes_of(from_data, from_data.next_minibatch(64)))
        << "minibatch " << i;

  // A checkpoint of one restores the other.
  Dictionary state = from_file.get_checkpoint_state();
  MinibatchSource restored = MinibatchSourceFromData(arrays, config, chunking);
  restored.restore_from_checkpoint(state);
  for (int i = 0; i < 20; ++i)  // to the end of max_samples
    ASSERT_EQ(bytes_of(from_file, from_file.next_minibatch(100)),
              bytes_of(restored, restored.next_minibatch(100)))
        << "after restore, minibatch " << i;
}

}  // namespace
}  // namespace loom
