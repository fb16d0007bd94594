// Products of a sparse CSR matrix (int32 row offsets and column indices, as NDArrayView stores
// them) with dense row-major matrices: the first layer on one-hot input and its weight
// gradient. The CSR parts must be valid (NDArrayView::sparse_csr checks them). Conventions as
// in elementwise.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::kernels {

// C (M x N) = alpha * A * B + beta * C, where A is M x K in CSR (row_offsets has M + 1 entries)
// and B is K x N dense. With beta == 0, C is not read.
template <typename T>
void csr_gemm(size_t M, size_t N, const int32_t* row_offsets, const int32_t* col_indices,
              const T* values, const T* B, size_t ldb, T alpha, T beta, T* C, size_t ldc);

// C (K x N) = alpha * Aᵀ * D + beta * C, where A is M x K in CSR and D is M x N dense. Threads
// own disjoint column ranges of C, so the result does not depend on the thread count. With
// beta == 0, C is not read.
template <typename T>
void csr_transpose_gemm(size_t M, size_t K, size_t N, const int32_t* row_offsets,
                        const int32_t* col_indices, const T* values, const T* D, size_t ldd,
                        T alpha, T beta, T* C, size_t ldc);

}  // namespace loom::kernels
