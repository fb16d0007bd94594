#include <gtest/gtest.h>

#include <cmath>

#include "loom/layers/dropout.h"
#include "loom/layers/normalization.h"
#include "loom/ops/ops_test_util.h"

namespace loom {
namespace {

// The constant of f's graph with the given name.
Constant constant_named(const Function& f, const std::string& name) {
  for (const Constant& c : f.constants())
    if (c.name() == name) return c;
  ADD_FAILURE() << "no constant " << name;
  return {};
}

TEST(BatchNormalizationLayer, SpatialInfersPerChannelStatisticsAndTrains) {
  Variable x = input_variable({3, 4, 4}, f64("x"));
  Function layer = BatchNormalization({.map_rank = 1, .init_scale = 2, .dtype = kF64});
  Function f = layer(x);
  EXPECT_EQ(f.to_string(), "BatchNormalization(x: Tensor[3,4,4]) -> Tensor[3,4,4]");
  for (const Parameter& p : f.parameters()) EXPECT_EQ(p.shape(), NDShape{3}) << p.name();
  const Constant mean = constant_named(f, "aggregate_mean");
  const Constant count = constant_named(f, "aggregate_count");
  EXPECT_EQ(mean.shape(), NDShape{3});
  EXPECT_EQ(mean.value().to_vector<double>(), std::vector<double>(3, 0.0));

  const Value v = random_batch({3, 4, 4}, 5, kF64, 1, -1, 3);
  const auto y = values(f.forward({{x, v}}).second.at(f.output()));
  // Normalized by the minibatch, then scaled by 2: each channel's mean 0 and variance ~4.
  for (size_t c = 0; c < 3; ++c) {
    double s = 0, q = 0;
    for (size_t n = 0; n < 5; ++n)
      for (size_t i = 0; i < 16; ++i) s += y[(n * 3 + c) * 16 + i];
    for (size_t n = 0; n < 5; ++n)
      for (size_t i = 0; i < 16; ++i) q += std::pow(y[(n * 3 + c) * 16 + i], 2);
    EXPECT_NEAR(s / 80, 0, 1e-12);
    EXPECT_NEAR(q / 80, 4, 1e-3);
  }
  EXPECT_EQ(count.value().to_vector<double>(), std::vector<double>{5});
  // Inference with the running statistics of that one minibatch: the same mean, the
  // variance unbiased (80 / 79), so the outputs shrink by sqrt(79 / 80).
  const auto z = values(f.eval_one({{x, v}}));
  for (size_t i = 0; i < z.size(); ++i) EXPECT_NEAR(z[i], y[i] * std::sqrt(79.0 / 80), 1e-4);
}

TEST(BatchNormalizationLayer, PerElementAndSharedAcrossCalls) {
  Variable x = input_variable({2, 3}, f64("x"));
  Function layer = BatchNormalization({.dtype = kF64});
  Function a = layer(x), b = layer(x);
  EXPECT_EQ(constant_named(a, "aggregate_variance").shape(), (NDShape{2, 3}));
  EXPECT_EQ(constant_named(a, "aggregate_mean").uid(), constant_named(b, "aggregate_mean").uid());
  a.forward({{x, random_batch({2, 3}, 4, kF64, 2)}});
  EXPECT_EQ(constant_named(b, "aggregate_count").value().to_vector<double>(),
            std::vector<double>{4});
  EXPECT_THROW(BatchNormalization({.map_rank = 2}), ArgumentError);
}

TEST(LayerNormalizationLayer, InfersSampleShapedParameters) {
  Variable x = input_variable({2, 3}, f64("x"));
  Function f = LayerNormalization({.initial_scale = 1, .initial_bias = 0.5, .dtype = kF64})(x);
  EXPECT_EQ(f.to_string(), "LayerNormalization(x: Tensor[2,3]) -> Tensor[2,3]");
  for (const Parameter& p : f.parameters()) EXPECT_EQ(p.shape(), (NDShape{2, 3}));
  const auto y = values(f.eval_one({{x, random_batch({2, 3}, 3, kF64, 3)}}));
  for (size_t n = 0; n < 3; ++n) {
    double s = 0;
    for (size_t i = 0; i < 6; ++i) s += y[n * 6 + i];
    EXPECT_NEAR(s / 6, 0.5, 1e-12);
  }
}

TEST(DropoutLayer, RateOrKeepProbability) {
  Variable x = input_variable({1000});
  const Value ones = Value::create_batch<float>({1000}, std::vector<float>(10000, 1.0f));
  for (Function layer : {Dropout(0.25), Dropout({.keep_prob = 0.75, .seed = 3})}) {
    Function f = layer(x);
    EXPECT_EQ(f.to_string(), "Dropout(Tensor[1000]) -> Tensor[1000]");
    size_t zeros = 0;
    for (double v : values(f.forward({{x, ones}}).second.at(f.output()))) zeros += v == 0;
    EXPECT_NEAR(double(zeros) / 10000, 0.25, 0.02);
    EXPECT_EQ(values(f.eval_one({{x, ones}})), values(ones));
  }
  EXPECT_THROW(Dropout(DropoutOptions{}), ArgumentError);
  EXPECT_THROW(Dropout({.dropout_rate = 0.5, .keep_prob = 0.5}), ArgumentError);
  EXPECT_THROW(Dropout({.keep_prob = 0.0}), ArgumentError);
}

}  // namespace
}  // namespace loom
