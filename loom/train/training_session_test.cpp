#include "loom/train/training_session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "loom/graph/debugging.h"
#include "loom/layers/dense.h"
#include "loom/learners/sgd.h"
#include "loom/ops/losses.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// Collects summaries and, like a process killed at that moment, throws at training update
// number crash_at (from 1; 0: never).
struct Crash {};
class CrashingCollector : public SummaryCollector {
 public:
  size_t crash_at = 0;

 protected:
  void on_write_training_update(const ProgressWindow& window) override {
    SummaryCollector::on_write_training_update(window);
    if (training_updates.size() == crash_at) throw Crash{};
  }
};

// y = x·W (W = [1, 2]ᵀ, no bias), squared error as loss and metric, sgd at 0.01 per sample,
// over 8 in-memory samples read in order.
struct Problem {
  Variable x = input_variable({2}, {.name = "x"});
  Variable t = input_variable({1}, {.name = "t"});
  Function layer = Dense(1, {.bias = false});
  Variable y = layer(x);
  Variable loss = squared_error(y, t);
  Variable metric = squared_error(y, t);
  Parameter W = layer.parameters()[0];
  std::shared_ptr<Learner> learner;
  std::shared_ptr<CrashingCollector> collector = std::make_shared<CrashingCollector>();
  std::shared_ptr<Trainer> trainer;
  std::shared_ptr<MinibatchSource> source;
  InputMap input_map;

  Problem() {
    W.set_value(NDArrayView::from_vector<float>({2, 1}, {1, 2}));
    learner = sgd({W}, learning_rate_schedule(0.01, UnitType::sample));
    trainer = std::make_shared<Trainer>(y, std::pair{loss, metric},
                                        std::vector<std::shared_ptr<Learner>>{learner},
                                        ProgressWriters{collector});
    source = std::make_shared<MinibatchSource>(
        MinibatchSourceFromData({{"x", features()}, {"t", targets()}}, {.randomize = false}));
    input_map = {{x, (*source)["x"]}, {t, (*source)["t"]}};
  }
  static NDArrayView features() {
    return NDArrayView::from_vector<float>(
        {8, 2}, {1, 0, 0, 1, 1, 1, 0.5f, 0, 0, 0.5f, 1, 0.5f, 0.5f, 1, 0.25f, 0.75f});
  }
  static NDArrayView targets() {
    return NDArrayView::from_vector<float>({8, 1}, {1, -1, 0, 0.5f, 0.25f, 1, -0.5f, 0});
  }
  TrainingSessionConfig config(size_t max_samples) {
    return {.trainer = trainer,
            .mb_source = source,
            .mb_size = 2,
            .model_inputs_to_streams = input_map,
            .max_samples = max_samples};
  }
  std::vector<float> weights() const { return W.value().to_vector<float>(); }
};

// A fresh folder per test; `ckpt` is the checkpoint filename in it.
struct Folder {
  fs::path dir;
  explicit Folder(const std::string& name)
      : dir(fs::path(::testing::TempDir()) / ("loom_session_" + name)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Folder() { fs::remove_all(dir); }
  std::string ckpt() const { return (dir / "ckpt").string(); }
  std::set<std::string> files() const {
    std::set<std::string> names;
    for (auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<size_t> summary_samples(const SummaryCollector& c) {
  std::vector<size_t> n;
  for (auto& s : c.training_summaries) n.push_back(s.samples);
  return n;
}

TEST(TrainingSession, ProgressFrequencyInSamplesMinibatchesSweepsAndAtEnd) {
  const std::vector<std::pair<std::optional<Frequency>, std::vector<size_t>>> cases{
      {Frequency(4), {4, 4, 4, 4}},
      {Frequency(3, DataUnit::minibatch), {6, 6, 4}},  // 8 minibatches: 3, 6, then the rest
      {Frequency(1, DataUnit::sweep), {8, 8}},
      {std::nullopt, {16}},
  };
  for (auto& [frequency, expected] : cases) {
    Problem p;
    auto config = p.config(16);
    config.progress_frequency = frequency;
    training_session(std::move(config)).train();
    EXPECT_EQ(p.trainer->total_number_of_samples_seen(), 16u);
    EXPECT_EQ(summary_samples(*p.collector), expected);
  }
}

// The profiler's summary has CNTK's rows of the training loop's parts, each counted per
// minibatch, before the nodes'.
TEST(TrainingSession, ProfilerSummaryHasCntksMainThreadRows) {
  Problem p;
  Folder f("profiler");
  start_profiler(f.dir.string());
  enable_profiler();
  training_session(p.config(16)).train();  // 8 minibatches
  const std::string summary = read_bytes(stop_profiler());
  auto count = [&](const std::string& row) -> int {
    const size_t at = summary.find("\n" + row + std::string(26 - row.size(), ' ') + ": ");
    if (at == std::string::npos) return -1;
    std::istringstream fields(summary.substr(at + 29, summary.find('\n', at + 1) - at - 29));
    std::vector<std::string> words{std::istream_iterator<std::string>(fields), {}};
    return words.size() == 11 ? std::stoi(words[8]) : -2;  // mean ms sd ms min ms max ms count
  };
  EXPECT_NE(summary.find("Main Thread\n\n"), std::string::npos) << summary;
  EXPECT_EQ(count("_Minibatch Iteration"), 8) << summary;
  EXPECT_GE(count("__Get Minibatch"), 8) << summary;
  EXPECT_EQ(count("__Forward + Backward"), 8) << summary;
  EXPECT_EQ(count("__Weight Update"), 8) << summary;
  EXPECT_EQ(count("__Post Processing"), 9) << summary;        // also after the empty last one
  EXPECT_EQ(count("__Gradient Aggregation"), -1) << summary;  // not distributed: no row
  EXPECT_LT(summary.find("__Post Processing"), summary.find("\nNodes\n"));
}

TEST(TrainingSession, MinibatchSizeScheduleAndMaxSamplesCutTheLastMinibatch) {
  Problem p;
  auto config = p.config(7);
  config.mb_size = MinibatchSizeSchedule(std::vector<size_t>{2, 3}, 4, IGNORE);
  training_session(std::move(config)).train();
  std::vector<size_t> sizes;
  for (auto& u : p.collector->training_updates) sizes.push_back(u.samples);
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 3}));  // 3 at sample 4, then only 0 left
}

TEST(TrainingSession, CrossValidationCallbackStopsTrainingAndChangesTheLearningRate) {
  Problem p;
  std::vector<std::tuple<size_t, double, size_t, size_t>> calls;
  auto config = p.config(16);
  config.cv_config = {
      .source = DataSource({Problem::features(), Problem::targets()}),
      .frequency = 4,
      .minibatch_size = 3,
      .callback =
          [&](size_t index, double error, size_t samples, size_t minibatches) {
            calls.emplace_back(index, error, samples, minibatches);
            p.learner->reset_learning_rate(learning_rate_schedule(0.005, UnitType::sample));
            return index < 1;
          },
  };
  training_session(std::move(config)).train();
  // CV after 4 samples (index 0) and 8 (index 1, which stops training).
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(std::get<0>(calls[0]), 0u);
  EXPECT_EQ(std::get<0>(calls[1]), 1u);
  EXPECT_EQ(std::get<2>(calls[1]), 8u);
  EXPECT_EQ(std::get<3>(calls[1]), 3u);  // minibatches of 3, 3, 2
  EXPECT_EQ(p.trainer->total_number_of_samples_seen(), 8u);
  EXPECT_DOUBLE_EQ(p.learner->learning_rate(), 0.005);
  // The last CV saw the final model: its error is the metric over the 8 samples now.
  const ValueMap out = combine({p.metric})
                           .eval({{p.x, Value(Problem::features(), false)},
                                  {p.t, Value(Problem::targets(), false)}});
  double sum = 0;
  for (float v : out.at(p.metric).data().to_vector<float>()) sum += v;
  EXPECT_NEAR(std::get<1>(calls[1]), sum / 8, 1e-6);
  // Cross-validation restored the training reader: the run continued in order.
  EXPECT_EQ(p.collector->test_summaries.size(), 2u);
}

TEST(TrainingSession, CrossValidationWithoutDataCallsTheCallbackAlone) {
  Problem p;
  std::vector<size_t> zeros;
  auto config = p.config(8);
  config.cv_config = {.frequency = Frequency(2, DataUnit::minibatch),
                      .callback = [&](size_t i, double e, size_t s, size_t m) {
                        zeros.push_back(i + size_t(e) + s + m);
                        return true;
                      }};
  training_session(std::move(config)).train();
  EXPECT_EQ(zeros, (std::vector<size_t>{0, 1}));
}

TEST(TrainingSession, RejectsBadConfigurations) {
  Problem p;
  auto no_trainer = p.config(8);
  no_trainer.trainer = nullptr;
  EXPECT_THROW(TrainingSession{no_trainer}, ArgumentError);
  auto zero = p.config(8);
  zero.progress_frequency = 0;
  EXPECT_THROW(TrainingSession{zero}, ArgumentError);
  auto unnamed = p.config(8);
  unnamed.checkpoint_config = {.max_to_keep = 2};
  EXPECT_THROW(TrainingSession{unnamed}, ArgumentError);
  auto arrays = p.config(8);
  arrays.test_config = {.source = DataSource({Problem::features()})};  // one array, two inputs
  EXPECT_THROW(TrainingSession{arrays}, ArgumentError);
}

// As CNTK: a source that never ends needs a limit, on the session or on the source.
TEST(TrainingSession, RejectsASourceThatNeverEndsWithoutALimit) {
  Problem p;
  ASSERT_TRUE(p.source->is_infinite());
  auto endless = p.config(8);
  endless.max_samples = std::nullopt;
  try {
    TrainingSession session(endless);
    ADD_FAILURE() << "expected an ArgumentError";
  } catch (const ArgumentError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the training minibatch source never ends"), std::string::npos) << m;
    EXPECT_NE(m.find("set max_samples (or max_sweeps)"), std::string::npos) << m;
  }
  EXPECT_EQ(p.trainer->total_number_of_samples_seen(), 0u);

  auto sweeps = endless;  // the session's sweep limit ends it
  sweeps.max_sweeps = 2;
  training_session(std::move(sweeps)).train();
  EXPECT_EQ(p.trainer->total_number_of_samples_seen(), 16u);

  Problem q;  // a source with an end needs no limit of the session's
  auto finite = q.config(8);
  finite.max_samples = std::nullopt;
  finite.mb_source = std::make_shared<MinibatchSource>(
      MinibatchSourceFromData({{"x", Problem::features()}, {"t", Problem::targets()}},
                              {.randomize = false, .max_sweeps = 1}));
  EXPECT_FALSE(finite.mb_source->is_infinite());
  finite.model_inputs_to_streams = {{q.x, (*finite.mb_source)["x"]},
                                    {q.t, (*finite.mb_source)["t"]}};
  training_session(std::move(finite)).train();
  EXPECT_EQ(q.trainer->total_number_of_samples_seen(), 8u);
}

// Cross-validation and test sources that never end would evaluate forever (CNTK refuses them).
TEST(TrainingSession, RejectsEvaluationSourcesThatNeverEnd) {
  Problem p;
  auto endless = [] {
    return std::make_shared<MinibatchSource>(MinibatchSourceFromData(
        {{"x", Problem::features()}, {"t", Problem::targets()}}, {.randomize = false}));
  };
  auto expect_refused = [](const TrainingSessionConfig& c, const std::string& part) {
    try {
      TrainingSession session(c);
      ADD_FAILURE() << "expected an ArgumentError with " << part;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  auto cv = p.config(8);
  cv.cv_config = {.source = endless()};
  expect_refused(cv, "the cross-validation minibatch source never ends");
  cv.cv_config.max_samples = 8;  // a limit per pass ends each one
  EXPECT_NO_THROW(TrainingSession{cv});
  auto test = p.config(8);
  test.test_config = {.source = endless()};
  expect_refused(test, "the test minibatch source never ends");
}

// Runs a session to max_samples with checkpoints every 4 samples.
void run(Problem& p, CheckpointConfig checkpoint, size_t max_samples) {
  auto config = p.config(max_samples);
  checkpoint.frequency = 4;
  config.checkpoint_config = std::move(checkpoint);
  training_session(std::move(config)).train();
}

TEST(CheckpointPolicy, DefaultOverwritesOneFile) {
  Folder f("default");
  Problem p;
  run(p, {.filename = f.ckpt()}, 16);
  EXPECT_EQ(f.files(), (std::set<std::string>{"ckpt"}));
}

TEST(CheckpointPolicy, PreserveAllKeepsEveryCheckpointAndTheFinalOne) {
  Folder f("preserve_all");
  Problem p;
  run(p, {.filename = f.ckpt(), .preserve_all = true}, 16);
  EXPECT_EQ(f.files(), (std::set<std::string>{"ckpt", "ckpt0", "ckpt1", "ckpt2", "ckpt3"}));
}

TEST(CheckpointPolicy, MaxToKeepKeepsTheNewest) {
  Folder f("max_to_keep");
  Problem p;
  run(p, {.filename = f.ckpt(), .max_to_keep = 2}, 16);
  EXPECT_EQ(f.files(), (std::set<std::string>{"ckpt", "ckpt2", "ckpt3"}));
}

TEST(CheckpointPolicy, KeepBestByAMonitorInMinAndMaxModeAndAlwaysTheLatest) {
  for (MonitorMode mode : {MonitorMode::min, MonitorMode::max}) {
    Folder f("keep_best");
    Problem p;
    std::vector<double> values{3, 1, 5, 2};
    size_t call = 0;
    run(p,
        {.filename = f.ckpt(),
         .keep_best = 1,
         .mode = mode,
         .monitor = [&] { return values[call++]; }},
        16);
    EXPECT_EQ(call, 4u);
    const std::string best = mode == MonitorMode::min ? "ckpt1" : "ckpt2";
    EXPECT_EQ(f.files(), (std::set<std::string>{"ckpt", best, "ckpt3"}));
  }
}

TEST(CheckpointPolicy, KeepBestByTheCrossValidationMetric) {
  Folder f("keep_best_cv");
  Problem p;
  std::vector<double> errors;
  auto config = p.config(16);
  config.checkpoint_config = {
      .filename = f.ckpt(), .frequency = 4, .keep_best = 1, .mode = MonitorMode::max};
  config.cv_config = {.source = DataSource({Problem::features(), Problem::targets()}),
                      .frequency = 4,
                      .callback = [&](size_t, double e, size_t, size_t) {
                        errors.push_back(e);
                        return true;
                      }};
  TrainingSession session(std::move(config));
  session.train();
  ASSERT_EQ(errors.size(), 4u);
  // The worst (max) error is kept as "best" in max mode, with the latest.
  const size_t worst = size_t(std::max_element(errors.begin(), errors.end()) - errors.begin());
  EXPECT_EQ(f.files(), (std::set<std::string>{"ckpt", "ckpt" + std::to_string(worst), "ckpt3"}));
  // Each checkpoint's value is the CV error of the model it holds.
  const Dictionary state = session.checkpoint_policy().state();
  const auto& retained = state.get<DictionaryVector>("retained");
  ASSERT_FALSE(retained.empty());
  const Dictionary first(retained.front().get<DictionaryMap>());
  EXPECT_DOUBLE_EQ(first.get<double>("value"), errors[first.get<uint64_t>("index")]);
}

TEST(CheckpointPolicy, ResumedRunContinuesExactlyAndHonoursTheRestoredBookkeeping) {
  Folder f("resume");
  Problem uninterrupted;
  training_session(uninterrupted.config(16)).train();
  {
    Problem first;
    run(first, {.filename = f.ckpt(), .max_to_keep = 2}, 8);
    EXPECT_EQ(f.files(), (std::set<std::string>{"ckpt", "ckpt0", "ckpt1"}));
  }
  Problem second;
  run(second, {.filename = f.ckpt(), .max_to_keep = 2}, 16);
  EXPECT_EQ(second.trainer->total_number_of_samples_seen(), 16u);
  // The first run's files were pruned by the second: its bookkeeping came from the checkpoint.
  EXPECT_EQ(f.files(), (std::set<std::string>{"ckpt", "ckpt2", "ckpt3"}));
  EXPECT_EQ(second.weights(), uninterrupted.weights());
  // One summary at the end of each run; the resumed writer's covers this run's 8 samples.
  EXPECT_EQ(summary_samples(*second.collector), (std::vector<size_t>{8}));
}

TEST(CheckpointPolicy, FallsBackPastDamagedNewestCheckpointsWithAWarning) {
  Folder f("fallback");
  Problem uninterrupted;
  training_session(uninterrupted.config(16)).train();
  {
    Problem first;
    run(first, {.filename = f.ckpt(), .preserve_all = true}, 16);
  }
  // Damage the final checkpoint (a flipped byte) and the newest numbered one (truncated).
  std::string final_bytes = read_bytes(f.ckpt());
  final_bytes[final_bytes.size() / 2] ^= 0x5a;
  write_bytes(f.ckpt(), final_bytes);
  const std::string newest = f.ckpt() + "3";
  write_bytes(newest, read_bytes(newest).substr(0, 100));

  Problem second;
  ::testing::internal::CaptureStderr();
  run(second, {.filename = f.ckpt(), .preserve_all = true}, 16);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("WARNING: cannot restore from checkpoint '" + f.ckpt() + "'"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("WARNING: cannot restore from checkpoint '" + newest + "'"), std::string::npos)
      << err;
  EXPECT_NE(err.find("Restoring training session from the checkpoint '" + f.ckpt() + "2'"),
            std::string::npos)
      << err;
  // Resumed at 12 samples and trained the rest exactly as the uninterrupted run did.
  EXPECT_EQ(second.trainer->total_number_of_samples_seen(), 16u);
  EXPECT_EQ(second.collector->training_updates.size(), 2u);
  EXPECT_EQ(second.weights(), uninterrupted.weights());
  // The start that restored moved the damaged ones aside, and the run wrote ckpt3 and the final
  // checkpoint anew: a later start neither warns nor falls back.
  EXPECT_NE(
      err.find("Moved the damaged checkpoint '" + f.ckpt() + "' to '" + f.ckpt() + ".damaged'"),
      std::string::npos)
      << err;
  EXPECT_TRUE(f.files().count("ckpt.damaged"));
  EXPECT_TRUE(f.files().count("ckpt3.damaged"));
  EXPECT_TRUE(f.files().count("ckpt3"));
  EXPECT_TRUE(f.files().count("ckpt"));
  Problem third;
  ::testing::internal::CaptureStderr();
  run(third, {.filename = f.ckpt(), .preserve_all = true}, 16);
  const std::string third_err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(third_err.find("Warning"), std::string::npos) << third_err;
  EXPECT_NE(third_err.find("from the checkpoint '" + f.ckpt() + "'"), std::string::npos)
      << third_err;
}

// A run that has nothing left to train still replaces a damaged final checkpoint (load_model of
// it works again), and at most the newest kKeptDamaged files set aside stay.
TEST(CheckpointPolicy, DamagedFinalCheckpointIsReplacedWhenNothingIsLeftToTrain) {
  Folder f("damaged_final");
  {
    Problem first;
    run(first, {.filename = f.ckpt(), .preserve_all = true}, 16);
  }
  for (int start = 0; start < 5; ++start) {
    std::string bytes = read_bytes(f.ckpt());
    bytes[bytes.size() / 2] ^= 0x5a;
    write_bytes(f.ckpt(), bytes);
    Problem again;
    ::testing::internal::CaptureStderr();
    run(again, {.filename = f.ckpt(), .preserve_all = true}, 16);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("Moved the damaged checkpoint '" + f.ckpt() + "'"), std::string::npos)
        << err;
    EXPECT_EQ(again.trainer->total_number_of_samples_seen(), 16u);
    ASSERT_TRUE(f.files().count("ckpt")) << "the final checkpoint is written anew";
    EXPECT_NO_THROW(Problem().trainer->restore_from_checkpoint(f.ckpt()));
    // One name is set aside once per start: make each its own file, as numbered ones are.
    std::filesystem::rename(f.dir / "ckpt.damaged",
                            f.dir / ("ckpt" + std::to_string(100 + start) + ".damaged"));
  }
  size_t damaged = 0;
  for (const std::string& name : f.files()) damaged += name.ends_with(".damaged");
  EXPECT_EQ(damaged, TrainingSession::kKeptDamaged);  // 5 set aside, the oldest 2 removed
}

TEST(CheckpointPolicy, NoValidCheckpointThrowsAndTouchesNothing) {
  Folder f("none_valid");
  {
    Problem first;
    run(first, {.filename = f.ckpt(), .max_to_keep = 2}, 16);
  }
  std::map<std::string, std::string> before;
  for (const std::string& name : f.files()) {
    std::string bytes = read_bytes((f.dir / name).string());
    bytes = bytes.substr(0, bytes.size() - 1);  // truncated: every checkpoint is damaged
    write_bytes((f.dir / name).string(), bytes);
    before[name] = bytes;
  }
  Problem second;
  const std::vector<float> w = second.weights();
  ::testing::internal::CaptureStderr();
  try {
    run(second, {.filename = f.ckpt(), .max_to_keep = 2}, 16);
    ADD_FAILURE() << "expected a StateError";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("none of the checkpoints"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(f.ckpt() + "3"), std::string::npos) << e.what();
  }
  ::testing::internal::GetCapturedStderr();
  std::map<std::string, std::string> after;
  for (const std::string& name : f.files()) after[name] = read_bytes((f.dir / name).string());
  EXPECT_EQ(after, before);
  EXPECT_EQ(second.weights(), w);
  EXPECT_EQ(second.trainer->total_number_of_samples_seen(), 0u);
}

TEST(CheckpointPolicy, ManualLoopCheckpointIsRefusedBeforeTheTrainerChanges) {
  Folder f("manual_loop");
  {
    Problem first;  // a manual loop's checkpoint: no session state in its external state
    first.trainer->train_minibatch(first.source->next_minibatch(4, first.input_map));
    first.trainer->save_checkpoint(f.ckpt(), first.source->get_checkpoint_state());
  }
  Problem second;
  const std::vector<float> w = second.weights();
  ::testing::internal::CaptureStderr();
  try {
    run(second, {.filename = f.ckpt()}, 8);
    ADD_FAILURE() << "expected a StateError";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("TrainingSession"), std::string::npos) << e.what();
  }
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("cannot restore from checkpoint"), std::string::npos) << warnings;
  EXPECT_EQ(second.weights(), w);
  EXPECT_EQ(second.trainer->total_number_of_samples_seen(), 0u);
}

TEST(CheckpointPolicy, RestoreFalseStartsAfresh) {
  Folder f("no_restore");
  {
    Problem first;
    run(first, {.filename = f.ckpt()}, 8);
  }
  Problem second;
  run(second, {.filename = f.ckpt(), .restore = false}, 8);
  EXPECT_EQ(second.collector->training_updates.size(), 4u);
}

// A session whose summary, cross-validation and checkpoint fall on the same steps, with seed
// 002's callback (halve the learning rate when the error improved by less than 5 %, keeping the
// previous error in the checkpoint): killed at any update and resumed, it makes the same calls,
// prints the same summaries and ends with the same weights as a run never killed.
struct CoincidingSession {
  Problem p;
  std::vector<std::pair<size_t, double>> calls;  // (index, learning rate after the call)
  double previous = 1;

  void train(const std::string& ckpt) {
    auto config = p.config(32);
    config.progress_frequency = 4;
    config.cv_config = {.source = DataSource({Problem::features(), Problem::targets()}),
                        .frequency = 4,
                        .minibatch_size = 4,
                        .callback = [this](size_t index, double error, size_t, size_t) {
                          if ((previous - error) / previous < 0.05)
                            p.learner->reset_learning_rate(learning_rate_schedule(
                                p.learner->learning_rate() / 2, UnitType::sample));
                          previous = error;
                          calls.emplace_back(index, p.learner->learning_rate());
                          return true;
                        }};
    config.checkpoint_config = {
        .filename = ckpt,
        .frequency = 4,
        .save_state =
            [this] {
              Dictionary d;
              d["previous"] = previous;
              return d;
            },
        .restore_state = [this](const Dictionary& d) { previous = d.get<double>("previous"); }};
    training_session(std::move(config)).train();
  }
};

TEST(CheckpointPolicy, ActionsAtTheCheckpointStepAreNeitherSkippedNorReplayedOnResume) {
  Folder reference_folder("coinciding_reference");
  CoincidingSession reference;
  reference.train(reference_folder.ckpt());
  ASSERT_EQ(reference.calls.size(), 8u);
  ASSERT_NE(reference.calls.front().second, reference.calls.back().second);  // rates changed
  // A kill after each update: 1-2 steps after the last checkpoint, or right after it.
  for (size_t crash_at = 1; crash_at < 16; ++crash_at) {
    Folder f("coinciding");
    {
      CoincidingSession killed;
      killed.p.collector->crash_at = crash_at;
      EXPECT_THROW(killed.train(f.ckpt()), Crash);
    }
    CoincidingSession resumed;
    ::testing::internal::CaptureStderr();
    resumed.train(f.ckpt());
    ::testing::internal::GetCapturedStderr();
    const size_t restored_steps = (crash_at - 1) / 2;  // a checkpoint every 2 updates
    EXPECT_EQ(resumed.p.weights(), reference.p.weights()) << crash_at;
    const std::vector<std::pair<size_t, double>> tail(
        reference.calls.begin() + long(restored_steps), reference.calls.end());
    EXPECT_EQ(resumed.calls, tail) << crash_at;
    const std::vector<size_t> summaries = summary_samples(*resumed.p.collector);
    EXPECT_EQ(summaries, std::vector<size_t>(8 - restored_steps, 4)) << crash_at;
  }
}

// A finished run continued with a larger max_samples and killed resumes from its newest
// numbered checkpoint, not from the older final one under the plain name.
TEST(CheckpointPolicy, RestorePicksTheNewestPositionWhateverTheFileName) {
  Folder f("newest_position");
  Problem uninterrupted;
  training_session(uninterrupted.config(24)).train();
  {
    Problem finished;
    run(finished, {.filename = f.ckpt(), .preserve_all = true}, 8);
  }
  {
    Problem continued;  // killed after 14 samples; ckpt2 (12 samples) is the newest
    continued.collector->crash_at = 3;
    EXPECT_THROW(run(continued, {.filename = f.ckpt(), .preserve_all = true}, 24), Crash);
  }
  Problem resumed;
  ::testing::internal::CaptureStderr();
  run(resumed, {.filename = f.ckpt(), .preserve_all = true}, 24);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("from the checkpoint '" + f.ckpt() + "2'"), std::string::npos) << err;
  EXPECT_EQ(resumed.collector->training_updates.size(), 6u);  // 12 samples left, not 16
  EXPECT_EQ(resumed.weights(), uninterrupted.weights());
}

TEST(CheckpointPolicy, KeepLatestFalseKeepsOnlyTheBest) {
  Folder f("keep_best_only");
  Problem p;
  std::vector<double> values{3, 1, 5, 2};
  size_t call = 0;
  run(p,
      {.filename = f.ckpt(),
       .keep_best = 1,
       .keep_latest = false,
       .monitor = [&] { return values[call++]; }},
      16);
  EXPECT_EQ(f.files(), (std::set<std::string>{"ckpt", "ckpt1"}));
}

TEST(CheckpointPolicy, AFolderThatCannotBeCreatedIsAnIOErrorNamingIt) {
  Folder f("no_folder");
  write_bytes((f.dir / "file").string(), "not a folder");
  const std::string ckpt = (f.dir / "file" / "sub" / "ckpt").string();
  Problem p;
  try {
    run(p, {.filename = ckpt}, 8);
    ADD_FAILURE() << "expected an IOError";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find((f.dir / "file" / "sub").string()), std::string::npos)
        << e.what();
  }
}

TEST(CheckpointPolicy, FrequencyInSecondsFollowsTheClock) {
  Folder f("seconds");
  Problem p;
  auto now = std::make_shared<std::chrono::nanoseconds>(0);
  auto config = p.config(16);
  config.checkpoint_config = {
      .filename = f.ckpt(), .frequency = Frequency(10, DataUnit::second), .preserve_all = true};
  // Each reading of the clock advances it by 3 s.
  config.clock = [now] { return *now += std::chrono::seconds(3); };
  training_session(std::move(config)).train();
  // About 3 s per step over 8 steps: saves as the time passes 10 s and 20 s.
  EXPECT_TRUE(f.files().count("ckpt0"));
  EXPECT_TRUE(f.files().count("ckpt1"));
}

}  // namespace
}  // namespace loom
