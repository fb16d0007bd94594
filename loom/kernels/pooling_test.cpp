#include "loom/kernels/pooling.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "loom/core/error.h"
#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using testing::random_vector;

SpatialAxis axis(size_t in, size_t k, size_t stride = 1, long lo = 0, long hi = 0) {
  const size_t out = size_t((long(in) + lo + hi - long(k)) / long(stride) + 1);
  return {in, k, out, stride, 1, lo, hi};
}

struct Case {
  std::string name;
  PoolShape shape;
};

std::vector<Case> cases() {
  return {
      {"2d_overlapping", {2, 3, {axis(7, 3, 2), axis(6, 3, 2)}}},
      {"2d_padded", {2, 17, {axis(6, 3, 2, 1, 1), axis(5, 2, 1, 0, 1)}}},
      {"1d", {3, 2, {axis(9, 4, 3, 2, 2)}}},
      {"3d", {1, 2, {axis(4, 2, 1, 1, 0), axis(5, 3, 2, 1, 1), axis(3, 2)}}},
      {"global", {2, 3, {axis(5, 5), axis(4, 4)}}},
      {"negative_pad", {2, 2, {axis(8, 1, 4, -1, 0), axis(5, 3, 2, 1, 1)}}},
  };
}

constexpr PoolKind kKinds[] = {PoolKind::Max, PoolKind::Average, PoolKind::AverageIncludePad};

TEST(Pooling, HandComputed) {
  // 1..16 as 4x4, window 3, stride 2, padding 1 on both sides: windows at -1 and 1.
  const PoolShape s{1, 1, {axis(4, 3, 2, 1, 1), axis(4, 3, 2, 1, 1)}};
  ASSERT_EQ(s.output_size(), 4u);
  std::vector<double> x(16), y(4);
  std::iota(x.begin(), x.end(), 1.0);
  std::vector<uint8_t> ws(pooling_workspace_bytes<double>(s, PoolKind::Max));
  pooling_forward<double>(s, PoolKind::Max, x.data(), y.data(), ws.data());
  EXPECT_EQ(y, (std::vector<double>{6, 8, 14, 16}));
  // Window (rows -1..1, cols -1..1) holds 1, 2, 5, 6.
  pooling_forward<double>(s, PoolKind::Average, x.data(), y.data(), nullptr);
  EXPECT_DOUBLE_EQ(y[0], (1 + 2 + 5 + 6) / 4.0);
  pooling_forward<double>(s, PoolKind::AverageIncludePad, x.data(), y.data(), nullptr);
  EXPECT_DOUBLE_EQ(y[0], (1 + 2 + 5 + 6) / 9.0);
  // The max gradient goes to the maximum's position.
  std::vector<double> dy{1, 2, 3, 4}, dx(16);
  pooling_backward<double>(s, PoolKind::Max, dy.data(), ws.data(), dx.data(), false);
  std::vector<double> expected(16, 0.0);
  expected[5] = 1, expected[7] = 2, expected[13] = 3, expected[15] = 4;
  EXPECT_EQ(dx, expected);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// Average pooling is linear, and max pooling is linear for fixed maxima: backward is the
// adjoint of forward, <pool(x), dy> = <x, backward(dy)>.
TEST(Pooling, BackwardIsTheAdjointOfForward) {
  for (const Case& c : cases())
    for (PoolKind kind : kKinds) {
      SCOPED_TRACE(c.name + " kind " + std::to_string(int(kind)));
      const PoolShape& s = c.shape;
      check_pool_shape(s, "test");
      auto x = random_vector<double>(s.input_size(), 1),
           dy = random_vector<double>(s.output_size(), 2);
      std::vector<double> y(s.output_size()), dx(s.input_size());
      std::vector<uint8_t> ws(pooling_workspace_bytes<double>(s, kind));
      pooling_forward<double>(s, kind, x.data(), y.data(), ws.data());
      pooling_backward<double>(s, kind, dy.data(), ws.data(), dx.data(), false);
      EXPECT_NEAR(dot(x, dx), dot(y, dy), 1e-12 * std::max(1.0, std::abs(dot(y, dy))));
    }
}

TEST(Pooling, FloatMatchesDoubleInEveryLayout) {
  for (const Case& c : cases())
    for (PoolKind kind : kKinds)
      for (ConvLayout layout :
           {ConvLayout::Auto, ConvLayout::Plain, ConvLayout::Blocked, ConvLayout::ChannelsLast}) {
        PoolShape s = c.shape;
        s.layout = layout;
        SCOPED_TRACE(c.name + " kind " + std::to_string(int(kind)) + " layout " +
                     std::to_string(int(layout)));
        auto x = random_vector<double>(s.input_size(), 3),
             dy = random_vector<double>(s.output_size(), 4);
        std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end());
        std::vector<double> y(s.output_size()), dx(s.input_size(), 0.5);
        std::vector<float> yf(s.output_size()), yf_inference(s.output_size()),
            dxf(s.input_size(), 0.5f);
        std::vector<uint8_t> ws(pooling_workspace_bytes<double>(s, kind)),
            wsf(pooling_workspace_bytes<float>(s, kind));
        pooling_forward<double>(s, kind, x.data(), y.data(), ws.data());
        pooling_forward<float>(s, kind, xf.data(), yf.data(), wsf.data());
        pooling_forward<float>(s, kind, xf.data(), yf_inference.data(), nullptr);
        EXPECT_EQ(yf, yf_inference);
        for (bool accumulate : {true, false}) {
          pooling_backward<double>(s, kind, dy.data(), ws.data(), dx.data(), accumulate);
          pooling_backward<float>(s, kind, dyf.data(), wsf.data(), dxf.data(), accumulate);
          for (size_t i = 0; i < dx.size(); ++i)
            ASSERT_NEAR(dxf[i], dx[i], 1e-5) << "backward at " << i;
        }
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(yf[i], y[i], 1e-6) << "forward at " << i;
      }
}

TEST(Pooling, RejectsInconsistentShapes) {
  try {
    check_pool_shape({1, 1, {SpatialAxis{4, 2, 3, 1, 2, 0, 0}}}, "pool");
    ADD_FAILURE() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("not dilated"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_pool_shape({1, 1, {SpatialAxis{4, 2, 4, 1, 1, 0, 0}}}, "pool"), ShapeError);
}

}  // namespace
}  // namespace loom::kernels
