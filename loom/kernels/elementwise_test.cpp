#include "loom/kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "loom/core/error.h"
#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using namespace loom::testing;

const UnaryOp kUnaryOps[] = {UnaryOp::Negate, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Relu,
                             UnaryOp::Exp,    UnaryOp::Log,  UnaryOp::Sqrt,    UnaryOp::Square,
                             UnaryOp::Abs,    UnaryOp::Copy};
const BinaryOp kBinaryOps[] = {BinaryOp::Plus,   BinaryOp::Minus, BinaryOp::Times,
                               BinaryOp::Divide, BinaryOp::Max,   BinaryOp::Min};

bool needs_positive(UnaryOp op) {
  return op == UnaryOp::Log || op == UnaryOp::Sqrt;
}

double unary_ref(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Negate:
      return -x;
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Sigmoid:
      return 1 / (1 + std::exp(-x));
    case UnaryOp::Relu:
      return x > 0 ? x : 0;
    case UnaryOp::Exp:
      return std::exp(x);
    case UnaryOp::Log:
      return std::log(x);
    case UnaryOp::Sqrt:
      return std::sqrt(x);
    case UnaryOp::Square:
      return x * x;
    case UnaryOp::Abs:
      return std::abs(x);
    case UnaryOp::Copy:
      return x;
    default:  // the other ops: the op-level conformance harness (ops/conformance_test.cpp)
      break;
  }
  return 0;
}

double unary_grad_ref(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Negate:
      return -1;
    case UnaryOp::Tanh:
      return 1 - std::tanh(x) * std::tanh(x);
    case UnaryOp::Sigmoid:
      return unary_ref(op, x) * (1 - unary_ref(op, x));
    case UnaryOp::Relu:
      return x > 0;
    case UnaryOp::Exp:
      return std::exp(x);
    case UnaryOp::Log:
      return 1 / x;
    case UnaryOp::Sqrt:
      return 0.5 / std::sqrt(x);
    case UnaryOp::Square:
      return 2 * x;
    case UnaryOp::Abs:
      return x > 0 ? 1 : (x < 0 ? -1 : 0);
    case UnaryOp::Copy:
      return 1;
    default:
      break;
  }
  return 0;
}

double binary_ref(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Plus:
      return a + b;
    case BinaryOp::Minus:
      return a - b;
    case BinaryOp::Times:
      return a * b;
    case BinaryOp::Divide:
      return a / b;
    case BinaryOp::Max:
      return a >= b ? a : b;
    case BinaryOp::Min:
      return a <= b ? a : b;
    default:  // the other ops: the op-level conformance harness (ops/conformance_test.cpp)
      break;
  }
  return 0;
}

// d(a op b)/da (which = 0) or /db (which = 1).
double binary_partial_ref(BinaryOp op, int which, double a, double b) {
  switch (op) {
    case BinaryOp::Plus:
      return 1;
    case BinaryOp::Minus:
      return which == 0 ? 1 : -1;
    case BinaryOp::Times:
      return which == 0 ? b : a;
    case BinaryOp::Divide:
      return which == 0 ? 1 / b : -a / (b * b);
    case BinaryOp::Max:
      return which == 0 ? a >= b : b > a;
    case BinaryOp::Min:
      return which == 0 ? a <= b : b < a;
    default:
      break;
  }
  return 0;
}

template <typename T>
class ElementwiseTest : public ::testing::Test {};
TYPED_TEST_SUITE(ElementwiseTest, RealTypes);

TYPED_TEST(ElementwiseTest, UnaryMatchesReference) {
  using T = TypeParam;
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{100}, size_t{100003}}) {
    for (UnaryOp op : kUnaryOps) {
      const auto x =
          needs_positive(op) ? random_vector<T>(n, 1, 0.01, 4) : random_vector<T>(n, 1, -2, 2);
      std::vector<T> y(n);
      unary(op, n, x.data(), y.data());
      for (size_t i = 0; i < n; ++i) {
        const double ref = unary_ref(op, x[i]);
        ASSERT_NEAR(y[i], ref, tolerance<T>() * (1 + std::abs(ref)))
            << "op " << int(op) << " n " << n << " i " << i;
      }
      // In place.
      std::vector<T> z = x;
      unary(op, n, z.data(), z.data());
      EXPECT_EQ(z, y);
    }
  }
}

TYPED_TEST(ElementwiseTest, SigmoidIsStableForLargeInputs) {
  using T = TypeParam;
  const std::vector<T> x = {-1000, -80, 0, 80, 1000};
  std::vector<T> y(x.size());
  unary(UnaryOp::Sigmoid, x.size(), x.data(), y.data());
  EXPECT_EQ(y[0], T(0));
  EXPECT_GT(y[1], T(0));
  EXPECT_EQ(y[2], T(0.5));
  EXPECT_EQ(y[3], T(1));
  EXPECT_EQ(y[4], T(1));
}

TYPED_TEST(ElementwiseTest, UnaryBackwardMatchesReference) {
  using T = TypeParam;
  for (size_t n : {size_t{0}, size_t{5}, size_t{100003}}) {
    for (UnaryOp op : kUnaryOps) {
      auto x = needs_positive(op) ? random_vector<T>(n, 2, 0.01, 4) : random_vector<T>(n, 2, -2, 2);
      if (n > 0) x[0] = 0;  // Relu and Abs have derivative 0 there.
      if (n > 0 && needs_positive(op)) x[0] = 1;
      std::vector<T> y(n);
      unary(op, n, x.data(), y.data());
      const auto dy = random_vector<T>(n, 3, -2, 2);
      for (bool accumulate : {false, true}) {
        const auto init = random_vector<T>(n, 4, -2, 2);
        std::vector<T> dx = init;
        unary_backward(op, n, x.data(), y.data(), dy.data(), dx.data(), accumulate);
        for (size_t i = 0; i < n; ++i) {
          const double ref =
              double(dy[i]) * unary_grad_ref(op, x[i]) + (accumulate ? double(init[i]) : 0.0);
          ASSERT_NEAR(dx[i], ref, 2 * tolerance<T>() * (1 + std::abs(ref)))
              << "op " << int(op) << " i " << i;
        }
      }
    }
  }
}

TEST(ElementwiseFiniteDifference, UnaryDerivatives) {
  const double h = 1e-6;
  for (UnaryOp op : kUnaryOps) {
    // Keep away from the kinks of Relu and Abs at 0.
    auto x = needs_positive(op) ? random_vector<double>(50, 5, 0.1, 4)
                                : random_vector<double>(50, 5, -2, 2);
    for (double& v : x)
      if (std::abs(v) < 0.05) v = 0.5;
    std::vector<double> y(x.size()), dx(x.size()), ones(x.size(), 1.0);
    unary(op, x.size(), x.data(), y.data());
    unary_backward(op, x.size(), x.data(), y.data(), ones.data(), dx.data(), false);
    for (size_t i = 0; i < x.size(); ++i) {
      double lo = x[i] - h, hi = x[i] + h, f_lo, f_hi;
      unary(op, 1, &lo, &f_lo);
      unary(op, 1, &hi, &f_hi);
      const double fd = (f_hi - f_lo) / (2 * h);
      EXPECT_NEAR(dx[i], fd, 1e-6 * (1 + std::abs(fd))) << "op " << int(op) << " x " << x[i];
    }
  }
}

TEST(ElementwiseFiniteDifference, BinaryDerivatives) {
  const double h = 1e-6;
  const Dims out = {3, 4}, ad = {3, 4}, bd = {1, 4};
  const auto a = random_vector<double>(12, 6, 0.5, 2);
  auto b = random_vector<double>(4, 7, -2, -0.5);
  for (BinaryOp op : kBinaryOps) {
    for (int which : {0, 1}) {
      const auto dy = random_vector<double>(12, 8, -2, 2);
      std::vector<double> grad(which == 0 ? 12 : 4);
      binary_backward(op, which, out, ad, a.data(), bd, b.data(), dy.data(), grad.data(), false);
      // Loss = sum(dy * (a op b)); perturb each element of the input.
      auto loss = [&](const std::vector<double>& aa, const std::vector<double>& bb) {
        std::vector<double> y(12);
        binary(op, out, ad, aa.data(), bd, bb.data(), y.data());
        double s = 0;
        for (size_t i = 0; i < 12; ++i) s += dy[i] * y[i];
        return s;
      };
      for (size_t i = 0; i < grad.size(); ++i) {
        auto lo_a = a, hi_a = a, lo_b = b, hi_b = b;
        (which == 0 ? lo_a : lo_b)[i] -= h;
        (which == 0 ? hi_a : hi_b)[i] += h;
        const double fd = (loss(hi_a, hi_b) - loss(lo_a, lo_b)) / (2 * h);
        EXPECT_NEAR(grad[i], fd, 1e-6 * (1 + std::abs(fd))) << "op " << int(op) << " " << which;
      }
    }
  }
}

// Runs binary and both gradients for one broadcast case and checks them against the reference.
// Relu and Abs gradients select dy, -dy or 0, so they are exact: compare bit for bit on odd
// lengths (vector tails) with many exact zeros, where the select must give 0.
TYPED_TEST(ElementwiseTest, SelectingGradientsAreExactOnOddLengths) {
  using T = TypeParam;
  for (size_t n : {size_t{1}, size_t{7}, size_t{37}, size_t{100003}}) {
    auto x = random_vector<T>(n, 5, -2, 2);
    for (size_t i = 0; i < n; i += 3) x[i] = 0;
    const auto dy = random_vector<T>(n, 6, -2, 2);
    const auto init = random_vector<T>(n, 7, -2, 2);
    for (UnaryOp op : {UnaryOp::Relu, UnaryOp::Abs})
      for (bool accumulate : {false, true}) {
        std::vector<T> dx = init;
        // relu reads its output, which is x where x > 0 (abs reads x alone).
        unary_backward<T>(op, n, x.data(), x.data(), dy.data(), dx.data(), accumulate);
        for (size_t i = 0; i < n; ++i) {
          const T g = x[i] > 0 ? dy[i] : (op == UnaryOp::Abs && x[i] < 0 ? -dy[i] : T(0));
          ASSERT_EQ(dx[i], accumulate ? init[i] + g : g) << "op " << int(op) << " i " << i;
        }
      }
  }
}

template <typename T>
void check_binary(const Dims& out, const Dims& ad, const Dims& bd, unsigned seed) {
  const size_t n = product(out), na = product(ad), nb = product(bd);
  const auto a = random_vector<T>(na, seed, -2, 2);
  auto b = random_vector<T>(nb, seed + 1, -2, 2);
  for (T& v : b) v = v >= 0 ? v + T(0.5) : v - T(0.5);  // keep Divide well conditioned
  const auto dy = random_vector<T>(n, seed + 2, -2, 2);
  for (BinaryOp op : kBinaryOps) {
    std::vector<T> y(n);
    binary(op, out, ad, a.data(), bd, b.data(), y.data());
    for (size_t i = 0; i < n; ++i) {
      const double ref =
          binary_ref(op, a[broadcast_offset(out, ad, i)], b[broadcast_offset(out, bd, i)]);
      ASSERT_NEAR(y[i], ref, tolerance<T>() * (1 + std::abs(ref))) << "op " << int(op);
    }
    for (int which : {0, 1}) {
      const Dims& xd = which == 0 ? ad : bd;
      std::vector<double> ref(product(xd)), scale(product(xd));
      for (size_t i = 0; i < n; ++i) {
        const size_t ia = broadcast_offset(out, ad, i), ib = broadcast_offset(out, bd, i);
        const double g = double(dy[i]) * binary_partial_ref(op, which, a[ia], b[ib]);
        ref[which == 0 ? ia : ib] += g;
        scale[which == 0 ? ia : ib] += std::abs(g);
      }
      for (bool accumulate : {false, true}) {
        const auto init = random_vector<T>(ref.size(), seed + 3, -2, 2);
        std::vector<T> dx = init;
        binary_backward(op, which, out, ad, a.data(), bd, b.data(), dy.data(), dx.data(),
                        accumulate);
        for (size_t i = 0; i < ref.size(); ++i) {
          const double want = ref[i] + (accumulate ? double(init[i]) : 0.0);
          ASSERT_NEAR(dx[i], want, 4 * tolerance<T>() * (1 + scale[i] + std::abs(want)))
              << "op " << int(op) << " which " << which << " acc " << accumulate << " i " << i;
        }
      }
    }
  }
}

// A bias [1,C,1,...] against [N,C,H*W...] on odd sizes: runs shorter than, equal to and longer
// than the 16 partial sums of the reduction (with a tail), forward and gradient, both accumulate
// modes (check_binary), against the naive loop.
TYPED_TEST(ElementwiseTest, BinaryBiasShapesOfOddSizes) {
  unsigned seed = 300;
  for (size_t hw : {size_t{1}, size_t{7}, size_t{16}, size_t{37}}) {
    check_binary<TypeParam>({5, 3, 1, hw}, {5, 3, 1, hw}, {1, 3, 1, 1}, seed++);
    check_binary<TypeParam>({5, 3, hw}, {1, 3, 1}, {5, 3, hw}, seed++);
    check_binary<TypeParam>({5, hw}, {5, hw}, {1, hw}, seed++);
  }
}

TYPED_TEST(ElementwiseTest, BinaryBroadcastsEveryAxisCombination) {
  const Dims shapes[] = {{},        {1},       {5},          {3, 4},      {3, 1},
                         {1, 1, 1}, {2, 3, 4}, {2, 1, 3, 5}, {2, 3, 4, 5}};
  unsigned seed = 10;
  for (const Dims& out : shapes) {
    for (unsigned ma = 0; ma < (1u << out.size()); ++ma)
      for (unsigned mb = 0; mb < (1u << out.size()); ++mb)
        check_binary<TypeParam>(out, masked(out, ma), masked(out, mb), seed++);
  }
}

TYPED_TEST(ElementwiseTest, BinaryLargeShapesUseThreads) {
  // Same shape, scalar, bias row, column, and an inner-axis broadcast, all above the threading
  // threshold; several bias columns too few to split.
  check_binary<TypeParam>({300, 257}, {300, 257}, {300, 257}, 1);
  check_binary<TypeParam>({300, 257}, {300, 257}, {1, 1}, 2);
  check_binary<TypeParam>({300, 257}, {300, 257}, {1, 257}, 3);
  check_binary<TypeParam>({300, 257}, {300, 1}, {300, 257}, 4);
  check_binary<TypeParam>({40, 30, 50}, {40, 1, 50}, {1, 30, 1}, 5);
  check_binary<TypeParam>({20000, 3}, {20000, 3}, {1, 3}, 6);
  check_binary<TypeParam>({70000}, {1}, {70000}, 7);
}

TYPED_TEST(ElementwiseTest, EmptyShapesDoNothing) {
  check_binary<TypeParam>({0}, {0}, {1}, 1);
  check_binary<TypeParam>({3, 0, 2}, {3, 0, 2}, {1, 1, 2}, 2);
  // A broadcast input of an empty output gets a zero gradient.
  using T = TypeParam;
  std::vector<T> dx = {5, 5};
  binary_backward<T>(BinaryOp::Plus, 1, {0, 2}, {0, 2}, nullptr, {1, 2}, nullptr, nullptr,
                     dx.data(), false);
  EXPECT_EQ(dx, (std::vector<T>{0, 0}));
}

TYPED_TEST(ElementwiseTest, BinaryRejectsMismatchedShapes) {
  using T = TypeParam;
  std::vector<T> a(6), b(6), y(6);
  EXPECT_THROW(binary<T>(BinaryOp::Plus, {2, 3}, {2, 3}, a.data(), {3}, b.data(), y.data()),
               ShapeError);
  EXPECT_THROW(binary<T>(BinaryOp::Plus, {2, 3}, {2, 3}, a.data(), {2, 2}, b.data(), y.data()),
               ShapeError);
  EXPECT_THROW(binary_backward<T>(BinaryOp::Plus, 2, {2, 3}, {2, 3}, a.data(), {2, 3}, b.data(),
                                  y.data(), y.data(), false),
               ArgumentError);
}

TYPED_TEST(ElementwiseTest, ResultsDoNotDependOnThreadCount) {
  using T = TypeParam;
  const Dims out = {513, 301}, ad = {513, 301}, bd = {1, 301}, cd = {513, 1};
  const auto a = random_vector<T>(513 * 301, 1, -2, 2), b = random_vector<T>(301, 2, -2, 2),
             dy = random_vector<T>(513 * 301, 3, -2, 2);
  expect_same_for_thread_counts([&] {
    std::vector<T> db(301), dc(513), y(a.size());
    binary(BinaryOp::Times, out, ad, a.data(), bd, b.data(), y.data());
    binary_backward(BinaryOp::Times, 1, out, ad, a.data(), bd, b.data(), dy.data(), db.data(),
                    false);
    binary_backward<T>(BinaryOp::Plus, 1, out, ad, nullptr, cd, nullptr, dy.data(), dc.data(),
                       false);
    y.insert(y.end(), db.begin(), db.end());
    y.insert(y.end(), dc.begin(), dc.end());
    return y;
  });
}

TYPED_TEST(ElementwiseTest, TrigonometricKernelsTakeStdBeyondTheReductionBound) {
  using T = TypeParam;
  const size_t n = 10000;  // several blocks, one of them with large arguments
  auto x = random_vector<T>(n, 5, -100, 100);
  for (size_t i : {size_t{4100}, size_t{4101}, size_t{9999}}) x[i] = T(i) * T(1e6);
  x[4102] = T(-3e30);
  const auto dy = random_vector<T>(n, 6, -2, 2);
  std::vector<T> y(n), dx(n);
  for (UnaryOp op : {UnaryOp::Sin, UnaryOp::Cos, UnaryOp::Tan}) {
    unary(op, n, x.data(), y.data());
    for (size_t i = 0; i < n; ++i) {
      const T want = op == UnaryOp::Sin ? std::sin(x[i])
                                        : (op == UnaryOp::Cos ? std::cos(x[i]) : std::tan(x[i]));
      ASSERT_NEAR(y[i], want, tolerance<T>() * (1 + std::abs(want))) << int(op) << " " << x[i];
    }
  }
  unary_backward(UnaryOp::Sin, n, x.data(), y.data(), dy.data(), dx.data(), false);
  for (size_t i = 0; i < n; ++i)
    ASSERT_NEAR(dx[i], dy[i] * std::cos(x[i]), 2 * tolerance<T>()) << x[i];
  unary_backward(UnaryOp::Cos, n, x.data(), y.data(), dy.data(), dx.data(), false);
  for (size_t i = 0; i < n; ++i)
    ASSERT_NEAR(dx[i], -dy[i] * std::sin(x[i]), 2 * tolerance<T>()) << x[i];
}

TYPED_TEST(ElementwiseTest, PowIsCntksSafePower) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> a = {-2, -2,   -2,  0,   0,   0,    2, -8, 4,   nan, -2, -2,
                            3,  -0.5, inf, inf, inf, -inf, 1, -1, 0.5, 2,   nan};
  const std::vector<T> b = {3,   2,  0.5, 0,   3,  -1, -1,  T(1) / 3, 0.5, 0,   inf, 4e7f,
                            0.5, -3, 0,   0.5, -2, 3,  inf, inf,      inf, nan, 2};
  const std::vector<T> want = {
      -8, 4, nan, 1, 0,    0, 0.5, nan, 2,   1,  -inf, T(std::pow(2.0, 4e7)), T(std::sqrt(3.0)),
      -8, 1, inf, 0, -inf, 1, -1,  0,   nan, nan};
  std::vector<T> y(a.size());
  const Dims d = {a.size()};
  binary(BinaryOp::Pow, d, d, a.data(), d, b.data(), y.data());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(y[i])) << i;
    else if (std::isinf(want[i]))
      EXPECT_EQ(y[i], want[i]) << i;
    else
      EXPECT_NEAR(y[i], want[i], tolerance<T>() * std::abs(want[i])) << i;
  }
}

// The vectorized loop (a length of many vectors and a tail) against CNTK's safe power on doubles:
// negative bases with integer and other exponents, zeros, and the gradients.
TYPED_TEST(ElementwiseTest, PowMatchesTheSafePowerOnLongInputs) {
  using T = TypeParam;
  auto reference = [](double u, double v) {
    if (v == 0) return 1.0;
    if (u == 0) return 0.0;
    if (u > 0) return std::pow(u, v);
    if (std::trunc(v) != v) return std::numeric_limits<double>::quiet_NaN();
    return std::pow(u, v);  // the sign of an odd power
  };
  const size_t n = 1003;
  std::vector<T> a(n), b(n), dy(n, T(0.5)), y(n), da(n), db(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = T((int(i % 41) - 20) / 8.0);                                  // -2.5 .. 2.5 with 0
    b[i] = i % 3 == 0 ? T(int(i % 7) - 3) : T((int(i % 13) - 6) / 2.5);  // integers and others
  }
  const Dims d = {n};
  binary(BinaryOp::Pow, d, d, a.data(), d, b.data(), y.data());
  binary_backward(BinaryOp::Pow, 0, d, d, a.data(), d, b.data(), dy.data(), da.data(), false);
  binary_backward(BinaryOp::Pow, 1, d, d, a.data(), d, b.data(), dy.data(), db.data(), false);
  for (size_t i = 0; i < n; ++i) {
    const double u = a[i], v = b[i], want = reference(u, v);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << u << "^" << v;
      continue;
    }
    EXPECT_NEAR(y[i], want, 1e-6 * std::abs(want)) << u << "^" << v;
    EXPECT_NEAR(da[i], 0.5 * v * reference(u, v - 1), 1e-6 * std::abs(v * reference(u, v - 1)))
        << u << "^" << v;
    const double dv = u <= 0 ? 0.0 : 0.5 * want * std::log(u);
    EXPECT_NEAR(db[i], dv, 1e-6 * std::abs(dv) + 1e-7) << u << "^" << v;
  }
}

}  // namespace
}  // namespace loom::kernels
