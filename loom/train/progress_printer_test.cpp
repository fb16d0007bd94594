#include "loom/train/progress_printer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "loom/core/error.h"

namespace loom {
namespace {

using std::chrono::milliseconds;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A clock the test moves by hand.
struct FakeClock {
  milliseconds now{0};
  ProgressClock clock() {
    return [this] { return std::chrono::nanoseconds(now); };
  }
};

// Integer error counts spread over n minibatches, as a classification error would give.
double share(size_t errors, size_t n, size_t i) {
  return static_cast<double>(errors / n + (i < errors % n ? 1 : 0));
}

// Seed 000: XOR, squared error as loss and metric, minibatches of 4, ProgressPrinter(freq=10).
TEST(ProgressPrinter, Seed000XorLines) {
  std::ostringstream out;
  ProgressPrinter printer({.freq = 10, .out = &out});
  printer.write("Learning rate per sample", 0.1);
  const double averages[] = {0.307924, 0.235954, 0.219182, 0.191043, 0.147003,
                             0.088223, 0.035363, 0.009170, 0.001756, 0.010385,
                             0.242481, 0.004554, 0.000244, 0.000030, 0.000004};
  for (double average : averages) {
    for (int i = 0; i < 10; ++i) printer.update_training(4, average * 4, average * 4);
  }
  const std::vector<std::string> expected = {
      "Learning rate per sample: 0.1",
      " Minibatch[   1-  10]: loss = 0.307924 * 40, metric = 30.79% * 40;",
      " Minibatch[  11-  20]: loss = 0.235954 * 40, metric = 23.60% * 40;",
      " Minibatch[  21-  30]: loss = 0.219182 * 40, metric = 21.92% * 40;",
      " Minibatch[  31-  40]: loss = 0.191043 * 40, metric = 19.10% * 40;",
      " Minibatch[  41-  50]: loss = 0.147003 * 40, metric = 14.70% * 40;",
      " Minibatch[  51-  60]: loss = 0.088223 * 40, metric = 8.82% * 40;",
      " Minibatch[  61-  70]: loss = 0.035363 * 40, metric = 3.54% * 40;",
      " Minibatch[  71-  80]: loss = 0.009170 * 40, metric = 0.92% * 40;",
      " Minibatch[  81-  90]: loss = 0.001756 * 40, metric = 0.18% * 40;",
      " Minibatch[  91- 100]: loss = 0.010385 * 40, metric = 1.04% * 40;",
      " Minibatch[ 101- 110]: loss = 0.242481 * 40, metric = 24.25% * 40;",
      " Minibatch[ 111- 120]: loss = 0.004554 * 40, metric = 0.46% * 40;",
      " Minibatch[ 121- 130]: loss = 0.000244 * 40, metric = 0.02% * 40;",
      " Minibatch[ 131- 140]: loss = 0.000030 * 40, metric = 0.00% * 40;",
      " Minibatch[ 141- 150]: loss = 0.000004 * 40, metric = 0.00% * 40;",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

// Seed 002's explicit loop: 625 minibatches of 32 through ProgressPrinter(50), the epoch
// summary after 2.298 s, then a second test pass on the printer that printed evaluation 1.
TEST(ProgressPrinter, Seed002ExplicitLoop) {
  FakeClock time;
  std::ostringstream out;
  ProgressPrinter printer({.freq = 50, .out = &out, .clock = time.clock()});
  printer.write("Learning rate per minibatch", 0.1);
  const double losses[] = {0.663274, 0.481867, 0.402196, 0.386619, 0.328646, 0.301831,
                           0.299345, 0.279577, 0.281061, 0.261366, 0.244967, 0.243953};
  const size_t errors[] = {597, 329, 207, 220, 147, 152, 151, 143, 132, 125, 114, 133};
  for (size_t w = 0; w < 12; ++w) {
    for (size_t i = 0; i < 50; ++i) {
      printer.update_training(32, losses[w] * 32, share(errors[w], 50, i));
    }
  }
  // The 25 unreported minibatches that complete 20000 samples.
  for (size_t i = 0; i < 25; ++i) printer.update_training(32, 0.260571 * 32, share(66, 25, i));
  time.now = milliseconds(2298);
  printer.write_training_summary();
  EXPECT_EQ(printer.total_training_updates(), 625u);

  const std::vector<std::string> expected = {
      "Learning rate per minibatch: 0.1",
      " Minibatch[   1-  50]: loss = 0.663274 * 1600, metric = 37.31% * 1600;",
      " Minibatch[  51- 100]: loss = 0.481867 * 1600, metric = 20.56% * 1600;",
      " Minibatch[ 101- 150]: loss = 0.402196 * 1600, metric = 12.94% * 1600;",
      " Minibatch[ 151- 200]: loss = 0.386619 * 1600, metric = 13.75% * 1600;",
      " Minibatch[ 201- 250]: loss = 0.328646 * 1600, metric = 9.19% * 1600;",
      " Minibatch[ 251- 300]: loss = 0.301831 * 1600, metric = 9.50% * 1600;",
      " Minibatch[ 301- 350]: loss = 0.299345 * 1600, metric = 9.44% * 1600;",
      " Minibatch[ 351- 400]: loss = 0.279577 * 1600, metric = 8.94% * 1600;",
      " Minibatch[ 401- 450]: loss = 0.281061 * 1600, metric = 8.25% * 1600;",
      " Minibatch[ 451- 500]: loss = 0.261366 * 1600, metric = 7.81% * 1600;",
      " Minibatch[ 501- 550]: loss = 0.244967 * 1600, metric = 7.12% * 1600;",
      " Minibatch[ 551- 600]: loss = 0.243953 * 1600, metric = 8.31% * 1600;",
      "Finished Epoch[1]: loss = 0.344399 * 20000, metric = 12.58% * 20000 2.298s (8703.2 "
      "samples/s);",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

TEST(ProgressPrinter, Seed002Evaluations) {
  std::ostringstream out;
  ProgressPrinter printer({.out = &out});
  // The MNIST test: 10000 samples in 313 minibatches, 60 errors.
  for (size_t i = 0; i < 313; ++i) printer.update_test(i < 312 ? 32 : 16, share(60, 313, i));
  printer.write_test_summary();
  // The logistic regression test of the explicit loop: 1024 samples, 83 errors.
  for (size_t i = 0; i < 32; ++i) printer.update_test(32, share(83, 32, i));
  printer.write_test_summary();
  EXPECT_EQ(printer.total_test_updates(), 345u);
  const std::vector<std::string> expected = {
      "Finished Evaluation [1]: Minibatch[1-313]: metric = 0.60% * 10000;",
      "Finished Evaluation [2]: Minibatch[1-32]: metric = 8.11% * 1024;",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

// Seed 002's ProgressPrinter(0): the averaged table at minibatches 1, 3, 7, 15, ... of 32.
TEST(ProgressPrinter, Seed002GeometricTable) {
  std::ostringstream out;
  ProgressPrinter printer({.freq = 0, .out = &out});
  printer.write("Learning rate per minibatch", 0.1);
  // Per window (2^k minibatches): the loss sum of each minibatch and the window's errors.
  const double losses[] = {114.4267, 20.1253, 22.8773, 22.0133, 19.1283,
                           17.3683,  14.2963, 11.4803, 9.0746};
  const size_t errors[] = {18, 26, 60, 114, 206, 284, 337, 470, 718};
  for (size_t w = 0; w < 9; ++w) {
    const size_t n = size_t{1} << w;
    for (size_t i = 0; i < n; ++i) printer.update_training(32, losses[w], share(errors[w], n, i));
  }
  printer.write_training_summary();  // no epoch line in geometric mode
  for (size_t i = 0; i < 32; ++i) printer.update_test(32, share(83, 32, i));
  printer.write_test_summary();
  const std::vector<std::string> expected = {
      " average      since    average      since      examples",
      "    loss       last     metric       last              ",
      " ------------------------------------------------------",
      "Learning rate per minibatch: 0.1",
      "     3.58       3.58      0.562      0.562            32",
      "     1.61      0.629      0.458      0.406            96",
      "      1.1      0.715      0.464      0.469           224",
      "     0.88      0.688      0.454      0.445           480",
      "    0.734      0.598      0.427      0.402           992",
      "    0.637      0.543      0.351      0.277          2016",
      "    0.541      0.447      0.257      0.165          4064",
      "     0.45      0.359      0.186      0.115          8160",
      "    0.366      0.284      0.137     0.0876         16352",
      "Finished Evaluation [1]: Minibatch[1-32]: metric = 8.11% * 1024;",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

TEST(ProgressPrinter, GeometricRestartsEachPeriodAndBlanksAbsentColumns) {
  std::ostringstream out;
  ProgressPrinter printer({.freq = 0, .test_freq = 0, .out = &out});
  for (int i = 0; i < 3; ++i) printer.update_training(2, 1.0, std::nullopt);
  printer.write_training_summary();
  printer.update_training(2, 3.0, std::nullopt);
  printer.update_test(4, 1.0);
  const std::vector<std::string> expected = {
      " average      since    average      since      examples",
      "    loss       last     metric       last              ",
      " ------------------------------------------------------",
      "      0.5        0.5                                   2",
      "      0.5        0.5                                   6",
      "      1.5        1.5                                   2",
      "                           0.25       0.25             4",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

// Seed 001: a tagged printer that knows the number of epochs; 5 minibatches of 4 per epoch.
TEST(ProgressPrinter, TagAndNumEpochs) {
  FakeClock time;
  std::ostringstream out;
  ProgressPrinter printer(
      {.tag = "Training", .num_epochs = 10, .out = &out, .clock = time.clock()});
  printer.write("Learning rate per sample", 0.5);
  const struct {
    double loss;
    size_t errors;
    int ms;
  } epochs[] = {{1.077986, 19, 107}, {0.424429, 0, 76}, {0.082140, 0, 72}, {0.030935, 0, 71}};
  for (const auto& e : epochs) {
    for (size_t i = 0; i < 5; ++i) printer.update_training(4, e.loss * 4, share(e.errors, 5, i));
    time.now += milliseconds(e.ms);
    printer.write_training_summary();
  }
  const std::vector<std::string> expected = {
      "Learning rate per sample: 0.5",
      "Finished Epoch[1 of 10]: [Training] loss = 1.077986 * 20, metric = 95.00% * 20 0.107s "
      "(186.9 samples/s);",
      "Finished Epoch[2 of 10]: [Training] loss = 0.424429 * 20, metric = 0.00% * 20 0.076s "
      "(263.2 samples/s);",
      "Finished Epoch[3 of 10]: [Training] loss = 0.082140 * 20, metric = 0.00% * 20 0.072s "
      "(277.8 samples/s);",
      "Finished Epoch[4 of 10]: [Training] loss = 0.030935 * 20, metric = 0.00% * 20 0.071s "
      "(281.7 samples/s);",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

TEST(ProgressPrinter, FirstMinibatchesAreWrittenOneByOne) {
  std::ostringstream out;
  ProgressPrinter printer({.freq = 5, .first = 3, .out = &out});
  for (int period = 0; period < 2; ++period) {
    for (int i = 0; i < 11; ++i) printer.update_training(2, 1.0, 0.0);
    printer.write_training_summary();
  }
  const std::vector<std::string> period = {
      " Minibatch[   1-   1]: loss = 0.500000 * 2, metric = 0.00% * 2;",
      " Minibatch[   2-   2]: loss = 0.500000 * 2, metric = 0.00% * 2;",
      " Minibatch[   3-   3]: loss = 0.500000 * 2, metric = 0.00% * 2;",
      " Minibatch[   4-   5]: loss = 0.500000 * 4, metric = 0.00% * 4;",
      " Minibatch[   6-  10]: loss = 0.500000 * 10, metric = 0.00% * 10;",
  };
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 12u);
  for (size_t p = 0; p < 2; ++p) {
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(lines[p * 6 + i], period[i]);
    EXPECT_EQ(lines[p * 6 + 5].rfind("Finished Epoch[" + std::to_string(p + 1) +
                                         "]: loss = "
                                         "0.500000 * 22, metric = 0.00% * 22 0.",
                                     0),
              0u)
        << lines[p * 6 + 5];
  }
}

TEST(ProgressPrinter, WithoutFrequencyOnlyTheFirstAreWritten) {
  std::ostringstream out;
  ProgressPrinter printer({.first = 2, .out = &out});
  for (int i = 0; i < 100; ++i) printer.update_training(1, 2.0, 1.0);
  const std::vector<std::string> expected = {
      " Minibatch[   1-   1]: loss = 2.000000 * 1, metric = 100.00% * 1;",
      " Minibatch[   2-   2]: loss = 2.000000 * 1, metric = 100.00% * 1;",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

TEST(ProgressPrinter, MetricNotPercentAndNoMetric) {
  FakeClock time;
  std::ostringstream out;
  ProgressPrinter with_metric(
      {.freq = 2, .metric_is_pct = false, .out = &out, .clock = time.clock()});
  ProgressPrinter without_metric({.freq = 2, .out = &out, .clock = time.clock()});
  for (int i = 0; i < 2; ++i) {
    with_metric.update_training(4, 2.0, 1.0);
    without_metric.update_training(4, 2.0, std::nullopt);
  }
  with_metric.update_test(8, 2.0);
  time.now = milliseconds(1000);
  with_metric.write_training_summary();
  without_metric.write_training_summary();
  with_metric.write_test_summary();
  const std::vector<std::string> expected = {
      " Minibatch[   1-   2]: loss = 0.500000 * 8, metric = 0.250000 * 8;",
      " Minibatch[   1-   2]: loss = 0.500000 * 8;",
      "Finished Epoch[1]: loss = 0.500000 * 8, metric = 0.250000 * 8 1.000s (  8.0 samples/s);",
      "Finished Epoch[1]: loss = 0.500000 * 8 1.000s (  8.0 samples/s);",
      "Finished Evaluation [1]: Minibatch[1-1]: metric = 0.250000 * 8;",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

TEST(ProgressPrinter, TestUpdatesAndEmptyPeriods) {
  std::ostringstream out;
  ProgressPrinter printer({.test_freq = 2, .out = &out});
  for (int i = 0; i < 5; ++i) printer.update_test(4, 1.0);
  printer.update_test(0, 0.0);  // an empty minibatch is not counted
  printer.write_test_summary();
  printer.write_training_summary();  // nothing trained, no time passed: zeros, not NaN
  const std::vector<std::string> lines = lines_of(out.str());
  const std::vector<std::string> expected = {
      " Evaluation Minibatch[   1-   2]: metric = 25.00% * 8;",
      " Evaluation Minibatch[   3-   4]: metric = 25.00% * 8;",
      "Finished Evaluation [1]: Minibatch[1-5]: metric = 25.00% * 20;",
  };
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(lines.begin(), lines.begin() + 3), expected);
  EXPECT_EQ(lines[3].rfind("Finished Epoch[1]: loss = 0.000000 * 0 0.", 0), 0u) << lines[3];
}

TEST(ProgressPrinter, DistributedSyncLines) {
  std::ostringstream out;
  ProgressPrinter printer({.distributed_freq = 2, .out = &out});
  for (int i = 0; i < 5; ++i) printer.update_distributed_sync(100);
  const std::vector<std::string> expected = {
      "Distributed training: #Syncs elapsed = 2, #Samples elapsed = 200",
      "Distributed training: #Syncs elapsed = 2, #Samples elapsed = 200",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

TEST(ProgressPrinter, HyperparameterLines) {
  std::ostringstream out;
  ProgressPrinter printer({.out = &out});
  printer.write("Learning rate per minibatch", 0.7 * 0.03);
  printer.write("Momentum per 1 samples", 0.0);
  printer.write("Learning rate per 1 samples", 6.25e-05);
  printer.log("a line of my own");
  const std::vector<std::string> expected = {
      "Learning rate per minibatch: 0.020999999999999998",
      "Momentum per 1 samples: 0.0",
      "Learning rate per 1 samples: 6.25e-05",
      "a line of my own",
  };
  EXPECT_EQ(lines_of(out.str()), expected);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class ProgressPrinterLogFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("loom_progress_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// Seed 002's ProgressPrinter(50, first=10, log_to_file='my.log').
TEST_F(ProgressPrinterLogFile, WritesCntkHeaderAndLinesToTheFile) {
  const std::string log = (dir_ / "my.log").string();
  std::ostringstream out;
  {
    ProgressPrinter printer({.freq = 50, .first = 10, .log_to_file = log, .out = &out});
    printer.write("Learning rate per 1 samples", 0.001);
    for (int i = 0; i < 50; ++i) printer.update_training(256, 0.5 * 256, 0.0);
    printer.end_progress_print("done");
  }
  EXPECT_EQ(out.str(), "Redirecting log to file " + log + "\n");
  std::string expected = log + "\n" +
                         "CNTKCommandTrainInfo: train : 300\n"
                         "CNTKCommandTrainInfo: CNTKNoMoreCommands_Total : 300\n"
                         "CNTKCommandTrainBegin: train\n"
                         "Learning rate per 1 samples: 0.001\n";
  for (int i = 1; i <= 10; ++i) {
    char line[80];
    std::snprintf(line, sizeof(line),
                  " Minibatch[%4d-%4d]: loss = 0.500000 * 256, metric = 0.00%% * 256;\n", i, i);
    expected += line;
  }
  expected += " Minibatch[  11-  50]: loss = 0.500000 * 10240, metric = 0.00% * 10240;\n";
  expected += "CNTKCommandTrainEnd: train\ndone\n";
  EXPECT_EQ(read_file(log), expected);
}

TEST_F(ProgressPrinterLogFile, RankSuffixNumEpochsAndGeometricHeader) {
  const std::string log = (dir_ / "train.log").string();
  std::ostringstream out;
  {
    ProgressPrinter printer(
        {.freq = 0, .log_to_file = log, .rank = 3, .num_epochs = 5, .out = &out});
    printer.end_progress_print();
  }
  EXPECT_EQ(out.str(), "Redirecting log to file " + log + "rank3\n");
  EXPECT_FALSE(std::filesystem::exists(log));
  EXPECT_EQ(read_file(log + "rank3"),
            log + "rank3\n" +
                "CNTKCommandTrainInfo: train : 5\n"
                "CNTKCommandTrainInfo: CNTKNoMoreCommands_Total : 5\n"
                "CNTKCommandTrainBegin: train\n"
                " average      since    average      since      examples\n"
                "    loss       last     metric       last              \n"
                " ------------------------------------------------------\n"
                "CNTKCommandTrainEnd: train\n");
}

TEST_F(ProgressPrinterLogFile, UnwritablePathIsAnIOError) {
  std::ostringstream out;
  const std::string log = (dir_ / "missing" / "my.log").string();
  EXPECT_THROW(ProgressPrinter({.log_to_file = log, .out = &out}), IOError);
}

// A run stopped mid-window and resumed from the writer's checkpoint state prints what the
// uninterrupted run prints, however long it was stopped.
TEST(ProgressPrinter, CheckpointRestoreContinuesIdentically) {
  // Training, test and sync updates of uneven sizes, with period ends in between.
  const auto step = [](ProgressPrinter& p, FakeClock& time, int i) {
    time.now += milliseconds(10 + i);
    p.update_training(3 + i % 4, 0.1 * i, i % 2);
    if (i % 4 == 0) p.update_test(5, 0.25 * i);
    p.update_distributed_sync(7);
    if (i == 17 || i == 39) {
      p.write_training_summary();
      p.write_test_summary();
    }
  };
  const auto options = [](std::ostringstream& out, FakeClock& time) {
    return ProgressPrinterOptions{.freq = 5,
                                  .first = 2,
                                  .num_epochs = 3,
                                  .test_freq = 3,
                                  .distributed_freq = 4,
                                  .out = &out,
                                  .clock = time.clock()};
  };

  FakeClock time_a;
  std::ostringstream out_a;
  ProgressPrinter uninterrupted(options(out_a, time_a));
  for (int i = 0; i < 40; ++i) step(uninterrupted, time_a, i);

  FakeClock time_b;
  std::ostringstream out_b;
  Dictionary state;
  {
    ProgressPrinter first_half(options(out_b, time_b));
    for (int i = 0; i < 23; ++i) step(first_half, time_b, i);
    state = first_half.get_checkpoint_state();
  }
  const size_t lines_before = lines_of(out_b.str()).size();
  time_b.now += milliseconds(3600 * 1000);  // the downtime is not part of the epoch
  ProgressPrinter resumed(options(out_b, time_b));
  resumed.restore_from_checkpoint(state);
  for (int i = 23; i < 40; ++i) step(resumed, time_b, i);

  const std::vector<std::string> a = lines_of(out_a.str());
  EXPECT_EQ(lines_of(out_b.str()), a);
  EXPECT_GT(a.size(), lines_before + 4);
  EXPECT_EQ(resumed.total_training_updates(), 40u);
  EXPECT_EQ(resumed.total_test_updates(), 10u);
}

TEST(ProgressPrinter, RestoreRejectsForeignState) {
  std::ostringstream out;
  ProgressPrinter printer({.out = &out});
  Dictionary foreign;
  foreign["type"] = "Learner";
  EXPECT_THROW(printer.restore_from_checkpoint(foreign), StateError);
  Dictionary broken = printer.get_checkpoint_state();
  broken["version"] = int64_t{99};
  EXPECT_THROW(printer.restore_from_checkpoint(broken), StateError);
  broken = printer.get_checkpoint_state();
  Dictionary training = broken.get_dictionary("training");
  training["samples_end"] = 1.5;
  broken["training"] = training;
  EXPECT_THROW(printer.restore_from_checkpoint(broken), StateError);
}

// The base class's bookkeeping as a derived writer sees it.
class RecordingWriter : public ProgressWriter {
 public:
  using ProgressWriter::ProgressWriter;
  std::vector<ProgressWindow> training, test, sync;
  std::vector<ProgressSummary> training_summaries, test_summaries;
  std::vector<std::pair<std::string, double>> values;

 protected:
  void on_write_training_update(const ProgressWindow& w) override { training.push_back(w); }
  void on_write_test_update(const ProgressWindow& w) override { test.push_back(w); }
  void on_write_distributed_sync_update(const ProgressWindow& w) override { sync.push_back(w); }
  void on_write_training_summary(const ProgressSummary& s) override {
    training_summaries.push_back(s);
  }
  void on_write_test_summary(const ProgressSummary& s) override { test_summaries.push_back(s); }
  void on_write(const std::string& key, double value) override { values.emplace_back(key, value); }
};

TEST(ProgressWriter, GeometricScheduleAndWindows) {
  FakeClock time;
  RecordingWriter writer(0, 0, std::nullopt, 0, std::nullopt, 0, time.clock());
  for (int i = 1; i <= 40; ++i) writer.update_training(2, 1.0 * i, std::nullopt);
  std::vector<size_t> written;
  for (const auto& w : writer.training) written.push_back(w.updates.second);
  EXPECT_EQ(written, (std::vector<size_t>{1, 3, 7, 15, 31}));
  const ProgressWindow& w = writer.training[2];  // updates 4..7
  EXPECT_EQ(w.updates, (std::pair<size_t, size_t>{3, 7}));
  EXPECT_EQ(w.samples, (std::pair<size_t, size_t>{6, 14}));
  ASSERT_TRUE(w.loss);
  EXPECT_EQ(*w.loss, (std::pair<double, double>{6.0, 28.0}));
  EXPECT_FALSE(w.metric);
  time.now = milliseconds(1234);
  writer.write_training_summary();
  ASSERT_EQ(writer.training_summaries.size(), 1u);
  const ProgressSummary& s = writer.training_summaries[0];
  EXPECT_EQ(s.samples, 80u);
  EXPECT_EQ(s.updates, 40u);
  EXPECT_EQ(s.summaries, 1u);
  EXPECT_EQ(s.loss, 820.0);
  EXPECT_FALSE(s.metric);
  EXPECT_EQ(s.elapsed_ms, 1234u);
  // Nothing is reported for test and sync updates without a frequency.
  for (int i = 0; i < 10; ++i) {
    writer.update_test(1, 0.5);
    writer.update_distributed_sync(1);
  }
  EXPECT_TRUE(writer.test.empty());
  EXPECT_TRUE(writer.sync.empty());
  writer.write_test_summary();
  ASSERT_EQ(writer.test_summaries.size(), 1u);
  EXPECT_EQ(writer.test_summaries[0].metric, 5.0);
  EXPECT_FALSE(writer.test_summaries[0].loss);
  EXPECT_EQ(writer.test_summaries[0].elapsed_ms, 1234u);
  writer.write("Learning rate per sample", 0.25);
  EXPECT_EQ(writer.values,
            (std::vector<std::pair<std::string, double>>{{"Learning rate per sample", 0.25}}));
  EXPECT_EQ(writer.total_training_updates(), 40u);
  EXPECT_EQ(writer.total_test_updates(), 10u);
}

}  // namespace
}  // namespace loom
