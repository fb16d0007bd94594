#include "loom/kernels/batch_norm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "loom/kernels/convolution.h"
#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using testing::random_vector;

// Where element (n, c, s) of a row-major [N, C, S] tensor lies in its blocked layout (nCw16c).
size_t blocked_index(const BatchNormShape& s, size_t i) {
  const size_t n = i / (s.C * s.S), c = i / s.S % s.C, k = i % s.S;
  return ((n * (s.C / kChannelBlock) + c / kChannelBlock) * s.S + k) * kChannelBlock +
         c % kChannelBlock;
}

// A row-major tensor in the given layout, and back.
std::vector<float> to_layout(const BatchNormShape& s, const std::vector<double>& v, bool blocked) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[blocked ? blocked_index(s, i) : i] = float(v[i]);
  return r;
}
std::vector<double> from_layout(const BatchNormShape& s, const std::vector<float>& v,
                                bool blocked) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = v[blocked ? blocked_index(s, i) : i];
  return r;
}

void expect_near(const std::vector<double>& actual, const std::vector<double>& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-5 * std::max(1.0, std::abs(expected[i])))
        << what << " at " << i;
}

std::vector<double> as_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// The float kernels (oneDNN) against the double loops, in every layout pair the executor can
// give them (row-major; blocked; a blocked input whose output the caller reads row-major), with
// the minibatch's statistics and with given (running) ones; backward writes dx, adds to it, or
// leaves it out (only the gradients of scale and bias wanted).
TEST(BatchNorm, FloatMatchesDoubleInEveryLayout) {
  struct Layouts {
    bool in, out;
  };
  const BatchNormShape shapes[] = {{5, 32, 7}, {6, 16, 1}, {4, 3, 10}, {7, 20, 1}};
  for (const BatchNormShape& shape : shapes)
    for (Layouts l : {Layouts{false, false}, Layouts{true, true}, Layouts{true, false}}) {
      if (l.in && shape.C % kChannelBlock) continue;
      BatchNormShape s = shape;
      s.input_blocked = l.in;
      s.output_blocked = l.out;
      // The minibatch's statistics, running ones, and (backward) CNTK's blend of the two.
      for (double batch_weight : {1.0, 0.0, 0.3}) {
        const bool batch_statistics = batch_weight == 1;
        SCOPED_TRACE("N " + std::to_string(s.N) + " C " + std::to_string(s.C) + " S " +
                     std::to_string(s.S) + (l.in ? " blocked" : " row-major") + " -> " +
                     (l.out ? "blocked" : "row-major") + ", batch statistics' weight " +
                     std::to_string(batch_weight));
        const size_t n = s.N * s.C * s.S;
        const auto x = random_vector<double>(n, 1, -2, 3), dy = random_vector<double>(n, 2),
                   dx0 = random_vector<double>(n, 3);
        const auto scale = random_vector<double>(s.C, 4, 0.5, 1.5),
                   bias = random_vector<double>(s.C, 5);
        auto mean = random_vector<double>(s.C, 6), var = random_vector<double>(s.C, 7, 0.5, 1.5);
        const double eps = 1e-5;

        const BatchNormShape row_major{s.N, s.C, s.S};
        std::vector<double> y(n), dx = dx0, dscale(s.C), dbias(s.C);
        batch_norm_forward<double>(row_major, x.data(), scale.data(), bias.data(), eps,
                                   batch_statistics, mean.data(), var.data(), y.data());
        batch_norm_backward<double>(row_major, x.data(), dy.data(), mean.data(), var.data(),
                                    scale.data(), bias.data(), eps, batch_weight, dx.data(), true,
                                    dscale.data(), dbias.data());

        std::vector<float> fx = to_layout(s, x, l.in), fdy = to_layout(s, dy, l.out),
                           fscale(scale.begin(), scale.end()), fbias(bias.begin(), bias.end()),
                           fy(n), fmean(s.C), fvar(s.C), fdscale(s.C), fdbias(s.C);
        if (!batch_statistics) {
          fmean.assign(mean.begin(), mean.end());
          fvar.assign(var.begin(), var.end());
        }
        batch_norm_forward<float>(s, fx.data(), fscale.data(), fbias.data(), eps, batch_statistics,
                                  fmean.data(), fvar.data(), fy.data());
        expect_near(from_layout(s, fy, l.out), y, "y");
        expect_near(as_double(fmean), mean, "mean");
        expect_near(as_double(fvar), var, "variance");
        for (const char* mode : {"written", "added", "not wanted"}) {
          SCOPED_TRACE(std::string("dx ") + mode);
          const bool add = mode[0] == 'a', wanted = mode[0] != 'n';
          std::vector<float> fdx = to_layout(s, add ? dx0 : std::vector<double>(n, 7.0), l.in);
          const std::vector<float> untouched = fdx;
          batch_norm_backward<float>(
              s, fx.data(), fdy.data(), fmean.data(), fvar.data(), fscale.data(), fbias.data(), eps,
              batch_weight, wanted ? fdx.data() : nullptr, add, fdscale.data(), fdbias.data());
          expect_near(as_double(fdscale), dscale, "dscale");
          expect_near(as_double(fdbias), dbias, "dbias");
          if (!wanted) {
            EXPECT_EQ(fdx, untouched);
            continue;
          }
          std::vector<double> got = from_layout(s, fdx, l.in);
          if (!add)
            for (size_t i = 0; i < n; ++i) got[i] += dx0[i];  // the reference added to dx0
          expect_near(got, dx, "dx");
        }
      }
    }
}

}  // namespace
}  // namespace loom::kernels
