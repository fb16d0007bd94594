#include "loom/kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <type_traits>

#include "loom/core/error.h"
#include "loom/kernels/cpu_isa.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/elementwise_isa.h"
#include "loom/kernels/fast_math.h"

namespace loom::kernels {

namespace isa::baseline {
#include "loom/kernels/elementwise_impl.inc"
}  // namespace isa::baseline

namespace {

// dx[c] (+)= scale * sum over rows r of dy[r * cols + c], summed in double in row order (as the
// general reduction does), columns split across threads.
template <bool Accumulate, typename T>
void column_sum(size_t rows, size_t cols, const T* dy, T* dx, T scale) {
  detail::parallel_for(cols, rows * cols, [&](size_t c0, size_t c1) {
    constexpr size_t kChunk = 256;
    double acc[kChunk];
    for (size_t c = c0; c < c1; c += kChunk) {
      const size_t n = std::min(kChunk, c1 - c);
      std::fill_n(acc, n, 0.0);
      for (size_t r = 0; r < rows; ++r) {
        const T* row = dy + r * cols + c;
#pragma omp simd
        for (size_t j = 0; j < n; ++j) acc[j] += row[j];
      }
      T* out = dx + c;
#pragma omp simd
      for (size_t j = 0; j < n; ++j) {
        const T v = scale * static_cast<T>(acc[j]);
        out[j] = Accumulate ? out[j] + v : v;
      }
    }
  });
}

}  // namespace

template <bool Accumulate, typename T>
void isa::reduce_to_operand(const detail::Plan& p, size_t target, const T* src, T scale, T* dx) {
  if (std::equal(p.stride[target], p.stride[target] + p.rank, p.stride[0]))
    return baseline::map_grad<Accumulate>(p.size, 1, dx, [=](size_t i) { return scale * src[i]; });
  // A bias [C] broadcast over rows [N, C]: a plain column sum.
  if (p.rank == 2 && p.stride[target][0] == 0 && p.stride[target][1] == 1 && p.stride[0][1] == 1)
    return column_sum<Accumulate>(p.dim[0], p.dim[1], src, dx, scale);
  detail::reduce_plan<detail::Combine::Sum, Accumulate>(
      p, target, dx, scale, [=](size_t o, size_t, size_t, size_t i) { return src[o + i]; });
}

template void isa::reduce_to_operand<false, float>(const detail::Plan&, size_t, const float*, float,
                                                   float*);
template void isa::reduce_to_operand<true, float>(const detail::Plan&, size_t, const float*, float,
                                                  float*);
template void isa::reduce_to_operand<false, double>(const detail::Plan&, size_t, const double*,
                                                    double, double*);
template void isa::reduce_to_operand<true, double>(const detail::Plan&, size_t, const double*,
                                                   double, double*);

template <typename T>
void unary(UnaryOp op, size_t n, const T* x, T* y, const UnaryParams& params) {
  use_avx512() ? isa::avx512::unary(op, n, x, y, params)
               : isa::baseline::unary(op, n, x, y, params);
}

template <typename T>
void unary_backward(UnaryOp op, size_t n, const T* x, const T* y, const T* dy, T* dx,
                    bool accumulate, const UnaryParams& params) {
  use_avx512() ? isa::avx512::unary_backward(op, n, x, y, dy, dx, accumulate, params)
               : isa::baseline::unary_backward(op, n, x, y, dy, dx, accumulate, params);
}

template <typename T>
void binary(BinaryOp op, const Dims& out_dims, const Dims& a_dims, const T* a, const Dims& b_dims,
            const T* b, T* y) {
  use_avx512() ? isa::avx512::binary(op, out_dims, a_dims, a, b_dims, b, y)
               : isa::baseline::binary(op, out_dims, a_dims, a, b_dims, b, y);
}

template <typename T>
void binary_backward(BinaryOp op, int which, const Dims& out_dims, const Dims& a_dims, const T* a,
                     const Dims& b_dims, const T* b, const T* dy, T* dx, bool accumulate) {
  use_avx512()
      ? isa::avx512::binary_backward(op, which, out_dims, a_dims, a, b_dims, b, dy, dx, accumulate)
      : isa::baseline::binary_backward(op, which, out_dims, a_dims, a, b_dims, b, dy, dx,
                                       accumulate);
}

template <typename T>
void ternary(TernaryOp op, const Dims& out_dims, const Dims& c_dims, const T* c, const Dims& a_dims,
             const T* a, const Dims& b_dims, const T* b, T* y) {
  use_avx512() ? isa::avx512::ternary(op, out_dims, c_dims, c, a_dims, a, b_dims, b, y)
               : isa::baseline::ternary(op, out_dims, c_dims, c, a_dims, a, b_dims, b, y);
}

template <typename T>
void ternary_backward(TernaryOp op, int which, const Dims& out_dims, const Dims& cond_dims,
                      const T* cond, const T* y, const Dims& x_dims, const T* dy, T* dx,
                      bool accumulate) {
  use_avx512() ? isa::avx512::ternary_backward(op, which, out_dims, cond_dims, cond, y, x_dims, dy,
                                               dx, accumulate)
               : isa::baseline::ternary_backward(op, which, out_dims, cond_dims, cond, y, x_dims,
                                                 dy, dx, accumulate);
}

UnaryReads unary_backward_reads(UnaryOp op) {
  switch (op) {
    case UnaryOp::Tanh:
    case UnaryOp::Sigmoid:
    case UnaryOp::Exp:
    case UnaryOp::Sqrt:
    case UnaryOp::Relu:  // y > 0 exactly where x > 0
    case UnaryOp::Log:   // CNTK's dy·e^-y
    case UnaryOp::Reciprocal:
    case UnaryOp::Tan:
      return {.output = true};
    case UnaryOp::Elu:
    case UnaryOp::Selu:
      return {.input = true, .output = true};
    case UnaryOp::Negate:
    case UnaryOp::Copy:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::StopGradient:
    case UnaryOp::Not:
    case UnaryOp::ZerosLike:
    case UnaryOp::OnesLike:
      return {};
    default:
      return {.input = true};
  }
}

bool binary_backward_reads_inputs(BinaryOp op) {
  switch (op) {
    case BinaryOp::Plus:
    case BinaryOp::Minus:
    case BinaryOp::Equal:
    case BinaryOp::NotEqual:
    case BinaryOp::Less:
    case BinaryOp::LessEqual:
    case BinaryOp::Greater:
    case BinaryOp::GreaterEqual:
    case BinaryOp::And:
    case BinaryOp::Or:
    case BinaryOp::Xor:
      return false;
    default:
      return true;
  }
}

LOOM_ELEMENTWISE_INSTANTIATE(float)
LOOM_ELEMENTWISE_INSTANTIATE(double)

}  // namespace loom::kernels
