#include "loom/kernels/gemm.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "loom/core/error.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/onednn.h"

namespace loom::kernels {
namespace {

void check_dims(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, size_t lda, size_t ldb,
                size_t ldc) {
  const size_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
  LOOM_CHECK(lda >= std::max<size_t>(a_cols, 1), ArgumentError, "gemm: lda ", lda,
             " is smaller than A's ", a_cols, " columns");
  LOOM_CHECK(ldb >= std::max<size_t>(b_cols, 1), ArgumentError, "gemm: ldb ", ldb,
             " is smaller than B's ", b_cols, " columns");
  LOOM_CHECK(ldc >= std::max<size_t>(N, 1), ArgumentError, "gemm: ldc ", ldc,
             " is smaller than C's ", N, " columns");
}

// C = beta * C; beta == 0 writes zeros without reading C.
template <typename T>
void scale_c(size_t M, size_t N, T beta, T* C, size_t ldc) {
  if (beta == T(1)) return;
  detail::parallel_for(M, M * N, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      T* c = C + i * ldc;
      if (beta == T(0)) {
        std::fill(c, c + N, T(0));
      } else {
#pragma omp simd
        for (size_t j = 0; j < N; ++j) c[j] *= beta;
      }
    }
  });
}

// Blocking for the double loop: a KC x NC panel of op(B) (1 MiB) stays in L2 while row blocks of
// MR rows of C stream past it, and each MR x 8 tile of C stays in registers across the panel.
constexpr size_t kNC = 512, kKC = 256, kMR = 4;

// Four doubles (GCC/Clang vector extension): one AVX register, or two SSE ones. Written out
// because the auto-vectorizer picks the k loop of the tile and gathers. Loads and stores go
// through memcpy (unaligned), and no function takes or returns one, which keeps the ABI as is.
using V4 = double __attribute__((vector_size(32)));

// c[R x nc] += ap[R x kc] * bp[kc x nc], all row-major with leading dims kc, nc and ldc.
template <size_t R>
void tile_rows(size_t nc, size_t kc, const double* ap, const double* bp, double* c, size_t ldc) {
  size_t j = 0;
  for (; j + 8 <= nc; j += 8) {
    V4 acc[R][2];
    for (size_t r = 0; r < R; ++r) std::memcpy(&acc[r], c + r * ldc + j, sizeof acc[r]);
    for (size_t k = 0; k < kc; ++k) {
      V4 b0, b1;
      std::memcpy(&b0, bp + k * nc + j, sizeof b0);
      std::memcpy(&b1, bp + k * nc + j + 4, sizeof b1);
      for (size_t r = 0; r < R; ++r) {
        const double a = ap[r * kc + k];
        acc[r][0] += a * b0;
        acc[r][1] += a * b1;
      }
    }
    for (size_t r = 0; r < R; ++r) std::memcpy(c + r * ldc + j, &acc[r], sizeof acc[r]);
  }
  for (; j < nc; ++j) {
    for (size_t r = 0; r < R; ++r) {
      double s = c[r * ldc + j];
      for (size_t k = 0; k < kc; ++k) s += ap[r * kc + k] * bp[k * nc + j];
      c[r * ldc + j] = s;
    }
  }
}

// oneDNN splits any product over all OpenMP threads; below detail::kGrain elements of work per
// thread (kMacsPerElement multiply-adds each) the fork/join and cache traffic cost more than
// they save (a 32x784x10 step took 5 µs on one thread and 9-31 µs on two here), so small
// products get fewer threads while this lives.
class ThreadsForProduct {
 public:
  explicit ThreadsForProduct(size_t multiply_adds)
      : max_(omp_get_max_threads()),
        threads_(int(std::clamp<size_t>(multiply_adds / detail::kMacsPerElement / detail::kGrain, 1,
                                        size_t(max_)))) {
    if (threads_ != max_) omp_set_num_threads(threads_);
  }
  ~ThreadsForProduct() {
    if (threads_ != max_) omp_set_num_threads(max_);
  }
  ThreadsForProduct(const ThreadsForProduct&) = delete;
  ThreadsForProduct& operator=(const ThreadsForProduct&) = delete;

 private:
  int max_, threads_;
};

}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, float alpha,
                 const float* A, size_t lda, const float* B, size_t ldb, float beta, float* C,
                 size_t ldc) {
  check_dims(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  // oneDNN rejects K == 0; BLAS semantics leave C = beta * C then (and when alpha == 0).
  if (K == 0 || alpha == 0.0f) return scale_c(M, N, beta, C, ldc);
  const auto d = [](size_t v) { return static_cast<dnnl_dim_t>(v); };
  dnnl_status_t status;
  {
    ThreadsForProduct threads(M * N * K);
    status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', d(M), d(N), d(K), alpha, A,
                        d(lda), B, d(ldb), beta, C, d(ldc));
  }
  LOOM_CHECK(status == dnnl_success, Error, "gemm: oneDNN sgemm failed with status ",
             static_cast<int>(status), " for M=", M, " N=", N, " K=", K);
}

namespace {

struct MatmulBf16 {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  dnnl::memory::desc a, b, c;  // Loom's float32 matrices, strided
};

MatmulBf16 make_matmul_bf16(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, float alpha,
                            size_t lda, size_t ldb, float beta, size_t ldc) {
  using dnnl::memory;
  const auto d = [](size_t v) { return memory::dim(v); };
  const auto f32 = memory::data_type::f32, bf16 = memory::data_type::bf16;
  // op(A) is M x K: A's rows, or A's columns when transposed; likewise op(B), K x N.
  const memory::desc a({d(M), d(K)}, f32,
                       trans_a ? memory::dims{1, d(lda)} : memory::dims{d(lda), 1});
  const memory::desc b({d(K), d(N)}, f32,
                       trans_b ? memory::dims{1, d(ldb)} : memory::dims{d(ldb), 1});
  const memory::desc c({d(M), d(N)}, f32, memory::dims{d(ldc), 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);
    attr.set_post_ops(sum);
  }
  const memory::desc a16({d(M), d(K)}, bf16, memory::format_tag::any),
      b16({d(K), d(N)}, bf16, memory::format_tag::any);
  dnnl::matmul::primitive_desc pd({a16, b16, c}, attr, onednn::engine());
  return {pd, dnnl::matmul(pd), a, b, c};
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, float alpha,
               const float* A, size_t lda, const float* B, size_t ldb, float beta, float* C,
               size_t ldc) {
  namespace dnn = onednn;
  check_dims(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.0f) return scale_c(M, N, beta, C, ldc);
  const auto i = [](auto v) { return dnn::dims::value_type(v); };
  const std::string k = dnn::key(
      "matmul_bf16", {{i(trans_a), i(trans_b), i(M), i(N), i(K), i(lda), i(ldb), i(ldc)},
                      {i(std::bit_cast<uint32_t>(alpha)), i(std::bit_cast<uint32_t>(beta))}});
  MatmulBf16& p = dnn::cached<MatmulBf16>(
      k, [&] { return make_matmul_bf16(trans_a, trans_b, M, N, K, alpha, lda, ldb, beta, ldc); });
  ThreadsForProduct threads(M * N * K);
  const dnnl::memory a = dnn::to_layout(p.a, A, p.pd.src_desc(), 0);
  const dnnl::memory b = dnn::to_layout(p.b, B, p.pd.weights_desc(), 1);
  dnn::execute(p.prim,
               {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, dnn::wrap(p.c, C)}},
               "bf16 matrix product");
}

template <>
void gemm<double>(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, double alpha,
                  const double* A, size_t lda, const double* B, size_t ldb, double beta, double* C,
                  size_t ldc) {
  check_dims(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  scale_c(M, N, beta, C, ldc);
  if (K == 0 || alpha == 0.0) return;
  // Grows once per thread to one panel; later calls reuse it.
  thread_local std::vector<double> panel;
  panel.resize(kKC * kNC);
  double* bp = panel.data();
  const size_t row_blocks = (M + kMR - 1) / kMR;
  for (size_t jc = 0; jc < N; jc += kNC) {
    const size_t nc = std::min(kNC, N - jc);
    for (size_t pc = 0; pc < K; pc += kKC) {
      const size_t kc = std::min(kKC, K - pc);
      for (size_t k = 0; k < kc; ++k)
        for (size_t j = 0; j < nc; ++j)
          bp[k * nc + j] = trans_b ? B[(jc + j) * ldb + pc + k] : B[(pc + k) * ldb + jc + j];
      // Each row block of C belongs to one thread and sums over k in a fixed order.
      detail::parallel_for(row_blocks, M * nc * kc, [&](size_t b0, size_t b1) {
        double ap[kMR * kKC];
        for (size_t blk = b0; blk < b1; ++blk) {
          const size_t i0 = blk * kMR, mr = std::min(kMR, M - i0);
          for (size_t r = 0; r < mr; ++r)
            for (size_t k = 0; k < kc; ++k)
              ap[r * kc + k] =
                  alpha * (trans_a ? A[(pc + k) * lda + i0 + r] : A[(i0 + r) * lda + pc + k]);
          double* c = C + i0 * ldc + jc;
          switch (mr) {
            case 4:
              tile_rows<4>(nc, kc, ap, bp, c, ldc);
              break;
            case 3:
              tile_rows<3>(nc, kc, ap, bp, c, ldc);
              break;
            case 2:
              tile_rows<2>(nc, kc, ap, bp, c, ldc);
              break;
            default:
              tile_rows<1>(nc, kc, ap, bp, c, ldc);
              break;
          }
        }
      });
    }
  }
}

}  // namespace loom::kernels
