#include "loom/kernels/sparse.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace loom::kernels {
namespace {

template <typename T>
std::vector<T> random_vector(size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(gen));
  return v;
}

template <typename T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

// A random M x K CSR matrix with about `per_row` entries a row (some rows empty), and its dense
// copy.
template <typename T>
struct Csr {
  std::vector<int32_t> offsets{0}, cols;
  std::vector<T> values;
  std::vector<double> dense;
};

template <typename T>
Csr<T> random_csr(size_t M, size_t K, size_t per_row, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<size_t> count(0, 2 * per_row);
  std::uniform_real_distribution<double> value(-1, 1);
  Csr<T> a;
  a.dense.assign(M * K, 0.0);
  for (size_t i = 0; i < M; ++i) {
    const size_t c = K ? count(gen) : 0;
    for (size_t p = 0; p < c; ++p) {
      const size_t col = (i * 7 + p * 13) % K;  // distinct while c <= K / gcd
      if (a.dense[i * K + col] != 0) continue;
      a.cols.push_back(static_cast<int32_t>(col));
      a.values.push_back(static_cast<T>(value(gen)));
      a.dense[i * K + col] = a.values.back();
    }
    a.offsets.push_back(static_cast<int32_t>(a.cols.size()));
  }
  return a;
}

template <typename T>
void check_csr_gemm(size_t M, size_t K, size_t N, size_t per_row, T alpha, T beta, unsigned seed) {
  const Csr<T> a = random_csr<T>(M, K, per_row, seed);
  const size_t ldb = N + 2, ldc = N + 1;
  const auto B = random_vector<T>(K * ldb, seed + 1);
  auto C = random_vector<T>(M * ldc, seed + 2);
  const auto C0 = C;
  if (beta == T(0)) std::fill(C.begin(), C.end(), std::numeric_limits<T>::quiet_NaN());
  csr_gemm(M, N, a.offsets.data(), a.cols.data(), a.values.data(), B.data(), ldb, alpha, beta,
           C.data(), ldc);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      double s = 0, mag = 0;
      for (size_t k = 0; k < K; ++k) {
        s += a.dense[i * K + k] * B[k * ldb + j];
        mag += std::abs(a.dense[i * K + k] * B[k * ldb + j]);
      }
      const double c0 = beta == T(0) ? 0.0 : double(C0[i * ldc + j]);
      const double want = double(alpha) * s + double(beta) * c0;
      ASSERT_NEAR(C[i * ldc + j], want, tolerance<T>() * (1 + mag + std::abs(c0)))
          << M << "x" << K << "x" << N << " at " << i << "," << j;
    }
}

template <typename T>
void check_csr_transpose_gemm(size_t M, size_t K, size_t N, size_t per_row, T alpha, T beta,
                              unsigned seed) {
  const Csr<T> a = random_csr<T>(M, K, per_row, seed);
  const size_t ldd = N + 2, ldc = N + 1;
  const auto D = random_vector<T>(M * ldd, seed + 1);
  auto C = random_vector<T>(K * ldc, seed + 2);
  const auto C0 = C;
  if (beta == T(0)) std::fill(C.begin(), C.end(), std::numeric_limits<T>::quiet_NaN());
  csr_transpose_gemm(M, K, N, a.offsets.data(), a.cols.data(), a.values.data(), D.data(), ldd,
                     alpha, beta, C.data(), ldc);
  for (size_t k = 0; k < K; ++k)
    for (size_t j = 0; j < N; ++j) {
      double s = 0, mag = 0;
      for (size_t i = 0; i < M; ++i) {
        s += a.dense[i * K + k] * D[i * ldd + j];
        mag += std::abs(a.dense[i * K + k] * D[i * ldd + j]);
      }
      const double c0 = beta == T(0) ? 0.0 : double(C0[k * ldc + j]);
      const double want = double(alpha) * s + double(beta) * c0;
      ASSERT_NEAR(C[k * ldc + j], want, tolerance<T>() * (1 + mag + std::abs(c0)))
          << M << "x" << K << "x" << N << " at " << k << "," << j;
    }
}

template <typename T>
class SparseTest : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SparseTest, Types);

struct Case {
  size_t M, K, N, per_row;
};
const Case kCases[] = {{0, 4, 3, 1},  {3, 0, 3, 1},    {4, 5, 0, 1},       {1, 1, 1, 1},
                       {6, 10, 7, 1}, {20, 50, 33, 3}, {300, 200, 130, 2}, {2000, 100, 40, 1}};

TYPED_TEST(SparseTest, CsrGemmMatchesDense) {
  using T = TypeParam;
  unsigned seed = 1;
  for (const Case& c : kCases) {
    check_csr_gemm<T>(c.M, c.K, c.N, c.per_row, T(1), T(0), seed++);
    check_csr_gemm<T>(c.M, c.K, c.N, c.per_row, T(-0.5), T(1), seed++);
    check_csr_gemm<T>(c.M, c.K, c.N, c.per_row, T(2), T(0.25), seed++);
  }
}

TYPED_TEST(SparseTest, CsrTransposeGemmMatchesDense) {
  using T = TypeParam;
  unsigned seed = 100;
  for (const Case& c : kCases) {
    check_csr_transpose_gemm<T>(c.M, c.K, c.N, c.per_row, T(1), T(0), seed++);
    check_csr_transpose_gemm<T>(c.M, c.K, c.N, c.per_row, T(-0.5), T(1), seed++);
    check_csr_transpose_gemm<T>(c.M, c.K, c.N, c.per_row, T(2), T(0.25), seed++);
  }
}

TYPED_TEST(SparseTest, ResultsDoNotDependOnThreadCount) {
  using T = TypeParam;
  // Many rows of A hit the same columns, so C's rows collect many terms each.
  const size_t M = 4000, K = 50, N = 300;
  const Csr<T> a = random_csr<T>(M, K, 3, 5);
  const auto D = random_vector<T>(M * N, 6), B = random_vector<T>(K * N, 7);
  const int saved = omp_get_max_threads();
  std::vector<std::vector<T>> runs;
  for (int threads : {1, 3, 3}) {
    omp_set_num_threads(threads);
    std::vector<T> C(K * N), E(M * N);
    csr_transpose_gemm(M, K, N, a.offsets.data(), a.cols.data(), a.values.data(), D.data(), N, T(1),
                       T(0), C.data(), N);
    csr_gemm(M, N, a.offsets.data(), a.cols.data(), a.values.data(), B.data(), N, T(1), T(0),
             E.data(), N);
    C.insert(C.end(), E.begin(), E.end());
    runs.push_back(C);
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[1], runs[2]);
}

}  // namespace
}  // namespace loom::kernels
