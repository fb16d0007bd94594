// The layers of CNTK's cntk.layers added for issue 29: Activation, Label, ResNetBlock,
// SequentialClique, ForwardDeclaration, PastValueWindow, MaxUnpooling, the convolutions
// without num_filters or along the sequence, ConvolutionTranspose1D/2D/3D, AttentionModel.
// Numbers against computations written out here.
#include <gtest/gtest.h>

#include <cmath>

#include "loom/layers/attention.h"
#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/normalization.h"
#include "loom/layers/pooling.h"
#include "loom/layers/recurrent.h"
#include "loom/layers/sequential.h"
#include "loom/ops/ops.h"
#include "loom/ops/ops_test_util.h"

namespace loom {
namespace {

using Vec = std::vector<double>;

Vec eval(const Function& f, const Variable& x, const Value& v) {
  return values(f.eval_one({{x, v}}));
}

TEST(ActivationLayer, AppliesTheActivationOrTheDefault) {
  Variable x = input_variable({3}, f64());
  const Value v = Value::create_batch<double>({3}, {-1, 0, 2});
  Function a = ActivationLayer(relu)(x);
  EXPECT_EQ(a.to_string(), "Activation(Tensor[3]) -> Tensor[3]");
  EXPECT_EQ(eval(a, x, v), (Vec{0, 0, 2}));
  EXPECT_EQ(eval(ActivationLayer()(x), x, v), (Vec{-1, 0, 2}));  // identity
  auto scope = default_options({.activation = tanh});
  const Vec t = eval(ActivationLayer()(x), x, v);
  EXPECT_NEAR(t[0], std::tanh(-1.0), 1e-12);
  EXPECT_EQ(eval(ActivationLayer(None)(x), x, v), (Vec{-1, 0, 2}));
}

TEST(Label, NamesTheValue) {
  Variable x = input_variable({2}, f64());
  Function y = Label("hidden")(x);
  EXPECT_EQ(y.output().owner().name(), "hidden");
  EXPECT_EQ(y.output().owner().op_name(), "Pass");  // CNTK's alias is a Pass op
  EXPECT_EQ(eval(y, x, Value::create_batch<double>({2}, {3, 4})), (Vec{3, 4}));
}

TEST(ResNetBlock, AddsTheInput) {
  Variable x = input_variable({2}, f64());
  Function d = Dense(2, {.activation = None, .dtype = kF64});
  Function r = ResNetBlock(d)(x);
  d.parameters()[0].set_value(NDArrayView::from_vector<double>({2, 2}, {1, 2, 3, 4}));
  d.parameters()[1].set_value(NDArrayView::from_vector<double>({2}, {0.5, -0.5}));
  // x W + b + x for x = (1, 2): (1 + 6 + 0.5 + 1, 2 + 8 - 0.5 + 2)
  EXPECT_EQ(eval(r, x, Value::create_batch<double>({2}, {1, 2})), (Vec{8.5, 11.5}));
  EXPECT_EQ(ResNetBlock(d, "res")(x).output().owner().name(), "res");
  expect_argument_error([] { ResNetBlock(Function()); }, {"ResNetBlock", "no function"});
}

TEST(SequentialClique, EachFunctionGetsTheSumOfAllBefore) {
  Variable x = input_variable({2}, f64());
  Function f = SequentialClique({Function(abs(placeholder("a"))), Function(sqrt(placeholder("b"))),
                                 Function(square(placeholder("c")))})(x);
  // x=8: 8 -> 16 -> sqrt 4 -> 20 -> 400; x=2: 2 -> 4 -> 2 -> 6 -> 36
  EXPECT_EQ(eval(f, x, Value::create_batch<double>({2}, {2, 8})), (Vec{36, 400}));
  expect_argument_error([] { SequentialClique({}); }, {"SequentialClique"});
}

TEST(ForwardDeclaration, ClosesALoopThatCountsTheSteps) {
  Variable x = sequence::input_variable({2});
  Variable fwd = ForwardDeclaration();
  EXPECT_EQ(fwd.name(), "forward_declaration");
  Variable out = plus(sequence::past_value(fwd, constant(0.0)), sequence::broadcast_as(1.0, x));
  resolve_to(fwd, out);
  Function length = sequence::last(out);
  const Value v = Value::create_sequences<float>({2}, {{0, 1, 2, 3, 4, 5}, {6, 7}});
  EXPECT_EQ(eval(length, x, v), (Vec{3, 1}));
  expect_argument_error([&] { resolve_to(out, out); }, {"resolve_to", "placeholder"});
}

TEST(PastValueWindow, LastStepsNewestFirstWithValidity) {
  Variable x = sequence::input_variable({2});
  Function w = PastValueWindow(4, -2)(x);
  ASSERT_EQ(w.outputs().size(), 2u);
  EXPECT_EQ(w.outputs()[0].shape(), (NDShape{4, 2}));
  EXPECT_EQ(w.outputs()[1].shape(), (NDShape{4, 1}));
  EXPECT_FALSE(w.outputs()[0].has_sequence_axis());
  const Value v = Value::create_sequences<float>({2}, {{0, 1, 2, 3, 4, 5}});
  ValueMap r = w.eval({{x, v}}, w.outputs());
  EXPECT_EQ(values(r.at(w.outputs()[0])), (Vec{4, 5, 2, 3, 0, 1, 0, 0}));
  EXPECT_EQ(values(r.at(w.outputs()[1])), (Vec{1, 1, 1, 0}));
  Function back = PastValueWindow(2, -2, {.go_backwards = true})(x);
  EXPECT_EQ(values(back.eval({{x, v}}, back.outputs()).at(back.outputs()[0])), (Vec{0, 1, 2, 3}));
  expect_argument_error([] { PastValueWindow(0, -2); }, {"window_size"});
}

TEST(MaxUnpooling, PutsTheMaximaBack) {
  Variable x = input_variable({1, 2, 4}, f64());
  Function pool = MaxPooling({2, 2}, {.strides = {2, 2}});
  Function unpool = MaxUnpooling({2, 2}, {.strides = {2, 2}});
  Function y = unpool(std::vector<Variable>{pool(x), x});
  EXPECT_EQ(y.output().shape(), (NDShape{1, 2, 4}));
  const Value v = Value::create_batch<double>({1, 2, 4}, {1, 5, 2, 0, 3, 4, 7, 6});
  EXPECT_EQ(eval(y, x, v), (Vec{0, 5, 0, 0, 0, 0, 7, 0}));
}

TEST(Convolution, WithoutNumFiltersHasNoChannelAxis) {
  Variable x = input_variable({2, 5, 5});
  Function c = Convolution({3, 3});
  Function y = c(x);
  EXPECT_EQ(y.output().shape(), (NDShape{3, 3}));
  EXPECT_EQ(c.parameter("W").shape(), (NDShape{1, 2, 3, 3}));
  EXPECT_EQ(c.parameter("b").shape(), (NDShape{1, 1, 1}));
  EXPECT_EQ(Convolution({3, 3}, {}, {.pad = true})(x).output().shape(), (NDShape{5, 5}));
  expect_argument_error(
      [] {
        Convolution({3, 3}, 4, {.transpose_weight = true});
      },
      {"transpose_weight"});
  expect_argument_error([] { Convolution({3}, 0); }, {"num_filters"});
}

// out[t][o] = b[o] + sum_{k, c} W[o, c, k] x[t + k - lpad][c] over the window's valid steps.
Vec sequential_reference(const Vec& W, const Vec& b, const Vec& x, size_t T, size_t C, size_t O,
                         size_t fs, bool pad) {
  const int lpad = int(fs - 1) / 2;
  Vec out;
  const int first = pad ? 0 : lpad, last = pad ? int(T) : int(T) - int(fs - 1) + lpad;
  for (int t = first; t < last; ++t)
    for (size_t o = 0; o < O; ++o) {
      double s = b[o];
      for (size_t k = 0; k < fs; ++k) {
        const int u = t + int(k) - lpad;
        if (u < 0 || u >= int(T)) continue;
        for (size_t c = 0; c < C; ++c) s += W[(o * C + c) * fs + k] * x[size_t(u) * C + c];
      }
      out.push_back(s);
    }
  return out;
}

TEST(Convolution, SequentialConvolvesAlongTheSequence) {
  const size_t C = 2, O = 3, T = 5, fs = 3;
  Vec xs;
  for (size_t i = 0; i < T * C; ++i) xs.push_back(0.25 * double(i) - 1);
  std::vector<float> xf(xs.begin(), xs.end());
  const Value v = Value::create_sequences<float>({C}, {xf});
  for (bool pad : {false, true})
    for (bool layer : {false, true}) {
      Variable x = sequence::input_variable({C});
      ConvolutionLayerOptions o{.sequential = true, .pad = pad};
      Function c = layer ? SequentialConvolution({fs}, O, o) : Convolution({fs}, O, o);
      Function y = c(x);
      EXPECT_EQ(y.output().shape(), (NDShape{O}));
      EXPECT_TRUE(y.output().has_sequence_axis());
      EXPECT_EQ(c.parameter("W").shape(), (NDShape{O, C, fs}));
      EXPECT_EQ(c.parameter("b").shape(), layer ? NDShape{O} : (NDShape{O, 1}));
      Vec W;
      for (size_t i = 0; i < O * C * fs; ++i) W.push_back(std::sin(double(i)));
      for (double& w : W) w = double(float(w));
      c.parameter("W").set_value(
          NDArrayView::from_vector<float>({O, C, fs}, std::vector<float>(W.begin(), W.end())));
      c.parameter("b").set_value(
          NDArrayView::from_vector<float>(c.parameter("b").shape(), {0.1f, 0.2f, 0.3f}));
      const auto seqs = y.eval_one({{x, v}}).as_sequences<double>();
      ASSERT_EQ(seqs.size(), 1u);
      gradient_check_detail::expect_all_near(
          seqs[0], sequential_reference(W, {0.1f, 0.2f, 0.3f}, xs, T, C, O, fs, pad), 1e-5, "conv");
    }
}

TEST(Convolution, SequentialWithSpatialAxesAndScalarOutput) {
  Variable x = sequence::input_variable({1, 6});  // one channel, 6 wide, per step
  Function y = Convolution({2, 3}, {}, {.sequential = true, .pad = true})(x);
  EXPECT_EQ(y.output().shape(), (NDShape{6}));
  Variable bw = sequence::input_variable({6});  // reduction_rank 0
  EXPECT_EQ(SequentialConvolution({3, 3}, 4, {.reduction_rank = 0})(bw).output().shape(),
            (NDShape{4, 4}));
  expect_argument_error([] { SequentialConvolution({3, 3}, 4, {.strides = {2, 1}}); }, {"stride"});
}

TEST(ConvolutionTranspose, NDVariantsCheckTheFilterRank) {
  Variable x = input_variable({2, 4, 4});
  Function t = ConvolutionTranspose2D({3, 3}, 5, {.pad = true});
  EXPECT_EQ(t(x).output().shape(), (NDShape{5, 4, 4}));
  EXPECT_EQ(t.parameter("W").shape(), (NDShape{2, 5, 3, 3}));
  expect_argument_error(
      [] {
        ConvolutionTranspose1D({3, 3}, 5);
      },
      {"ConvolutionTranspose1D", "1 axes"});
  expect_argument_error([] { ConvolutionTranspose3D({3, 3}, 5); }, {"ConvolutionTranspose3D"});
}

TEST(BatchNormalization, AcceptsCntksEngineAndRegularizationFlags) {
  Variable x = input_variable({3});
  Function bn = BatchNormalization({.use_cntk_engine = true, .disable_regularization = true});
  EXPECT_EQ(bn(x).output().shape(), (NDShape{3}));
}

TEST(AttentionModel, ParametersAndShapes) {
  Variable enc = sequence::input_variable({4}, Axis::dynamic_axis_named("enc"));
  Variable dec = sequence::input_variable({5}, Axis::dynamic_axis_named("dec"));
  Function att = AttentionModel(6);
  Function y = att(std::vector<Variable>{enc, dec});
  EXPECT_EQ(y.output().shape(), (NDShape{4}));
  EXPECT_EQ(y.output().dynamic_axes(), dec.dynamic_axes());
  // 3 projections' W and 4 stabilizers' alpha
  EXPECT_EQ(y.parameters().size(), 7u);
  EXPECT_EQ(AttentionModel(6, {.enable_self_stabilization = false})(std::vector<Variable>{enc, dec})
                .parameters()
                .size(),
            3u);
  expect_argument_error([] { AttentionModel(6, {.attention_span = 3}); }, {"attention_axis"});
  expect_argument_error([] { AttentionModel(6, {.attention_span = 0, .attention_axis = -2}); },
                        {"attention_span"});
}

}  // namespace
}  // namespace loom
