#include "loom/io/user_minibatch_source.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "loom/core/random.h"
#include "loom/layers/dense.h"
#include "loom/layers/recurrent.h"
#include "loom/learners/sgd.h"
#include "loom/ops/losses.h"
#include "loom/ops/sequence_ops.h"
#include "loom/train/function_training.h"
#include "loom/train/training_session.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// Word sequences of a 6-word vocabulary and a class of 3 per sequence.
const std::vector<std::vector<size_t>> kWords{{1, 2}, {3}, {4, 0, 5}, {2, 2, 1, 3},
                                              {5, 4}, {0}, {1, 3, 3}, {4, 1}};
const std::vector<size_t> kClasses{0, 1, 2, 0, 1, 2, 0, 1};

// Reads kWords in order, whole sequences while they fit into num_samples (at least one), the
// sequences of index % number_of_workers == worker_rank; its state is the next sequence.
class WordSource : public UserMinibatchSource {
 public:
  StreamInformation words{"words", 0, StorageFormat::SparseCSR, DataType::Float32, {6}};
  StreamInformation classes{"classes", 1, StorageFormat::SparseCSR, DataType::Float32, {3}};
  // End a minibatch at the end of a sweep (else it goes on into the next sweep, as the seed's).
  bool stop_at_sweep_end = false;
  // What the next call returns instead, to test the loops' checks.
  std::function<void(Minibatch<StreamInformation>&)> damage;

  std::vector<StreamInformation> stream_infos() const override { return {words, classes}; }
  using UserMinibatchSource::next_minibatch;  // keyed by the variables of an input map

  Minibatch<StreamInformation> next_minibatch(size_t num_samples, size_t number_of_workers,
                                              size_t worker_rank) override {
    std::vector<std::vector<size_t>> seqs;
    std::vector<size_t> labels;
    size_t taken = 0, samples = 0;
    bool sweep_end = false;
    while (taken < num_samples) {
      const std::vector<size_t>& s = kWords[next_];
      if (taken > 0 && taken + s.size() > num_samples) break;
      taken += s.size();
      if (next_ % number_of_workers == worker_rank) {
        seqs.push_back(s);
        labels.push_back(kClasses[next_]);
        samples += s.size();
      }
      if (++next_ == kWords.size()) {
        next_ = 0;
        sweep_end = true;
        if (stop_at_sweep_end) break;
      }
    }
    Minibatch<StreamInformation> mb{
        {words, {Value::one_hot_sequences(6, seqs), seqs.size(), samples, sweep_end}},
        {classes, {Value::one_hot(3, labels), labels.size(), labels.size(), sweep_end}}};
    if (damage) damage(mb);
    return mb;
  }
  Dictionary get_checkpoint_state() const override {
    Dictionary d;
    d["next"] = uint64_t{next_};
    return d;
  }
  void restore_from_checkpoint(const Dictionary& state) override {
    next_ = size_t(state.get<uint64_t>("next"));
  }

 private:
  size_t next_ = 0;
};

// A stateless source of the same data that ends after one sweep.
class OneSweep : public UserMinibatchSource {
 public:
  OneSweep() { inner.stop_at_sweep_end = true; }
  WordSource inner;
  std::vector<StreamInformation> stream_infos() const override { return inner.stream_infos(); }
  Minibatch<StreamInformation> next_minibatch(size_t n, size_t workers, size_t rank) override {
    if (done_) return {};
    Minibatch<StreamInformation> mb = inner.next_minibatch(n, workers, rank);
    done_ = mb.begin()->second.sweep_end;
    return mb;
  }

 private:
  bool done_ = false;
};

// Recurrence(RNNStep(4)), last, Dense(3) with cross entropy and classification error.
struct Model {
  Variable x = sequence::input_variable({6}, {.is_sparse = true, .name = "words"});
  Variable y = input_variable({3}, {.is_sparse = true, .name = "classes"});
  Function z;
  Function criterion;
  std::shared_ptr<SummaryCollector> collector = std::make_shared<SummaryCollector>();
  std::shared_ptr<Trainer> trainer;

  Model() {
    set_fixed_random_seed(7);  // every Model starts from the same weights
    z = Dense(3)(sequence::last(Recurrence(RNNStep(4))(x)));
    criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
    trainer = std::make_shared<Trainer>(
        z, criterion,
        std::vector{sgd(z.parameters(), learning_rate_schedule(0.1, UnitType::sample))},
        ProgressWriters{collector});
  }
  std::vector<float> weights() const {
    std::vector<float> all;
    for (const Parameter& p : z.parameters()) {
      std::vector<float> v = p.value().to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
};

// The same data for Loom's reader, read in order.
MinibatchSource reader() {
  std::vector<size_t> labels(kClasses.begin(), kClasses.end());
  return MinibatchSourceFromData(
      {{"words", Value::one_hot_sequences(6, kWords)}, {"classes", Value::one_hot(3, labels)}},
      {.randomize = false});
}

TEST(UserMinibatchSource, TrainsInASessionAsLoomsReaderWithTheSameData) {
  Model a, b;
  WordSource user;
  MinibatchSource builtin = reader();
  training_session({.trainer = a.trainer,
                    .mb_source = user,
                    .mb_size = 5,
                    .model_inputs_to_streams = {{a.x, user.words}, {a.y, user.classes}},
                    .max_samples = 60})
      .train();
  training_session({.trainer = b.trainer,
                    .mb_source = builtin,
                    .mb_size = 5,
                    .model_inputs_to_streams = {{b.x, builtin["words"]}, {b.y, builtin["classes"]}},
                    .max_samples = 60})
      .train();
  EXPECT_EQ(a.trainer->total_number_of_samples_seen(), 60u);
  EXPECT_EQ(a.weights(), b.weights());
}

TEST(UserMinibatchSource, ATrainerLoopReadsItThroughAnInputMap) {
  Model m;
  WordSource source;
  const InputMap input_map{{m.x, source["words"]}, {m.y, source["classes"]}};
  size_t sweeps = 0;
  for (int i = 0; i < 6; ++i) {
    MinibatchMap mb = source.next_minibatch(4, input_map);
    sweeps += mb[m.x].sweep_end;
    EXPECT_EQ(mb[m.y].data.is_sequence(), false);
    m.trainer->train_minibatch(mb);
  }
  EXPECT_EQ(sweeps, 1u);
  EXPECT_EQ(m.trainer->parameter_learners()[0]->total_number_of_sweeps_seen(), 1u);
}

TEST(UserMinibatchSource, FunctionTrainAndTestAcceptIt) {
  Model m;
  OneSweep train_data, test_data;
  TrainOptions options{.minibatch_size = 4, .max_epochs = 1};
  options.parameter_learners = {
      sgd(m.z.parameters(), learning_rate_schedule(0.1, UnitType::sample))};
  TrainSummary s = m.criterion.train(train_data, options);
  ASSERT_EQ(s.epoch_summaries.size(), 1u);
  EXPECT_EQ(s.epoch_summaries[0].samples, kWords.size());  // the loss counts sequences
  TestSummary t = m.criterion.test(test_data, {.minibatch_size = 4});
  EXPECT_EQ(t.samples, kWords.size());
}

TEST(UserMinibatchSource, ASessionResumesItFromItsCheckpointState) {
  const fs::path dir = fs::path(::testing::TempDir()) / "loom_user_source_resume";
  fs::remove_all(dir);
  auto run = [&](size_t max_samples, bool restore) {
    Model m;
    WordSource source;
    training_session({.trainer = m.trainer,
                      .mb_source = source,
                      .mb_size = 3,
                      .model_inputs_to_streams = {{m.x, source.words}, {m.y, source.classes}},
                      .max_samples = max_samples,
                      .checkpoint_config = {.filename = (dir / "ckpt").string(),
                                            .frequency = 9,
                                            .restore = restore}})
        .train();
    return m.weights();
  };
  const std::vector<float> whole = run(40, false);
  fs::remove_all(dir);
  run(18, false);                   // stops after the checkpoint at 18 samples
  EXPECT_EQ(run(40, true), whole);  // resumes at sequence 18's successor
  fs::remove_all(dir);
}

TEST(UserMinibatchSource, PartitionsSequencesByWorkerRank) {
  WordSource source;
  Minibatch<StreamInformation> mine = source.next_minibatch(10, 2, 1);  // sequences 0-3 fit
  EXPECT_EQ(mine[source.words].number_of_sequences, 2u);                // sequences 1 and 3
  EXPECT_EQ(mine[source.words].number_of_samples, 5u);
}

// The error of the first minibatch (2 sequences of 3 samples) changed by damage.
template <class E>
std::string error_of(
    const std::function<void(WordSource&, Minibatch<StreamInformation>&)>& damage) {
  Model m;
  WordSource source;
  source.damage = [&](Minibatch<StreamInformation>& mb) { damage(source, mb); };
  try {
    source.next_minibatch(4, {{m.x, source.words}, {m.y, source.classes}});
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong kind of error: ") + e.what();
  }
  return "no error";
}

TEST(UserMinibatchSource, BadMinibatchesAreErrorsNamingTheStreamAndBothCounts) {
  std::string e = error_of<ArgumentError>([](WordSource& s, Minibatch<StreamInformation>& mb) {
    mb.emplace(StreamInformation{"extra", 2, StorageFormat::Dense, DataType::Float32, {1}},
               mb[s.classes]);
  });
  EXPECT_NE(e.find("stream 'extra'"), std::string::npos) << e;
  EXPECT_NE(e.find("not one of its stream_infos() ('words', 'classes')"), std::string::npos) << e;

  e = error_of<DataError>(
      [](WordSource& s, Minibatch<StreamInformation>& mb) { mb[s.words].number_of_samples = 9; });
  EXPECT_NE(e.find("stream 'words'"), std::string::npos) << e;
  EXPECT_NE(e.find("number_of_samples = 9, but its Value holds 3 samples"), std::string::npos) << e;

  e = error_of<DataError>([](WordSource& s, Minibatch<StreamInformation>& mb) {
    mb[s.classes].number_of_sequences = 5;
  });
  EXPECT_NE(e.find("stream 'classes'"), std::string::npos) << e;
  EXPECT_NE(e.find("number_of_sequences = 5, but its Value holds 2 sequences"), std::string::npos)
      << e;

  e = error_of<DataError>([](WordSource& s, Minibatch<StreamInformation>& mb) {
    mb[s.classes] = {Value::one_hot(3, {0}), 1, 1, false};
  });
  EXPECT_NE(e.find("holds 1"), std::string::npos) << e;
  EXPECT_NE(e.find("holds 2"), std::string::npos) << e;

  e = error_of<ArgumentError>(
      [](WordSource& s, Minibatch<StreamInformation>& mb) { mb.erase(s.classes); });
  EXPECT_NE(e.find("no data for stream 'classes'"), std::string::npos) << e;
}

TEST(UserMinibatchSource, WithoutRestoreItRefusesAState) {
  OneSweep source;
  EXPECT_NO_THROW(source.restore_from_checkpoint(Dictionary()));
  Dictionary state;
  state["next"] = uint64_t{3};
  EXPECT_THROW(source.restore_from_checkpoint(state), ArgumentError);
}

}  // namespace
}  // namespace loom
