// Truncated BPTT in MinibatchSource (MinibatchSourceConfig::truncation_length).
#include <gtest/gtest.h>

#include <sstream>

#include "loom/core/random.h"
#include "loom/graph/executor.h"
#include "loom/io/minibatch_source.h"
#include "loom/io/minibatch_source_from_data.h"
#include "loom/layers/recurrent.h"

namespace loom {
namespace {

// Sequences of the given lengths; step t of sequence s holds 100 * s + t in stream "x" (and
// 2 features in "xy": 100 * s + t and 0.1 * t).
MinibatchSource source_of(const std::vector<size_t>& lengths, MinibatchSourceConfig config) {
  std::vector<std::vector<float>> x, xy;
  for (size_t s = 0; s < lengths.size(); ++s) {
    x.emplace_back();
    xy.emplace_back();
    for (size_t t = 0; t < lengths[s]; ++t) {
      x.back().push_back(float(100 * s + t));
      xy.back().insert(xy.back().end(), {float(100 * s + t) / 100, 0.1f * float(t)});
    }
  }
  config.randomize = false;
  return MinibatchSourceFromData({{"x", Value::create_sequences<float>({1}, x)},
                                  {"xy", Value::create_sequences<float>({2}, xy)}},
                                 config);
}

// A minibatch of stream x: each sequence's values, '~' before a continued one.
std::string describe(MinibatchSource& source, const Minibatch<StreamInformation>& mb) {
  if (mb.empty()) return "end";
  const MinibatchData& d = mb.at(source["x"]);
  std::ostringstream out;
  EXPECT_TRUE(d.data.is_packed());
  std::vector<std::vector<float>> seqs = d.data.as_sequences<float>();
  for (size_t b = 0; b < seqs.size(); ++b) {
    out << (b ? " | " : "");
    // The packed start flags, and the padded form's mask, agree.
    if (!seqs[b].empty()) {
      EXPECT_EQ(d.data.begins_sequence(b), d.data.mask()->begins_sequence(b)) << b;
    }
    if (!seqs[b].empty() && !d.data.begins_sequence(b)) out << "~";
    for (size_t t = 0; t < seqs[b].size(); ++t) out << (t ? "," : "") << seqs[b][t];
  }
  out << " (" << d.number_of_samples << (d.sweep_end ? ", sweep end)" : ")");
  return out.str();
}

TEST(Truncation, PiecesOfASequenceComeInConsecutiveMinibatchesAtTheSameIndex) {
  MinibatchSource source = source_of({10, 3, 5}, {.max_sweeps = 1, .truncation_length = 4});
  // 8 samples, 4 steps: 2 slots.
  EXPECT_EQ(describe(source, source.next_minibatch(8)), "0,1,2,3 | 100,101,102 (7)");
  EXPECT_EQ(describe(source, source.next_minibatch(8)),
            "~4,5,6,7 | 200,201,202,203 (8, sweep end)");
  EXPECT_EQ(describe(source, source.next_minibatch(8)), "~8,9 | ~204 (3)");
  EXPECT_EQ(describe(source, source.next_minibatch(8)), "end");
  EXPECT_EQ(source.position(), 18u);
}

TEST(Truncation, ASlotWithoutDataIsAnEmptySequenceAndSweepsFollowEachOther) {
  MinibatchSource source = source_of({2, 9}, {.truncation_length = 3});
  EXPECT_EQ(describe(source, source.next_minibatch(6)), "0,1 | 100,101,102 (5, sweep end)");
  EXPECT_EQ(describe(source, source.next_minibatch(6)), "0,1 | ~103,104,105 (5)");
  EXPECT_EQ(describe(source, source.next_minibatch(6)),
            "100,101,102 | ~106,107,108 (6, sweep end)");
  // A smaller minibatch: one slot; the second finished its sequence and goes.
  EXPECT_EQ(describe(source, source.next_minibatch(3)), "~103,104,105 (3)");

  MinibatchSource ending = source_of({2, 9}, {.max_samples = 11, .truncation_length = 3});
  ending.next_minibatch(6);
  ending.next_minibatch(6);  // takes the sweep's 11 samples
  EXPECT_EQ(describe(ending, ending.next_minibatch(6)), " | ~106,107,108 (3)");
}

TEST(Truncation, CheckpointsRestoreTheSlots) {
  MinibatchSourceConfig config{.max_sweeps = 3, .truncation_length = 4};
  MinibatchSource a = source_of({10, 3, 5, 7}, config);
  a.next_minibatch(8);
  a.next_minibatch(8);
  const Dictionary state = a.get_checkpoint_state();
  std::vector<std::string> rest;
  for (auto mb = a.next_minibatch(8); !mb.empty(); mb = a.next_minibatch(8))
    rest.push_back(describe(a, mb));
  MinibatchSource b = source_of({10, 3, 5, 7}, config);
  b.restore_from_checkpoint(state);
  for (const std::string& expected : rest) EXPECT_EQ(describe(b, b.next_minibatch(8)), expected);
  EXPECT_EQ(describe(b, b.next_minibatch(8)), "end");

  MinibatchSource plain = source_of({10, 3, 5, 7}, {.max_sweeps = 3});
  EXPECT_THROW(plain.restore_from_checkpoint(state), ArgumentError);
  MinibatchSource other = source_of({1, 3, 5, 7}, config);
  EXPECT_THROW(other.restore_from_checkpoint(state), ArgumentError);
}

TEST(Truncation, WorkersTakeSlotsInTurn) {
  MinibatchSourceConfig config{.max_sweeps = 1, .truncation_length = 2};
  MinibatchSource w0 = source_of({5, 3, 4}, config), w1 = source_of({5, 3, 4}, config);
  EXPECT_EQ(describe(w0, w0.next_minibatch(4, 2, 0)), "0,1 (2)");
  EXPECT_EQ(describe(w1, w1.next_minibatch(4, 2, 1)), "100,101 (2)");
  EXPECT_EQ(describe(w0, w0.next_minibatch(4, 2, 0)), "~2,3 (2)");
  EXPECT_EQ(describe(w1, w1.next_minibatch(4, 2, 1)), "~102 (1)");
  EXPECT_EQ(w0.position(), 7u);                             // the global count
  EXPECT_THROW(w0.next_minibatch(3, 2, 0), ArgumentError);  // one slot for two workers
}

TEST(Truncation, NeedsEveryStreamAtFullLength) {
  std::vector<std::vector<float>> x{{1, 2, 3}}, label{{1}};
  MinibatchSource source =
      MinibatchSourceFromData({{"x", Value::create_sequences<float>({1}, x)},
                               {"label", Value::create_sequences<float>({1}, label)}},
                              {.randomize = false, .truncation_length = 2});
  try {
    source.next_minibatch(2);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("stream 'label' has 1 samples in sequence"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(MinibatchSourceFromData({{"x", Value::create_sequences<float>({1}, x)}},
                                       {.frame_mode = true, .truncation_length = 2}),
               ArgumentError);
}

// The outputs of a recurrent layer over sequences read in pieces of 4 steps are those over
// the unbroken sequences: the state carries from each piece to the next.
TEST(Truncation, ARecurrenceOverPiecesGivesTheUnbrokenSequencesOutputs) {
  set_fixed_random_seed(3);
  Variable x = sequence::input_variable({2}, {.name = "xy"});
  Variable h = Recurrence(LSTM(3))(x);
  const std::vector<size_t> lengths{11, 6, 1};

  MinibatchSource whole = source_of(lengths, {.max_sweeps = 1});
  Executor full({h});
  full.forward({{x, whole.next_minibatch(100).at(whole["xy"]).data}}, false);
  const std::vector<std::vector<float>> expected = full.output_value(h).as_sequences<float>();

  // 12 samples, 4 steps: 3 slots, one per sequence.
  MinibatchSource pieces = source_of(lengths, {.max_sweeps = 1, .truncation_length = 4});
  Executor stepwise({h});
  std::vector<std::vector<float>> joined(lengths.size());
  size_t minibatches = 0;
  for (auto mb = pieces.next_minibatch(12); !mb.empty(); mb = pieces.next_minibatch(12)) {
    stepwise.forward({{x, mb.at(pieces["xy"]).data}}, true);
    std::vector<std::vector<float>> out = stepwise.output_value(h).as_sequences<float>();
    for (size_t s = 0; s < out.size(); ++s)
      joined[s].insert(joined[s].end(), out[s].begin(), out[s].end());
    ++minibatches;
  }
  EXPECT_EQ(minibatches, 3u);
  ASSERT_EQ(joined.size(), expected.size());
  for (size_t s = 0; s < expected.size(); ++s) {
    ASSERT_EQ(joined[s].size(), expected[s].size()) << "sequence " << s;
    for (size_t i = 0; i < expected[s].size(); ++i)
      EXPECT_NEAR(joined[s][i], expected[s][i], 1e-6) << "sequence " << s << " value " << i;
  }
}

}  // namespace
}  // namespace loom
