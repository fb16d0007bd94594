// crop_manual's window and gradient, crop_automatic's offsets through convolutions, poolings and
// elementwise ops (CNTK's ComputeCropOffsets), and the errors. The conformance harness checks
// Crop's gradients against finite differences, float32, sequences, save and load.
#include "loom/ops/crop.h"

#include <gtest/gtest.h>

#include <numeric>

#include "loom/ops/convolution.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/ops_test_util.h"
#include "loom/ops/pooling.h"
#include "loom/ops/shape_ops.h"

namespace loom {
namespace {

using V = std::vector<double>;

V iota(size_t n) {
  V v(n);
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}

// A 3x3 kernel of ones, valid windows (no padding): [1, 8, 8] -> [1, 6, 6].
Function valid_conv(const Variable& x) {
  Constant w = constant(NDArrayView::from_vector<double>({1, 1, 3, 3}, V(9, 1.0)));
  return convolution(w, x, {.auto_padding = {false}});
}

// The offsets a Crop was built with.
std::pair<int64_t, int64_t> offsets(const Function& crop) {
  const Dictionary& a = crop.attributes();
  return {a.get<int64_t>("offset_x"), a.get<int64_t>("offset_y")};
}

TEST(Crop, ManualCutsTheWindowOfTheReferentsExtents) {
  const Variable x = input_variable({2, 4, 5}, f64("x"));
  const Variable ref = input_variable({1, 2, 3}, f64("ref"));
  const Function y = crop_manual(x, ref, 1, 2);
  EXPECT_EQ(y.output().shape(), (NDShape{2, 2, 3}));
  const Value out = y.eval_one({{x, Value::create_batch<double>({2, 4, 5}, iota(40))},
                                {ref, Value::create_batch<double>({1, 2, 3}, V(6, 0.0))}});
  // rows 2 and 3, columns 1 to 3 of each channel
  EXPECT_EQ(values(out), (V{11, 12, 13, 16, 17, 18, 31, 32, 33, 36, 37, 38}));
}

TEST(Crop, GradientIsTheOutputsGradientInTheWindowAndZeroElsewhere) {
  InputOptions o = f64("x");
  o.needs_gradient = true;
  const Variable x = input_variable({3, 3}, o);
  const Constant ref = constant(NDArrayView::from_vector<double>({2, 2}, V(4, 0.0)));
  const Function y = crop_manual(x, ref, 1, 0);
  const ValueMap g = y.grad({{x, Value::create_batch<double>({3, 3}, iota(9))}}, {x});
  EXPECT_EQ(values(g.at(x)), (V{0, 1, 1, 0, 1, 1, 0, 0, 0}));
}

TEST(Crop, AutomaticOffsetsFollowConvolutionWindows) {
  const Variable x = input_variable({1, 8, 8}, f64("x"));
  const Function c = valid_conv(x);
  // Each output of the valid 3x3 convolution is centred on x's position + 1.
  EXPECT_EQ(offsets(crop_automatic(x, c)), (std::pair<int64_t, int64_t>{1, 1}));
  // Two of them, with a relu between: + 2.
  const Function cc = valid_conv(relu(c));
  EXPECT_EQ(offsets(crop_automatic(x, cc)), (std::pair<int64_t, int64_t>{2, 2}));
  // Padded ("same") windows keep positions.
  Constant w = constant(NDArrayView::from_vector<double>({1, 1, 3, 3}, V(9, 1.0)));
  EXPECT_EQ(offsets(crop_automatic(x, convolution(w, x))), (std::pair<int64_t, int64_t>{0, 0}));
  // The referent is the input itself.
  EXPECT_EQ(offsets(crop_automatic(c, c)), (std::pair<int64_t, int64_t>{0, 0}));
  // Cropped values are x's at the offsets.
  const Function y = crop_automatic(x, cc);
  const Value out = y.eval_one({{x, Value::create_batch<double>({1, 8, 8}, iota(64))}});
  EXPECT_EQ(y.output().shape(), (NDShape{1, 4, 4}));
  EXPECT_EQ(values(out)[0], 18);  // x[2][2]
}

TEST(Crop, AutomaticOffsetsThroughPoolingAndItsTranspose) {
  // A fully convolutional network's upsampling path: pool by 2, convolve, upsample by 2 with a
  // transposed convolution of a 4-wide kernel (CNTK's filter maps compose to scale 1).
  const Variable x = input_variable({1, 12, 12}, f64("x"));
  const Function p = pooling(x, PoolingType::Max, NDShape{2, 2}, {.strides = {2}});
  Constant up = constant(NDArrayView::from_vector<double>({1, 1, 4, 4}, V(16, 1.0)));
  const Function u = convolution_transpose(up, p, {.strides = {2}, .auto_padding = {false}});
  ASSERT_EQ(u.output().shape(), (NDShape{1, 14, 14}));
  // pooling: input p -> output p / 2 + 0 ... upsampling: q -> 2 q + 1; together p + 1.
  EXPECT_EQ(offsets(crop_automatic(u, x)), (std::pair<int64_t, int64_t>{1, 1}));
  // Unpooling puts the pooled values back at their windows: positions as x's.
  const Function back = unpooling(p, x, PoolingType::Max, NDShape{2, 2}, {.strides = {2}});
  EXPECT_EQ(offsets(crop_automatic(back, x)), (std::pair<int64_t, int64_t>{0, 0}));
  // The pooled map itself is at half scale: no crop aligns it.
  expect_argument_error([&] { crop_automatic(x, p); }, {"crop_automatic", "scaled"});
}

TEST(Crop, AncestorsAlignTwoInputs) {
  const Variable image = input_variable({1, 8, 8}, f64("image"));
  const Variable labels = input_variable({1, 8, 8}, f64("labels"));
  const Function c = valid_conv(image);
  expect_argument_error([&] { crop_automatic(labels, c); },
                        {"crop_automatic", "no common ancestor", "with_ancestors"});
  const Function y = crop_automatic_with_ancestors(labels, c, labels, image);
  EXPECT_EQ(offsets(y), (std::pair<int64_t, int64_t>{1, 1}));
  expect_argument_error([&] { crop_automatic_with_ancestors(labels, c, c, image); },
                        {"crop_automatic_with_ancestors", "not an ancestor"});
}

TEST(Crop, BadInputsAreRefused) {
  const Variable x = input_variable({1, 8, 8}, f64("x"));
  const Variable small = input_variable({1, 3, 3}, f64("small"));
  // An op without a spatial map on the path.
  const Function r = reshape(valid_conv(x), NDShape{1, 6, 6});
  expect_argument_error([&] { crop_automatic(x, r); },
                        {"crop_automatic", "Reshape", "crop_manual"});
  // The window does not fit.
  expect_shape_error([&] { crop_manual(x, small, 6, 0); }, {"crop", "does not fit"});
  expect_shape_error([&] { crop_manual(small, x, 0, 0); }, {"crop", "does not fit"});
  // Fewer than two static axes.
  const Variable v = input_variable({8}, f64("v"));
  expect_shape_error([&] { crop_manual(v, small, 0, 0); }, {"crop", "two static axes"});
}

}  // namespace
}  // namespace loom
