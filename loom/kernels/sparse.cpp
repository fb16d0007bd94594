#include "loom/kernels/sparse.h"

#include <algorithm>

#include "loom/kernels/detail.h"

namespace loom::kernels {
namespace {

// c[0..n) = beta * c; beta == 0 writes zeros without reading c.
template <typename T>
void scale_row(size_t n, T beta, T* c) {
  if (beta == T(0)) {
    std::fill(c, c + n, T(0));
  } else if (beta != T(1)) {
#pragma omp simd
    for (size_t j = 0; j < n; ++j) c[j] *= beta;
  }
}

}  // namespace

template <typename T>
void csr_gemm(size_t M, size_t N, const int32_t* row_offsets, const int32_t* col_indices,
              const T* values, const T* B, size_t ldb, T alpha, T beta, T* C, size_t ldc) {
  if (M == 0 || N == 0) return;
  const size_t nnz = static_cast<size_t>(row_offsets[M] - row_offsets[0]);
  detail::parallel_for(M, (nnz + M) * N, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      T* c = C + i * ldc;
      scale_row(N, beta, c);
      for (int32_t p = row_offsets[i]; p < row_offsets[i + 1]; ++p) {
        const T av = alpha * values[p];
        const T* b = B + static_cast<size_t>(col_indices[p]) * ldb;
#pragma omp simd
        for (size_t j = 0; j < N; ++j) c[j] += av * b[j];
      }
    }
  });
}

template <typename T>
void csr_transpose_gemm(size_t M, size_t K, size_t N, const int32_t* row_offsets,
                        const int32_t* col_indices, const T* values, const T* D, size_t ldd,
                        T alpha, T beta, T* C, size_t ldc) {
  if (K == 0 || N == 0) return;
  detail::parallel_for(K, K * N, [&](size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) scale_row(N, beta, C + k * ldc);
  });
  if (M == 0) return;
  // Rows of A scatter into rows of C, so threads split the columns instead: 16 columns per
  // block keeps two threads off one cache line, and every element sums its terms in A's order.
  constexpr size_t kBlock = 16;
  const size_t blocks = (N + kBlock - 1) / kBlock;
  const size_t nnz = static_cast<size_t>(row_offsets[M] - row_offsets[0]);
  detail::parallel_for(blocks, nnz * N, [&](size_t b0, size_t b1) {
    const size_t j0 = b0 * kBlock, j1 = std::min(N, b1 * kBlock);
    for (size_t i = 0; i < M; ++i) {
      const T* d = D + i * ldd;
      for (int32_t p = row_offsets[i]; p < row_offsets[i + 1]; ++p) {
        const T av = alpha * values[p];
        T* c = C + static_cast<size_t>(col_indices[p]) * ldc;
#pragma omp simd
        for (size_t j = j0; j < j1; ++j) c[j] += av * d[j];
      }
    }
  });
}

#define LOOM_INSTANTIATE(T)                                                                     \
  template void csr_gemm<T>(size_t, size_t, const int32_t*, const int32_t*, const T*, const T*, \
                            size_t, T, T, T*, size_t);                                          \
  template void csr_transpose_gemm<T>(size_t, size_t, size_t, const int32_t*, const int32_t*,   \
                                      const T*, const T*, size_t, T, T, T*, size_t);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
