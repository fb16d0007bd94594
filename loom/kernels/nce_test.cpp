#include "loom/kernels/nce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using namespace loom::testing;

double log_add_exp(double a, double b) {
  if (b == -std::numeric_limits<double>::infinity()) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b)));
}
double sigmoid(double v) {
  return 1 / (1 + std::exp(-v));
}

// A minibatch of 5 samples over 9 classes of dimension 7 with 4 noise classes, class 3 drawn
// twice and also a label; labels one-hot, none (row 2), soft (row 3), and one of no noise (row
// 4: its log prior is −inf).
template <typename T>
struct Case {
  size_t rows = 5, dim = 7, classes = 9, k = 4;
  std::vector<T> x = random_vector<T>(rows * dim, 1), w = random_vector<T>(classes * dim, 2),
                 bias = random_vector<T>(classes, 3), dy = random_vector<T>(rows, 4, 0.5, 1.5);
  std::vector<int32_t> offsets{0, 1, 2, 2, 4, 5}, labels{2, 3, 1, 5, 8};
  std::vector<T> values{1, 1, T(0.3), T(0.7), 1};
  std::vector<size_t> noise{3, 8, 3, 0};
  std::vector<T> label_log_prior{T(-1.5), T(-0.2), 0, T(-2), -std::numeric_limits<T>::infinity()},
      noise_log_prior{T(-0.2), T(-3), T(-0.2), T(-1)}, noise_weight{T(0.9), T(1.3), T(0.9), 1};
  double entropy = 0.7;

  NceBatch<T> batch() const {
    return {rows,          dim,           classes,     k,
            x.data(),      w.data(),      bias.data(), offsets.data(),
            labels.data(), values.data(), noise.data()};
  }
  double logit(size_t r, size_t c) const {
    double z = bias[c];
    for (size_t d = 0; d < dim; ++d) z += double(w[c * dim + d]) * double(x[r * dim + d]);
    return z;
  }
  // d loss_r / d z+ and / d z_{s_i}.
  double dz_label(size_t r) const { return sigmoid(label_logit(r) - label_log_prior[r]) - 1; }
  double dz_noise(size_t r, size_t i) const {
    return noise_weight[i] * sigmoid(logit(r, noise[i]) - noise_log_prior[i]);
  }
  double label_logit(size_t r) const {
    double z = 0;
    for (int32_t e = offsets[r]; e < offsets[r + 1]; ++e) z += values[e] * logit(r, labels[e]);
    return z;
  }
  double loss(size_t r) const {
    const double z = label_logit(r);
    double l = log_add_exp(z, label_log_prior[r]) - z - entropy;
    for (size_t i = 0; i < k; ++i)
      l += noise_weight[i] * log_add_exp(logit(r, noise[i]), noise_log_prior[i]);
    return l;
  }
  // The gradients' references: of the inputs [rows, dim], weights [classes, dim], biases.
  std::vector<double> dx() const {
    std::vector<double> g(rows * dim, 0.0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t d = 0; d < dim; ++d) {
        double s = 0;
        for (int32_t e = offsets[r]; e < offsets[r + 1]; ++e)
          s += dz_label(r) * values[e] * w[labels[e] * dim + d];
        for (size_t i = 0; i < k; ++i) s += dz_noise(r, i) * w[noise[i] * dim + d];
        g[r * dim + d] = dy[r] * s;
      }
    return g;
  }
  // Of the weights' rows (dim = this->dim) or, with dim 1 and x as 1, of the biases.
  std::vector<double> dw(size_t n) const {
    std::vector<double> g(classes * n, 0.0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t d = 0; d < n; ++d) {
        const double xd = n == 1 ? 1.0 : double(x[r * dim + d]);
        for (int32_t e = offsets[r]; e < offsets[r + 1]; ++e)
          g[labels[e] * n + d] += dy[r] * dz_label(r) * values[e] * xd;
        for (size_t i = 0; i < k; ++i) g[noise[i] * n + d] += dy[r] * dz_noise(r, i) * xd;
      }
    return g;
  }
};

// What forward keeps and backward's work, in one buffer.
template <typename T>
struct Buffers {
  std::vector<T> kept, work;
  NceKept<T> view;
  explicit Buffers(const NceBatch<T>& b)
      : kept(b.k * b.dim + b.rows * b.k + b.rows), work(nce_work_size(b)) {
    view = {kept.data(), kept.data() + b.k * b.dim, kept.data() + b.k * b.dim + b.rows * b.k};
  }
};

void expect_near_all(const std::vector<double>& want, const std::vector<double>& got, double tol,
                     const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
}

template <typename T>
class NceTest : public ::testing::Test {};
TYPED_TEST_SUITE(NceTest, RealTypes);

TYPED_TEST(NceTest, LossAndGradientsMatchTheFormula) {
  using T = TypeParam;
  const Case<T> c;
  const NceBatch<T> b = c.batch();
  Buffers<T> buf(b);
  std::vector<T> loss(c.rows);
  nce_forward(b, c.label_log_prior.data(), c.noise_log_prior.data(), c.noise_weight.data(),
              c.entropy, loss.data(), buf.view);
  std::vector<double> want(c.rows);
  for (size_t r = 0; r < c.rows; ++r) want[r] = c.loss(r);
  expect_near_all(want, std::vector<double>(loss.begin(), loss.end()), 10 * tolerance<T>(), "loss");
  // Each gradient written, then added to the same initial values.
  auto check = [&](const std::vector<double>& ref, size_t n, const char* what, auto&& backward) {
    for (bool accumulate : {false, true}) {
      const std::vector<T> initial = random_vector<T>(n, 9);
      std::vector<T> g = accumulate ? initial : std::vector<T>(n, std::nan(""));
      backward(g.data(), accumulate);
      std::vector<double> expected = ref;
      if (accumulate)
        for (size_t i = 0; i < n; ++i) expected[i] += initial[i];
      expect_near_all(expected, std::vector<double>(g.begin(), g.end()), 10 * tolerance<T>(), what);
    }
  };
  const T* dy = c.dy.data();
  check(c.dx(), c.rows * c.dim, "inputs", [&](T* g, bool accumulate) {
    nce_backward_inputs(b, buf.view, dy, g, accumulate, buf.work.data());
  });
  check(c.dw(c.dim), c.classes * c.dim, "weights", [&](T* g, bool accumulate) {
    nce_backward_weights(b, buf.view, dy, g, accumulate, buf.work.data());
  });
  check(c.dw(1), c.classes, "biases",
        [&](T* g, bool accumulate) { nce_backward_biases(b, buf.view, dy, g, accumulate); });
}

TYPED_TEST(NceTest, EntropySumsTheNoiseTerms) {
  using T = TypeParam;
  // Unnormalized weights, one class of none and one whose noise term k q is subnormal (the
  // smallest normal weight over a total of ~1000): the logarithm's clamp.
  std::vector<T> w = random_vector<T>(1000, 5, 0.1, 3);
  w[3] = 0;
  w[7] = std::numeric_limits<T>::min();
  double total = 0;
  for (T v : w) total += v;
  double want = 0;
  for (T v : w)
    if (v > 0) want += 50 * v / total * std::log(50 * v / total);
  EXPECT_NEAR(nce_entropy<T>(w.size(), w.data(), 50), want, tolerance<T>() * std::abs(want));
}

TEST(Nce, DoublesDoNotDependOnThreadCount) {
  // Enough rows and columns that every kernel splits over threads.
  Case<double> c;
  c.rows = 600;
  c.dim = 96;
  c.classes = 300;
  c.k = 30;
  c.x = random_vector<double>(c.rows * c.dim, 1);
  c.w = random_vector<double>(c.classes * c.dim, 2);
  c.bias = random_vector<double>(c.classes, 3);
  c.dy = random_vector<double>(c.rows, 4);
  c.offsets = {0};
  c.labels.clear();
  c.values.clear();
  for (size_t r = 0; r < c.rows; ++r) {
    c.labels.push_back(int32_t(r * 7 % c.classes));
    c.values.push_back(1);
    c.offsets.push_back(int32_t(c.labels.size()));
  }
  c.label_log_prior.assign(c.rows, -1);
  c.noise.clear();
  for (size_t i = 0; i < c.k; ++i) c.noise.push_back(i * 11 % c.classes);
  c.noise_log_prior.assign(c.k, -2);
  c.noise_weight.assign(c.k, 1);
  expect_same_for_thread_counts([&] {
    const NceBatch<double> b = c.batch();
    Buffers<double> buf(b);
    std::vector<double> out(c.rows), dx(c.rows * c.dim), dw(c.classes * c.dim);
    nce_forward(b, c.label_log_prior.data(), c.noise_log_prior.data(), c.noise_weight.data(),
                c.entropy, out.data(), buf.view);
    nce_backward_inputs(b, buf.view, c.dy.data(), dx.data(), false, buf.work.data());
    nce_backward_weights(b, buf.view, c.dy.data(), dw.data(), false, buf.work.data());
    out.insert(out.end(), dx.begin(), dx.end());
    out.insert(out.end(), dw.begin(), dw.end());
    return out;
  });
}

}  // namespace
}  // namespace loom::kernels
