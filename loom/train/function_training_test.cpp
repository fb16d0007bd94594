#include "loom/train/function_training.h"

#include <gtest/gtest.h>

#include <sstream>

#include "loom/layers/dense.h"
#include "loom/learners/sgd.h"
#include "loom/ops/losses.h"
#include "loom/ops/sequence_ops.h"
#include "loom/train/progress_printer.h"

namespace loom {
namespace {

// criterion(x, t) = (loss, metric), both the squared error of y = x·W, W = [1, 2]ᵀ.
struct Criterion {
  Variable x = input_variable({2}, {.name = "x"});
  Variable t = input_variable({1}, {.name = "t"});
  Function layer = Dense(1, {.bias = false});
  Variable y = layer(x);
  Function criterion = combine({squared_error(y, t), squared_error(y, t)});
  Parameter W = layer.parameters()[0];
  Criterion() { W.set_value(NDArrayView::from_vector<float>({2, 1}, {1, 2})); }
  std::shared_ptr<Learner> learner() const {
    return sgd({W}, learning_rate_schedule(0.1, UnitType::sample));
  }
};

// Samples (1,0), (0,1), (1,1), (0,0), all with target 0.
NDArrayView features() {
  return NDArrayView::from_vector<float>({4, 2}, {1, 0, 0, 1, 1, 1, 0, 0});
}
NDArrayView targets() {
  return NDArrayView::from_vector<float>({4, 1}, {0, 0, 0, 0});
}

TEST(FunctionTraining, TrainAndTestOnArraysGiveTheExactSummaries) {
  Criterion c;
  const TrainSummary s = c.criterion.train(
      {features(), targets()},
      {.minibatch_size = 4, .parameter_learners = {c.learner()}, .max_epochs = 2});
  // Epoch 1: y = 1, 2, 3, 0, mean loss 14/4. The summed gradient 2·Σ y·x = (8, 10) moves W to
  // (0.2, 1.0); epoch 2: y = 0.2, 1.0, 1.2, 0, mean loss 2.48/4 = 0.62.
  ASSERT_EQ(s.epoch_summaries.size(), 2u);
  EXPECT_NEAR(s.epoch_summaries[0].loss, 3.5, 1e-6);
  EXPECT_NEAR(*s.epoch_summaries[0].metric, 3.5, 1e-6);
  EXPECT_EQ(s.epoch_summaries[0].samples, 4u);
  EXPECT_NEAR(s.epoch_summaries[1].loss, 0.62, 1e-6);
  ASSERT_EQ(s.updates.size(), 2u);
  EXPECT_NEAR(s.updates[1].loss, 0.62, 1e-6);
  EXPECT_FALSE(s.test_summary);
  // Then W = (0.2, 1.0) - 0.1·2·(1.4, 2.2) = (-0.08, 0.56): y = -0.08, 0.56, 0.48, 0.
  const TestSummary t = c.criterion.test({features(), targets()});
  EXPECT_NEAR(t.metric, (0.0064 + 0.3136 + 0.2304) / 4, 1e-6);
  EXPECT_EQ(t.samples, 4u);
}

TEST(FunctionTraining, EpochSizeMaxSamplesAndProgressFrequency) {
  Criterion c;
  const TrainSummary s = c.criterion.train(
      {features(), targets()},
      {.minibatch_size = 2, .parameter_learners = {c.learner()}, .max_epochs = 3, .epoch_size = 6});
  ASSERT_EQ(s.epoch_summaries.size(), 3u);
  for (auto& e : s.epoch_summaries) EXPECT_EQ(e.samples, 6u);
  EXPECT_EQ(s.updates.size(), 9u);

  Criterion d;
  const TrainSummary m = d.criterion.train(
      {features(), targets()},
      {.minibatch_size = 2, .parameter_learners = {d.learner()}, .max_samples = 6});
  // In-memory data: an epoch is the data's size (4 samples, CNTK's rule); the partial last
  // epoch is summarized at the end, and no minibatch crosses an epoch boundary.
  ASSERT_EQ(m.epoch_summaries.size(), 2u);
  EXPECT_EQ(m.epoch_summaries[0].samples, 4u);
  EXPECT_EQ(m.epoch_summaries[1].samples, 2u);
  EXPECT_EQ(m.updates.size(), 3u);
}

// A model that reads sequences and gives one output each: the Trainer counts the loss's samples
// (sequences, CNTK's label samples), and an epoch of in-memory data is one sweep in that unit.
TEST(FunctionTraining, AnEpochOfSequencesIsOneSweepInLabelSamples) {
  Variable x = sequence::input_variable({1}, {.name = "x"});
  Variable t = input_variable({1}, {.name = "t"});
  Function layer = Dense(1, {.bias = false});
  Variable y = layer(sequence::last(x));
  Function criterion = combine({squared_error(y, t), squared_error(y, t)});
  // Six sequences of 1 to 6 steps (21 steps in all) and one target each.
  std::vector<std::vector<float>> sequences;
  for (size_t n = 1; n <= 6; ++n) sequences.emplace_back(n, 1.0f);
  const TrainSummary s = criterion.train(
      {Value::create_sequences<float>({1}, sequences),
       NDArrayView::from_vector<float>({6, 1}, {0, 0, 0, 0, 0, 0})},
      {.minibatch_size = 7,
       .parameter_learners = {sgd(layer.parameters(), learning_parameter_schedule(0.01))},
       .max_epochs = 2});
  ASSERT_EQ(s.epoch_summaries.size(), 2u);
  for (auto& e : s.epoch_summaries) EXPECT_EQ(e.samples, 6u);
  // Minibatches of at most 7 steps: {1, 2, 3}, {4}, {5}, {6}, once per epoch.
  EXPECT_EQ(s.updates.size(), 8u);
}

TEST(FunctionTraining, MinibatchSourceByArgumentNamesOrStreams) {
  Criterion c, d;
  auto source = [] {
    return std::make_shared<MinibatchSource>(MinibatchSourceFromData(
        {{"x", features()}, {"t", targets()}}, {.randomize = false, .max_sweeps = 1}));
  };
  const TrainSummary by_name =
      c.criterion.train(source(), {.minibatch_size = 4, .parameter_learners = {c.learner()}});
  ASSERT_EQ(by_name.epoch_summaries.size(), 1u);
  EXPECT_NEAR(by_name.epoch_summaries[0].loss, 3.5, 1e-6);

  auto renamed = std::make_shared<MinibatchSource>(MinibatchSourceFromData(
      {{"features", features()}, {"labels", targets()}}, {.randomize = false, .max_sweeps = 1}));
  const TrainSummary by_order = d.criterion.train(renamed, {.minibatch_size = 4,
                                                            .streams = {"features", "labels"},
                                                            .parameter_learners = {d.learner()}});
  EXPECT_NEAR(by_order.epoch_summaries[0].loss, 3.5, 1e-6);
  EXPECT_EQ(c.W.value().to_vector<float>(), d.W.value().to_vector<float>());
  EXPECT_THROW(d.criterion.train(renamed, {.parameter_learners = {d.learner()}}), ArgumentError);
}

TEST(FunctionTraining, CallbacksPrintAndTestConfigGivesTheTestSummary) {
  Criterion c;
  std::ostringstream out;
  auto printer = std::make_shared<ProgressPrinter>(ProgressPrinterOptions{.out = &out});
  std::vector<double> cv_errors;
  const TrainSummary s = c.criterion.train(
      {features(), targets()},
      {.minibatch_size = 4,
       .parameter_learners = {c.learner()},
       .callbacks = {printer,
                     CrossValidationConfig{.source = DataSource({features(), targets()}),
                                           .frequency = 4,
                                           .callback =
                                               [&](size_t, double e, size_t, size_t) {
                                                 cv_errors.push_back(e);
                                                 return true;
                                               }},
                     TestConfig{.source = DataSource({features(), targets()})}},
       .max_epochs = 2});
  ASSERT_TRUE(s.test_summary);
  EXPECT_NEAR(s.test_summary->metric, (0.0064 + 0.3136 + 0.2304) / 4, 1e-6);
  ASSERT_EQ(cv_errors.size(), 2u);
  EXPECT_NEAR(cv_errors[0], 0.62, 1e-6);  // after epoch 1, the model epoch 2 starts from
  const std::string text = out.str();
  EXPECT_NE(text.find("Finished Epoch[1]: loss = 3.500000 * 4, metric = 350.00% * 4"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Finished Evaluation [3]: Minibatch[1-1]: metric = 13.76% * 4;"),
            std::string::npos)
      << text;
  EXPECT_THROW(
      c.criterion.train({features(), targets()}, {.parameter_learners = {c.learner()},
                                                  .callbacks = {TestConfig{}, TestConfig{}}}),
      ArgumentError);
}

TEST(FunctionTraining, RejectsCriteriaAndDataThatDoNotFit) {
  Criterion c;
  EXPECT_THROW(c.criterion.test({features()}), ArgumentError);
  Function three = combine({c.y, c.y, c.y});
  EXPECT_THROW(three.test({features(), targets()}), ArgumentError);
}

}  // namespace
}  // namespace loom
