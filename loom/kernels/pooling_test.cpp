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
      // The first row of windows lies entirely in the padding: maximum and average 0.
      {"window_in_padding", {1, 16, {axis(3, 2, 1, 2, 0), axis(4, 3, 1, 1, 1)}}},
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
  // A shape with a window entirely in the padding is never held blocked (its maxima come from
  // the reference loops, see window_in_padding above).
  EXPECT_TRUE(can_block(PoolShape{1, 16, {axis(4, 2, 1, 1, 0)}}));
  EXPECT_FALSE(can_block(PoolShape{1, 16, {axis(4, 2, 1, 2, 0)}}));
  EXPECT_FALSE(can_block(PoolShape{1, 16, {axis(4, 2, 2, 0, 3)}}));
}

// [N, C, spatial] <-> the blocked layout [N, C / 16, spatial, 16] (kChannelBlock).
std::vector<float> to_blocked(const std::vector<double>& v, size_t n, size_t c, size_t sp) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < n * c; ++i)
    for (size_t j = 0; j < sp; ++j)
      out[((i / kChannelBlock) * sp + j) * kChannelBlock + i % kChannelBlock] =
          float(v[i * sp + j]);
  return out;
}
std::vector<float> from_blocked(const std::vector<float>& v, size_t n, size_t c, size_t sp) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < n * c; ++i)
    for (size_t j = 0; j < sp; ++j)
      out[i * sp + j] = v[((i / kChannelBlock) * sp + j) * kChannelBlock + i % kChannelBlock];
  return out;
}

// Max pooling of activations held blocked (Loom's own kernel in training, oneDNN's in
// inference): the reference's maxima, the first of equal maxima, and the gradients.
TEST(Pooling, BlockedMaxMatchesTheReference) {
  const std::vector<Case> blocked = {
      {"2d_overlapping", {2, 32, {axis(7, 3, 2), axis(6, 3, 2)}}},
      {"2d_padded", {1, 16, {axis(6, 3, 2, 1, 1), axis(5, 2, 1, 0, 1)}}},
      {"1d", {2, 16, {axis(9, 4, 3, 2, 2)}}},
      {"3d", {1, 16, {axis(4, 2, 1, 1, 0), axis(5, 3, 2, 1, 1), axis(3, 2)}}},
      {"global", {2, 16, {axis(5, 5), axis(4, 4)}}},
  };
  for (const Case& c : blocked)
    for (bool ties : {false, true}) {
      PoolShape s = c.shape;
      s.input_blocked = s.output_blocked = true;
      SCOPED_TRACE(c.name + (ties ? " with ties" : ""));
      const size_t in_sp = s.input_size() / (s.batch * s.channels),
                   out_sp = s.output_size() / (s.batch * s.channels);
      // Values in float's precision, so the double reference sees the same ones.
      auto x = random_vector<double>(s.input_size(), 3),
           dy = random_vector<double>(s.output_size(), 4);
      for (double& v : x) v = ties ? 1.0 : double(float(v));
      for (double& v : dy) v = double(float(v));
      std::vector<double> y(s.output_size()), dx(s.input_size(), 0.5);
      std::vector<uint8_t> ws(pooling_workspace_bytes<double>(s, PoolKind::Max));
      pooling_forward<double>(s, PoolKind::Max, x.data(), y.data(), ws.data());
      const std::vector<float> xb = to_blocked(x, s.batch, s.channels, in_sp),
                               dyb = to_blocked(dy, s.batch, s.channels, out_sp);
      std::vector<float> yb(s.output_size()), yb_inference(s.output_size());
      std::vector<float> dxb = to_blocked(dx, s.batch, s.channels, in_sp);
      std::vector<uint8_t> wsb(pooling_workspace_bytes<float>(s, PoolKind::Max));
      EXPECT_EQ(wsb.size(), s.output_size());  // one tap per output element
      pooling_forward<float>(s, PoolKind::Max, xb.data(), yb.data(), wsb.data());
      pooling_forward<float>(s, PoolKind::Max, xb.data(), yb_inference.data(), nullptr);
      EXPECT_EQ(yb, yb_inference);
      const std::vector<float> yf = from_blocked(yb, s.batch, s.channels, out_sp);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(yf[i], float(y[i])) << "forward at " << i;
      for (bool accumulate : {true, false}) {
        pooling_backward<double>(s, PoolKind::Max, dy.data(), ws.data(), dx.data(), accumulate);
        pooling_backward<float>(s, PoolKind::Max, dyb.data(), wsb.data(), dxb.data(), accumulate);
        const std::vector<float> dxf = from_blocked(dxb, s.batch, s.channels, in_sp);
        for (size_t i = 0; i < dx.size(); ++i)
          ASSERT_NEAR(dxf[i], dx[i], 1e-5)
              << "backward at " << i << (accumulate ? ", accumulating" : "");
      }
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
