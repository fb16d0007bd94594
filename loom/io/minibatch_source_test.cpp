#include "loom/io/minibatch_source.h"

#include <gtest/gtest.h>

#include <malloc.h>

#include <cstdlib>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include "loom/io/ctf_deserializer.h"

#include "loom/io/io_test_util.h"

namespace loom {
namespace {

using testing_io::write_temp;

// Seed 000's XOR table.
std::shared_ptr<Deserializer> xor_data() {
  static const std::string path =
      write_temp("xor.ctf", "|xy 0 0\t|r 0\n|xy 1 0\t|r 1\n|xy 0 1\t|r 1\n|xy 1 1\t|r 0\n");
  return std::make_shared<CTFDeserializer>(path,
                                           StreamDefs{{"xy", StreamDef{.field = "xy", .shape = 2}},
                                                      {"r", StreamDef{.field = "r", .shape = 1}}});
}

// 40 sequences of 1..4 samples: |k holds the sequence number once, |v the sample values.
std::shared_ptr<Deserializer> numbered_data(size_t chunk_size_bytes = 60) {
  std::string text;
  for (int s = 0; s < 40; ++s)
    for (int t = 0; t < 1 + s % 4; ++t)
      text += std::to_string(s) + (t == 0 ? " |k " + std::to_string(s) : std::string()) + " |v " +
              std::to_string(100 * s + t) + " |w " + std::to_string(t % 3) + ":1\n";
  static const std::string path = write_temp("numbered.ctf", text);
  return std::make_shared<CTFDeserializer>(
      path,
      StreamDefs{{"k", StreamDef{.shape = 1}},
                 {"v", StreamDef{.shape = 1, .dtype = DataType::Float64}},
                 {"w", StreamDef{.shape = 3, .is_sparse = true}}},
      CTFOptions{.chunk_size_bytes = chunk_size_bytes});
}

// The sequence numbers of a numbered_data minibatch, in batch order.
std::vector<int> keys(MinibatchSource& source, const Minibatch<StreamInformation>& mb) {
  std::vector<int> out;
  for (const auto& seq : mb.at(source["k"]).data.as_sequences<float>()) out.push_back(int(seq[0]));
  return out;
}

// Everything observable about a minibatch, to compare two timelines.
std::string describe(MinibatchSource& source, const Minibatch<StreamInformation>& mb) {
  if (mb.empty()) return "end";
  std::ostringstream out;
  for (const StreamInformation& s : source.stream_infos()) {
    const MinibatchData& d = mb.at(s);
    out << s.name << ":" << d.number_of_sequences << "/" << d.number_of_samples << "/"
        << d.sweep_end << "[";
    for (const auto& seq : d.data.as_sequences<double>()) {
      for (double x : seq) out << x << ",";
      out << ";";
    }
    out << "]";
  }
  return out.str();
}

TEST(MinibatchSource, XorInFileOrder) {
  MinibatchSource source(xor_data(), {.randomize = false});
  const StreamInformation& xy = source["xy"];
  EXPECT_EQ(xy.sample_shape, NDShape{2});
  EXPECT_EQ(xy.storage, StorageFormat::Dense);
  EXPECT_EQ(source.stream_infos().size(), 2u);
  for (int sweep = 0; sweep < 3; ++sweep) {
    Minibatch<StreamInformation> mb = source.next_minibatch(4);
    const MinibatchData& x = mb.at(xy);
    const MinibatchData& r = mb.at(source["r"]);
    EXPECT_TRUE(x.sweep_end);
    EXPECT_TRUE(r.sweep_end);
    EXPECT_EQ(x.number_of_sequences, 4u);
    EXPECT_EQ(x.number_of_samples, 4u);
    EXPECT_EQ(x.data.data().shape(), (NDShape{4, 1, 2}));
    EXPECT_EQ(x.data.data().to_vector<float>(), (std::vector<float>{0, 0, 1, 0, 0, 1, 1, 1}));
    EXPECT_EQ(r.data.data().to_vector<float>(), (std::vector<float>{0, 1, 1, 0}));
    ASSERT_TRUE(x.data.mask().has_value());
    EXPECT_EQ(x.data.sequence_lengths(), (std::vector<size_t>{1, 1, 1, 1}));
  }
}

// A source keeps the reader's large buffers in the heap (large_allocations.h): a 40 MB block,
// like a packed minibatch of 64 images of 224 x 224 x 3 floats, is no longer a fresh mapping.
TEST(MinibatchSource, LargeBuffersComeFromTheHeap) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer replaces malloc";
#else
  MinibatchSource source(xor_data(), {.randomize = false});
  const size_t mapped = mallinfo2().hblks;
  void* block = std::malloc(40u << 20);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(mallinfo2().hblks, mapped);
  std::free(block);
#endif
}

TEST(MinibatchSource, MinibatchesCrossSweepsAndFlagTheirEnd) {
  MinibatchSource source(xor_data(), {.randomize = false});
  std::vector<bool> ends;
  std::vector<float> first_r;
  for (int i = 0; i < 4; ++i) {
    Minibatch<StreamInformation> mb = source.next_minibatch(3);
    ends.push_back(mb.at(source["r"]).sweep_end);
    first_r.push_back(mb.at(source["xy"]).data.data().to_vector<float>()[0]);
  }
  EXPECT_EQ(ends, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(first_r, (std::vector<float>{0, 1, 0, 1}));  // rows 0, 3, 2, 1
}

TEST(MinibatchSource, MaxSamplesAndMaxSweepsEndTheTimeline) {
  MinibatchSource by_samples(xor_data(), {.randomize = false, .max_samples = 10});
  std::vector<size_t> sizes;
  for (Minibatch<StreamInformation> mb; !(mb = by_samples.next_minibatch(4)).empty();)
    sizes.push_back(mb.at(by_samples["xy"]).number_of_samples);
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 4, 2}));
  EXPECT_TRUE(by_samples.next_minibatch(4).empty());

  MinibatchSource by_sweeps(xor_data(), {.randomize = false, .max_sweeps = 2});
  sizes.clear();
  std::vector<bool> ends;
  for (Minibatch<StreamInformation> mb; !(mb = by_sweeps.next_minibatch(3)).empty();) {
    sizes.push_back(mb.at(by_sweeps["xy"]).number_of_samples);
    ends.push_back(mb.at(by_sweeps["xy"]).sweep_end);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 2}));
  EXPECT_EQ(ends, (std::vector<bool>{false, true, true}));

  MinibatchSource one_sweep(xor_data(), {.max_samples = FULL_DATA_SWEEP});
  EXPECT_EQ(one_sweep.next_minibatch(100).at(one_sweep["r"]).number_of_samples, 4u);
  EXPECT_TRUE(one_sweep.next_minibatch(100).empty());

  EXPECT_FALSE(by_samples.is_infinite());
  EXPECT_FALSE(by_sweeps.is_infinite());
  EXPECT_FALSE(one_sweep.is_infinite());
  EXPECT_TRUE(MinibatchSource(xor_data()).is_infinite());
  // More sweeps than size_t counts samples of: no end either.
  EXPECT_TRUE(MinibatchSource(xor_data(), {.max_sweeps = INFINITELY_REPEAT / 2}).is_infinite());

  EXPECT_THROW(MinibatchSource(xor_data(), {.max_samples = 10, .max_sweeps = 1}), ArgumentError);
  EXPECT_THROW(MinibatchSource(xor_data()).next_minibatch(0), ArgumentError);
  EXPECT_THROW(MinibatchSource(xor_data()).next_minibatch(4, 2, 2), ArgumentError);
}

TEST(MinibatchSource, UnknownStreamNamesTheKnownOnes) {
  MinibatchSource source(xor_data());
  try {
    source["z"];
    FAIL() << "no exception";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown stream 'z'; known streams: 'xy', 'r'"),
              std::string::npos)
        << e.what();
  }
}

TEST(MinibatchSource, DenseSequencesArePackedAndSparseOnesPaddedWithAMask) {
  MinibatchSource source(numbered_data(), {.randomize = false});
  Minibatch<StreamInformation> mb =
      source.next_minibatch(6);  // sequences 0 (1 sample), 1 (2), 2 (3)
  EXPECT_EQ(keys(source, mb), (std::vector<int>{0, 1, 2}));
  const MinibatchData& v = mb.at(source["v"]);
  EXPECT_EQ(v.number_of_samples, 6u);
  EXPECT_EQ(v.data.dtype(), DataType::Float64);
  // Packed: time-major, the longest sequence first at each step.
  ASSERT_TRUE(v.data.is_packed());
  EXPECT_EQ(v.data.packed_rows().shape(), (NDShape{6, 1}));
  EXPECT_EQ(v.data.packed_rows().to_vector<double>(),
            (std::vector<double>{200, 100, 0, 201, 101, 202}));
  EXPECT_EQ(v.data.sequence_lengths(), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(v.data.as_sequences<double>(),
            (std::vector<std::vector<double>>{{0}, {100, 101}, {200, 201, 202}}));
  // Padded on request, as CNTK's reader delivers it: the padding reads as zeros.
  EXPECT_EQ(v.data.data().shape(), (NDShape{3, 3, 1}));
  EXPECT_EQ(v.data.data().to_vector<double>(),
            (std::vector<double>{0, 0, 0, 100, 101, 0, 200, 201, 202}));
  EXPECT_EQ(*v.data.mask(), NDMask::of_lengths({1, 2, 3}, 3));
  const MinibatchData& k = mb.at(source["k"]);
  EXPECT_EQ(k.number_of_samples, 3u);  // one sample per sequence
  EXPECT_EQ(k.data.data().shape(), (NDShape{3, 1, 1}));
  const MinibatchData& w = mb.at(source["w"]);
  ASSERT_TRUE(w.data.is_sparse());
  EXPECT_FALSE(w.data.is_packed());
  EXPECT_EQ(w.data.data().shape(), (NDShape{3, 3, 3}));
  EXPECT_EQ(w.data.data().csr_row_offsets(), (std::vector<int32_t>{0, 1, 1, 1, 2, 3, 3, 4, 5, 6}));
  EXPECT_EQ(w.data.data().csr_col_indices(), (std::vector<int32_t>{0, 0, 1, 0, 1, 2}));
  EXPECT_EQ(w.data.mask()->at(0, 1), MaskKind::Invalid);
  EXPECT_EQ(w.data.mask()->at(2, 0), MaskKind::SequenceBegin);
}

TEST(MinibatchSource, RandomizedSweepsSeeEverySequenceOnce) {
  auto data = numbered_data();
  ASSERT_GT(data->chunk_infos().size(), 4u);
  auto sweeps = [&](uint64_t seed, size_t window) {
    MinibatchSource source(
        data,
        {.max_sweeps = 3, .randomization_seed = seed, .randomization_window_in_chunks = window});
    // A minibatch may cross a sweep end: sort sequences into sweeps by sample position.
    std::vector<std::vector<int>> out(3);
    size_t position = 0;
    for (Minibatch<StreamInformation> mb; !(mb = source.next_minibatch(7)).empty();) {
      for (int k : keys(source, mb)) {
        out.at(position / 100).push_back(k);  // a sweep holds 100 samples
        position += 1 + k % 4;
      }
    }
    return out;
  };
  std::vector<int> all(40);
  std::iota(all.begin(), all.end(), 0);
  for (size_t window : {1, 2, 128}) {
    auto a = sweeps(1, window);
    ASSERT_EQ(a.size(), 3u);
    for (const auto& sweep : a) {
      std::vector<int> sorted = sweep;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, all);
      EXPECT_NE(sweep, all);
    }
    EXPECT_NE(a[0], a[1]);
    EXPECT_EQ(a, sweeps(1, window));
    EXPECT_NE(a, sweeps(2, window));
  }
}

TEST(MinibatchSource, FrameModeSplitsSequencesIntoSamples) {
  std::string path = write_temp("frames.ctf", "0 |a 1 |b 10\n0 |a 2 |b 20\n1 |a 3 |b 30\n");
  auto data = std::make_shared<CTFDeserializer>(
      path, StreamDefs{{"a", StreamDef{.shape = 1}}, {"b", StreamDef{.shape = 1}}});
  MinibatchSource source(data, {.randomize = false, .frame_mode = true});
  Minibatch<StreamInformation> mb = source.next_minibatch(2);
  EXPECT_EQ(mb.at(source["a"]).data.data().shape(), (NDShape{2, 1, 1}));
  EXPECT_EQ(mb.at(source["b"]).data.data().to_vector<float>(), (std::vector<float>{10, 20}));
  mb = source.next_minibatch(2);
  EXPECT_EQ(mb.at(source["b"]).data.data().to_vector<float>(), (std::vector<float>{30, 10}));
  EXPECT_TRUE(mb.at(source["b"]).sweep_end);

  std::string ragged = write_temp("ragged.ctf", "0 |a 1 |b 10\n0 |a 2\n");
  MinibatchSource bad(
      std::make_shared<CTFDeserializer>(
          ragged, StreamDefs{{"a", StreamDef{.shape = 1}}, {"b", StreamDef{.shape = 1}}}),
      {.frame_mode = true});
  EXPECT_THROW(bad.next_minibatch(2), DataError);
}

TEST(MinibatchSource, CheckpointRestoresTheExactRemainingStream) {
  for (bool randomize : {false, true}) {
    for (size_t taken = 0; taken < 25; taken += 3) {
      MinibatchSourceConfig config{.randomize = randomize,
                                   .max_samples = 300,
                                   .randomization_seed = 7,
                                   .randomization_window_in_chunks = 2};
      MinibatchSource original(numbered_data(), config);
      for (size_t i = 0; i < taken; ++i) original.next_minibatch(5 + i % 4);
      Dictionary state = original.get_checkpoint_state();
      MinibatchSource restored(numbered_data(), config);
      restored.restore_from_checkpoint(state);
      for (size_t i = taken; i < taken + 30; ++i) {
        size_t n = 5 + i % 4;
        ASSERT_EQ(describe(restored, restored.next_minibatch(n)),
                  describe(original, original.next_minibatch(n)))
            << "randomize " << randomize << ", restored after " << taken << ", minibatch " << i;
      }
    }
  }
  MinibatchSource source(numbered_data(), {.randomize = false});
  Dictionary bad;
  bad["minibatchSourcePosition"] = uint64_t{2};  // inside sequence 1 (samples 1..2)
  Dictionary good = MinibatchSource(numbered_data()).get_checkpoint_state();
  source.next_minibatch(3);
  EXPECT_THROW(source.restore_from_checkpoint(bad), ArgumentError);
  EXPECT_EQ(keys(source, source.next_minibatch(3)), (std::vector<int>{2}));  // unchanged
  EXPECT_THROW(source.restore_from_checkpoint(Dictionary()), ArgumentError);
  source.restore_from_checkpoint(good);
  EXPECT_EQ(keys(source, source.next_minibatch(3)), (std::vector<int>{0, 1}));
}

TEST(MinibatchSource, PartitionsSplitTheDataDisjointlyAndCompletely) {
  for (size_t chunk_size : {60, 1 << 20}) {  // many chunks; a single chunk
    for (bool randomize : {false, true}) {
      for (size_t workers : {2, 3}) {
        std::vector<std::unique_ptr<MinibatchSource>> sources;
        for (size_t r = 0; r < workers; ++r)
          sources.push_back(std::make_unique<MinibatchSource>(
              numbered_data(chunk_size),
              MinibatchSourceConfig{
                  .randomize = randomize, .max_sweeps = 1, .randomization_window_in_chunks = 2}));
        std::multiset<int> seen;
        std::vector<size_t> per_worker(workers);
        for (bool done = false; !done;) {
          for (size_t r = 0; r < workers; ++r) {
            Minibatch<StreamInformation> mb = sources[r]->next_minibatch(10, workers, r);
            done = mb.empty();
            if (done) break;
            for (int k : keys(*sources[r], mb)) seen.insert(k), ++per_worker[r];
          }
        }
        SCOPED_TRACE(testing::Message() << "chunk " << chunk_size << " randomize " << randomize
                                        << " workers " << workers);
        EXPECT_EQ(seen.size(), 40u);
        EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 40u);
        for (size_t n : per_worker) EXPECT_GT(n, 5u);
      }
    }
  }
}

TEST(MinibatchSource, AWorkerWithoutDataGetsAnEmptyMinibatch) {
  MinibatchSource source(xor_data(), {.randomize = false});
  Minibatch<StreamInformation> mb =
      source.next_minibatch(1, 2, 1);  // sequence 0 belongs to worker 0
  ASSERT_FALSE(mb.empty());
  EXPECT_EQ(mb.at(source["xy"]).number_of_sequences, 0u);
  EXPECT_EQ(mb.at(source["xy"]).data.data().shape(), (NDShape{0, 0, 2}));
}

TEST(MinibatchSource, CombinesDeserializersSequenceBySequence) {
  auto labels =
      std::make_shared<CTFDeserializer>(write_temp("labels.ctf", "|y 1\n|y 2\n|y 3\n|y 4\n"),
                                        StreamDefs{{"y", StreamDef{.shape = 1}}});
  MinibatchSource source({xor_data(), labels}, {.randomize = false});
  EXPECT_EQ(source["y"].id, 2u);
  Minibatch<StreamInformation> mb = source.next_minibatch(2);
  EXPECT_EQ(mb.at(source["y"]).data.data().to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(mb.at(source["xy"]).data.data().to_vector<float>(), (std::vector<float>{0, 0, 1, 0}));
  auto short_labels = std::make_shared<CTFDeserializer>(write_temp("short_labels.ctf", "|y 1\n"),
                                                        StreamDefs{{"y", StreamDef{.shape = 1}}});
  EXPECT_THROW(MinibatchSource({xor_data(), short_labels}), ArgumentError);
  EXPECT_THROW(MinibatchSource({xor_data(), xor_data()}), ArgumentError);  // same names
}

// 200 sequences of 1..3 samples (|k the sequence number on every row) in chunks of about two
// sequences: many chunks.
std::shared_ptr<Deserializer> many_chunks() {
  std::string text;
  for (int s = 0; s < 200; ++s)
    for (int t = 0; t < 1 + s % 3; ++t)
      text += std::to_string(s) + " |k " + std::to_string(s) + " |v " +
              std::to_string(1000 * s + t) + "\n";
  static const std::string path = write_temp("many_chunks.ctf", text);
  return std::make_shared<CTFDeserializer>(
      path, StreamDefs{{"k", StreamDef{.shape = 1}}, {"v", StreamDef{.shape = 1}}},
      CTFOptions{.chunk_size_bytes = 40});
}

// The descriptions of `count` minibatches of the given sizes (cycled) from a new source.
std::vector<std::string> stream_of(MinibatchSourceConfig config, size_t count,
                                   std::vector<size_t> sizes = {7}, size_t workers = 1,
                                   size_t rank = 0, const Dictionary* restore = nullptr) {
  MinibatchSource source(many_chunks(), config);
  if (restore) source.restore_from_checkpoint(*restore);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i)
    out.push_back(describe(source, source.next_minibatch(sizes[i % sizes.size()], workers, rank)));
  return out;
}

TEST(MinibatchSource, HoldsOnlyTheChunksOfItsWindow) {
  auto data = many_chunks();
  const size_t num_chunks = data->chunk_infos().size();
  ASSERT_GT(num_chunks, 60u);
  for (bool prefetch : {false, true}) {
    for (size_t window : {1, 4, 16}) {
      MinibatchSource source(data, {.max_sweeps = 3,
                                    .randomization_seed = 2,
                                    .randomization_window_in_chunks = window,
                                    .prefetch = prefetch});
      const size_t minibatch = 5;  // samples: at most 5 sequences, so at most 5 chunks
      for (Minibatch<StreamInformation> mb; !(mb = source.next_minibatch(minibatch)).empty();)
        EXPECT_LE(source.chunk_stats().resident, window) << "window " << window;
      ChunkStats stats = source.chunk_stats();
      SCOPED_TRACE(testing::Message() << "window " << window << " prefetch " << prefetch);
      // Each chunk is loaded once a sweep, and dropped once the timeline has passed it.
      EXPECT_EQ(stats.loads, 3 * num_chunks);
      EXPECT_LE(stats.peak_resident, window + minibatch);
      EXPECT_EQ(stats.resident, 0u);
    }
  }
  // In file order a chunk is dropped once read: one or two chunks at a time.
  MinibatchSource in_order(data, {.randomize = false, .max_sweeps = 1});
  while (!in_order.next_minibatch(3).empty()) EXPECT_LE(in_order.chunk_stats().resident, 1u);
  EXPECT_LE(in_order.chunk_stats().peak_resident, 3u);
}

// When one window holds every chunk, chunks whose data are the same in every sweep are loaded
// once, not once a sweep, and the minibatches are those of a source that reloads them.
TEST(MinibatchSource, OneWindowLoadsEachChunkOnceForAllSweeps) {
  struct ReloadEverySweep : Deserializer {
    std::shared_ptr<Deserializer> inner;
    const std::vector<StreamInformation>& stream_infos() const override {
      return inner->stream_infos();
    }
    const std::vector<ChunkInfo>& chunk_infos() const override { return inner->chunk_infos(); }
    std::vector<SequenceInfo> sequence_infos(size_t chunk) const override {
      return inner->sequence_infos(chunk);
    }
    std::shared_ptr<const Chunk> load_chunk(size_t chunk) override {
      return inner->load_chunk(chunk);
    }
    bool same_in_every_sweep() const override { return false; }
  };
  auto data = many_chunks();
  auto reloading = std::make_shared<ReloadEverySweep>();
  reloading->inner = data;
  const size_t num_chunks = data->chunk_infos().size();
  for (bool prefetch : {false, true}) {
    SCOPED_TRACE(prefetch ? "prefetch" : "sync");
    const MinibatchSourceConfig config{.max_sweeps = 3,
                                       .randomization_seed = 5,
                                       .randomization_window_in_chunks = num_chunks,
                                       .prefetch = prefetch};
    MinibatchSource kept(data, config), reloaded(reloading, config);
    for (Minibatch<StreamInformation> mb; !(mb = kept.next_minibatch(7)).empty();)
      EXPECT_EQ(describe(kept, mb), describe(reloaded, reloaded.next_minibatch(7)));
    EXPECT_TRUE(reloaded.next_minibatch(7).empty());
    EXPECT_EQ(kept.chunk_stats().loads, num_chunks);
    EXPECT_EQ(reloaded.chunk_stats().loads, 3 * num_chunks);
    EXPECT_EQ(kept.chunk_stats().resident, 0u);
  }
}

TEST(MinibatchSource, WindowInSamplesShufflesWithinWindowsOfThatSize) {
  auto order = [](MinibatchSourceConfig config) {
    MinibatchSource source(many_chunks(), config);
    std::vector<int> out;
    while (out.size() < 200) {
      auto mb = source.next_minibatch(1);
      for (int k : keys(source, mb)) out.push_back(k);
      EXPECT_LE(source.chunk_stats().resident, 30u);  // chunks hold at least one sample
    }
    return out;
  };
  MinibatchSourceConfig by_samples{.randomization_seed = 4,
                                   .randomization_window_in_chunks = 0,
                                   .randomization_window_in_samples = 30};
  std::vector<int> a = order(by_samples), sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> all(200);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_EQ(a, order(by_samples));  // deterministic
  EXPECT_NE(a, order({.randomization_seed = 4}));
  EXPECT_THROW(MinibatchSource(many_chunks(), {.randomization_window_in_samples = 30}),
               ArgumentError);  // both windows
}

// Restoring rebuilds one sweep's order and reads nothing; the data it needs then is loaded.
TEST(MinibatchSource, RestoringLateLoadsOnlyWhatItReads) {
  MinibatchSourceConfig config{.randomization_seed = 9, .randomization_window_in_chunks = 4};
  MinibatchSource original(many_chunks(), config);
  const size_t sweep = original.samples_per_sweep();
  while (original.position().value() < 50 * sweep + sweep / 2) original.next_minibatch(50);
  const size_t loads_so_far = original.chunk_stats().loads;
  EXPECT_GE(loads_so_far, 50 * many_chunks()->chunk_infos().size());
  Dictionary state = original.get_checkpoint_state();
  MinibatchSource restored(many_chunks(), config);
  restored.restore_from_checkpoint(state);
  EXPECT_EQ(restored.chunk_stats().loads, 0u);
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(describe(restored, restored.next_minibatch(5)),
              describe(original, original.next_minibatch(5)));
  // 20 minibatches of at most 5 sequences, and the one read ahead.
  EXPECT_LE(restored.chunk_stats().loads, 21u * 5);
}

// numbered_data with an empty chunk before each of its chunks.
class WithEmptyChunks : public Deserializer {
 public:
  WithEmptyChunks() : data_(numbered_data()) {
    for (const ChunkInfo& c : data_->chunk_infos()) {
      chunks_.push_back({});
      chunks_.push_back(c);
    }
  }
  const std::vector<StreamInformation>& stream_infos() const override {
    return data_->stream_infos();
  }
  const std::vector<ChunkInfo>& chunk_infos() const override { return chunks_; }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override {
    return chunk % 2 ? data_->sequence_infos(chunk / 2) : std::vector<SequenceInfo>{};
  }
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override {
    EXPECT_EQ(chunk % 2, 1u) << "no unit lies in an empty chunk";
    return data_->load_chunk(chunk / 2);
  }

 private:
  std::shared_ptr<Deserializer> data_;
  std::vector<ChunkInfo> chunks_;
};

// Windows of empty chunks hold no units (the source holds one window's units at a time): every
// sweep still delivers every sequence once, and a restore in mid-sweep the same rest.
TEST(MinibatchSource, WindowsOfEmptyChunksHoldNoUnits) {
  for (size_t window : {1, 2, 3}) {
    MinibatchSourceConfig config{
        .max_sweeps = 3, .randomization_seed = 4, .randomization_window_in_chunks = window};
    MinibatchSource source(std::make_shared<WithEmptyChunks>(), config);
    std::multiset<int> seen;
    Dictionary state;
    for (size_t n = 0;; ++n) {
      const auto mb = source.next_minibatch(3);
      if (mb.empty()) break;
      for (int k : keys(source, mb)) seen.insert(k);
      if (n == 30) state = source.get_checkpoint_state();
    }
    for (int k = 0; k < 40; ++k) EXPECT_EQ(seen.count(k), 3u) << "window " << window;

    MinibatchSource original(std::make_shared<WithEmptyChunks>(), config),
        restored(std::make_shared<WithEmptyChunks>(), config);
    for (size_t n = 0; n <= 30; ++n) original.next_minibatch(3);
    restored.restore_from_checkpoint(state);
    for (auto mb = original.next_minibatch(3); !mb.empty(); mb = original.next_minibatch(3))
      ASSERT_EQ(describe(restored, restored.next_minibatch(3)), describe(original, mb));
    EXPECT_TRUE(restored.next_minibatch(3).empty());
  }
}

// xor_data, but its first sequence claims 2^32 samples: more than the source's 32-bit lengths.
class ClaimsAHugeSequence : public Deserializer {
 public:
  const std::vector<StreamInformation>& stream_infos() const override {
    return data_->stream_infos();
  }
  const std::vector<ChunkInfo>& chunk_infos() const override { return data_->chunk_infos(); }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override {
    std::vector<SequenceInfo> infos = data_->sequence_infos(chunk);
    infos[0].num_samples = size_t{1} << 32;
    return infos;
  }
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override {
    return data_->load_chunk(chunk);
  }

 private:
  std::shared_ptr<Deserializer> data_ = xor_data();
};

TEST(MinibatchSource, ASequenceOf2To32SamplesIsRejected) {
  try {
    MinibatchSource source(std::make_shared<ClaimsAHugeSequence>());
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("at most 2^32 - 1"), std::string::npos) << e.what();
  }
}

// Reading ahead on a background thread, with any number of reader threads, delivers exactly
// what reading on demand delivers: in every mode, for every worker, after a restore, and when
// the minibatch size changes between calls.
TEST(MinibatchSource, PrefetchDeliversTheSameStream) {
  const std::vector<MinibatchSourceConfig> configs{
      {.randomization_seed = 1, .randomization_window_in_chunks = 3},
      {.randomize = false, .max_samples = 250},
      {.randomization_seed = 2, .randomization_window_in_chunks = 5, .frame_mode = true},
      {.randomization_seed = 3, .randomization_window_in_chunks = 2, .truncation_length = 2},
  };
  for (size_t c = 0; c < configs.size(); ++c) {
    MinibatchSourceConfig plain = configs[c];
    plain.prefetch = false;
    plain.num_reader_threads = 1;
    for (size_t workers : {1, 2}) {
      for (size_t rank = 0; rank < workers; ++rank) {
        const std::vector<size_t> sizes{8, 8, 8, 5, 5, 12, 8};
        const std::vector<std::string> want = stream_of(plain, 150, sizes, workers, rank);
        for (size_t threads : {1, 3}) {
          MinibatchSourceConfig ahead = configs[c];
          ahead.prefetch = true;
          ahead.num_reader_threads = threads;
          SCOPED_TRACE(testing::Message() << "config " << c << " workers " << workers << " rank "
                                          << rank << " threads " << threads);
          EXPECT_EQ(stream_of(ahead, 150, sizes, workers, rank), want);
        }
      }
    }
    // A checkpoint taken while a minibatch is read ahead is where the caller stands.
    MinibatchSourceConfig ahead = configs[c];
    MinibatchSource source(many_chunks(), ahead);
    for (int i = 0; i < 37; ++i) source.next_minibatch(8);
    const Dictionary state = source.get_checkpoint_state();
    EXPECT_EQ(stream_of(ahead, 60, {8}, 1, 0, &state), stream_of(plain, 60, {8}, 1, 0, &state));
    std::vector<std::string> rest;
    for (int i = 0; i < 60; ++i) rest.push_back(describe(source, source.next_minibatch(8)));
    EXPECT_EQ(rest, stream_of(plain, 60, {8}, 1, 0, &state));
  }
}

// An error met while reading ahead is thrown by the call that asks for that minibatch, with
// the message reading on demand gives; destroying a source while it reads ahead is safe.
TEST(MinibatchSource, ReadAheadErrorsSurfaceOnTheirCallAndDestructionWaits) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "|x " + std::to_string(i) + ".5\n";
  const std::string path = write_temp("late_error.ctf", text);
  const StreamDefs defs{{"x", StreamDef{.shape = 1}}};
  for (bool prefetch : {false, true}) {
    std::ofstream(path, std::ios::binary) << text;
    MinibatchSource source(
        std::make_shared<CTFDeserializer>(path, defs, CTFOptions{.chunk_size_bytes = 8}),
        {.randomize = false, .prefetch = prefetch});
    // The file changes after it was indexed: line 90 now holds a malformed number.
    std::string changed = text;
    changed.replace(changed.find("|x 90.5"), 7, "|x 90.x");
    std::ofstream(path, std::ios::binary) << changed;
    std::string expected;
    try {
      CTFDeserializer(path, defs, {.trace_level = 0});
    } catch (const DataError& e) {
      expected = e.what();
    }
    ASSERT_NE(expected.find("Reached the maximum number of allowed errors"), std::string::npos);
    size_t delivered = 0;
    try {
      for (;; ++delivered) source.next_minibatch(10);
    } catch (const DataError& e) {
      EXPECT_EQ(e.what(), expected);
    }
    EXPECT_EQ(delivered, 9u) << "prefetch " << prefetch;  // lines 0..89 (a chunk a line)
  }
  std::ofstream(path, std::ios::binary) << text;
  for (int i = 0; i < 20; ++i) {
    MinibatchSource source(many_chunks(), {.randomization_window_in_chunks = 2});
    source.next_minibatch(size_t(1 + i));  // returns while the next is read
  }
}

}  // namespace
}  // namespace loom
