#include <gtest/gtest.h>

#include <fstream>

#include "loom/io/io_test_util.h"
#include "loom/layers/dense.h"
#include "loom/layers/sequential.h"
#include "loom/learners/momentum_sgd.h"
#include "loom/ops/ops.h"
#include "loom/serialize/container.h"
#include "loom/serialize/model_file.h"
#include "loom/train/progress_printer.h"
#include "loom/train/trainer.h"

namespace loom {
namespace {

// A small classifier trained with momentum on a fixed stream of random minibatches; built
// the same way twice, it has the same structure but new uids (as in a new process).
struct TrainingRun {
  Variable x = input_variable({4});
  Variable y = input_variable({3});
  Function model;
  Function criterion;
  std::shared_ptr<Learner> learner;
  std::shared_ptr<ProgressPrinter> printer;
  std::ostringstream log;
  std::unique_ptr<Trainer> trainer;

  explicit TrainingRun(size_t hidden = 5) {
    set_fixed_random_seed(7);
    model = Sequential({Dense(hidden, {.activation = tanh}), Dense(3)});
    Variable z = model(x);
    criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
    learner = momentum_sgd(model.parameters(), learning_rate_schedule(0.1, UnitType::sample),
                           momentum_schedule(0.9));
    printer = std::make_shared<ProgressPrinter>(ProgressPrinterOptions{.freq = 2, .out = &log});
    trainer =
        std::make_unique<Trainer>(z, criterion, std::vector{learner}, ProgressWriters{printer});
  }

  ValueMap minibatch(size_t step) const {
    std::vector<float> xs(8 * 4), ys(8 * 3, 0.f);
    RandomGenerator g(99, step);
    for (float& v : xs) v = float(g.uniform() * 2 - 1);
    for (size_t i = 0; i < 8; ++i) ys[i * 3 + g.next_u32() % 3] = 1.f;
    return {{x, Value::create_batch({4}, xs)}, {y, Value::create_batch({3}, ys)}};
  }

  void train(size_t from, size_t to) {
    for (size_t s = from; s < to; ++s) trainer->train_minibatch(minibatch(s));
  }

  std::vector<std::vector<float>> parameters() const {
    std::vector<std::vector<float>> v;
    for (const Parameter& p : model.parameters()) v.push_back(p.value().to_vector<float>());
    return v;
  }
};

std::string temp_path(const std::string& name) {
  return testing_io::test_dir() + "/" + name;
}

TEST(TrainerCheckpoint, ResumesBitIdentically) {
  TrainingRun full;
  full.train(0, 10);
  const std::string path = temp_path("resume.ckp");
  Dictionary external;
  external["position"] = uint64_t(10);
  full.trainer->save_checkpoint(path, external);
  const std::string log_at_save = full.log.str();
  const double loss_at_save = full.trainer->previous_minibatch_loss_average();
  full.train(10, 20);

  TrainingRun resumed;  // fresh graph, fresh learner and printer
  Dictionary got = resumed.trainer->restore_from_checkpoint(path);
  EXPECT_EQ(got.get<uint64_t>("position"), 10u);
  EXPECT_EQ(resumed.trainer->total_number_of_samples_seen(), 80u);
  EXPECT_EQ(resumed.trainer->previous_minibatch_loss_average(), loss_at_save);
  resumed.train(10, 20);
  EXPECT_EQ(resumed.parameters(), full.parameters());  // byte-identical floats
  // The printer continues with exactly the lines the uninterrupted run printed.
  EXPECT_EQ(resumed.log.str(), full.log.str().substr(log_at_save.size()));
  EXPECT_EQ(resumed.learner->total_number_of_samples_seen(),
            full.learner->total_number_of_samples_seen());
}

// load_model reads the trainer's model out of a checkpoint (CNTK writes it to a model file
// beside the .ckp): deploying a checkpoint needs nothing else.
TEST(TrainerCheckpoint, IsAModelFileHoldingTheTrainersModel) {
  TrainingRun s;
  s.train(0, 3);
  const std::string path = temp_path("model.ckp");
  s.trainer->save_checkpoint(path);
  Function loaded = load_model(path);
  ASSERT_EQ(loaded.arguments().size(), 1u);
  ASSERT_EQ(loaded.outputs().size(), 1u);
  ASSERT_EQ(loaded.parameters().size(), s.model.parameters().size());
  ValueMap mb = s.minibatch(5);
  const Function model = s.trainer->model();
  EXPECT_EQ(loaded.eval_one({{loaded.arguments()[0], mb.at(s.x)}}).data().to_vector<float>(),
            model.eval_one({{s.x, mb.at(s.x)}}).data().to_vector<float>());
}

TEST(TrainerCheckpoint, DamagedFileLeavesTrainerUntouched) {
  TrainingRun s;
  s.train(0, 4);
  const std::string path = temp_path("damaged.ckp");
  s.trainer->save_checkpoint(path);
  std::vector<uint8_t> bytes = read_file_bytes(path);
  s.train(4, 6);
  const auto before = s.parameters();
  const size_t seen = s.trainer->total_number_of_samples_seen();

  // Truncated.
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size() / 2));
  EXPECT_THROW(s.trainer->restore_from_checkpoint(path), DataError);
  // One flipped byte in every eighth position (header, graph, state).
  for (size_t at = 0; at < bytes.size(); at += bytes.size() / 8) {
    std::vector<uint8_t> flipped = bytes;
    flipped[at] ^= 0x40;
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(flipped.data()), std::streamsize(flipped.size()));
    try {
      s.trainer->restore_from_checkpoint(path);
      ADD_FAILURE() << "a flipped byte at " << at << " was not noticed";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(s.parameters(), before);
  EXPECT_EQ(s.trainer->total_number_of_samples_seen(), seen);
  EXPECT_THROW(s.trainer->restore_from_checkpoint(temp_path("missing.ckp")), IOError);
}

TEST(TrainerCheckpoint, DifferentGraphIsNamed) {
  TrainingRun small(5);
  small.train(0, 2);
  const std::string path = temp_path("small.ckp");
  small.trainer->save_checkpoint(path);
  TrainingRun big(6);
  big.train(0, 1);
  const auto before = big.parameters();
  try {
    big.trainer->restore_from_checkpoint(path);
    ADD_FAILURE() << "restored into a different graph";
  } catch (const StateError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("parameter"), std::string::npos) << m;
    EXPECT_NE(m.find("[4,5]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4,6]"), std::string::npos) << m;
  }
  EXPECT_EQ(big.parameters(), before);
}

TEST(TrainerCheckpoint, ModelFileIsNotACheckpoint) {
  TrainingRun s;
  const std::string path = temp_path("model.loom");
  save_model(s.criterion, path);
  EXPECT_THROW(s.trainer->restore_from_checkpoint(path), DataError);
}

}  // namespace
}  // namespace loom
