#include "loom/kernels/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/precision.h"
#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using namespace loom::testing;

// Which float kernel check_gemm runs: gemm, gemm_bf16 or gemm_narrow.
enum class Kernel { Gemm, Bf16, Narrow };

// Checks gemm (or another kernel) on matrices stored with `pad` extra columns against a double
// reference.
template <typename T>
void check_gemm(bool ta, bool tb, size_t M, size_t N, size_t K, T alpha, T beta, size_t pad,
                unsigned seed, Kernel kernel = Kernel::Gemm) {
  const bool bf16 = kernel == Kernel::Bf16;
  const size_t a_rows = ta ? K : M, a_cols = ta ? M : K;
  const size_t b_rows = tb ? N : K, b_cols = tb ? K : N;
  const size_t lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
  const auto A = random_vector<T>(a_rows * lda, seed);
  const auto B = random_vector<T>(b_rows * ldb, seed + 1);
  GemmOutput<T> C(M * ldc, beta, seed + 2);
  if constexpr (std::is_same_v<T, float>) {
    if (bf16)
      gemm_bf16(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.c.data(), ldc);
    if (kernel == Kernel::Narrow) {
      ASSERT_TRUE(
          gemm_narrow(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.c.data(), ldc));
    }
  }
  if (kernel == Kernel::Gemm)
    gemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.c.data(), ldc);
  // bf16 rounds each input to 8 significant bits: a product is off by at most 2^-8 of its size.
  const double tol = bf16 ? 1.0 / 256 : tolerance<T>();
  for (size_t i = 0; i < M; ++i) {
    for (size_t j = 0; j < N; ++j) {
      const GemmReference r = gemm_reference(
          K, [&](size_t k) -> double { return ta ? A[k * lda + i] : A[i * lda + k]; },
          [&](size_t k) -> double { return tb ? B[j * ldb + k] : B[k * ldb + j]; }, alpha, beta,
          C.initial[i * ldc + j]);
      const double scale = std::abs(double(alpha)) * r.mag + std::abs(double(beta) * r.c0) + 1;
      ASSERT_NEAR(C.c[i * ldc + j], r.want, tol * scale)
          << "ta " << ta << " tb " << tb << " M " << M << " N " << N << " K " << K << " at " << i
          << "," << j;
    }
    // Padding columns are untouched.
    for (size_t j = N; j < ldc; ++j) {
      if (beta == T(0))
        ASSERT_TRUE(std::isnan(C.c[i * ldc + j]));
      else
        ASSERT_EQ(C.c[i * ldc + j], C.initial[i * ldc + j]);
    }
  }
}

template <typename T>
class GemmTest : public ::testing::Test {};
TYPED_TEST_SUITE(GemmTest, RealTypes);

TYPED_TEST(GemmTest, AllTranspositionsAndSizes) {
  using T = TypeParam;
  struct Size {
    size_t M, N, K;
  };
  // The last two are the logistic regression's products (bench/logistic_regression.cpp), which
  // gemm<float> gives to gemm_narrow on AVX-512.
  const Size sizes[] = {{1, 1, 1},      {7, 5, 3},   {4, 9, 1},     {33, 17, 65},
                        {130, 70, 300}, {5, 600, 7}, {32, 10, 784}, {784, 10, 32}};
  unsigned seed = 1;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const Size& s : sizes)
        for (size_t pad : {size_t{0}, size_t{3}}) {
          check_gemm<T>(ta, tb, s.M, s.N, s.K, T(1), T(0), pad, seed++);
          check_gemm<T>(ta, tb, s.M, s.N, s.K, T(-0.5), T(1), pad, seed++);
          check_gemm<T>(ta, tb, s.M, s.N, s.K, T(2), T(0.25), pad, seed++);
        }
}

TYPED_TEST(GemmTest, LargeProductsUseThreads) {
  using T = TypeParam;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check_gemm<T>(ta, tb, 257, 530, 260, T(1), T(0.5), 1, 7);
}

TYPED_TEST(GemmTest, DegenerateSizes) {
  using T = TypeParam;
  // K == 0 or alpha == 0: C = beta * C, and beta == 0 clears NaN.
  for (bool ta : {false, true}) {
    check_gemm<T>(ta, false, 3, 4, 0, T(1), T(0.5), 1, 1);  // lda >= 1 even for K == 0
    check_gemm<T>(ta, true, 3, 4, 0, T(1), T(0), 1, 2);
    check_gemm<T>(ta, false, 3, 4, 5, T(0), T(0), 0, 3);
    check_gemm<T>(ta, false, 3, 4, 5, T(0), T(2), 0, 4);
  }
  // Empty outputs touch nothing.
  gemm<T>(false, false, 0, 4, 5, T(1), nullptr, 5, nullptr, 4, T(0), nullptr, 4);
  gemm<T>(false, false, 3, 0, 5, T(1), nullptr, 5, nullptr, 1, T(0), nullptr, 1);
}

// bf16 mixed precision: every transposition, padding, alpha and beta, and a product large
// enough for threads.
TEST(GemmBf16Test, AllTranspositionsAndSizes) {
  if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  unsigned seed = 1;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      for (size_t pad : {size_t{0}, size_t{3}}) {
        check_gemm<float>(ta, tb, 33, 17, 65, 1.0f, 0.0f, pad, seed++, Kernel::Bf16);
        check_gemm<float>(ta, tb, 7, 5, 3, -0.5f, 1.0f, pad, seed++, Kernel::Bf16);
        check_gemm<float>(ta, tb, 130, 70, 300, 2.0f, 0.25f, pad, seed++, Kernel::Bf16);
      }
      check_gemm<float>(ta, tb, 257, 530, 260, 1.0f, 0.5f, 1, seed++, Kernel::Bf16);
    }
  check_gemm<float>(false, false, 3, 4, 0, 1.0f, 0.5f, 1, seed++, Kernel::Bf16);  // C = beta * C
}

// gemm_narrow (N <= 16, AVX-512), called directly, at every width: M and K odd and on both
// sides of the kernel's blocks (16 lanes, tiles of up to 6 rows or 64 rows of C), K below one
// vector too, padded leading dimensions, alpha != 1, beta 0 with NaN in C, and beta != 0.
bool narrow_runs() {
  float x = 0;
  return gemm_narrow(false, false, 1, 1, 1, 1.0f, &x, 1, &x, 1, 0.0f, &x, 1);
}

TEST(GemmNarrow, EveryTranspositionAndWidth) {
  if (!narrow_runs()) GTEST_SKIP() << "no AVX-512 here, or LOOM_MAX_CPU_ISA=avx2";
  struct Size {
    size_t M, K;
  };
  const Size sizes[] = {{1, 1}, {5, 7}, {37, 53}, {67, 19}, {23, 129}};
  unsigned seed = 1;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (size_t n = 1; n <= 16; ++n)
        for (const Size& s : sizes) {
          check_gemm<float>(ta, tb, s.M, n, s.K, 1.0f, 0.0f, 0, seed++, Kernel::Narrow);
          check_gemm<float>(ta, tb, s.M, n, s.K, -0.75f, 0.0f, 3, seed++, Kernel::Narrow);
          check_gemm<float>(ta, tb, s.M, n, s.K, 1.5f, 0.5f, 3, seed++, Kernel::Narrow);
        }
}

TEST(GemmNarrow, DegenerateSizesAndWideProducts) {
  if (!narrow_runs()) GTEST_SKIP() << "no AVX-512 here, or LOOM_MAX_CPU_ISA=avx2";
  for (bool ta : {false, true}) {
    check_gemm<float>(ta, false, 3, 4, 0, 1.0f, 0.5f, 1, 1, Kernel::Narrow);  // C = beta * C
    check_gemm<float>(ta, true, 3, 4, 5, 0.0f, 0.0f, 0, 2, Kernel::Narrow);   // clears NaN
  }
  EXPECT_TRUE(gemm_narrow(false, false, 0, 4, 5, 1.0f, nullptr, 5, nullptr, 4, 0.0f, nullptr, 4));
  EXPECT_THROW(gemm_narrow(false, false, 3, 4, 4, 1.0f, nullptr, 3, nullptr, 4, 0.0f, nullptr, 4),
               ArgumentError);
  // N > 16: not narrow; C untouched. gemm<float> (oneDNN) for N up to 20.
  std::vector<float> a(17 * 5, 1.0f), b(17 * 5, 1.0f), c(3 * 17, 7.0f);
  EXPECT_FALSE(
      gemm_narrow(false, false, 3, 17, 5, 1.0f, a.data(), 5, b.data(), 17, 0.0f, c.data(), 17));
  EXPECT_EQ(c, std::vector<float>(3 * 17, 7.0f));
  unsigned seed = 100;
  for (bool ta : {false, true})
    for (size_t n = 17; n <= 20; ++n) check_gemm<float>(ta, ta, 37, n, 53, 1.5f, 0.5f, 3, seed++);
}

// Products large enough for detail::parallel_for to split them: the rows of C go to threads
// whole, so every element is summed in the same order on 1, 2 or 3 threads.
TEST(GemmNarrow, ResultDoesNotDependOnThreadCount) {
  if (!narrow_runs()) GTEST_SKIP() << "no AVX-512 here, or LOOM_MAX_CPU_ISA=avx2";
  const size_t M = 1001, N = 10, K = 784;
  const auto x = random_vector<float>(M * K, 1), w = random_vector<float>(K * N, 2),
             dy = random_vector<float>(M * N, 3);
  expect_same_for_thread_counts(
      [&] {
        // The Times op's forward product and weight gradient (ops/linear.cpp), then the same
        // with op(B) = Bᵀ: w read as N x K, dy as N x M.
        std::vector<float> y(M * N), dw(K * N), y_t(M * N), dw_t(K * N);
        EXPECT_TRUE(
            gemm_narrow(false, false, M, N, K, 1.0f, x.data(), K, w.data(), N, 0.0f, y.data(), N));
        EXPECT_TRUE(
            gemm_narrow(true, false, K, N, M, 1.0f, x.data(), K, dy.data(), N, 0.0f, dw.data(), N));
        EXPECT_TRUE(
            gemm_narrow(false, true, M, N, K, 1.0f, x.data(), K, w.data(), K, 0.0f, y_t.data(), N));
        EXPECT_TRUE(gemm_narrow(true, true, K, N, M, 1.0f, x.data(), K, dy.data(), M, 0.0f,
                                dw_t.data(), N));
        for (const auto* v : {&dw, &y_t, &dw_t}) y.insert(y.end(), v->begin(), v->end());
        return y;
      },
      {1, 2, 3});
}

TYPED_TEST(GemmTest, RejectsShortLeadingDimensions) {
  using T = TypeParam;
  std::vector<T> a(12), b(12), c(12);
  EXPECT_THROW(gemm<T>(false, false, 3, 4, 4, T(1), a.data(), 3, b.data(), 4, T(0), c.data(), 4),
               ArgumentError);
  EXPECT_THROW(gemm<T>(true, false, 3, 4, 4, T(1), a.data(), 2, b.data(), 4, T(0), c.data(), 4),
               ArgumentError);
  EXPECT_THROW(gemm<T>(false, true, 3, 4, 4, T(1), a.data(), 4, b.data(), 3, T(0), c.data(), 4),
               ArgumentError);
  EXPECT_THROW(gemm<T>(false, false, 3, 4, 4, T(1), a.data(), 4, b.data(), 4, T(0), c.data(), 3),
               ArgumentError);
}

TEST(GemmDouble, ResultDoesNotDependOnThreadCount) {
  const size_t M = 300, N = 600, K = 700;
  const auto A = random_vector<double>(M * K, 1), B = random_vector<double>(K * N, 2);
  expect_same_for_thread_counts([&] {
    std::vector<double> C(M * N);
    gemm<double>(false, true, M, N, K, 1.0, A.data(), K, B.data(), K, 0.0, C.data(), N);
    return C;
  });
}

}  // namespace
}  // namespace loom::kernels
