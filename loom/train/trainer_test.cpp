#include "loom/train/trainer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/pooling.h"
#include "loom/layers/sequential.h"
#include "loom/learners/momentum_sgd.h"
#include "loom/learners/sgd.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/losses.h"
#include "loom/serialize/model_file.h"
#include "loom/train/progress_printer.h"

namespace loom {
namespace {

std::vector<float> values(const Parameter& p) {
  return p.value().to_vector<float>();
}

// y = x·W (no bias), W = [1, 2]ᵀ; squared error against t.
struct Linear {
  Variable x = input_variable({2}, {.name = "x"});
  Variable t = input_variable({1}, {.name = "t"});
  Function layer = Dense(1, {.bias = false});
  Variable y = layer(x);
  Variable loss = squared_error(y, t);
  Parameter W = layer.parameters()[0];
  Linear() { W.set_value(NDArrayView::from_vector<float>({2, 1}, {1, 2})); }
  ValueMap batch(std::vector<float> xs, std::vector<float> ts) const {
    ValueMap m;
    m.emplace(x, Value::create_batch<float>({2}, xs));
    m.emplace(t, Value::create_batch<float>({1}, ts));
    return m;
  }
};

TEST(Trainer, SgdStepUsesTheSumOfPerSampleGradients) {
  Linear m;
  auto learner = sgd({m.W}, learning_rate_schedule(0.1, UnitType::sample));
  Trainer trainer(m.y, m.loss, {learner});
  // Samples (1,0)->t=0 and (0,1)->t=0: y = 1 and 2, losses 1 and 4.
  EXPECT_TRUE(trainer.train_minibatch(m.batch({1, 0, 0, 1}, {0, 0})));
  EXPECT_EQ(trainer.previous_minibatch_sample_count(), 2u);
  EXPECT_DOUBLE_EQ(trainer.previous_minibatch_loss_average(), 2.5);
  EXPECT_EQ(trainer.total_number_of_samples_seen(), 2u);
  // dL/dW = Σ 2(y - t)x = (2, 4); W -= 0.1 · (2, 4).
  auto w = values(m.W);
  EXPECT_FLOAT_EQ(w[0], 0.8f);
  EXPECT_FLOAT_EQ(w[1], 1.6f);
  EXPECT_THROW(trainer.previous_minibatch_evaluation_average(), StateError);
}

TEST(Trainer, PerMinibatchRateAppliesToTheMeanGradient) {
  Linear m;
  auto learner = sgd({m.W}, learning_parameter_schedule(0.1));
  Trainer trainer(m.y, m.loss, {learner});
  trainer.train_minibatch(m.batch({1, 0, 0, 1}, {0, 0}));
  auto w = values(m.W);
  EXPECT_FLOAT_EQ(w[0], 0.9f);  // 1 - 0.1 · 2 / 2
  EXPECT_FLOAT_EQ(w[1], 1.8f);  // 2 - 0.1 · 4 / 2
}

TEST(Trainer, EmptyMinibatchOrZeroRateStopsTraining) {
  Linear m;
  Trainer trainer(m.y, m.loss, {sgd({m.W}, learning_rate_schedule(0.1, UnitType::sample))});
  EXPECT_FALSE(trainer.train_minibatch(ValueMap{}));
  EXPECT_EQ(trainer.total_number_of_samples_seen(), 0u);
  Linear n;
  auto zero_at_end =
      sgd({n.W}, learning_rate_schedule(std::vector<double>{0.1, 0.0}, UnitType::sample, 2));
  Trainer t2(n.y, n.loss, {zero_at_end});
  EXPECT_TRUE(t2.train_minibatch(n.batch({1, 0, 0, 1}, {0, 0})));
  auto before = values(n.W);
  EXPECT_FALSE(t2.train_minibatch(n.batch({1, 0, 0, 1}, {0, 0})));
  EXPECT_EQ(values(n.W), before);
}

TEST(Trainer, SeveralLearnersOnDisjointParametersAndUncoveredOnesStayFixed) {
  Variable x = input_variable({2});
  Variable t = input_variable({1});
  Function first = Dense(2, {.activation = tanh}), second = Dense(1);
  Variable y = second(first(x));
  Variable loss = squared_error(y, t);
  ValueMap data;
  data.emplace(x, Value::create_batch<float>({2}, {1, 0, 0, 1, 1, 1}));
  data.emplace(t, Value::create_batch<float>({1}, {1, 1, 0}));
  auto first_before = values(first.parameters()[0]);
  auto second_before = values(second.parameters()[0]);
  // Only the first layer learns: the second layer's parameters stay fixed.
  Trainer only_first(y, loss,
                     {sgd(first.parameters(), learning_rate_schedule(0.1, UnitType::sample))});
  only_first.train_minibatch(data);
  EXPECT_NE(values(first.parameters()[0]), first_before);
  EXPECT_EQ(values(second.parameters()[0]), second_before);
  // Two learners with different rates: each moves its own parameters.
  auto a = sgd(first.parameters(), learning_rate_schedule(0.0, UnitType::sample));
  auto b = sgd(second.parameters(), learning_rate_schedule(0.1, UnitType::sample));
  Trainer both(y, loss, {a, b});
  first_before = values(first.parameters()[0]);
  EXPECT_TRUE(both.train_minibatch(data));  // b still learns
  EXPECT_EQ(values(first.parameters()[0]), first_before);
  EXPECT_NE(values(second.parameters()[0]), second_before);
  // A parameter given to two learners is an error.
  EXPECT_THROW(Trainer(y, loss,
                       {sgd(first.parameters(), learning_rate_schedule(0.1, UnitType::sample)),
                        sgd(first.parameters(), learning_rate_schedule(0.1, UnitType::sample))}),
               ArgumentError);
}

// The model is what a checkpoint deploys: an uncalled layer would save a graph with an unbound
// placeholder, which no one could evaluate.
TEST(Trainer, RefusesAModelWithUnboundPlaceholders) {
  Variable x = input_variable({2}, {.name = "x"});
  Variable t = input_variable({2}, {.name = "t"});
  Function layer = Dense(2);
  Variable z = layer(x);
  Variable loss = squared_error(z, t);
  auto learner = sgd(layer.parameters(), learning_rate_schedule(0.1, UnitType::sample));
  try {
    Trainer trainer(layer, loss, {learner});
    ADD_FAILURE() << "expected an ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("unbound placeholder"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model(x)"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(Trainer(z, loss, {learner}));
  Trainer without_model({}, loss, {learner});  // CNTK's Trainer(None, criterion, ...)
  EXPECT_TRUE(without_model.train_minibatch({{x, Value::create_batch<float>({2}, {1, 2})},
                                             {t, Value::create_batch<float>({2}, {0, 1})}}));
  // Its checkpoints hold the criterion.
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "loom_trainer_without_model").string();
  without_model.save_checkpoint(path);
  EXPECT_EQ(load_model(path).arguments().size(), 2u);
  std::filesystem::remove(path);
}

TEST(Trainer, CountsSamplesOfSequences) {
  Variable s = sequence::input_variable({2});
  Variable t = sequence::input_variable({1});
  Function layer = Dense(1);
  Variable y = layer(s);
  Variable loss = squared_error(y, t);
  Trainer trainer(y, loss,
                  {sgd(layer.parameters(), learning_rate_schedule(0.01, UnitType::sample))});
  ValueMap data;
  data.emplace(s, Value::create_sequences<float>({2}, {{1, 2, 3, 4, 5, 6}, {7, 8}}));
  data.emplace(t, Value::create_sequences<float>({1}, {{1, 2, 3}, {4}}));
  trainer.train_minibatch(data);
  EXPECT_EQ(trainer.previous_minibatch_sample_count(), 4u);
  EXPECT_EQ(trainer.total_number_of_samples_seen(), 4u);
}

TEST(Trainer, TestMinibatchAveragesTheMetricWithoutLearning) {
  Linear m;
  Variable metric = squared_error(m.y, m.t);
  Trainer trainer(m.y, {m.loss, metric},
                  {sgd({m.W}, learning_rate_schedule(0.1, UnitType::sample))});
  auto before = values(m.W);
  EXPECT_DOUBLE_EQ(trainer.test_minibatch(m.batch({1, 0, 0, 1, 1, 1}, {0, 0, 0})),
                   (1 + 4 + 9) / 3.0);
  EXPECT_EQ(values(m.W), before);
}

TEST(Trainer, ReportsToProgressWriters) {
  Linear m;
  std::ostringstream out;
  auto printer = std::make_shared<ProgressPrinter>(ProgressPrinterOptions{.freq = 2, .out = &out});
  Trainer trainer(m.y, {m.loss, m.loss},
                  {sgd({m.W}, learning_rate_schedule(0.0001, UnitType::sample))}, {printer});
  trainer.train_minibatch(m.batch({1, 0, 0, 1}, {0, 0}));
  trainer.train_minibatch(m.batch({1, 0, 0, 1}, {0, 0}));
  std::string text = out.str();
  EXPECT_EQ(text.substr(0, text.find('\n')), "Learning rate per sample: 0.0001");
  EXPECT_NE(text.find(" Minibatch[   1-   2]: loss = 2.49"), std::string::npos) << text;
  EXPECT_NE(text.find("* 4, metric = 249."), std::string::npos) << text;
  Evaluator evaluator(m.loss, {printer});
  evaluator.test_minibatch(m.batch({1, 0}, {1}));
  evaluator.summarize_test_progress();
  EXPECT_NE(out.str().find("Finished Evaluation [1]: Minibatch[1-1]: metric = "), std::string::npos)
      << out.str();
}

// Sharing buffers is the training executor's default; a trainer without it (to measure or debug)
// learns exactly the same parameters (buffer_sharing_test.cpp compares single steps).
TEST(Trainer, ExecutorOptionsWithoutSharedBuffersLearnTheSameParameters) {
  Variable x = input_variable({1, 8, 8}, {.name = "x"});
  Variable y = input_variable({3}, {.is_sparse = true, .name = "y"});
  Variable z = Sequential({Convolution2D({3, 3}, 8, {.activation = relu, .pad = true}),
                           MaxPooling({2, 2}, {.strides = {2, 2}}),
                           Convolution2D({3, 3}, 8, {.activation = relu}), Dense(3)})(x);
  Variable loss = cross_entropy_with_softmax(z, y);
  const std::vector<Parameter> parameters = combine({loss}).parameters();
  std::vector<NDArrayView> initial;
  for (const Parameter& p : parameters) initial.push_back(p.value().deep_clone());
  std::vector<ValueMap> minibatches;
  for (size_t n : {size_t{6}, size_t{10}, size_t{6}}) {
    std::vector<float> pixels(64 * n);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = float((i * 37 + n) % 17) / 17.f;
    std::vector<size_t> labels(n);
    for (size_t i = 0; i < n; ++i) labels[i] = (i + n) % 3;
    ValueMap m;
    m.emplace(x, Value::create_batch<float>({1, 8, 8}, pixels));
    m.emplace(y, Value::one_hot(3, labels));
    minibatches.push_back(std::move(m));
  }
  auto learned = [&](bool share) {
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i].set_value(initial[i]);
    Trainer trainer(z, loss,
                    {momentum_sgd(parameters, learning_rate_schedule(0.05, UnitType::minibatch),
                                  momentum_schedule(0.9))},
                    {}, {.share_buffers = share});
    for (const ValueMap& m : minibatches) EXPECT_TRUE(trainer.train_minibatch(m));
    std::vector<std::vector<float>> result;
    for (const Parameter& p : parameters) result.push_back(values(p));
    return result;
  };
  const auto shared = learned(true);
  EXPECT_TRUE(shared == learned(false));
  for (size_t i = 0; i < parameters.size(); ++i)
    EXPECT_FALSE(shared[i] == initial[i].to_vector<float>()) << parameters[i].describe();
}

}  // namespace
}  // namespace loom
