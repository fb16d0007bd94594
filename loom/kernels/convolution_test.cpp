#include "loom/kernels/convolution.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>

#include "loom/core/error.h"
#include "loom/core/precision.h"
#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using testing::random_vector;

// An axis of input extent `in` with the output extent its window, stride and pads give.
SpatialAxis axis(size_t in, size_t k, size_t stride = 1, size_t dilation = 1, long lo = 0,
                 long hi = 0) {
  const long extent = long((k - 1) * dilation + 1);
  const size_t out = size_t((long(in) + lo + hi - extent) / long(stride) + 1);
  return {in, k, out, stride, dilation, lo, hi};
}

struct Case {
  std::string name;
  ConvShape shape;
};

std::vector<Case> cases() {
  return {
      {"2d", {2, 3, 4, 1, {axis(6, 3), axis(5, 2)}}},
      {"2d_padded_strided", {2, 3, 4, 1, {axis(7, 3, 2, 1, 1, 1), axis(6, 5, 1, 1, 2, 2)}}},
      {"2d_asymmetric_pad", {1, 2, 3, 1, {axis(5, 4, 1, 1, 1, 2), axis(5, 2, 2, 1, 0, 1)}}},
      {"2d_dilated", {2, 2, 3, 1, {axis(9, 3, 1, 2, 2, 2), axis(7, 2, 2, 3)}}},
      {"2d_groups", {2, 6, 4, 2, {axis(5, 3, 1, 1, 1, 1), axis(4, 3)}}},
      {"2d_depthwise", {2, 4, 4, 4, {axis(5, 3, 2, 1, 1, 1), axis(5, 3)}}},
      {"1d", {3, 2, 5, 1, {axis(11, 3, 2, 1, 1, 1)}}},
      {"3d", {2, 2, 3, 1, {axis(4, 2, 1, 1, 1, 0), axis(5, 3, 2), axis(3, 2, 1, 2, 1, 1)}}},
      {"negative_pad", {2, 2, 2, 1, {axis(8, 1, 4, 1, -1, 0), axis(5, 3, 1, 1, 1, 1)}}},
  };
}

TEST(Convolution, HandComputed2d) {
  // x = 1..9 as 3x3, w = [[1, 0], [0, -1]] (2x2), valid: y[i][j] = x[i][j] - x[i+1][j+1] = -4.
  const ConvShape s{1, 1, 1, 1, {axis(3, 2), axis(3, 2)}};
  std::vector<double> x(9), w{1, 0, 0, -1}, y(4);
  std::iota(x.begin(), x.end(), 1.0);
  convolution_forward<double>(s, x.data(), w.data(), nullptr, y.data());
  EXPECT_EQ(y, (std::vector<double>{-4, -4, -4, -4}));
  // Padding 1 on each side, stride 2: windows at -1 and 1 on both axes.
  const ConvShape p{1, 1, 1, 1, {axis(3, 2, 2, 1, 1, 1), axis(3, 2, 2, 1, 1, 1)}};
  ASSERT_EQ(p.output_size(), 4u);
  convolution_forward<double>(p, x.data(), w.data(), nullptr, y.data());
  // y[0][0]: rows -1..0, cols -1..0 give 0 - x[0][0]; y[0][1]: cols 1..2 give 0 - x[0][2];
  // y[1][1]: rows and cols 1..2 give x[1][1] - x[2][2].
  EXPECT_EQ(y, (std::vector<double>{-1, -3, -7, 5 - 9}));
  std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), yf(4);
  convolution_forward<float>(p, xf.data(), wf.data(), nullptr, yf.data());
  EXPECT_EQ(yf, (std::vector<float>{-1, -3, -7, -4}));
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// The backward passes are the adjoints of the forward map: <conv(x, w), dy> equals both
// <x, backward_data(dy, w)> and <w, backward_weights(x, dy)>.
TEST(Convolution, BackwardIsTheAdjointOfForward) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const ConvShape& s = c.shape;
    check_conv_shape(s, "test");
    auto x = random_vector<double>(s.input_size(), 1),
         w = random_vector<double>(s.weight_size(), 2),
         dy = random_vector<double>(s.output_size(), 3);
    std::vector<double> y(s.output_size()), dx(s.input_size()), dw(s.weight_size());
    convolution_forward<double>(s, x.data(), w.data(), nullptr, y.data());
    convolution_backward_data<double>(s, dy.data(), w.data(), dx.data(), false);
    convolution_backward_weights<double>(s, x.data(), dy.data(), dw.data(), nullptr, false);
    const double expected = dot(y, dy);
    EXPECT_NEAR(dot(x, dx), expected, 1e-12 * std::max(1.0, std::abs(expected)));
    EXPECT_NEAR(dot(w, dw), expected, 1e-12 * std::max(1.0, std::abs(expected)));
  }
}

void expect_near(const std::vector<float>& actual, const std::vector<double>& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], 1e-5 * std::max(1.0, std::abs(expected[i])))
        << what << " at " << i;
}

// float (oneDNN in every activation layout) against the double loops, overwriting and
// accumulating.
TEST(Convolution, FloatMatchesDoubleInEveryLayout) {
  for (const Case& c : cases()) {
    for (ConvLayout layout :
         {ConvLayout::Auto, ConvLayout::Plain, ConvLayout::Blocked, ConvLayout::ChannelsLast}) {
      ConvShape s = c.shape;
      s.layout = layout;
      SCOPED_TRACE(c.name + " layout " + std::to_string(int(layout)));
      auto x = random_vector<double>(s.input_size(), 4),
           w = random_vector<double>(s.weight_size(), 5),
           dy = random_vector<double>(s.output_size(), 6);
      auto xf = std::vector<float>(x.begin(), x.end()), wf = std::vector<float>(w.begin(), w.end()),
           dyf = std::vector<float>(dy.begin(), dy.end());
      std::vector<double> y(s.output_size()), dx(s.input_size(), 0.5), dw(s.weight_size(), 0.5);
      std::vector<float> yf(s.output_size()), dxf(s.input_size(), 0.5f), dwf(s.weight_size(), 0.5f);
      convolution_forward<double>(s, x.data(), w.data(), nullptr, y.data());
      convolution_forward<float>(s, xf.data(), wf.data(), nullptr, yf.data());
      expect_near(yf, y, "forward");
      for (bool accumulate : {true, false}) {
        convolution_backward_data<double>(s, dy.data(), w.data(), dx.data(), accumulate);
        convolution_backward_data<float>(s, dyf.data(), wf.data(), dxf.data(), accumulate);
        expect_near(dxf, dx, accumulate ? "backward data, accumulating" : "backward data");
        convolution_backward_weights<double>(s, x.data(), dy.data(), dw.data(), nullptr,
                                             accumulate);
        convolution_backward_weights<float>(s, xf.data(), dyf.data(), dwf.data(), nullptr,
                                            accumulate);
        expect_near(dwf, dw, accumulate ? "backward weights, accumulating" : "backward weights");
      }
    }
  }
}

// bf16 computes a convolution with at least kMinBf16Channels input channels per group; below
// that the float32 kernels run (the results are float32's exactly).
TEST(Convolution, Bf16FromMinBf16ChannelsOn) {
  if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  for (size_t channels : {size_t(1), kMinBf16Channels - 1, kMinBf16Channels, size_t(16)}) {
    SCOPED_TRACE(std::to_string(channels) + " input channels");
    ConvShape s{8, channels, 16, 1, {axis(12, 5, 1, 1, 2, 2), axis(12, 5, 1, 1, 2, 2)}};
    const auto x = random_vector<float>(s.input_size(), 7),
               w = random_vector<float>(s.weight_size(), 8),
               dy = random_vector<float>(s.output_size(), 9);
    // Forward, gradient of the input, gradient of the kernel, in float32 and then in bf16.
    std::vector<float> out[2][3];
    for (bool bf16 : {false, true}) {
      s.bf16 = bf16;
      auto& o = out[bf16];
      o[0].resize(s.output_size());
      o[1].resize(s.input_size());
      o[2].resize(s.weight_size());
      convolution_forward<float>(s, x.data(), w.data(), nullptr, o[0].data());
      convolution_backward_data<float>(s, dy.data(), w.data(), o[1].data(), false);
      convolution_backward_weights<float>(s, x.data(), dy.data(), o[2].data(), nullptr, false);
    }
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE("result " + std::to_string(k));
      if (channels < kMinBf16Channels) {
        EXPECT_EQ(out[1][k], out[0][k]);
      } else {
        EXPECT_NE(out[1][k], out[0][k]) << "not computed in bf16";
        // 8 significant bits per operand: sums of 25 to 400 products are within 2 %.
        double d = 0, n = 0;
        for (size_t i = 0; i < out[0][k].size(); ++i) {
          d += std::pow(double(out[1][k][i]) - out[0][k][i], 2);
          n += std::pow(double(out[0][k][i]), 2);
        }
        EXPECT_LT(std::sqrt(d / n), 2e-2);
      }
    }
  }
}

TEST(Convolution, RejectsInconsistentShapes) {
  auto expect_error = [](const ConvShape& s, const std::string& part) {
    try {
      check_conv_shape(s, "conv");
      ADD_FAILURE() << "expected ShapeError with " << part;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error({1, 3, 4, 2, {axis(5, 3)}}, "divisible by groups=2");
  expect_error({1, 1, 1, 1, {}}, "0 spatial axes");
  expect_error({1, 1, 1, 1, {SpatialAxis{4, 3, 3, 1, 1, 0, 0}}}, "does not fit");
}

}  // namespace
}  // namespace loom::kernels
