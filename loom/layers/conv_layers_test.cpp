// Convolution and pooling layers: shapes and parameters of seed 002's convnet,
// default_options, and values against the ops they wrap.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>

#include <filesystem>

#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/pooling.h"
#include "loom/layers/sequential.h"
#include "loom/ops/convolution.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/pooling.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

std::vector<NDShape> shapes(const std::vector<Parameter>& ps) {
  std::vector<NDShape> out;
  for (const Parameter& p : ps) out.push_back(p.shape());
  return out;
}

// Seed 002's feature extractor, with default_options(activation=relu, pad=False): the
// tutorial feeds [28, 28] images (reduction_rank 0); a [1, 28, 28] input takes reduction_rank 1.
Function seed_002_features(size_t reduction_rank) {
  auto scope = default_options({.activation = relu, .pad = false});
  return Sequential({Convolution2D({5, 5}, 32, {.pad = true, .reduction_rank = reduction_rank}),
                     MaxPooling({3, 3}, {.strides = {2, 2}}), Convolution2D({3, 3}, 48),
                     MaxPooling({3, 3}, {.strides = {2, 2}}), Convolution2D({3, 3}, 64)});
}

TEST(ConvLayers, Seed002ConvnetShapes) {
  for (const NDShape& input : {NDShape{1, 28, 28}, NDShape{28, 28}}) {
    SCOPED_TRACE(input.to_string());
    Function features = seed_002_features(input.rank() == 3 ? 1 : 0);
    Variable x = input_variable(input);
    Function y = features(x);
    EXPECT_EQ(y.output().shape(), (NDShape{64, 3, 3}));
    // The kernels' input channels are inferred (the emulated one of reduction_rank 0 is 1).
    EXPECT_EQ(
        shapes(features.parameters()),
        (std::vector<NDShape>{
            {32, 1, 5, 5}, {32, 1, 1}, {48, 32, 3, 3}, {48, 1, 1}, {64, 48, 3, 3}, {64, 1, 1}}));
    Function model = Sequential({features, Dense(96, {.activation = relu}), Dense(10)});
    EXPECT_EQ(model(x).output().shape(), (NDShape{10}));
    // Training-sized minibatch through the float32 (oneDNN) path: finite outputs.
    const auto out = model(x).eval_one({{x, random_batch(input, 4, DataType::Float32, 5)}});
    EXPECT_EQ(out.data().shape(), (NDShape{4, 10}));
  }
}

TEST(ConvLayers, HonourDefaultOptionsAndExplicitOptions) {
  Variable x = input_variable({2, 8, 8});
  {
    auto scope = default_options({.bias = false, .pad = true});
    Function c = Convolution2D({3, 3}, 4);
    EXPECT_EQ(c(x).output().shape(), (NDShape{4, 8, 8}));
    EXPECT_EQ(c.parameters().size(), 1u);  // no bias
    EXPECT_EQ(MaxPooling({2, 2}, {.strides = {2}})(x).output().shape(), (NDShape{2, 4, 4}));
    // Explicit options win over default_options.
    EXPECT_EQ(Convolution2D({3, 3}, 4, {.pad = false, .bias = true})(x).output().shape(),
              (NDShape{4, 6, 6}));
    EXPECT_EQ(AveragePooling({3, 3}, {.pad = PadFlags{false, true}})(x).output().shape(),
              (NDShape{2, 6, 8}));
  }
  // CNTK's defaults: no padding, a bias, no activation.
  Function c = Convolution2D({3, 3}, 4, {.strides = {2, 1}});
  EXPECT_EQ(c(x).output().shape(), (NDShape{4, 3, 6}));
  EXPECT_EQ(shapes(c.parameters()), (std::vector<NDShape>{{4, 2, 3, 3}, {4, 1, 1}}));
  EXPECT_EQ(Convolution1D({3}, 5)(input_variable({2, 9})).output().shape(), (NDShape{5, 7}));
  EXPECT_EQ(Convolution3D({2, 2, 2}, 3)(input_variable({1, 4, 4, 4})).output().shape(),
            (NDShape{3, 3, 3, 3}));
  EXPECT_EQ(Convolution({3, 3}, 6, {.groups = 2})(x).parameters()[0].shape(),
            (NDShape{6, 1, 3, 3}));
  EXPECT_THROW(Convolution2D({3}, 4), ArgumentError);
  EXPECT_THROW(Convolution1D({3, 3}, 4), ArgumentError);
  EXPECT_EQ(GlobalMaxPooling()(x).output().shape(), (NDShape{2, 1, 1}));
  EXPECT_EQ(GlobalAveragePooling()(x).output().shape(), (NDShape{2, 1, 1}));
  Function t = ConvolutionTranspose({3, 3}, 5, {.strides = {2}});
  EXPECT_EQ(t(x).output().shape(), (NDShape{5, 17, 17}));
  EXPECT_EQ(shapes(t.parameters()), (std::vector<NDShape>{{2, 5, 3, 3}, {5, 1, 1}}));
}

TEST(ConvLayers, ComputeActivationOfConvolutionPlusBias) {
  Function c =
      Convolution2D({3, 3}, 4, {.activation = relu, .pad = true, .dtype = DataType::Float64});
  Variable x = input_variable({2, 5, 5}, {.dtype = DataType::Float64});
  Function y = c(x);
  auto ps = c.parameters();
  ps[1].set_value(random_array({4, 1, 1}, DataType::Float64, 3));
  Function reference = relu(plus(convolution(ps[0], x, {.auto_padding = {true}}), ps[1]));
  const Value in = random_batch({2, 5, 5}, 3, DataType::Float64, 4);
  gradient_check_detail::expect_all_near(y.eval_one({{x, in}}).data().to_vector<double>(),
                                         reference.eval_one({{x, in}}).data().to_vector<double>(),
                                         1e-12, "layer output");
  expect_gradients_match(y, {{x, in}}, {x, ps[0], ps[1]});
}

TEST(ConvLayers, KernelFansAreCntks) {
  // W [48, 32, 3, 3]: fan_in = 32 * 9, fan_out = 48 * 9 (CNTK's output_rank -1, filter_rank 2,
  // PyTorch's xavier_uniform_), so glorot_uniform draws within sqrt(6 / (288 + 432)).
  set_fixed_random_seed(3);
  Variable x = input_variable({32, 13, 13});
  Function conv = Convolution2D({3, 3}, 48, {.bias = false})(x);
  ASSERT_EQ(conv.parameters().size(), 1u);
  auto w = conv.parameters()[0].value().to_vector<float>();
  ASSERT_EQ(w.size(), 48u * 32 * 9);
  const double limit = std::sqrt(6.0 / (288 + 432));
  double max_abs = 0, sq = 0;
  for (float v : w) {
    max_abs = std::max(max_abs, double(std::abs(v)));
    sq += double(v) * v;
  }
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.99 * limit);
  EXPECT_NEAR(sq / double(w.size()), limit * limit / 3, 0.05 * limit * limit / 3);
}

TEST(ConvLayers, Seed002FeaturesSurviveSaveAndLoad) {
  Variable x = input_variable({28, 28});
  Function f = seed_002_features(0)(x);
  const auto path = std::filesystem::path(::testing::TempDir()) /
                    ("loom_conv_layers_" + std::to_string(getpid()) + ".model");
  save_model(f, path.string());
  Function g = load_model(path.string());
  std::filesystem::remove(path);
  const Value in = random_batch({28, 28}, 2, DataType::Float32, 6, 0, 1);
  gradient_check_detail::expect_all_near(
      g.eval_one({{g.arguments().at(0), in}}).data().to_vector<double>(),
      f.eval_one({{x, in}}).data().to_vector<double>(), 0, "loaded model");
}

}  // namespace
}  // namespace loom
