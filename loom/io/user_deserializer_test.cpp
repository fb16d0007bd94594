#include "loom/io/user_deserializer.h"

#include <gtest/gtest.h>

#include <atomic>

namespace loom {
namespace {

// Chunk k holds 3 sequences; sequence i of chunk k has (i + 1) samples of value 10 k + i and
// one label, the one-hot of i.
class Counting : public UserDeserializer {
 public:
  std::vector<StreamInformation> declared_stream_infos() override {
    return {{.name = "x", .sample_shape = NDShape{2}},
            {.name = "y", .storage = StorageFormat::SparseCSR, .sample_shape = NDShape{3}}};
  }
  size_t num_chunks() override { return 4; }
  DataStreams get_chunk(size_t id) override {
    ++calls;
    std::vector<std::vector<float>> seqs;
    for (size_t i = 0; i < 3; ++i) seqs.emplace_back(2 * (i + 1), float(10 * id + i));
    if (broken == int(id)) seqs.pop_back();
    return {{"y", Value::one_hot(3, {0, 1, 2}).data()},
            {"x", Value::create_sequences<float>({2}, seqs)}};
  }
  std::atomic<int> calls = 0;
  int broken = -1;
};

TEST(UserDeserializer, ReadsThroughMinibatchSource) {
  auto d = std::make_shared<Counting>();
  EXPECT_EQ(d->chunk_infos().size(), 4u);
  EXPECT_EQ(d->chunk_infos()[1].num_samples, 6u);  // the longest stream fixes the length
  EXPECT_EQ(d->sequence_infos(2)[1].key, 7u);
  MinibatchSource source(d, {.randomize = false, .max_sweeps = 1});
  Minibatch<StreamInformation> mb = source.next_minibatch(6);
  const MinibatchData& x = mb.at(source["x"]);
  EXPECT_EQ(x.number_of_sequences, 3u);
  EXPECT_EQ(x.number_of_samples, 6u);
  EXPECT_EQ(x.data.sequence_lengths(), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(mb.at(source["y"]).data.data().csr_col_indices(), (std::vector<int32_t>{0, 1, 2}));
  size_t samples = 6;
  while (!(mb = source.next_minibatch(6)).empty()) samples += mb.at(source["x"]).number_of_samples;
  EXPECT_EQ(samples, 24u);
}

TEST(UserDeserializer, RandomizedSweepsAndCheckpoints) {
  auto d = std::make_shared<Counting>();
  MinibatchSource a(d, {.max_sweeps = 2, .randomization_window_in_chunks = 2});
  for (int i = 0; i < 3; ++i) a.next_minibatch(4);
  Dictionary state = a.get_checkpoint_state();
  auto rest = [](MinibatchSource& s) {
    std::vector<float> all;
    Minibatch<StreamInformation> mb;
    while (!(mb = s.next_minibatch(4)).empty()) {
      std::vector<float> v = mb.at(s["x"]).data.data().to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  std::vector<float> expected = rest(a);
  MinibatchSource b(d, {.max_sweeps = 2, .randomization_window_in_chunks = 2});
  b.restore_from_checkpoint(state);
  EXPECT_EQ(rest(b), expected);
  EXPECT_FALSE(expected.empty());
}

TEST(UserDeserializer, ChunkThatChangedOrDoesNotFitIsADataError) {
  auto d = std::make_shared<Counting>();
  MinibatchSource source(d, {.randomize = false});
  d->broken = 0;  // now one sequence short in x
  try {
    source.next_minibatch(4);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("UserDeserializer.get_chunk(0): stream 'y' holds 3 "
                                         "sequences, stream 'x' 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace loom
