// A Trainer whose loss or metric is one number for the minibatch (CNTK's lambda_rank, ndcg_at_1,
// edit_distance_error, a reduction over all axes): it counts the samples as CNTK's Trainer and
// Evaluator do (the first variable with dynamic axes under the loss; the metric's first input),
// so that its averages and its progress lines are CNTK's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "loom/learners/sgd.h"
#include "loom/ops/ops.h"
#include "loom/train/progress_printer.h"
#include "loom/train/trainer.h"

namespace loom {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string fixed6(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6f", v);
  return text;
}

InputOptions f64(const std::string& name) {
  return {.dtype = DataType::Float64, .name = name};
}

// Scores w·x of one feature, ranked within groups by lambda_rank and ndcg_at_1.
struct Ranking {
  Variable x = input_variable({1}, f64("x"));
  Variable gain = input_variable({1}, f64("gain"));
  Variable group = input_variable({1}, f64("group"));
  Parameter w = parameter(NDArrayView::from_vector<double>({1}, {1.0}), "w");
  Variable score = element_times(x, w);
  ValueMap minibatch() const {
    // CNTK's docstring example: groups 1 and 2, each listed by decreasing gain, each ranked
    // wrong at the top by the scores (x, with w = 1).
    return {{x, Value::create_batch<double>({1}, {1, 2, 3, 4})},
            {gain, Value::create_batch<double>({1}, {7, 1, 3, 1})},
            {group, Value::create_batch<double>({1}, {1, 1, 2, 2})}};
  }
};

TEST(MinibatchMetric, LambdaRankLossAndNdcgMetricAreAveragedOverTheSamples) {
  Ranking r;
  const Variable loss = lambda_rank(r.score, r.gain, r.group);
  const Variable metric = ndcg_at_1(r.score, r.gain, r.group);
  ASSERT_TRUE(loss.dynamic_axes().empty());
  std::ostringstream out;
  auto printer = std::make_shared<ProgressPrinter>(
      ProgressPrinterOptions{.freq = 1, .metric_is_pct = false, .out = &out});
  Trainer trainer(r.score, std::pair{loss, metric}, {sgd({r.w}, learning_parameter_schedule(1.0))},
                  {printer});

  // By hand: group 1 ranks gain 1 above gain 7, group 2 gain 1 above gain 3.
  const double ideal1 = 7 / std::log(2.0) + 1 / std::log(3.0);
  const double ideal2 = 3 / std::log(2.0) + 1 / std::log(3.0);
  const double ndcg1 = (1 / std::log(2.0) + 7 / std::log(3.0)) / ideal1;
  const double ndcg2 = (1 / std::log(2.0) + 3 / std::log(3.0)) / ideal2;
  const double loss_value = (1 - (ndcg1 + ndcg2) / 2) * 100 * 4;  // CNTK's, for the minibatch
  const double ndcg_at_1_value = (1.0 / 7 + 1.0 / 3) / 2 * 100 * 4;
  EXPECT_NEAR(loss_value, 58.038055419921875 + 40.65847396850586, 1e-5);  // CNTK's losses_test

  for (int step = 0; step < 2; ++step) {
    trainer.train_minibatch(r.minibatch());
    // CNTK's count: the samples of the scores, the loss's first input with dynamic axes.
    EXPECT_EQ(trainer.previous_minibatch_sample_count(), 4u);
    EXPECT_NEAR(trainer.previous_minibatch_loss_average(), loss_value / 4, 1e-12);
    EXPECT_NEAR(trainer.previous_minibatch_evaluation_average(), ndcg_at_1_value / 4, 1e-12);
    if (step == 0) {
      // LambdaRank's gradient Σ λ·x = 0.2121461 + 0.14861868, the rate per minibatch over the
      // 4 samples. The order of the scores (all the values depend on) stays.
      EXPECT_NEAR(r.w.value().to_vector<double>()[0], 1 - (0.2121461 + 0.14861868) / 4, 1e-7);
    }
  }
  EXPECT_EQ(trainer.total_number_of_samples_seen(), 8u);
  trainer.summarize_training_progress();
  const std::string averages =
      "loss = " + fixed6(loss_value / 4) + " * 4, metric = " + fixed6(ndcg_at_1_value / 4) + " * 4";
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 4u) << out.str();
  EXPECT_EQ(lines[1], " Minibatch[   1-   1]: " + averages + ";");
  EXPECT_EQ(lines[2], " Minibatch[   2-   2]: " + averages + ";");
  const std::string summary = "Finished Epoch[1]: loss = " + fixed6(loss_value / 4) +
                              " * 8, metric = " + fixed6(ndcg_at_1_value / 4) + " * 8";
  EXPECT_EQ(lines[3].rfind(summary, 0), 0u) << lines[3];

  // test_minibatch: the metric's first input (the scores) counts the samples.
  EXPECT_NEAR(trainer.test_minibatch(r.minibatch()), ndcg_at_1_value / 4, 1e-12);
}

TEST(MinibatchMetric, EditDistanceErrorIsTheErrorRateOfTheReferenceLabels) {
  // z = x·I: each frame's label is x's; cross entropy per frame as the loss.
  const Variable x = sequence::input_variable({3}, f64("x"));
  const Variable labels = sequence::input_variable({3}, f64("labels"));
  Parameter W =
      parameter(NDArrayView::from_vector<double>({3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1}), "W");
  const Variable z = times(x, W);
  const Variable loss = cross_entropy_with_softmax(z, labels);
  const Variable metric = edit_distance_error(z, labels);
  auto one_hot = [](const std::vector<std::vector<size_t>>& seqs) {
    std::vector<std::vector<double>> data;
    for (const auto& s : seqs) {
      std::vector<double> rows(s.size() * 3, 0.0);
      for (size_t t = 0; t < s.size(); ++t) rows[t * 3 + s[t]] = 1;
      data.push_back(rows);
    }
    return Value::create_sequences<double>({3}, data);
  };
  // Sequence 1: 0 1 2 against 0 2 2 (a substitution); sequence 2: 2 2 against 2 1 (one):
  // 2 errors in 5 reference labels.
  const ValueMap minibatch{{x, one_hot({{0, 1, 2}, {2, 2}})},
                           {labels, one_hot({{0, 2, 2}, {2, 1}})}};
  std::ostringstream out;
  auto printer = std::make_shared<ProgressPrinter>(ProgressPrinterOptions{.freq = 1, .out = &out});
  Trainer trainer(z, std::pair{loss, metric}, {sgd({W}, learning_parameter_schedule(0.5))},
                  {printer});

  EXPECT_NEAR(trainer.test_minibatch(minibatch), 0.4, 1e-15);
  trainer.summarize_test_progress();
  trainer.train_minibatch(minibatch);
  EXPECT_EQ(trainer.previous_minibatch_sample_count(), 5u);
  // Cross entropy of a one-hot row of W = I: log(e + 2) − 1 where right (3 frames), else
  // log(e + 2).
  const double ce = (5 * std::log(std::exp(1.0) + 2) - 3) / 5;
  EXPECT_NEAR(trainer.previous_minibatch_loss_average(), ce, 1e-12);
  EXPECT_NEAR(trainer.previous_minibatch_evaluation_average(), 0.4, 1e-15);
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_EQ(lines[0], "Finished Evaluation [1]: Minibatch[1-1]: metric = 40.00% * 5;");
  EXPECT_EQ(lines[2], " Minibatch[   1-   1]: loss = " + fixed6(ce) + " * 5, metric = 40.00% * 5;");
}

TEST(MinibatchMetric, ALossReducedOverAllAxesCountsTheSamplesUnderIt) {
  Ranking r;
  const Variable per_sample = squared_error(r.score, r.gain);
  const Variable loss = reduce_sum(per_sample, Axis::all_axes());
  ASSERT_TRUE(loss.dynamic_axes().empty());
  Trainer trainer(r.score, loss, {sgd({r.w}, learning_parameter_schedule(0.0))});
  trainer.train_minibatch(r.minibatch());
  EXPECT_EQ(trainer.previous_minibatch_sample_count(), 4u);
  // (1 − 7)² + (2 − 1)² + (3 − 3)² + (4 − 1)² over 4 samples.
  EXPECT_NEAR(trainer.previous_minibatch_loss_average(), (36 + 1 + 0 + 9) / 4.0, 1e-12);
  // As an evaluation metric: its first input, the per-sample losses, counts.
  Evaluator evaluator(loss);
  EXPECT_NEAR(evaluator.test_minibatch(r.minibatch()), 46 / 4.0, 1e-12);
  EXPECT_EQ(evaluator.previous_minibatch_sample_count(), 4u);
}

TEST(MinibatchMetric, ALossWithNothingToCountSamplesOnIsRefused) {
  Parameter p = parameter(NDArrayView::from_vector<double>({2}, {1, 2}), "p");
  const Variable loss = reduce_sum(element_times(p, p), Axis::all_axes());
  try {
    Trainer trainer(Function(), loss, {sgd({p}, learning_parameter_schedule(0.1))});
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("count the minibatch's samples"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace loom
