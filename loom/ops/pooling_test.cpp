#include "loom/ops/pooling.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <limits>
#include <numeric>

#include "loom/ops/convolution.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/ops_test_util.h"
#include "loom/ops/reduction.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

NDShape out_shape(const Function& f) {
  return f.output().shape();
}

TEST(Pooling, OutputShapes) {
  Variable x = input_variable({32, 28, 28});
  // The seed-002 convnet: 3x3 windows, stride 2, no padding (CNTK's default).
  Function p = pooling(x, PoolingType::Max, {3, 3}, {.strides = {2}});
  EXPECT_EQ(p.op_name(), "Pooling");
  EXPECT_EQ(out_shape(p), (NDShape{32, 13, 13}));
  EXPECT_EQ(
      out_shape(pooling(x, PoolingType::Max, {3, 3}, {.strides = {2}, .auto_padding = {true}})),
      (NDShape{32, 14, 14}));
  EXPECT_EQ(out_shape(pooling(x, PoolingType::Average, {2, 3}, {.strides = {2, 3}})),
            (NDShape{32, 14, 9}));
  // The window pools the trailing axes; all leading axes are channels.
  EXPECT_EQ(out_shape(pooling(input_variable({2, 3, 8}), PoolingType::Max, {2}, {.strides = {2}})),
            (NDShape{2, 3, 4}));
  EXPECT_EQ(out_shape(pooling(input_variable({4, 4, 4}), PoolingType::Max, {2, 2, 2})),
            (NDShape{3, 3, 3}));
  EXPECT_EQ(out_shape(global_pooling(x, PoolingType::Average)), (NDShape{32, 1, 1}));
  EXPECT_EQ(out_shape(global_pooling(input_variable({5, 7}), PoolingType::Max)), (NDShape{5, 1}));
  EXPECT_EQ(Variable(pooling(sequence::input_variable({2, 4, 4}), PoolingType::Max, {2, 2}))
                .type_string(),
            "Sequence[Tensor[2,3,3]]");
}

TEST(Pooling, RejectsBadShapes) {
  Variable x = input_variable({2, 4, 4});
  expect_shape_error(
      [&] {
        pooling(x, PoolingType::Max, {5, 2});
      },
      {"Pooling", "input extent of 4", "window extent 5"});
  expect_shape_error(
      [&] {
        pooling(x, PoolingType::Max, {2, 2, 2, 2});
      },
      {"Pooling", "[2,2,2,2]", "[2,4,4]"});
  expect_shape_error(
      [&] {
        pooling(x, PoolingType::Max, {2, 2}, {.strides = {1, 2, 3, 4}});
      },
      {"strides has 4 values"});
  expect_shape_error([&] { pooling(x, PoolingType::Max, {}); }, {"must be given"});
}

// 1..16 as one 4x4 channel; 3x3 windows at stride 2 with automatic padding start at -1 + 1.
TEST(Pooling, Values) {
  for (DataType dt : {kF32, kF64}) {
    Variable x = input_variable({1, 4, 4}, {.dtype = dt});
    std::vector<double> v(16);
    std::iota(v.begin(), v.end(), 1.0);
    const Value in = dispatch(dt, [&](auto zero) {
      using T = decltype(zero);
      return Value(NDArrayView::from_vector<T>({1, 1, 4, 4}, std::vector<T>(v.begin(), v.end())),
                   false);
    });
    const PoolingOptions pad{.strides = {2}, .auto_padding = {true}};
    // in = 4, stride 2: 2 outputs, extra = 1, windows centred at 0 and 2: rows -1..1, 1..3.
    expect_all_near(values(pooling(x, PoolingType::Max, {3, 3}, pad).eval_one({{x, in}})),
                    {6, 8, 14, 16}, 0, "max");
    expect_all_near(
        values(pooling(x, PoolingType::Average, {3, 3}, pad).eval_one({{x, in}})),
        {(1 + 2 + 5 + 6) / 4.0, (2 + 3 + 4 + 6 + 7 + 8) / 6.0, (5 + 6 + 9 + 10 + 13 + 14) / 6.0,
         (6 + 7 + 8 + 10 + 11 + 12 + 14 + 15 + 16) / 9.0},
        1e-6, "average");
    PoolingOptions include = pad;
    include.include_pad = true;
    expect_all_near(values(pooling(x, PoolingType::Average, {3, 3}, include).eval_one({{x, in}})),
                    {14 / 9.0, 30 / 9.0, 57 / 9.0, 99 / 9.0}, 1e-6, "average with padding");
    expect_all_near(values(global_pooling(x, PoolingType::Max).eval_one({{x, in}})), {16}, 0,
                    "global max");
    expect_all_near(values(global_pooling(x, PoolingType::Average).eval_one({{x, in}})), {8.5},
                    1e-6, "global average");
  }
}

struct PoolCase {
  std::string name;
  NDShape x, window;
  PoolingOptions options;
};

std::vector<PoolCase> pool_cases() {
  return {
      {"overlapping", {2, 7, 6}, {3, 3}, {.strides = {2}}},
      {"padded", {2, 6, 5}, {3, 2}, {.strides = {2, 1}, .auto_padding = {true}}},
      {"padded_include",
       {2, 5, 5},
       {3, 3},
       {.strides = {2}, .auto_padding = {true}, .include_pad = true}},
      {"1d", {3, 9}, {4}, {.strides = {3}, .auto_padding = {true}}},
      {"3d", {2, 4, 5, 3}, {2, 3, 2}, {.strides = {1, 2, 1}}},
      {"negative_pad", {2, 8}, {1}, {.strides = {4}, .auto_padding = {true}}},
  };
}

TEST(Pooling, GradientsMatchFiniteDifferences) {
  for (PoolingType type : {PoolingType::Max, PoolingType::Average}) {
    for (const PoolCase& c : pool_cases()) {
      SCOPED_TRACE(c.name + (type == PoolingType::Max ? " max" : " average"));
      Variable x = input_variable(c.x, f64("x"));
      expect_gradients_match(pooling(x, type, c.window, c.options),
                             {{x, random_batch(c.x, 2, kF64, 1)}}, {x});
    }
    Variable s = sequence::input_variable({2, 4, 4}, f64("s"));
    expect_gradients_match(global_pooling(s, type),
                           {{s, random_sequences({2, 4, 4}, kLengths, kF64, 2)}}, {s});
  }
}

TEST(Pooling, Float32MatchesFloat64) {
  for (PoolingType type : {PoolingType::Max, PoolingType::Average}) {
    for (const PoolCase& c : pool_cases()) {
      SCOPED_TRACE(c.name);
      expect_float32_matches_float64([&](DataType dt) {
        Variable x = input_variable(c.x, {.dtype = dt, .name = "x"});
        return OpCase{
            pooling(x, type, c.window, c.options), {{x, random_batch(c.x, 3, dt, 3)}}, {x}};
      });
    }
  }
}

// A pooling whose operand the executor keeps blocked (a convolution of 16 channels feeds it)
// and whose output the caller reads (row-major): the kernel reorders between the two.
TEST(Pooling, BlockedOperandRowMajorOutputMatchesFloat64) {
  for (PoolingType type : {PoolingType::Max, PoolingType::Average}) {
    SCOPED_TRACE(type == PoolingType::Max ? "max" : "average");
    expect_float32_matches_float64([&](DataType dt) {
      Variable x = input_variable({3, 6, 6}, {.dtype = dt, .name = "x", .needs_gradient = true});
      Parameter W = parameter(random_array({16, 3, 3, 3}, dt, 1, -0.5, 0.5), "W");
      return OpCase{pooling(relu(convolution(W, x)), type, {2, 2}, {.strides = {2}}),
                    {{x, random_batch({3, 6, 6}, 3, dt, 4)}},
                    {x, W}};
    });
  }
}

// Convolution, transposed convolution and pooling keep their attributes through a model file.
TEST(Pooling, ConvolutionAndPoolingSurviveSaveAndLoad) {
  Variable x = input_variable({2, 9, 8}, f64("x"));
  Function conv =
      convolution(parameter(random_array({4, 2, 3, 2}, kF64, 1)), x,
                  {.strides = {2, 1}, .auto_padding = {true, false}, .dilation = {1, 2}});
  Function up = convolution_transpose(parameter(random_array({4, 3, 2, 2}, kF64, 2)), conv,
                                      {.strides = {2}, .output_shape = NDShape{10, 12}});
  Function f = plus(global_pooling(pooling(up, PoolingType::Max, {3, 3},
                                           {.strides = {2}, .auto_padding = {true}}),
                                   PoolingType::Average),
                    reduce_sum(pooling(conv, PoolingType::Average, {2, 2}, {.include_pad = true})));
  const auto path = std::filesystem::path(::testing::TempDir()) /
                    ("loom_pool_model_" + std::to_string(getpid()) + ".model");
  save_model(f, path.string());
  Function g = load_model(path.string());
  std::filesystem::remove(path);
  const Value in = random_batch({2, 9, 8}, 2, kF64, 3);
  expect_all_near(values(g.eval_one({{g.arguments().at(0), in}})), values(f.eval_one({{x, in}})), 0,
                  "loaded model");
}

// 1..n in the sample shape, one sample, of dtype dt.
Value iota_sample(const NDShape& shape, DataType dt, double first = 1) {
  std::vector<double> v(shape.total_size());
  std::iota(v.begin(), v.end(), first);
  std::vector<size_t> dims{1};
  for (size_t d : shape.dims()) dims.push_back(d);
  return dispatch(dt, [&](auto zero) {
    using T = decltype(zero);
    return Value(NDArrayView::from_vector<T>(NDShape(dims), std::vector<T>(v.begin(), v.end())),
                 false);
  });
}

// CNTK's kernel_test.py, POOLING_CEIL_DATA: 1..64 as 8x8, 3x3 windows at stride 2.
TEST(Pooling, CeilOutDimAddsTheOverhangingWindow) {
  Variable x = input_variable({1, 8, 8});
  const PoolingOptions ceil{.strides = {2}, .ceil_out_dim = true};
  Function p = pooling(x, PoolingType::Max, {3, 3}, ceil);
  EXPECT_EQ(out_shape(p), (NDShape{1, 4, 4}));
  EXPECT_EQ(out_shape(pooling(x, PoolingType::Max, {3, 3}, {.strides = {2}})), (NDShape{1, 3, 3}));
  expect_all_near(values(p.eval_one({{x, iota_sample({1, 8, 8}, kF32)}})),
                  {19, 21, 23, 24, 35, 37, 39, 40, 51, 53, 55, 56, 59, 61, 63, 64}, 0, "max");
  // Average pooling divides the overhanging windows by the elements inside the input.
  const auto average = values(
      pooling(x, PoolingType::Average, {3, 3}, ceil).eval_one({{x, iota_sample({1, 8, 8}, kF32)}}));
  EXPECT_NEAR(average.back(), (55 + 56 + 63 + 64) / 4.0, 1e-5);
}

// CNTK's unpooling docstring: 0..15 as 4x4, max pooled 2x2 at stride 2 and unpooled.
TEST(Unpooling, PutsTheOperandWherePoolingFoundItsMaxima) {
  for (DataType dt : {kF32, kF64}) {
    Variable x = input_variable({1, 4, 4}, {.dtype = dt});
    Function p = pooling(x, PoolingType::Max, {2, 2}, {.strides = {2}});
    Function u = unpooling(p, x, PoolingType::Max, {2, 2}, {.strides = {2}});
    EXPECT_EQ(u.op_name(), "Unpooling");
    EXPECT_EQ(out_shape(u), (NDShape{1, 4, 4}));
    expect_all_near(values(u.eval_one({{x, iota_sample({1, 4, 4}, dt, 0)}})),
                    {0, 0, 0, 0, 0, 5, 0, 7, 0, 0, 0, 0, 0, 13, 0, 15}, 0, "unpooled");
  }
}

// Overlapping windows (3x3 at stride 1) choose the same positions: the later window's value
// stays, and the gradient reaches only the operand elements whose values stayed.
TEST(Unpooling, OverlappingWindowsKeepTheLaterValue) {
  Variable x = input_variable({1, 4, 4}, f64("x"));
  Variable y = input_variable({1, 2, 2}, f64("y"));
  Function u = unpooling(y, x, PoolingType::Max, {3, 3});
  const Value xs = iota_sample({1, 4, 4}, kF64, 0), ys = iota_sample({1, 2, 2}, kF64, 1);
  // Maxima at 10, 11, 14, 15 (each window's lower right): all distinct, all kept.
  expect_all_near(values(u.eval_one({{x, xs}, {y, ys}})),
                  {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4}, 0, "distinct maxima");
  // One maximum at the centre for every window: the last window's value, 4, stays.
  std::vector<double> peak(16, 0.0);
  peak[5] = 1;
  const Value px(NDArrayView::from_vector<double>({1, 1, 4, 4}, peak), false);
  auto out = values(u.eval_one({{x, px}, {y, ys}}));
  EXPECT_EQ(out[5], 4);
  expect_gradients_match(u, {{x, px}, {y, random_batch({1, 2, 2}, 1, kF64, 5)}}, {y});
  expect_gradients_match(
      unpooling(y, x, PoolingType::Max, {2, 2}, {.strides = {2}}),
      {{x, random_batch({1, 4, 4}, 1, kF64, 6)}, {y, random_batch({1, 2, 2}, 1, kF64, 7)}}, {y});
}

TEST(Unpooling, RejectsBadInputs) {
  Variable x = input_variable({1, 4, 4});
  expect_shape_error(
      [&] {
        unpooling(input_variable({1, 3, 3}), x, PoolingType::Max, {2, 2}, {.strides = {2}});
      },
      {"Unpooling", "[1,2,2]"});
  expect_argument_error(
      [&] {
        unpooling(input_variable({1, 2, 2}), x, PoolingType::Average, {2, 2}, {.strides = {2}});
      },
      {"unpooling", "MAX_UNPOOLING"});
  expect_shape_error(
      [&] {
        unpooling(input_variable({1, 1, 1}), x, PoolingType::Max, {5, 5});
      },
      {"Unpooling", "window extent 5"});
}

// CNTK's kernel_test.py, ROIPOOLING_OPERANDS: the 3x3 map 1..9, the region (1, 1, 2, 2) pooled
// into 3x3; the gradient of ones lands on the maxima as often as they were chosen.
TEST(RoiPooling, CntksValuesAndGradient) {
  for (DataType dt : {kF32, kF64}) {
    Variable x = input_variable({1, 3, 3}, {.dtype = dt, .needs_gradient = true});
    Variable r = input_variable({1, 4}, {.dtype = dt});
    Function f = roipooling(x, r, PoolingType::Max, {3, 3}, 1.0);
    EXPECT_EQ(f.op_name(), "ROIPooling");
    EXPECT_EQ(out_shape(f), (NDShape{1, 1, 3, 3}));
    const Value rois = dispatch(dt, [&](auto zero) {
      using T = decltype(zero);
      return Value(NDArrayView::from_vector<T>({1, 1, 4}, {T(1), T(1), T(2), T(2)}), false);
    });
    const ValueMap args{{x, iota_sample({1, 3, 3}, dt)}, {r, rois}};
    expect_all_near(values(f.eval_one(args)), {5, 6, 6, 8, 9, 9, 8, 9, 9}, 0, "forward");
    expect_all_near(values(f.grad(args, {x}).at(x)), {0, 0, 0, 0, 1, 2, 0, 2, 4}, 0, "backward");
  }
}

// A region beyond the map: its cells are empty, 0 with no gradient; a cell over ties and a NaN
// takes the first of the largest and passes the NaN over.
TEST(RoiPooling, EmptyCellsTiesAndNaN) {
  Variable x = input_variable({1, 2, 2}, {.needs_gradient = true});
  Variable r = input_variable({3, 4});
  Function f = roipooling(x, r, PoolingType::Max, {1, 1}, 1.0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Value rois(NDArrayView::from_vector<float>({1, 3, 4}, {5, 5, 7, 7, 0, 0, 1, 1, 1, 0, 1, 1}),
                   false);
  const ValueMap args{
      {x, Value(NDArrayView::from_vector<float>({1, 1, 2, 2}, {3, 3, nan, 3}), false)}, {r, rois}};
  const std::vector<double> y = values(f.eval_one(args));
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0], 0);  // empty
  EXPECT_EQ(y[1], 3);  // 3, 3, NaN, 3: the first 3
  EXPECT_EQ(y[2], 3);  // the second column: 3, then 3
  expect_all_near(values(f.grad(args, {x}).at(x)), {1, 1, 0, 0}, 0, "backward");
}

TEST(RoiPooling, ScalesRegionsAndGradientsMatchFiniteDifferences) {
  Variable x = input_variable({2, 6, 8}, f64("x"));
  Variable r = input_variable({3, 4}, f64("r"));
  // Regions in an image twice the map's size, one of them partly outside the map.
  const Value rois(
      NDArrayView::from_vector<double>({2, 3, 4}, {0, 0, 15, 11, 4, 2, 9, 7, 10, 6, 20, 14,  //
                                                   2, 2, 5,  5,  0, 0, 1, 1, 6,  0, 14, 10}),
      false);
  Function f = roipooling(x, r, PoolingType::Max, {2, 3}, 0.5);
  EXPECT_EQ(out_shape(f), (NDShape{3, 2, 2, 3}));
  expect_gradients_match(f, {{x, random_batch({2, 6, 8}, 2, kF64, 8)}, {r, rois}}, {x});
}

TEST(RoiPooling, RejectsBadInputs) {
  Variable x = input_variable({2, 6, 8}), r = input_variable({3, 4});
  expect_shape_error(
      [&] {
        roipooling(input_variable({6, 8}), r, PoolingType::Max, {2, 2}, 1);
      },
      {"ROIPooling", "(channels, height, width)"});
  expect_shape_error(
      [&] {
        roipooling(x, input_variable({3, 5}), PoolingType::Max, {2, 2}, 1);
      },
      {"ROIPooling", "(x1, y1, x2, y2)"});
  expect_shape_error(
      [&] {
        roipooling(x, r, PoolingType::Max, {7, 2}, 1);
      },
      {"ROIPooling", "smaller than roi_output_shape"});
  expect_argument_error(
      [&] {
        roipooling(x, r, PoolingType::Average, {2, 2}, 1);
      },
      {"roipooling", "MAX_POOLING"});
}

}  // namespace
}  // namespace loom
