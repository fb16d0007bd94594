#include "loom/ops/convolution.h"

#include <gtest/gtest.h>

#include "loom/graph/executor.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/ops_test_util.h"
#include "loom/ops/pooling.h"

namespace loom {
namespace {

constexpr size_t kInf = NDShape::kInferred;

// An array of the given values in data type dt.
NDArrayView array(const NDShape& shape, const std::vector<double>& v, DataType dt) {
  return dispatch(dt, [&](auto zero) {
    using T = decltype(zero);
    return NDArrayView::from_vector<T>(shape, std::vector<T>(v.begin(), v.end()));
  });
}

NDShape out_shape(const Function& f) {
  return f.output().shape();
}

TEST(Convolution, OutputShapes) {
  Variable x = input_variable({1, 28, 28});
  // The seed-002 convnet's first layer: 5x5, padded, 32 filters.
  Function c = convolution(parameter({32, 1, 5, 5}), x);
  EXPECT_EQ(c.op_name(), "Convolution");
  EXPECT_EQ(out_shape(c), (NDShape{32, 28, 28}));
  EXPECT_EQ(out_shape(convolution(parameter({32, 1, 5, 5}), x, {.auto_padding = {false}})),
            (NDShape{32, 24, 24}));
  // Automatic padding gives ceil(input / stride); per-axis options.
  EXPECT_EQ(out_shape(convolution(parameter({8, 1, 3, 3}), x, {.strides = {2, 3}})),
            (NDShape{8, 14, 10}));
  EXPECT_EQ(out_shape(convolution(parameter({8, 1, 3, 3}), x,
                                  {.strides = {1, 2, 3}, .auto_padding = {false, false, true}})),
            (NDShape{8, 13, 10}));
  // Explicit padding and dilation (a dilated 3-tap kernel spans 5).
  EXPECT_EQ(out_shape(convolution(parameter({4, 1, 3, 3}), x,
                                  {.auto_padding = {false}, .lower_pad = {1}, .upper_pad = {2}})),
            (NDShape{4, 29, 29}));
  EXPECT_EQ(out_shape(convolution(parameter({4, 1, 3, 3}), x,
                                  {.auto_padding = {false}, .dilation = {2}})),
            (NDShape{4, 24, 24}));
  // reduction_rank 0: no channel axis, W [O, kernel...].
  Variable bw = input_variable({28, 28});
  EXPECT_EQ(out_shape(convolution(parameter({6, 5, 5}), bw, {.reduction_rank = 0})),
            (NDShape{6, 28, 28}));
  // ... or CNTK's layer shape [O, 1, kernel...], whose 1 may be inferred.
  Parameter w1 = parameter({6, kInf, 5, 5});
  EXPECT_EQ(out_shape(convolution(w1, bw, {.reduction_rank = 0})), (NDShape{6, 28, 28}));
  EXPECT_EQ(w1.shape(), (NDShape{6, 1, 5, 5}));
  // Groups: W has C / groups input channels.
  Variable x6 = input_variable({6, 5, 5});
  EXPECT_EQ(out_shape(convolution(parameter({4, 3, 3, 3}), x6, {.groups = 2})), (NDShape{4, 5, 5}));
  // 1D and 3D.
  EXPECT_EQ(out_shape(convolution(parameter({5, 2, 3}), input_variable({2, 10}),
                                  {.strides = {2}, .auto_padding = {false}})),
            (NDShape{5, 4}));
  EXPECT_EQ(out_shape(convolution(parameter({3, 2, 2, 3, 3}), input_variable({2, 4, 6, 6}))),
            (NDShape{3, 4, 6, 6}));
  // Sequences keep their dynamic axes.
  Variable s = sequence::input_variable({2, 5, 5});
  EXPECT_EQ(Variable(convolution(parameter({3, 2, 3, 3}), s)).type_string(),
            "Sequence[Tensor[3,5,5]]");
}

// CNTK's rules: a kernel of the operand's rank has one output channel (a transposed one's
// [C, kernel...] too), and per-axis options shorter than the spatial axes are the trailing
// axes', the leading ones repeating the first value.
TEST(Convolution, KernelsWithoutOutputChannelsAndShortOptions) {
  Variable x = input_variable({2, 9, 8, 7});
  EXPECT_EQ(Variable(convolution(parameter({2, 3, 3, 3}), x)).shape(), (NDShape{1, 9, 8, 7}));
  EXPECT_EQ(Variable(convolution_transpose(parameter({2, 3, 3, 3}), x)).shape(),
            (NDShape{1, 9, 8, 7}));
  EXPECT_EQ(Variable(convolution(parameter({3, 3}), input_variable({5, 6}),
                                 {.auto_padding = {false}, .reduction_rank = 0}))
                .shape(),
            (NDShape{1, 3, 4}));
  EXPECT_EQ(Variable(convolution(parameter({4, 2, 3, 3, 3}), x,
                                 {.strides = {1, 2}, .auto_padding = {true, false}}))
                .shape(),
            (NDShape{4, 9, 8, 3}));
}

TEST(Convolution, InfersTheKernelsInputChannels) {
  Parameter W = parameter({12, kInf, 3, 3}, glorot_uniform(), kF64);
  Variable x = input_variable({6, 8, 8}, f64());
  EXPECT_EQ(out_shape(convolution(W, x, {.groups = 3})), (NDShape{12, 8, 8}));
  EXPECT_EQ(W.shape(), (NDShape{12, 2, 3, 3}));
  EXPECT_EQ(W.value().shape(), (NDShape{12, 2, 3, 3}));
  // A mismatch found while inferring leaves the parameter's shape open.
  Parameter open = parameter({16, kInf, 3, 3}, glorot_uniform(), kF64);
  EXPECT_THROW(convolution(open, x, {.groups = 4}), ShapeError);
  EXPECT_EQ(open.shape(), (NDShape{16, kInf, 3, 3}));
  Parameter Wt = parameter({kInf, 5, 2, 2}, glorot_uniform(), kF64);
  EXPECT_EQ(out_shape(convolution_transpose(Wt, x, {.strides = {2}, .auto_padding = {false}})),
            (NDShape{5, 16, 16}));
  EXPECT_EQ(Wt.shape(), (NDShape{6, 5, 2, 2}));
}

TEST(Convolution, RejectsBadShapesAndOptions) {
  Variable x = input_variable({3, 8, 8});
  expect_shape_error(
      [&] {
        convolution(parameter({4, 2, 3, 3}), x);
      },
      {"Convolution", "[4,2,3,3]", "3 input channels", "[3,8,8]"});
  // A kernel of the operand's rank has no output-channel axis (CNTK's): [C, kernel...].
  expect_shape_error(
      [&] {
        convolution(parameter({4, 3, 3}), x);
      },
      {"Convolution", "[1,4,3,3]", "3 input channels", "[3,8,8]"});
  expect_shape_error(
      [&] {
        convolution(parameter({4, 3, 3}), input_variable({3, 8, 8, 8}));
      },
      {"Convolution", "[3,8,8,8]", "must have 2 axes"});
  expect_shape_error(
      [&] {
        convolution(parameter({4, 1, 3, 3}), x, {.groups = 2});
      },
      {"groups=2", "3 channels"});
  expect_shape_error(
      [&] {
        convolution(parameter({4, 3, 3, 3}), x, {.strides = {1, 2, 3, 4}});
      },
      {"strides has 4 values for 2 spatial axes"});
  expect_shape_error(
      [&] {
        convolution(parameter({4, 3, 9, 3}), x, {.auto_padding = {false}});
      },
      {"input extent of 8", "window extent 9"});
  expect_shape_error(
      [&] {
        convolution(parameter({4, 3, 3, 3}), x, {.sharing = {false}});
      },
      {"sharing=False"});
  expect_shape_error(
      [&] {
        convolution(parameter({4, 3, 3, 3}, glorot_uniform(), kF64), x);
      },
      {"Convolution", "types"});
  expect_shape_error(
      [&] {
        convolution(parameter({4, 3, 1, 1, 1, 1}), input_variable({3, 2, 2, 2, 2}));
      },
      {"1 to 3 spatial axes"});
  expect_shape_error(
      [&] {
        convolution_transpose(parameter({4, 2, 3, 3}), x);
      },
      {"ConvolutionTranspose", "operand's 3 channels"});
  expect_shape_error(
      [&] {
        convolution_transpose(parameter({3, 2, 3, 3}), x,
                              {.strides = {2}, .output_shape = NDShape{20, 20}});
      },
      {"output extent of 20", "operand's extent 8"});
  EXPECT_THROW(convolution(parameter({4, 3, 3, 3}), x, {.reduction_rank = 2}), ArgumentError);
}

// Values where CNTK's centred automatic padding shows: an even window puts the extra padding
// above, and a stride starts the windows at extra / 2.
TEST(Convolution, AutomaticPaddingFollowsCntk) {
  for (DataType dt : {kF32, kF64}) {
    Variable x = input_variable({1, 5}, {.dtype = dt});
    const Value v = Value(array({1, 1, 5}, {1, 2, 3, 4, 5}, dt), false);
    // Kernel 4 of ones: windows cover [i - 1, i + 2].
    Function four = convolution(constant(array({1, 1, 4}, {1, 1, 1, 1}, dt)), x);
    expect_all_near(values(four.eval_one({{x, v}})), {6, 10, 14, 12, 9}, 1e-6, "kernel 4");
    // Kernel 3, stride 2, on 6 elements: 3 outputs, windows at -1, 1, 3.
    Variable x6 = input_variable({1, 6}, {.dtype = dt});
    Function three = convolution(constant(array({1, 1, 3}, {1, 1, 1}, dt)), x6, {.strides = {2}});
    const Value v6 = Value(array({1, 1, 6}, {1, 2, 3, 4, 5, 6}, dt), false);
    expect_all_near(values(three.eval_one({{x6, v6}})), {3, 9, 15}, 1e-6, "stride 2");
  }
}

struct ConvCase {
  std::string name;
  NDShape w, x;
  ConvolutionOptions options;
};

std::vector<ConvCase> conv_cases() {
  return {
      {"same", {3, 2, 3, 3}, {2, 5, 4}, {}},
      {"even_kernel_strided", {2, 2, 4, 2}, {2, 7, 6}, {.strides = {2, 3}}},
      {"valid_dilated", {2, 1, 2, 3}, {1, 6, 7}, {.auto_padding = {false}, .dilation = {2, 1}}},
      {"explicit_pads",
       {2, 2, 3, 3},
       {2, 4, 5},
       {.auto_padding = {false}, .lower_pad = {1, 0}, .upper_pad = {2, 1}}},
      {"groups", {4, 2, 3, 3}, {4, 4, 4}, {.groups = 2}},
      {"reduction_rank_0", {3, 3, 3}, {5, 5}, {.reduction_rank = 0}},
      {"reduction_rank_0_layer_kernel", {3, 1, 3, 3}, {5, 5}, {.reduction_rank = 0}},
      {"1d", {3, 2, 3}, {2, 9}, {.strides = {2}}},
      {"3d", {2, 2, 2, 3, 2}, {2, 3, 4, 3}, {.strides = {1, 2, 1}}},
      {"negative_pad", {2, 2, 1, 3}, {2, 8, 5}, {.strides = {4, 1}}},
  };
}

TEST(Convolution, GradientsMatchFiniteDifferences) {
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    Parameter W = parameter(random_array(c.w, kF64, 1), "W");
    Variable x = input_variable(c.x, f64("x"));
    expect_gradients_match(convolution(W, x, c.options), {{x, random_batch(c.x, 2, kF64, 2)}},
                           {x, W});
  }
  // Over sequences (the rows of all steps form the batch).
  Parameter W = parameter(random_array({2, 2, 3, 3}, kF64, 3), "W");
  Variable s = sequence::input_variable({2, 4, 4}, f64("s"));
  expect_gradients_match(convolution(W, s), {{s, random_sequences({2, 4, 4}, kLengths, kF64, 4)}},
                         {s, W});
}

TEST(Convolution, Float32MatchesFloat64) {
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    expect_float32_matches_float64([&](DataType dt) {
      Parameter W = parameter(random_array(c.w, dt, 5), "W");
      Variable x = input_variable(c.x, {.dtype = dt, .name = "x"});
      return OpCase{convolution(W, x, c.options), {{x, random_batch(c.x, 3, dt, 6)}}, {x, W}};
    });
  }
}

// The bias the Convolution layers pass: oneDNN adds it and takes its gradient in the weights'
// pass (or alone when the weights are not differentiated).
TEST(Convolution, BiasGradientsMatchFiniteDifferences) {
  Parameter W = parameter(random_array({3, 2, 3, 3}, kF64, 1), "W");
  Parameter b = parameter(random_array({3, 1, 1}, kF64, 2), "b");
  Variable x = input_variable({2, 5, 4}, f64("x"));
  const Function f = convolution(W, x, {.bias = b});
  const ValueMap args{{x, random_batch({2, 5, 4}, 2, kF64, 3)}};
  expect_gradients_match(f, args, {x, W, b});
  expect_gradients_match(f, args, {b});
  expect_gradients_match(f, args, {W});
  // A bias of shape (O) works too; a wrong one is refused.
  Parameter flat = parameter(random_array({3}, kF64, 4), "flat");
  expect_gradients_match(convolution(W, x, {.bias = flat}), args, {flat, W});
  expect_shape_error([&] { convolution(W, x, {.bias = parameter(random_array({4}, kF64, 5))}); },
                     {"bias", "one float64 per output channel: (3)"});
  expect_shape_error([&] { convolution(W, x, {.bias = parameter(random_array({3}, kF32, 5))}); },
                     {"bias"});
}

// Channels that fill whole blocks of 16 stay in oneDNN's blocked layout from one op to the next
// (convolution -> relu -> pooling -> convolution): the values and gradients must be those of the
// float64 graph, which always runs row-major.
TEST(Convolution, BlockedLayoutBetweenOneDnnOpsMatchesFloat64) {
  struct Net {
    Function out;
    Variable conv1, relu1, pool1, conv2;
  };
  auto net = [](DataType /*dt*/, const Variable& x, const std::vector<Parameter>& p) {
    Net n;
    n.conv1 = convolution(p[0], x, {.bias = p[1]});
    n.relu1 = relu(n.conv1);
    n.pool1 = pooling(n.relu1, PoolingType::Max, {2, 2}, {.strides = {2}});
    n.conv2 = convolution(p[2], n.pool1, {.bias = p[3]});
    n.out = relu(n.conv2);
    return n;
  };
  auto params = [](DataType dt) {
    return std::vector<Parameter>{parameter(random_array({16, 16, 3, 3}, dt, 1, -0.3, 0.3), "W1"),
                                  parameter(random_array({16, 1, 1}, dt, 2), "b1"),
                                  parameter(random_array({32, 16, 3, 3}, dt, 3, -0.3, 0.3), "W2"),
                                  parameter(random_array({32, 1, 1}, dt, 4), "b2")};
  };
  // Which values the executor keeps blocked: not the output, which the caller reads.
  {
    Variable x = input_variable({16, 6, 6}, {.dtype = kF32, .name = "x"});
    const auto p = params(kF32);
    const Net n = net(kF32, x, p);
    Executor ex({n.out}, {x, p[0], p[1], p[2], p[3]});
    ex.forward({{x, random_batch({16, 6, 6}, 3, kF32, 5)}}, true);
    EXPECT_TRUE(ex.tensor(n.conv1).blocked);
    // relu1 runs after the pooling, which reads conv1's output (docs/executor.md).
    EXPECT_THROW(ex.tensor(n.relu1), ArgumentError);
    EXPECT_TRUE(ex.tensor(n.pool1).blocked);
    EXPECT_FALSE(ex.tensor(n.conv2).blocked);  // its relu is the output
    EXPECT_FALSE(ex.tensor(n.out).blocked);
    EXPECT_THROW(ex.output_value(n.conv1), StateError);
  }
  for (std::vector<size_t> wrt : {std::vector<size_t>{0, 1, 2, 3, 4}, {2}, {1, 3}}) {
    expect_float32_matches_float64(
        [&](DataType dt) {
          Variable x = input_variable({16, 6, 6}, {.dtype = dt, .name = "x"});
          const auto p = params(dt);
          std::vector<Variable> all{x, p[0], p[1], p[2], p[3]}, chosen;
          for (size_t i : wrt) chosen.push_back(all[i]);
          return OpCase{net(dt, x, p).out, {{x, random_batch({16, 6, 6}, 3, dt, 5)}}, chosen};
        },
        1e-4);
  }
}

struct TransposeCase {
  std::string name;
  NDShape w, x;
  ConvolutionTransposeOptions options;
};

std::vector<TransposeCase> transpose_cases() {
  return {
      {"same", {2, 3, 3, 3}, {2, 4, 5}, {}},
      {"strided_valid", {2, 3, 3, 2}, {2, 3, 4}, {.strides = {2}, .auto_padding = {false}}},
      {"output_shape", {2, 1, 3, 3}, {2, 3, 3}, {.strides = {2}, .output_shape = NDShape{6, 5}}},
      {"1d_dilated", {3, 2, 2}, {3, 5}, {.auto_padding = {false}, .dilation = {2}}},
  };
}

// CNTK's convolution(sequential=True): each sequence's steps as the first spatial axis. Each
// sequence gives what the plain convolution gives on its steps [C, T, spatial...] alone, as many
// steps as its own length convolves to (where the windows start does not depend on the
// minibatch's longest here: stride 1 along the sequence, or no automatic padding there).
TEST(Convolution, SequentialConvolvesAlongTheSequence) {
  struct Case {
    const char* name;
    NDShape w, step;  // W [O, C, kT, k...]; a step [C, spatial...]
    ConvolutionOptions options;
  };
  const std::vector<size_t> lengths{5, 1, 3, 4};
  const std::vector<Case> cases{
      {"same", {3, 2, 3, 3}, {2, 4}, {}},
      {"valid along the sequence", {3, 2, 2, 3}, {2, 4}, {.auto_padding = {false, true}}},
      {"stride 2, valid", {2, 2, 3, 2}, {2, 5}, {.strides = {2, 1}, .auto_padding = {false}}},
      {"reduction rank 0", {2, 1, 3, 3}, {4}, {.reduction_rank = 0}},
      {"sequence axis only", {2, 3, 3}, {3}, {}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ConvolutionOptions sequential = c.options;
    sequential.sequential = true;
    const Parameter W = parameter(random_array(c.w, kF64, 7), "W");
    const Variable x = sequence::input_variable(c.step, f64("x"));
    const Value xs = random_sequences(c.step, lengths, kF64, 8);
    const Function f = convolution(W, x, sequential);
    const std::vector<std::vector<double>> got = f.eval_one({{x, xs}}).as_sequences<double>();
    ASSERT_EQ(got.size(), lengths.size());
    const std::vector<std::vector<double>> steps = xs.as_sequences<double>();
    const size_t per_step = c.step.total_size(), channels = c.options.reduction_rank;
    const size_t C = channels ? c.step[0] : 1, rest = per_step / C;
    for (size_t s = 0; s < lengths.size(); ++s) {
      // The sequence alone as one sample [C, T, spatial...] (a unit channel at reduction rank 0).
      const size_t T = lengths[s];
      std::vector<double> sample(per_step * T);
      for (size_t t = 0; t < T; ++t)
        for (size_t ch = 0; ch < C; ++ch)
          for (size_t i = 0; i < rest; ++i)
            sample[(ch * T + t) * rest + i] = steps[s][t * per_step + ch * rest + i];
      std::vector<size_t> dims{C, T};
      for (size_t k = channels; k < c.step.rank(); ++k) dims.push_back(c.step[k]);
      const Variable alone = input_variable(NDShape(dims), f64("alone"));
      ConvolutionOptions plain = c.options;
      plain.reduction_rank = 1;
      std::vector<double> want;
      const NDShape xshape(dims);
      if (!c.options.auto_padding[0] && T < c.w[2]) {  // too short for a window: no steps
        EXPECT_TRUE(got[s].empty()) << "sequence " << s;
        continue;
      }
      const Value y =
          convolution(W, alone, plain)
              .eval_one({{alone, Value(array(xshape.prepend(1), sample, kF64), false)}});
      // [O, T', out...] -> steps [O, out...]
      const NDShape ys = y.data().shape();  // [1, O, T', out...]
      const size_t O = ys[1], Tout = ys[2], out = ys.total_size() / (O * Tout);
      const std::vector<double> v = y.data().to_vector<double>();
      for (size_t t = 0; t < Tout; ++t)
        for (size_t o = 0; o < O; ++o)
          for (size_t i = 0; i < out; ++i) want.push_back(v[(o * Tout + t) * out + i]);
      gradient_check_detail::expect_all_near(got[s], want, 1e-12, "sequence " + std::to_string(s));
    }
    expect_gradients_match(f, {{x, xs}}, {x, W});
  }
  // The lengths alone (CNTK's ConvolutionSequenceShape): ceil(T / 2) with automatic padding,
  // floor((T - 3) / 2) + 1 without, none for the sequence of 1.
  const Variable x = sequence::input_variable({2}, f64("x"));
  const Value xs = random_sequences({2}, lengths, kF64, 9);
  const Parameter W = parameter(random_array({1, 2, 3}, kF64, 10), "W");
  EXPECT_EQ(convolution_sequence_lengths(W, x, {.strides = {2}})
                .eval_one({{x, xs}})
                .data()
                .to_vector<double>(),
            (std::vector<double>{3, 1, 2, 2}));
  EXPECT_EQ(convolution_sequence_lengths(W, x, {.strides = {2}, .auto_padding = {false}})
                .eval_one({{x, xs}})
                .data()
                .to_vector<double>(),
            (std::vector<double>{2, 0, 1, 1}));
  // A minibatch of empty sequences (one empty sequence evaluated alone): empty outputs, and no
  // gradient.
  for (const std::vector<size_t>& empty : {std::vector<size_t>{0}, std::vector<size_t>{0, 0}}) {
    const Parameter W3 = parameter(random_array({3, 2, 3, 3}, kF64, 11), "W3");
    const Variable x3 = sequence::input_variable({2, 4}, f64("x3"));
    const Function f = convolution(W3, x3, {.sequential = true});
    const Value xs3 = random_sequences({2, 4}, empty, kF64, 12);
    for (const auto& steps : f.eval_one({{x3, xs3}}).as_sequences<double>())
      EXPECT_TRUE(steps.empty());
    const auto grads = f.grad({{x3, xs3}}, {W3});
    for (double g : grads.at(W3).data().to_vector<double>()) EXPECT_EQ(g, 0.0);
  }
  // An operand without a sequence axis.
  EXPECT_THROW(convolution(W, input_variable({2}), {.sequential = true}), ShapeError);
}

TEST(ConvolutionTranspose, ShapesGradientsAndFloat32) {
  Variable x = input_variable({2, 4, 5});
  EXPECT_EQ(out_shape(convolution_transpose(parameter({2, 3, 3, 3}), x)), (NDShape{3, 4, 5}));
  EXPECT_EQ(out_shape(convolution_transpose(parameter({2, 3, 3, 3}), x,
                                            {.strides = {2}, .auto_padding = {false}})),
            (NDShape{3, 9, 11}));
  for (const TransposeCase& c : transpose_cases()) {
    SCOPED_TRACE(c.name);
    Parameter W = parameter(random_array(c.w, kF64, 7), "W");
    Variable v = input_variable(c.x, f64("x"));
    Function t = convolution_transpose(W, v, c.options);
    expect_gradients_match(t, {{v, random_batch(c.x, 2, kF64, 8)}}, {v, W});
    // A convolution with the same W maps the output back to the operand's shape.
    ConvolutionOptions back{.strides = c.options.strides,
                            .auto_padding = c.options.auto_padding,
                            .dilation = c.options.dilation};
    EXPECT_EQ(out_shape(convolution(W, t, back)), c.x);
    expect_float32_matches_float64([&](DataType dt) {
      Parameter W = parameter(random_array(c.w, dt, 9), "W");
      Variable v = input_variable(c.x, {.dtype = dt, .name = "x"});
      return OpCase{
          convolution_transpose(W, v, c.options), {{v, random_batch(c.x, 3, dt, 10)}}, {v, W}};
    });
  }
}

// The transposed convolution is the adjoint of the convolution: for any y,
// <conv(W, x), y> = <x, conv_transpose(W, y)>.
TEST(ConvolutionTranspose, IsTheAdjointOfConvolution) {
  const NDArrayView w = random_array({3, 2, 3, 2}, kF64, 11);
  const Value xv = random_batch({2, 7, 6}, 2, kF64, 12), yv = random_batch({3, 4, 2}, 2, kF64, 13);
  Variable x = input_variable({2, 7, 6}, f64()), y = input_variable({3, 4, 2}, f64());
  const auto cx = values(convolution(constant(w), x, {.strides = {2, 3}}).eval_one({{x, xv}}));
  const auto ty = values(
      convolution_transpose(constant(w), y, {.strides = {2, 3}, .output_shape = NDShape{7, 6}})
          .eval_one({{y, yv}}));
  const auto xs = values(xv), ys = values(yv);
  double a = 0, b = 0;
  for (size_t i = 0; i < cx.size(); ++i) a += cx[i] * ys[i];
  for (size_t i = 0; i < ty.size(); ++i) b += xs[i] * ty[i];
  EXPECT_NEAR(a, b, 1e-12 * std::max(1.0, std::abs(a)));
}

// Two ops' attributes are the same keys holding the same shapes, numbers and flags.
void expect_same_attributes(const Function& a, const Function& b) {
  const DictionaryMap &x = a.attributes().map(), &y = b.attributes().map();
  ASSERT_EQ(x.size(), y.size()) << a.op_name();
  for (const auto& [key, value] : x) {
    ASSERT_TRUE(y.count(key)) << a.op_name() << ": " << key;
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, NDShape> || std::is_same_v<V, bool> ||
                        std::is_same_v<V, int64_t> || std::is_same_v<V, double>)
            EXPECT_EQ(v, y.at(key).get<V>()) << a.op_name() << ": " << key;
          else
            ADD_FAILURE() << a.op_name() << ": " << key << " holds " << value.type_name();
        },
        value.storage());
  }
}

// Python's convolution, convolution_transpose, pooling and unpooling come from the op table,
// whose parameters (CNTK's: per-axis lists of ints and bools) build the ops as the C++ builders
// do, with the attributes model files store under the keys they always had.
TEST(Convolution, TheTablesParametersBuildWhatTheBuildersDo) {
  const Variable x = input_variable({2, 6, 6});
  const Variable w = parameter({3, 2, 3, 3}), wt = parameter({2, 3, 2, 2});
  const OpSchema &conv = *find_schema("Convolution"),
                 &transpose = *find_schema("ConvolutionTranspose");
  const Dictionary strided({{"strides", int_list_attribute({2, 1})},
                            {"auto_padding", bool_list_attribute({false, true})},
                            {"dilation", int_list_attribute({1})},
                            {"max_temp_mem_size_in_samples", int64_t{16}}});
  expect_same_attributes(conv.apply({w, x}, strided),
                         convolution(w, x, {.strides = {2, 1}, .auto_padding = {false, true}}));
  expect_same_attributes(conv.apply({w, x}, {}), convolution(w, x));
  Dictionary shaped = strided;
  shaped["output_shape"] = NDShape{12, 6};
  expect_same_attributes(
      transpose.apply({wt, x}, shaped),
      convolution_transpose(
          wt, x,
          {.strides = {2, 1}, .auto_padding = {false, true}, .output_shape = NDShape{12, 6}}));
  expect_same_attributes(transpose.apply({wt, x}, {}), convolution_transpose(wt, x));
  // The layers' bias, a third input Python does not give.
  const Variable b = parameter({3, 1, 1});
  EXPECT_EQ(conv.apply({w, x, b}, {}).inputs().size(), 3u);

  const Dictionary window({{"pooling_type", int64_t(PoolingType::Average)},
                           {"window", NDShape{3, 3}},
                           {"strides", int_list_attribute({2})},
                           {"include_pad", true}});
  const Function pooled = find_schema("Pooling")->apply({x}, window);
  expect_same_attributes(
      pooled, pooling(x, PoolingType::Average, {3, 3}, {.strides = {2}, .include_pad = true}));
  Dictionary unpool({{"unpooling_type", int64_t(PoolingType::Max)},
                     {"window", NDShape{3, 3}},
                     {"strides", int_list_attribute({2})}});
  expect_same_attributes(find_schema("Unpooling")->apply({pooled, x}, unpool),
                         unpooling(pooled, x, PoolingType::Max, {3, 3}, {.strides = {2}}));
}

TEST(Convolution, TheTablesParametersRefuseBadValues) {
  const Variable x = input_variable({2, 6, 6}), w = parameter({3, 2, 3, 3});
  const OpSchema &conv = *find_schema("Convolution"), &pool = *find_schema("Pooling");
  expect_argument_error(
      [&] {
        conv.apply({w, x}, Dictionary({{"strides", int_list_attribute({-1})}}));
      },
      {"convolution: strides holds the negative value -1"});
  expect_argument_error(
      [&] {
        conv.apply({w, x}, Dictionary({{"groups", int64_t{-2}}}));
      },
      {"convolution: groups is -2"});
  expect_argument_error(
      [&] {
        pool.apply({x}, Dictionary({{"pooling_type", int64_t{2}}, {"window", NDShape{2, 2}}}));
      },
      {"pooling: pooling_type 2 is neither MAX_POOLING (0) nor AVG_POOLING (1)"});
  expect_argument_error(
      [&] {
        pool.apply({x}, Dictionary({{"pooling_type", int64_t{0}}}));
      },
      {"pooling: argument 'pooling_window_shape' is required"});
}

}  // namespace
}  // namespace loom
