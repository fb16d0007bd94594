// Dense matrix product over row-major matrices, BLAS-style. Conventions as in elementwise.h.
#pragma once

#include <cstddef>

namespace loom::kernels {

// C (M x N, leading dimension ldc) = alpha * op(A) * op(B) + beta * C, where op(A) is M x K
// (A is M x K with lda >= K, or K x M with lda >= M when trans_a) and op(B) is K x N (ldb >= N,
// or >= K when trans_b). With beta == 0, C is not read (it may hold NaN). float runs oneDNN's
// sgemm, or gemm_narrow where that is faster; double runs a cache-blocked loop whose result does
// not depend on the thread count. Throws ArgumentError on a leading dimension that is too small.
template <typename T>
void gemm(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, T alpha, const T* A, size_t lda,
          const T* B, size_t ldb, T beta, T* C, size_t ldc);

// gemm<float>'s kernel for narrow products, N <= 16, on AVX-512 (vectors along K or M, where
// oneDNN's run along N), whose result does not depend on the thread count. gemm<float> calls it
// where it beats oneDNN; the tests and bench/narrow_gemm.cpp call it directly. Returns false,
// touching nothing, where N > 16 or the CPU has no AVX-512 (kernels/cpu_isa.h). Throws as gemm.
bool gemm_narrow(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, float alpha,
                 const float* A, size_t lda, const float* B, size_t ldb, float beta, float* C,
                 size_t ldc);

// Products of fewer multiply-adds (M N K) than this compute in float32 even in bf16 mode (the
// callers check): converting the operands to bf16 costs more than AMX saves. On a Xeon with
// AMX, the MLP's and the convnet's dense products of 2.6 M to 14 M multiply-adds took 0.85x to
// 1.44x float32's time in bf16, those of 40 M 0.76x to 0.84x, and 512^3 0.41x (bench/README.md).
constexpr size_t kMinBf16Product = size_t(1) << 25;

// gemm<float> in bf16 mixed precision (ComputePrecision::BFloat16): op(A) and op(B) rounded to
// bfloat16 (oneDNN reorders them), products summed in float32 into the float32 C. oneDNN's
// matmul primitive, one per shape, cached per thread.
void gemm_bf16(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, float alpha,
               const float* A, size_t lda, const float* B, size_t ldb, float beta, float* C,
               size_t ldc);

}  // namespace loom::kernels
