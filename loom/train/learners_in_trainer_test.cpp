// Learners driven by a Trainer (seed 003): learning rates per sample and per minibatch when the
// minibatch size changes, several learners (built-in, universal, user) on disjoint parameter
// subsets, and the progress lines learners report through the Trainer.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "loom/layers/dense.h"
#include "loom/layers/sequential.h"
#include "loom/learners/momentum_sgd.h"
#include "loom/learners/sgd.h"
#include "loom/learners/universal.h"
#include "loom/learners/user_learner.h"
#include "loom/ops/assign.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/losses.h"
#include "loom/train/progress_printer.h"
#include "loom/train/trainer.h"

namespace loom {
namespace {

std::vector<float> values(const Variable& p) {
  return p.value().to_vector<float>();
}

// Seed 003's model: Sequential([Dense(4, relu), Dense(2)]) over 3 features, with
// cross_entropy_with_softmax against a 2-class label.
struct SeedModel {
  Variable features = input_variable({3}, {.name = "features"});
  Variable label = input_variable({2}, {.name = "label"});
  Function layer1 = Dense(4, {.activation = relu});
  Function layer2 = Dense(2);
  Function z = Sequential({layer1, layer2})(features);
  Variable loss = cross_entropy_with_softmax(z, label);

  std::vector<Parameter> parameters() const { return z.parameters(); }
  // Same structure, so the same parameter order: take over another model's values.
  void copy_from(const SeedModel& o) {
    auto mine = parameters(), theirs = o.parameters();
    for (size_t i = 0; i < mine.size(); ++i) mine[i].set_value(theirs[i].value());
  }
  // A deterministic minibatch of m samples (index k selects which).
  ValueMap batch(size_t m, size_t k) const {
    std::vector<float> x(m * 3), t(m * 2, 0.0f);
    for (size_t i = 0; i < m; ++i) {
      const size_t s = k * 131 + i * 17;
      for (size_t j = 0; j < 3; ++j) x[i * 3 + j] = std::sin(float(s * 3 + j) * 0.7f) * 2.0f;
      t[i * 2 + (s % 3 == 0 ? 1 : 0)] = 1.0f;
    }
    ValueMap v;
    v.emplace(features, Value::create_batch<float>({3}, x));
    v.emplace(label, Value::create_batch<float>({2}, t));
    return v;
  }
};

bool same_parameters(const SeedModel& a, const SeedModel& b) {
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    if (values(pa[i]) != values(pb[i])) return false;
  return true;
}

// Seed 003: with a per-minibatch rate the step is lr x the mean gradient, so it needs no
// retuning when the minibatch size changes; a per-sample rate is applied to the sum, so the
// same trajectory needs per-sample rate = per-minibatch rate / M, retuned when M changes. A
// rate per N samples (learning_parameter_schedule(lr, minibatch_size=N)) is lr/N per sample
// for any M.
TEST(LearnersInTrainerTest, PerSampleAndPerMinibatchRatesWhenTheMinibatchSizeChanges) {
  SeedModel per_minibatch, per_sample, retuned, per_two;
  per_sample.copy_from(per_minibatch);
  retuned.copy_from(per_minibatch);
  per_two.copy_from(per_minibatch);
  // Powers of two: 0.5 / 4 == 0.125 == 0.25 / 2 exactly, so the rates agree to the bit.
  auto lr_m = sgd(per_minibatch.parameters(), learning_rate_schedule(0.5, UnitType::minibatch));
  auto lr_s = sgd(per_sample.parameters(), learning_rate_schedule(0.125, UnitType::sample));
  auto lr_r = sgd(retuned.parameters(), learning_rate_schedule(0.125, UnitType::sample));
  auto lr_2 = sgd(per_two.parameters(), learning_parameter_schedule(0.25, 2));
  Trainer tm(per_minibatch.z, per_minibatch.loss, {lr_m});
  Trainer ts(per_sample.z, per_sample.loss, {lr_s});
  Trainer tr(retuned.z, retuned.loss, {lr_r});
  Trainer t2(per_two.z, per_two.loss, {lr_2});

  // Minibatches of 4: per-sample 0.125 is per-minibatch 0.5, bit for bit, step after step.
  for (size_t k = 0; k < 5; ++k) {
    tm.train_minibatch(per_minibatch.batch(4, k));
    ts.train_minibatch(per_sample.batch(4, k));
    tr.train_minibatch(retuned.batch(4, k));
    t2.train_minibatch(per_two.batch(4, k));
    ASSERT_TRUE(same_parameters(per_minibatch, per_sample)) << "minibatch " << k;
    ASSERT_TRUE(same_parameters(per_minibatch, retuned)) << "minibatch " << k;
    ASSERT_TRUE(same_parameters(per_sample, per_two)) << "minibatch " << k;
  }

  // Minibatches of 8 from now on. The per-minibatch learner needs nothing; the retuned
  // per-sample learner gets 0.5 / 8 and stays on the same trajectory; the per-sample learner
  // left alone now steps twice as far (0.125 x 8 = 1 x the mean gradient).
  lr_r->reset_learning_rate(learning_rate_schedule(0.5 / 8, UnitType::sample));
  const auto before_m = values(per_minibatch.parameters()[0]);
  const auto before_s = values(per_sample.parameters()[0]);
  ASSERT_EQ(before_m, before_s);
  for (size_t k = 5; k < 9; ++k) {
    tm.train_minibatch(per_minibatch.batch(8, k));
    tr.train_minibatch(retuned.batch(8, k));
    ASSERT_TRUE(same_parameters(per_minibatch, retuned)) << "minibatch " << k;
    if (k == 5) {
      ts.train_minibatch(per_sample.batch(8, k));
      const auto after_m = values(per_minibatch.parameters()[0]);
      const auto after_s = values(per_sample.parameters()[0]);
      for (size_t i = 0; i < after_m.size(); ++i) {
        const double step_m = double(after_m[i]) - before_m[i];
        const double step_s = double(after_s[i]) - before_s[i];
        EXPECT_NEAR(step_s, 2 * step_m, 1e-6 + 1e-5 * std::abs(step_s)) << i;
      }
      EXPECT_FALSE(same_parameters(per_minibatch, per_sample));
    }
  }
  // A rate per 2 samples is a rate per sample of half of it, whatever M is: per_two and
  // per_sample (0.125 per sample) went through the same 5 minibatches of 4; one of 8 more
  // each keeps them equal.
  t2.train_minibatch(per_two.batch(8, 5));
  EXPECT_TRUE(same_parameters(per_sample, per_two));
  EXPECT_EQ(tm.total_number_of_samples_seen(), 5u * 4 + 4 * 8);
  EXPECT_EQ(lr_m->total_number_of_samples_seen(), 5u * 4 + 4 * 8);
}

// Seed 003's my_rmsprop for the universal learner.
Function my_rmsprop(const std::vector<Parameter>& parameters,
                    const std::vector<Variable>& gradients) {
  std::vector<Variable> updates;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& p = parameters[i];
    NDArrayView init(p.dtype(), p.shape());
    init.fill(1e-6);
    Constant a = constant(init);
    Variable accum_new =
        assign(a, constant(0.999) * a + constant(1 - 0.999) * gradients[i] * gradients[i]);
    updates.push_back(assign(p, p - constant(0.01) * gradients[i] / sqrt(accum_new)));
  }
  return combine(updates);
}

// A user learner: SGD with a rate per minibatch (lr x the mean gradient).
class MeanSgd : public UserLearner {
 public:
  MeanSgd(std::vector<Parameter> p, double lr) : UserLearner(std::move(p), lr), lr_(lr) {}
  bool update(std::unordered_map<Variable, NDArrayView>& gradient_values, size_t m, bool) override {
    seen_keys = gradient_values.size();
    for (auto& [p, g] : gradient_values) {
      float* w = p.value().data<float>();
      const float* d = g.data<float>();
      for (size_t i = 0; i < g.size(); ++i) w[i] -= float(lr_ / double(m)) * d[i];
    }
    ++calls;
    return true;
  }
  size_t calls = 0, seen_keys = 0;

 private:
  double lr_;
};

// Seed 003: "it is possible to have multiple learners each working on a different subset of
// the parameters. Parameters that are not covered by any learner will not be updated."
TEST(LearnersInTrainerTest, SeveralLearnersOnDisjointParameterSubsets) {
  SeedModel m;
  const auto p1 = m.layer1.parameters();  // W, b of Dense(4, relu)
  const auto p2 = m.layer2.parameters();
  ASSERT_EQ(p1.size(), 2u);
  ASSERT_EQ(p2.size(), 2u);
  const Parameter W2 = p2[0].shape().rank() == 2 ? p2[0] : p2[1];
  const Parameter b2 = p2[0].shape().rank() == 2 ? p2[1] : p2[0];

  const ValueMap data = m.batch(6, 0);
  // The gradients (sums over the 6 samples) and values at the start, for the expected steps.
  const ValueMap grads = Function(m.loss).grad(data, {p1[0], p1[1], W2, b2});
  auto grad_of = [&](const Parameter& p) { return grads.at(p).data().to_vector<float>(); };
  std::vector<std::vector<float>> start;
  for (const Parameter& p : {p1[0], p1[1], W2, b2}) start.push_back(values(p));

  auto builtin = sgd(p1, learning_rate_schedule(0.5, UnitType::minibatch));
  auto expression = universal(my_rmsprop, {W2});
  auto user = std::make_shared<MeanSgd>(std::vector<Parameter>{b2}, 1.0);
  Trainer trainer(m.z, m.loss, {builtin, expression, user});
  EXPECT_TRUE(trainer.train_minibatch(data));

  for (size_t k = 0; k < 2; ++k) {  // sgd: p - 0.5 / 6 * g
    const auto g = grad_of(p1[k]);
    const auto now = values(p1[k]);
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_NEAR(now[i], start[k][i] - 0.5 / 6 * g[i], 1e-6) << "layer 1 parameter " << k;
  }
  {  // my_rmsprop, one step: a = 0.999e-6 + 0.001 g^2; p - 0.01 g / sqrt(a)
    const auto g = grad_of(W2);
    const auto now = values(W2);
    for (size_t i = 0; i < g.size(); ++i) {
      const double a = 0.999e-6 + 0.001 * double(g[i]) * g[i];
      EXPECT_NEAR(now[i], start[2][i] - 0.01 * g[i] / std::sqrt(a), 1e-5) << "W2 " << i;
    }
  }
  {  // the user learner: p - 1 / 6 * g, given only its own parameter's gradient
    const auto g = grad_of(b2);
    const auto now = values(b2);
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(now[i], start[3][i] - g[i] / 6, 1e-6);
    EXPECT_EQ(user->calls, 1u);
    EXPECT_EQ(user->seen_keys, 1u);
  }
  EXPECT_EQ(builtin->total_number_of_samples_seen(), 6u);
  EXPECT_EQ(expression->total_number_of_samples_seen(), 6u);
  EXPECT_EQ(trainer.total_number_of_samples_seen(), 6u);

  // Leave b2 to no learner: it stays as it is while the others go on learning.
  const auto b2_before = values(b2);
  const auto W2_before = values(W2);
  Trainer partial(
      m.z, m.loss,
      {sgd(p1, learning_rate_schedule(0.5, UnitType::minibatch)), universal(my_rmsprop, {W2})});
  for (size_t k = 1; k < 4; ++k) EXPECT_TRUE(partial.train_minibatch(m.batch(6, k)));
  EXPECT_EQ(values(b2), b2_before);
  EXPECT_NE(values(W2), W2_before);
  // A user learner is driven like any other: for each minibatch, once.
  Trainer with_user(m.z, m.loss, {user});
  for (size_t k = 0; k < 3; ++k) with_user.train_minibatch(m.batch(5, k));
  EXPECT_EQ(user->calls, 4u);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Seed 002's log shows "Learning rate per minibatch: 0.1" before the first minibatch line;
// learners report every hyper-parameter again whenever its value changes.
TEST(LearnersInTrainerTest, ProgressPrinterShowsEachChangeOfRateAndMomentum) {
  SeedModel m;
  std::ostringstream out;
  auto printer = std::make_shared<ProgressPrinter>(ProgressPrinterOptions{.freq = 1, .out = &out});
  // lr 0.1 for 8 samples, then 0.05; momentum per sample 0.9 for 12 samples, then 0.8.
  auto learner = momentum_sgd(
      m.parameters(), learning_parameter_schedule(std::vector<double>{0.1, 0.05}, IGNORE, 8),
      momentum_schedule_per_sample(std::vector<double>{0.9, 0.8}, 12));
  Trainer trainer(m.z, m.loss, {learner}, {printer});
  for (size_t k = 0; k < 5; ++k) trainer.train_minibatch(m.batch(4, k));
  std::vector<std::string> got;
  for (const std::string& line : lines_of(out.str()))
    got.push_back(line.rfind(" Minibatch[", 0) == 0 ? "mb" : line);
  const std::vector<std::string> expected = {
      "Learning rate per minibatch: 0.1",  // samples 0-3
      "Momentum per 1 samples: 0.9",
      "mb",
      "mb",                                 // samples 4-7
      "Learning rate per minibatch: 0.05",  // samples 8-11
      "mb",
      "Momentum per 1 samples: 0.8",  // samples 12-15
      "mb",
      "mb",  // samples 16-19: nothing changed
  };
  EXPECT_EQ(got, expected) << out.str();

  // Per-N-sample schedules and the universal learner's fixed rate are reported the same way.
  std::ostringstream out2;
  auto printer2 =
      std::make_shared<ProgressPrinter>(ProgressPrinterOptions{.freq = 100, .out = &out2});
  auto p = m.parameters();
  Trainer two(m.z, m.loss,
              {sgd({p[0], p[1]}, learning_parameter_schedule(0.5, 10)),
               universal(my_rmsprop, {p[2], p[3]})},
              {printer2});
  two.train_minibatch(m.batch(4, 0));
  two.train_minibatch(m.batch(4, 1));
  EXPECT_EQ(lines_of(out2.str()), (std::vector<std::string>{"Learning rate per 10 samples: 0.5",
                                                            "Learning rate per minibatch: 1.0"}));
}

}  // namespace
}  // namespace loom
