#include "loom/kernels/sparse.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using namespace loom::testing;

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

// Checks csr_gemm (C = alpha * A B + beta * C) or, with `transpose`, csr_transpose_gemm
// (C = alpha * A^T B + beta * C) for a random M x K CSR matrix A against a double reference.
// B (the dense factor, D in sparse.h) and C are stored with padding columns.
template <typename T>
void check_csr_gemm(bool transpose, size_t M, size_t K, size_t N, size_t per_row, T alpha, T beta,
                    unsigned seed) {
  const Csr<T> a = random_csr<T>(M, K, per_row, seed);
  const size_t rows = transpose ? K : M, inner = transpose ? M : K;  // op(A) is rows x inner
  const size_t ldb = N + 2, ldc = N + 1;
  const auto B = random_vector<T>(inner * ldb, seed + 1);
  GemmOutput<T> C(rows * ldc, beta, seed + 2);
  if (transpose)
    csr_transpose_gemm(M, K, N, a.offsets.data(), a.cols.data(), a.values.data(), B.data(), ldb,
                       alpha, beta, C.c.data(), ldc);
  else
    csr_gemm(M, N, a.offsets.data(), a.cols.data(), a.values.data(), B.data(), ldb, alpha, beta,
             C.c.data(), ldc);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < N; ++j) {
      const GemmReference r = gemm_reference(
          inner, [&](size_t k) { return transpose ? a.dense[k * K + i] : a.dense[i * K + k]; },
          [&](size_t k) -> double { return B[k * ldb + j]; }, alpha, beta, C.initial[i * ldc + j]);
      ASSERT_NEAR(C.c[i * ldc + j], r.want, tolerance<T>() * (1 + r.mag + std::abs(r.c0)))
          << M << "x" << K << "x" << N << " at " << i << "," << j;
    }
}

template <typename T>
class SparseTest : public ::testing::Test {};
TYPED_TEST_SUITE(SparseTest, RealTypes);

struct Case {
  size_t M, K, N, per_row;
};
const Case kCases[] = {{0, 4, 3, 1},  {3, 0, 3, 1},    {4, 5, 0, 1},       {1, 1, 1, 1},
                       {6, 10, 7, 1}, {20, 50, 33, 3}, {300, 200, 130, 2}, {2000, 100, 40, 1}};

// Every case with three (alpha, beta) pairs, beta == 0 (C not read) among them.
template <typename T>
void check_all_cases(bool transpose, unsigned seed) {
  for (const Case& c : kCases) {
    check_csr_gemm<T>(transpose, c.M, c.K, c.N, c.per_row, T(1), T(0), seed++);
    check_csr_gemm<T>(transpose, c.M, c.K, c.N, c.per_row, T(-0.5), T(1), seed++);
    check_csr_gemm<T>(transpose, c.M, c.K, c.N, c.per_row, T(2), T(0.25), seed++);
  }
}

TYPED_TEST(SparseTest, CsrGemmMatchesDense) {
  check_all_cases<TypeParam>(false, 1);
}

TYPED_TEST(SparseTest, CsrTransposeGemmMatchesDense) {
  check_all_cases<TypeParam>(true, 100);
}

TYPED_TEST(SparseTest, ResultsDoNotDependOnThreadCount) {
  using T = TypeParam;
  // Many rows of A hit the same columns, so C's rows collect many terms each.
  const size_t M = 4000, K = 50, N = 300;
  const Csr<T> a = random_csr<T>(M, K, 3, 5);
  const auto D = random_vector<T>(M * N, 6), B = random_vector<T>(K * N, 7);
  expect_same_for_thread_counts([&] {
    std::vector<T> C(K * N), E(M * N);
    csr_transpose_gemm(M, K, N, a.offsets.data(), a.cols.data(), a.values.data(), D.data(), N, T(1),
                       T(0), C.data(), N);
    csr_gemm(M, N, a.offsets.data(), a.cols.data(), a.values.data(), B.data(), N, T(1), T(0),
             E.data(), N);
    C.insert(C.end(), E.begin(), E.end());
    return C;
  });
}

}  // namespace
}  // namespace loom::kernels
