#include "loom/ops/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "loom/graph/random_state.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linear.h"
#include "loom/ops/ops_test_util.h"
#include "loom/ops/reduction.h"
#include "loom/ops/sequence_ops.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

constexpr size_t kDim = 1000, kBatch = 100;  // 100k elements

Value ones(size_t dim = kDim, size_t batch = kBatch) {
  return Value::create_batch<float>({dim}, std::vector<float>(dim * batch, 1.0f));
}

// One training-mode forward pass of f on x.
std::vector<double> train_forward(const Function& f, const Variable& x, const Value& v) {
  return values(f.forward({{x, v}}).second.at(f.output()));
}

TEST(Dropout, MasksAFractionNearTheRateAndScalesSurvivors) {
  Variable x = input_variable({kDim});
  for (double rate : {0.1, 0.5, 0.8}) {
    Function f = dropout(x, rate, 11);
    const auto y = train_forward(f, x, ones());
    size_t zeros = 0;
    for (double v : y) {
      if (v == 0) {
        ++zeros;
      } else {
        EXPECT_FLOAT_EQ(v, 1 / (1 - rate));
      }
    }
    // The binomial standard deviation for 100k draws is below 0.0016.
    EXPECT_NEAR(double(zeros) / double(y.size()), rate, 0.01) << "rate " << rate;
  }
}

TEST(Dropout, InferenceIsIdentityAndRateZeroKeepsAll) {
  Variable x = input_variable({4}, f64());
  Value v = random_batch({4}, 3, kF64, 1);
  Function f = dropout(x, 0.5);
  EXPECT_EQ(values(f.eval_one({{x, v}})), values(v));
  Function keep = dropout(x, 0.0);
  EXPECT_EQ(train_forward(keep, x, v), values(v));
}

TEST(Dropout, GradientIsTheForwardMaskTimesScale) {
  Variable x = input_variable({kDim}, {.needs_gradient = true});
  Function f = dropout(x, 0.4, 3);
  const Value in = ones(kDim, 8);
  auto [state, outs] = f.forward({{x, in}});
  const auto y = values(outs.at(f.output()));
  const Value dy = ones(kDim, 8);
  const auto dx = values(f.backward(state, {{f.output(), dy}}, {x}).at(x));
  ASSERT_EQ(dx.size(), y.size());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(dx[i], y[i]) << i;  // both mask * 1/(1-rate)
}

TEST(Dropout, SameSeedSameMasksAndDrawsAdvance) {
  Variable x = input_variable({kDim});
  Function a = dropout(x, 0.5, 42), b = dropout(x, 0.5, 42), c = dropout(x, 0.5, 43);
  const auto a1 = train_forward(a, x, ones()), b1 = train_forward(b, x, ones());
  EXPECT_EQ(a1, b1);
  EXPECT_NE(a1, train_forward(c, x, ones()));
  EXPECT_NE(a1, train_forward(a, x, ones()));  // a new mask per pass
  // Default seeds follow set_fixed_random_seed and creation order.
  set_fixed_random_seed(9);
  const auto d1 = train_forward(dropout(x, 0.5), x, ones());
  set_fixed_random_seed(9);
  EXPECT_EQ(train_forward(dropout(x, 0.5), x, ones()), d1);
}

TEST(Dropout, RejectsRatesOutsideZeroToOne) {
  Variable x = input_variable({2});
  EXPECT_THROW(dropout(x, 1.0), ArgumentError);
  EXPECT_THROW(dropout(x, -0.1), ArgumentError);
}

TEST(RandomState, RestoreContinuesTheSameMasks) {
  Variable x = input_variable({kDim});
  Function f = relu(dropout(dropout(x, 0.3, 1), 0.2));
  train_forward(f, x, ones());
  const Dictionary saved = random_state(f);
  EXPECT_EQ(saved.size(), 2u);
  const auto next = train_forward(f, x, ones());
  const auto after = train_forward(f, x, ones());
  restore_random_state(f, saved);
  EXPECT_EQ(train_forward(f, x, ones()), next);
  EXPECT_EQ(train_forward(f, x, ones()), after);
}

TEST(RandomState, MismatchedUidsAreNamed) {
  Variable x = input_variable({3});
  Function f = dropout(x, 0.5), g = dropout(x, 0.5);
  const Dictionary state = random_state(f);
  try {
    restore_random_state(g, state);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find(g.uid()), std::string::npos) << e.what();
  }
  Dictionary extra = state;
  extra["Dropout999999"] = state.at(f.uid());
  try {
    restore_random_state(f, extra);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("Dropout999999"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(random_state(relu(x)).map().empty());
}

// ---- random tensors (cntk.random)
// ----------------------------------------------------------------

constexpr size_t kDraws = 100000;

// The values of one evaluation of f (which has no arguments).
std::vector<double> draw(const Function& f) {
  return values(f.eval_one({}));
}

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / double(v.size());
}

double variance_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double sum = 0;
  for (double x : v) sum += (x - m) * (x - m);
  return sum / double(v.size() - 1);
}

// Expects the sample mean and variance of n draws within 6 standard errors of a distribution's
// mean and variance (kurtosis: its fourth standardized moment, for the variance's error).
void expect_moments(const std::vector<double>& v, double mean, double variance, double kurtosis,
                    const std::string& what) {
  const double n = double(v.size());
  EXPECT_NEAR(mean_of(v), mean, 6 * std::sqrt(variance / n)) << what;
  EXPECT_NEAR(variance_of(v), variance, 6 * variance * std::sqrt((kurtosis - 1) / n)) << what;
}

class RandomDistribution : public ::testing::TestWithParam<DataType> {};

TEST_P(RandomDistribution, MomentsMatchTheDistributions) {
  const DataType t = GetParam();
  const NDShape shape{200, kDraws / 200};
  const auto u = draw(uniform_random(shape, t, {.low = -2, .high = 3, .seed = 1}));
  ASSERT_EQ(u.size(), kDraws);
  for (double x : u) ASSERT_TRUE(x >= -2 && x < 3) << x;
  expect_moments(u, 0.5, 25.0 / 12, 1.8, "uniform");
  const auto n = draw(normal_random(shape, t, {.mean = 1, .scale = 2, .seed = 2}));
  expect_moments(n, 1, 4, 3, "normal");
  const auto g = draw(gumbel_random(shape, t, {.loc = 1, .scale = 2, .seed = 3}));
  constexpr double kEulerGamma = 0.5772156649;
  expect_moments(g, 1 + kEulerGamma * 2, M_PI * M_PI / 6 * 4, 5.4, "gumbel");
  const auto b = draw(bernoulli_random(shape, t, {.mean = 0.3, .seed = 4}));
  for (double x : b) ASSERT_TRUE(x == 0 || x == 1) << x;
  expect_moments(b, 0.3, 0.21, (1 - 3 * 0.21) / 0.21 + 3, "bernoulli");
}

TEST_P(RandomDistribution, ExtremeParametersAreExact) {
  const DataType t = GetParam();
  const NDShape shape{1000};
  for (double x : draw(bernoulli_random(shape, t, {.mean = 1}))) ASSERT_EQ(x, 1);
  for (double x : draw(bernoulli_random(shape, t, {.mean = 0}))) ASSERT_EQ(x, 0);
  for (double x : draw(normal_random(shape, t, {.mean = 2, .scale = 0}))) ASSERT_EQ(x, 2);
  for (double x : draw(gumbel_random(shape, t, {.loc = -1, .scale = 0}))) ASSERT_EQ(x, -1);
  // A range narrower than float32's spacing still stays below high.
  for (double x : draw(uniform_random(shape, t, {.low = 1, .high = 1 + 1e-9})))
    ASSERT_LT(x, 1 + 1e-9);
}

TEST_P(RandomDistribution, HasTheGivenShapeAndType) {
  const DataType t = GetParam();
  const Function f = normal_random(NDShape{2, 3}, t, {.seed = 5});
  EXPECT_EQ(f.output().shape(), (NDShape{2, 3}));
  EXPECT_EQ(f.output().dtype(), t);
  EXPECT_TRUE(f.output().dynamic_axes().empty());
  const Value v = f.eval_one({});
  EXPECT_EQ(v.dtype(), t);
  EXPECT_EQ(v.data().shape(), (NDShape{1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Types, RandomDistribution, ::testing::Values(kF32, kF64),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(RandomDistribution, NewValuesEachEvaluationAndSeedsRepeat) {
  const NDShape shape{100};
  const Function a = uniform_random(shape, kF32, {.seed = 42});
  const Function b = uniform_random(shape, kF32, {.seed = 42});
  const auto a1 = draw(a), a2 = draw(a);
  EXPECT_NE(a1, a2);  // a fresh sample at every evaluation
  EXPECT_EQ(draw(b), a1);
  EXPECT_EQ(draw(b), a2);
  EXPECT_NE(draw(uniform_random(shape, kF32, {.seed = 43})), a1);
  // Without a seed the generators follow set_fixed_random_seed and creation order.
  set_fixed_random_seed(9);
  const Function c = gumbel_random(shape), d = gumbel_random(shape);
  const auto c1 = draw(c), d1 = draw(d);
  EXPECT_NE(c1, d1);
  set_fixed_random_seed(9);
  EXPECT_EQ(draw(gumbel_random(shape)), c1);
  EXPECT_EQ(draw(gumbel_random(shape)), d1);
}

TEST(RandomDistribution, LikeTakesTheShapeTypeAndDynamicAxes) {
  // A batch in float64.
  const Variable x = input_variable({2, 3}, f64());
  const Function u = uniform_random_like(x, {.low = 5, .high = 6, .seed = 1});
  EXPECT_EQ(u.output().shape(), (NDShape{2, 3}));
  EXPECT_EQ(u.output().dtype(), kF64);
  EXPECT_EQ(u.output().dynamic_axes(), x.dynamic_axes());
  const Value in = random_batch({2, 3}, 4, kF64, 1);
  const Value out = u.eval_one({{x, in}});
  EXPECT_EQ(out.data().shape(), in.data().shape());
  for (double v : values(out)) ASSERT_TRUE(v >= 5 && v < 6) << v;
  // Ragged sequences: the output has the operand's sequences and mask.
  const Variable s = sequence::input_variable({4});
  const Value seqs = random_sequences({4}, kLengths, kF32, 2);
  for (const Function& f : {normal_random_like(s, {.seed = 2}), gumbel_random_like(s, {.seed = 3}),
                            bernoulli_random_like(s, {.seed = 4})}) {
    const Value y = f.eval_one({{s, seqs}});
    EXPECT_TRUE(y.is_sequence());
    EXPECT_EQ(y.data().shape(), seqs.data().shape());
    ASSERT_TRUE(y.mask().has_value());
    EXPECT_EQ(*y.mask(), *seqs.mask());
  }
  // Each step of each sequence gets its values: a sum along the sequences counts their steps.
  const Function steps = sequence::reduce_sum(bernoulli_random_like(s, {.mean = 1}));
  EXPECT_EQ(values(steps.eval_one({{s, seqs}})),
            (std::vector<double>{3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2}));
}

TEST(RandomDistribution, TheOperandsGradientIsZero) {
  const Variable x = input_variable({3}, {.needs_gradient = true});
  const Function f = reduce_sum(plus(normal_random_like(x, {.seed = 1}), x));
  const Value in = random_batch({3}, 2, kF32, 3);
  // d/dx (noise + x) is 1: the noise adds nothing.
  EXPECT_EQ(values(f.grad({{x, in}}, {x}).at(x)), std::vector<double>(6, 1.0));
  const Function only = reduce_sum(uniform_random_like(x, {.seed = 1}));
  EXPECT_EQ(values(only.grad({{x, in}}, {x}).at(x)), std::vector<double>(6, 0.0));
}

TEST(RandomDistribution, RejectsBadArgumentsNamingTheFunction) {
  const Variable x = input_variable({3});
  const NDShape s{3};
  expect_argument_error([&] { uniform_random(s, kF32, {.low = 1, .high = 1}); },
                        {"uniform", "low (1) must be below high (1)"});
  expect_argument_error([&] { uniform_random_like(x, {.low = 2, .high = 1}); },
                        {"uniform_like", "low (2)"});
  expect_argument_error([&] { normal_random(s, kF32, {.scale = -1}); },
                        {"normal", "scale (-1) must be >= 0"});
  expect_argument_error([&] { normal_random_like(x, {.scale = -0.5}); }, {"normal_like", "scale"});
  expect_argument_error([&] { gumbel_random(s, kF32, {.scale = -1}); }, {"gumbel", "scale"});
  expect_argument_error([&] { gumbel_random_like(x, {.scale = -1}); }, {"gumbel_like", "scale"});
  expect_argument_error([&] { bernoulli_random(s, kF32, {.mean = 1.5}); },
                        {"bernoulli", "mean (1.5)", "[0, 1]"});
  expect_argument_error([&] { bernoulli_random_like(x, {.mean = -0.1}); },
                        {"bernoulli_like", "mean"});
  expect_argument_error(
      [&] {
        uniform_random(NDShape{2, NDShape::kInferred});
      },
      {"uniform", "every dimension known"});
}

TEST(RandomDistribution, SaveAndLoadContinueTheStream) {
  const Variable x = input_variable({50});
  const Function f = combine({uniform_random(NDShape{50}, kF64, {.seed = 7}),
                              normal_random_like(x, {}), bernoulli_random_like(x, {.mean = 0.4})});
  const ValueMap args{{x, random_batch({50}, 2, kF32, 1)}};
  auto all = [&](const Function& g, const ValueMap& a) {
    const ValueMap results = g.eval(a);
    std::vector<double> out;
    for (const Variable& o : g.outputs())
      for (double d : values(results.at(o))) out.push_back(d);
    return out;
  };
  all(f, args);  // the saved generators have drawn once
  const std::vector<uint8_t> bytes = save_model_to_bytes(f);
  const auto next = all(f, args), after = all(f, args);
  const Function g = load_model_from_bytes(bytes);
  const ValueMap g_args{{g.arguments()[0], args.at(x)}};
  EXPECT_EQ(all(g, g_args), next);
  EXPECT_EQ(all(g, g_args), after);
  // A checkpoint's random state restores the same draws.
  const Dictionary state = random_state(f);
  EXPECT_EQ(state.size(), 3u);
  const auto again = all(f, args);
  restore_random_state(f, state);
  EXPECT_EQ(all(f, args), again);
}

// ---- random_sample, random_sample_inclusion_frequency
// --------------------------------------------

Constant weights(const std::vector<double>& w, DataType t = kF32) {
  return constant(dispatch(t, [&](auto zero) {
    using T = decltype(zero);
    return NDArrayView::from_vector<T>({w.size()}, std::vector<T>(w.begin(), w.end()));
  }));
}

// The class of each one-hot row of a [k, classes] draw; fails for a row that is not one-hot.
std::vector<size_t> classes_drawn(const std::vector<double>& y, size_t classes) {
  std::vector<size_t> out;
  for (size_t i = 0; i < y.size() / classes; ++i) {
    size_t ones = 0, at = 0;
    for (size_t c = 0; c < classes; ++c) {
      const double v = y[i * classes + c];
      EXPECT_TRUE(v == 0 || v == 1) << v;
      if (v == 1) ++ones, at = c;
    }
    EXPECT_EQ(ones, 1u) << "row " << i;
    out.push_back(at);
  }
  return out;
}

TEST(RandomSample, DrawsOneHotRowsInProportionToTheWeights) {
  for (DataType t : {kF32, kF64}) {
    const std::vector<double> w{1, 2, 0, 3, 4};
    const size_t k = 5000;
    const Function f = random_sample(weights(w, t), k, true, 11);
    EXPECT_EQ(f.output().shape(), (NDShape{k, 5}));
    EXPECT_EQ(f.output().dtype(), t);
    EXPECT_TRUE(f.output().dynamic_axes().empty());
    const auto drawn = classes_drawn(draw(f), 5);
    ASSERT_EQ(drawn.size(), k);
    std::vector<double> count(5, 0);
    for (size_t c : drawn) ++count[c];
    for (size_t c = 0; c < 5; ++c) {
      const double p = w[c] / 10;
      EXPECT_NEAR(count[c] / double(k), p, 6 * std::sqrt(p * (1 - p) / double(k)) + 1e-12) << c;
    }
    EXPECT_NE(draw(f), draw(f));  // new draws at every evaluation
  }
}

TEST(RandomSample, WithoutDuplicatesEachClassAtMostOnce) {
  const std::vector<double> w{5, 1, 0, 1, 1, 1};
  const Function f = random_sample(weights(w), 5, false, 3);
  for (int e = 0; e < 20; ++e) {
    const auto drawn = classes_drawn(draw(f), 6);
    EXPECT_EQ(std::set<size_t>(drawn.begin(), drawn.end()).size(), 5u);
    EXPECT_EQ(std::count(drawn.begin(), drawn.end(), size_t{2}), 0);  // weight 0: never
  }
}

TEST(RandomSample, SeedsRepeatAndSaveLoadContinues) {
  const std::vector<double> w{1, 2, 3, 4, 5, 6};
  const Function a = random_sample(weights(w), 4, false, 5),
                 b = random_sample(weights(w), 4, false, 5);
  const auto a1 = draw(a);
  EXPECT_EQ(draw(b), a1);
  const std::vector<uint8_t> bytes = save_model_to_bytes(a);
  const auto next = draw(a);
  EXPECT_EQ(draw(load_model_from_bytes(bytes)), next);
  set_fixed_random_seed(3);
  const auto c1 = draw(random_sample(weights(w), 4, true));
  set_fixed_random_seed(3);
  EXPECT_EQ(draw(random_sample(weights(w), 4, true)), c1);
}

TEST(RandomSample, InclusionFrequencyWithDuplicatesIsTheExpectedCount) {
  // CNTK's docstring: 100 classes of weight 1000, 100 of weight 1, 150 samples.
  std::vector<double> w(200, 1.0);
  std::fill_n(w.begin(), 100, 1000.0);
  for (DataType t : {kF32, kF64}) {
    const Function f = random_sample_inclusion_frequency(weights(w, t), 150, true);
    EXPECT_EQ(f.output().shape(), (NDShape{200}));
    const auto v = draw(f);
    const double tol = t == kF32 ? 1e-6 : 1e-12;
    EXPECT_NEAR(v[0], 150 * 1000 / 100100.0, tol);  // CNTK's 1.4985015
    EXPECT_NEAR(v[110], 150 / 100100.0, tol);       // CNTK's 0.0014985015
    EXPECT_EQ(draw(f), v);                          // no draws with duplicates
  }
}

TEST(RandomSample, InclusionFrequencyWithoutDuplicatesIsCntksEstimate) {
  std::vector<double> w(200, 1.0);
  std::fill_n(w.begin(), 100, 1000.0);
  const Function f = random_sample_inclusion_frequency(weights(w, kF64), 150, false, 1);
  const auto v = draw(f);
  EXPECT_NEAR(v[0], 1.0, 1e-9);  // CNTK's docstring: 1.0
  // Every class's estimate is 1 - (1 - p)^T for one T, the mean number of draws of 10 trial
  // samplings of 150 distinct classes: at least 150.
  const double p_low = 1 / 100100.0;
  const double tries = std::log1p(-v[150]) / std::log1p(-p_low);
  EXPECT_GE(tries, 150);
  for (size_t c = 100; c < 200; ++c) EXPECT_NEAR(v[c], v[150], 1e-15) << c;
  const double p_high = 1000 / 100100.0;
  EXPECT_NEAR(v[0], -std::expm1(tries * std::log1p(-p_high)), 1e-12);
  EXPECT_NE(draw(f), v);  // each evaluation estimates T from new trial samplings
}

TEST(RandomSample, TheWeightsGradientIsZero) {
  const Parameter w = parameter(NDArrayView::from_vector<float>({4}, {1, 2, 3, 4}));
  const Function f = reduce_sum(plus(random_sample_inclusion_frequency(w, 2, true, 1), w));
  EXPECT_EQ(values(f.grad({}, {w}).at(w)), std::vector<double>(4, 1.0));
  const Function g = reduce_sum(random_sample(w, 3, false, 1));
  EXPECT_EQ(values(g.grad({}, {w}).at(w)), std::vector<double>(4, 0.0));
}

TEST(RandomSample, RejectsBadArgumentsNamingTheFunction) {
  const Constant w = weights({1, 2, 3});
  expect_argument_error(
      [&] { random_sample(w, 4, false); },
      {"random_sample", "num_samples (4) must be below the number of classes (3)"});
  expect_argument_error([&] { random_sample_inclusion_frequency(w, 3, false); },
                        {"random_sample_inclusion_frequency", "num_samples (3)"});
  EXPECT_NO_THROW(random_sample(w, 4, true));
  expect_argument_error([&] { random_sample(w, 0, true); },
                        {"random_sample", "num_samples must be at least 1"});
  const Constant matrix = constant(NDArrayView::from_vector<float>({2, 2}, {1, 2, 3, 4}));
  expect_argument_error([&] { random_sample(matrix, 1, true); },
                        {"random_sample", "weights must be a vector", "[2,2]"});
  expect_argument_error([&] { random_sample_inclusion_frequency(input_variable({3}), 1, true); },
                        {"random_sample_inclusion_frequency", "without dynamic axes"});
  // The weights' values are checked when they are known, at evaluation.
  expect_argument_error(
      [&] {
        draw(random_sample(weights({1, -1, 2}), 1, true));
      },
      {"random_sample", "weights has a negative weight -1 at class 1"});
  expect_argument_error(
      [&] {
        draw(random_sample_inclusion_frequency(weights({0, 0}), 1, true));
      },
      {"random_sample_inclusion_frequency", "weights is all zeros"});
  expect_argument_error(
      [&] {
        draw(random_sample(weights({1, 0, 0, 2}), 3, false));
      },
      {"random_sample", "cannot draw 3 distinct classes", "2 nonzero weights"});
}

}  // namespace
}  // namespace loom
