#include "loom/kernels/gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "loom/core/error.h"
#include "loom/kernels/cpu_isa.h"
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

// Narrow float products (N <= 16), AVX-512 only. oneDNN's sgemm runs its vectors along N, so at
// N = 10 they carry 10 of 16 lanes and each multiply-add waits on a broadcast load: under half
// the core's peak for the logistic regression's products (bench/README.md). Here the 16 lanes
// run along K or M:
//  - op(A) = A: C[i][j] = A_i . column j of op(B), dot products along K of R rows of A with NC <=
//    8 columns at a time (R x NC vector accumulators), each summed across its lanes at the end.
//    The columns are B's rows when it is transposed, else B transposed into a buffer first.
//  - op(A) = Aᵀ: a row of A holds 16 consecutive rows of C: MB such vectors times each of the N
//    broadcast elements of op(B)'s row, summed over k; the N x 16 blocks are transposed into C.
// Every element of C is summed by one thread in an order that K alone fixes (per lane along k,
// then across lanes), so neither the thread count nor the row blocking changes a bit of it.
LOOM_AVX512_BEGIN
namespace avx512 {

// Sixteen floats. Arrays of them stay in registers only where GCC sees constant indices: the
// loops over them are unrolled early (`#pragma GCC unroll`) and the functions that take them are
// always inlined; otherwise GCC keeps the accumulators in memory and stores them at every step,
// which halves the speed.
using V16 = float __attribute__((vector_size(64)));

__mmask16 first_lanes(size_t n) {
  return __mmask16((1u << std::min<size_t>(n, 16)) - 1);
}
V16 load(__mmask16 m, const float* p) {
  return V16(_mm512_maskz_loadu_ps(m, p));
}
void store(float* p, __mmask16 m, V16 v) {
  _mm512_mask_storeu_ps(p, m, __m512(v));
}

// c = alpha * s + beta * c in the lanes of m (c not read when beta == 0).
void write_lanes(float* c, __mmask16 m, V16 s, float alpha, float beta) {
  V16 out = alpha * s;
  if (beta != 0.0f) out += beta * load(m, c);
  store(c, m, out);
}

// Level L of the 2 x 2 block transposition of rows a and b, in blocks of 2^L lanes: `even` takes
// the even blocks of a and b in turn, `odd` the odd ones.
template <int L, size_t... E>
V16 even(V16 a, V16 b, std::index_sequence<E...>) {
  return __builtin_shufflevector(a, b, int(E >> L & 1 ? 16 + E - (1 << L) : E)...);
}
template <int L, size_t... E>
V16 odd(V16 a, V16 b, std::index_sequence<E...>) {
  return __builtin_shufflevector(a, b, int(E >> L & 1 ? 16 + E : E + (1 << L))...);
}
constexpr auto kLanes = std::make_index_sequence<16>{};

// The 16 x 16 matrix whose rows are v[0..15] becomes its transpose: at level L, rows i and
// i + 2^L swap their off-diagonal blocks.
template <int L = 0>
[[gnu::always_inline]] inline void transpose(V16 (&v)[16]) {
  constexpr int s = 1 << L;
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    if (i & s) continue;
    const V16 a = v[i], b = v[i + s];
    v[i] = even<L>(a, b, kLanes);
    v[i + s] = odd<L>(a, b, kLanes);
  }
  if constexpr (L < 3) transpose<L + 1>(v);
}

// Lane j of the result is the sum of v[j]'s lanes, j < N <= 16: the same levels, adding the two
// halves of each 2 x 2 block transposition, halve the vectors each time.
template <int N>
[[gnu::always_inline]] inline V16 lane_sums(const V16 (&v)[N]) {
  V16 u[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) u[j] = j < N ? v[j] : V16{};
  const auto level = [&]<int L>(std::integral_constant<int, L>) {
#pragma GCC unroll 8
    for (int i = 0; i < 8 >> L; ++i)
      u[i] = even<L>(u[2 * i], u[2 * i + 1], kLanes) + odd<L>(u[2 * i], u[2 * i + 1], kLanes);
  };
  level(std::integral_constant<int, 0>{});
  level(std::integral_constant<int, 1>{});
  level(std::integral_constant<int, 2>{});
  level(std::integral_constant<int, 3>{});
  return u[0];
}

// op(A) = A. R rows and NC columns of C from R rows of A and the NC rows of bt (op(B)'s
// columns, leading dimension ldbt): R x NC accumulators, R + NC loads per R x NC multiply-adds,
// all in the 32 registers. A minibatch comes from memory, in rows too short for the hardware's
// prefetcher: each step also prefetches a line of each of the next `ahead` (<= R) rows, which
// the next tile reads.
template <int NC, int R>
void dot_tile(size_t K, const float* A, size_t lda, size_t ahead, const float* bt, size_t ldbt,
              float alpha, float beta, float* C, size_t ldc) {
  V16 acc[R][NC] = {};
  for (size_t k = 0; k < K; k += 16) {
    const __mmask16 m = first_lanes(K - k);
    V16 a[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      a[r] = load(m, A + r * lda + k);
      if (size_t(r) < ahead) _mm_prefetch(A + (R + r) * lda + k, _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) {
      const V16 b = load(m, bt + j * ldbt + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][j] += a[r] * b;
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    write_lanes(C + r * ldc, first_lanes(NC), lane_sums(acc[r]), alpha, beta);
}

// Rows [i0, i1) of C, NC columns.
template <int NC>
void dot_rows(size_t i0, size_t i1, size_t K, const float* A, size_t lda, const float* bt,
              size_t ldbt, float alpha, float beta, float* C, size_t ldc) {
  constexpr size_t R = NC <= 4 ? 6 : NC <= 6 ? 4 : 3;
  size_t i = i0;
  for (; i + R <= i1; i += R)
    dot_tile<NC, R>(K, A + i * lda, lda, std::min(R, i1 - i - R), bt, ldbt, alpha, beta,
                    C + i * ldc, ldc);
  for (; i < i1; ++i)
    dot_tile<NC, 1>(K, A + i * lda, lda, i + 1 < i1, bt, ldbt, alpha, beta, C + i * ldc, ldc);
}

// bt (n x K, leading dimension ldbt) = the transpose of B (K x n, leading dimension ldb), n <= 16,
// 16 rows of B at a time.
void pack_columns(size_t n, size_t K, const float* B, size_t ldb, float* bt, size_t ldbt) {
  for (size_t k = 0; k < K; k += 16) {
    const size_t rows = std::min<size_t>(16, K - k);
    V16 v[16];
#pragma GCC unroll 16
    for (size_t r = 0; r < 16; ++r)
      v[r] = r < rows ? load(first_lanes(n), B + (k + r) * ldb) : V16{};
    transpose(v);
#pragma GCC unroll 16
    for (size_t j = 0; j < 16; ++j)
      if (j < n) store(bt + j * ldbt + k, first_lanes(rows), v[j]);
  }
}

// A buffer of n floats whose start is 64-byte aligned, kept by the calling thread.
float* scratch(size_t n) {
  thread_local std::vector<float> buffer;
  buffer.resize(n + 16);
  const size_t misalignment = reinterpret_cast<uintptr_t>(buffer.data()) % 64 / sizeof(float);
  return buffer.data() + (misalignment ? 16 - misalignment : 0);
}

// Function tables over the width I + 1.
using DotRows = void (*)(size_t, size_t, size_t, const float*, size_t, const float*, size_t, float,
                         float, float*, size_t);
template <size_t... I>
constexpr DotRows dot_rows_for(size_t nc, std::index_sequence<I...>) {
  constexpr DotRows table[] = {&dot_rows<int(I) + 1>...};
  return table[nc - 1];
}

void gemm_rows(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float* A, size_t lda,
               const float* B, size_t ldb, float beta, float* C, size_t ldc) {
  // Blocks of at most 8 columns, about equal (10 = 5 + 5, 16 = 8 + 8), so that a block of op(B)
  // stays in L1 while all rows of A pass it (both blocks on each tile of rows were no faster).
  const size_t blocks = (N + 7) / 8;
  const auto block_start = [&](size_t b) { return N * b / blocks; };
  const float* bt = B;
  size_t ldbt = ldb;
  if (!trans_b) {
    ldbt = (K + 15) / 16 * 16;
    float* packed = scratch(N * ldbt);
    pack_columns(N, K, B, ldb, packed, ldbt);
    bt = packed;
  }
  detail::parallel_for(M, M * N * K / detail::kMacsPerElement, [&](size_t i0, size_t i1) {
    for (size_t b = 0; b < blocks; ++b) {
      const size_t j0 = block_start(b), nc = block_start(b + 1) - j0;
      dot_rows_for(nc, std::make_index_sequence<8>{})(i0, i1, K, A, lda, bt + j0 * ldbt, ldbt,
                                                      alpha, beta, C + j0, ldc);
    }
  });
}

// op(A) = Aᵀ (A is K x M). `rows` <= 16 MB rows of C from as many columns of A: lane l of vector
// v accumulates row 16 v + l; b is op(B), K x N with leading dimension ldb. A's rows are read
// 64 MB bytes at a time: each step also prefetches the line of A that vector v of the next tile
// reads there, for v < ahead.
template <int N, int MB>
void outer_tile(size_t rows, size_t K, const float* A, size_t lda, size_t ahead, const float* b,
                size_t ldb, float alpha, float beta, float* C, size_t ldc) {
  V16 acc[MB][N] = {};
  __mmask16 m[MB];
#pragma GCC unroll 4
  for (int v = 0; v < MB; ++v) m[v] = first_lanes(rows - std::min(rows, size_t(16 * v)));
  for (size_t k = 0; k < K; ++k) {
    V16 a[MB];
#pragma GCC unroll 4
    for (int v = 0; v < MB; ++v) {
      a[v] = load(m[v], A + k * lda + 16 * v);
      if (size_t(v) < ahead) _mm_prefetch(A + k * lda + 16 * (MB + v), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < MB; ++v) acc[v][j] += b[k * ldb + j] * a[v];
  }
#pragma GCC unroll 4
  for (int v = 0; v < MB; ++v) {
    V16 t[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) t[j] = j < N ? acc[v][j] : V16{};
    transpose(t);
    const size_t r0 = 16 * size_t(v), n = rows - std::min(rows, r0);
#pragma GCC unroll 16
    for (size_t l = 0; l < 16; ++l)
      if (l < n) write_lanes(C + (r0 + l) * ldc, first_lanes(N), t[l], alpha, beta);
  }
}

// Rows [m0, m1) of C. MB vectors of rows at a time: MB + N loads per MB x N multiply-adds.
template <int N>
void outer_rows(size_t m0, size_t m1, size_t K, const float* A, size_t lda, const float* b,
                size_t ldb, float alpha, float beta, float* C, size_t ldc) {
  constexpr size_t MB = N <= 4 ? 4 : N <= 12 ? 2 : 1;
  for (size_t m = m0; m < m1; m += 16 * MB) {
    const size_t rows = std::min(m1 - m, 16 * MB), next = m1 - m - rows;
    outer_tile<N, MB>(rows, K, A + m, lda, std::min(MB, (next + 15) / 16), b, ldb, alpha, beta,
                      C + m * ldc, ldc);
  }
}

using OuterRows = void (*)(size_t, size_t, size_t, const float*, size_t, const float*, size_t,
                           float, float, float*, size_t);
template <size_t... I>
constexpr OuterRows outer_rows_for(size_t n, std::index_sequence<I...>) {
  constexpr OuterRows table[] = {&outer_rows<int(I) + 1>...};
  return table[n - 1];
}

void gemm_columns(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float* A,
                  size_t lda, const float* B, size_t ldb, float beta, float* C, size_t ldc) {
  const float* b = B;
  if (trans_b) {  // op(B) = Bᵀ, K x N: copied (K x N floats against M x N x K multiply-adds)
    float* packed = scratch(K * N);
    for (size_t k = 0; k < K; ++k)
      for (size_t j = 0; j < N; ++j) packed[k * N + j] = B[j * ldb + k];
    b = packed;
    ldb = N;
  }
  const OuterRows rows = outer_rows_for(N, std::make_index_sequence<16>{});
  // Threads take whole vectors of 16 rows.
  detail::parallel_for(
      (M + 15) / 16, M * N * K / detail::kMacsPerElement, [&](size_t v0, size_t v1) {
        rows(16 * v0, std::min(M, 16 * v1), K, A, lda, b, ldb, alpha, beta, C, ldc);
      });
}

void narrow(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, float alpha, const float* A,
            size_t lda, const float* B, size_t ldb, float beta, float* C, size_t ldc) {
  if (trans_a)
    gemm_columns(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    gemm_rows(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace avx512
LOOM_AVX512_END

// Where gemm_narrow beats oneDNN's sgemm, on one thread (bench_narrow_gemm --threads 1 --sweep,
// bench/README.md), by a rule of the shape alone, so that the choice does not depend on the
// thread count. N from 2 to 12: at N = 1, a matrix-vector product, oneDNN is about as fast
// (op(A) = A) or faster (Aᵀ); above 12 the kernel gains little (Aᵀ) or loses (A). op(A) = Aᵀ
// with M >= 32, so that its vectors of 16 rows are mostly full. op(A) = A with K >= 8N
// (below, summing each dot product's lanes costs more than it saves) and, above 8 columns (two
// blocks), K <= 1024 (beyond, a block of op(B) leaves L1). op(A) of at most 4M elements: beyond,
// both kernels stream it from memory and oneDNN's blocking does better.
bool narrow_wins(bool trans_a, size_t M, size_t N, size_t K) {
  if (N < 2 || N > 12 || M * K > (size_t{1} << 22)) return false;
  return trans_a ? M >= 32 : K >= 8 * N && (N <= 8 || K <= 1024);
}

}  // namespace

bool gemm_narrow(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, float alpha,
                 const float* A, size_t lda, const float* B, size_t ldb, float beta, float* C,
                 size_t ldc) {
  if (N > 16 || !use_avx512()) return false;
  check_dims(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return true;
  if (K == 0 || alpha == 0.0f) {
    scale_c(M, N, beta, C, ldc);
    return true;
  }
  avx512::narrow(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  return true;
}

template <>
void gemm<float>(bool trans_a, bool trans_b, size_t M, size_t N, size_t K, float alpha,
                 const float* A, size_t lda, const float* B, size_t ldb, float beta, float* C,
                 size_t ldc) {
  check_dims(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  // oneDNN rejects K == 0; BLAS semantics leave C = beta * C then (and when alpha == 0).
  if (K == 0 || alpha == 0.0f) return scale_c(M, N, beta, C, ldc);
  if (narrow_wins(trans_a, M, N, K) &&
      gemm_narrow(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
    return;
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
