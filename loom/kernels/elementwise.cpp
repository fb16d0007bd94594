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
#include "loom/kernels/fast_math.h"

namespace loom::kernels {
namespace {

// Transcendental functions cost about this many simple ops; it lowers the threading threshold.
constexpr size_t kTranscendentalCost = 8;

namespace baseline {
#include "loom/kernels/elementwise_loops.inc"
}  // namespace baseline

LOOM_AVX512_BEGIN
namespace avx512 {
#include "loom/kernels/elementwise_loops.inc"
}  // namespace avx512
LOOM_AVX512_END

// elementwise_loops.inc's loops, in the copy for this CPU.
template <typename T, typename F>
void map_range(size_t begin, size_t end, const T* x, T* y, F f) {
  if (use_avx512())
    avx512::map_range(begin, end, x, y, f);
  else
    baseline::map_range(begin, end, x, y, f);
}

template <bool Accumulate, typename T, typename G>
void map_grad_range(size_t begin, size_t end, T* dx, G g) {
  if (use_avx512())
    avx512::map_grad_range<Accumulate>(begin, end, dx, g);
  else
    baseline::map_grad_range<Accumulate>(begin, end, dx, g);
}

template <typename T, typename F>
void map(size_t n, size_t cost, const T* x, T* y, F f) {
  detail::parallel_for(n, n * cost,
                       [&](size_t begin, size_t end) { map_range(begin, end, x, y, f); });
}

template <bool Accumulate, typename T, typename G>
void map_grad(size_t n, size_t cost, T* dx, G g) {
  detail::parallel_for(n, n * cost, [&](size_t begin, size_t end) {
    map_grad_range<Accumulate>(begin, end, dx, g);
  });
}

// Runs fast(begin, end) over the blocks of [0, n) whose x all lie within kTrigReductionBound
// (fast_math.h's sin, cos and tan), exact(begin, end) (std::'s) over the others, the blocks split
// over threads. Each block is checked just before its loop, while it is in the cache. double
// keeps std:: throughout.
template <typename T, typename Fast, typename Exact>
void by_trig_reduction(size_t n, const T* x, Fast fast, Exact exact) {
  detail::parallel_for(n, n * kTranscendentalCost, [&](size_t begin, size_t end) {
    if constexpr (std::is_same_v<T, float>) {
      constexpr size_t kBlock = 2048;
      const float* xs = x;  // a local copy: through the captured reference the check reloaded it
      for (size_t b = begin; b < end; b += kBlock) {
        const size_t e = std::min(end, b + kBlock);
        float largest = 0;  // of |x|, NaN left out (fast_sin gives NaN for NaN)
#pragma omp simd reduction(max : largest)
        for (size_t i = b; i < e; ++i) largest = std::max(largest, std::abs(xs[i]));
        if (largest > kTrigReductionBound)
          exact(b, e);
        else
          fast(b, e);
      }
    } else {
      exact(begin, end);
    }
  });
}

// 1 / (1 + e^-v): fast_exp gives inf below v = -88.72 (so 0) and 0 above v = 87.68 (so 1).
template <typename T>
T sigmoid(T v) {
  return T(1) / (T(1) + fast_exp(-v));
}

}  // namespace

namespace {

// CNTK's clamps (CommonMatrix.h): log of inputs below 1e-37 is log 1e-37, taken as -85.1.
template <typename T>
constexpr T kEpsInLog = T(1e-37f);
template <typename T>
constexpr T kLogOfEpsInLog = T(-85.1f);

// log(1 + e^z) without overflow.
template <typename T>
T softplus(T z) {
  return (z > 0 ? z : T(0)) + fast_log1p(fast_exp(-std::abs(z)));
}

// CNTK's safepow_: x^0 = 1, 0^y = 0, a negative base with a non-integer exponent NaN, else
// |x|^y negated for an odd y (an infinite y counts as odd, as fmod(y, 2) != 0 for it). In selects,
// so that float's loop vectorizes; always inlined, as g++ otherwise called it once per element.
template <typename T>
[[gnu::always_inline]] inline T safe_pow(T base, T exponent) {
  const T magnitude = fast_pow(std::abs(base), exponent);
  const T whole = std::trunc(exponent);
  const bool odd = whole - T(2) * std::trunc(whole * T(0.5)) != 0;  // NaN for inf: odd
  const T negative =
      whole != exponent ? std::numeric_limits<T>::quiet_NaN() : (odd ? -magnitude : magnitude);
  return exponent == 0 ? T(1) : (base == 0 ? T(0) : (base > 0 ? magnitude : negative));
}

}  // namespace

template <typename T>
void unary(UnaryOp op, size_t n, const T* x, T* y, const UnaryParams& params) {
  const size_t tc = kTranscendentalCost;
  const T alpha = T(params.alpha), beta = T(params.beta);
  auto trig = [&](auto fast, auto exact) {
    by_trig_reduction(
        n, x, [&](size_t b, size_t e) { map_range(b, e, x, y, fast); },
        [&](size_t b, size_t e) { map_range(b, e, x, y, exact); });
  };
  switch (op) {
    case UnaryOp::Negate:
      return map(n, 1, x, y, [](T v) { return -v; });
    case UnaryOp::Tanh:
      return map(n, tc, x, y, [](T v) { return fast_tanh(v); });
    case UnaryOp::Sigmoid:
      return map(n, tc, x, y, [](T v) { return sigmoid(v); });
    case UnaryOp::Relu:
      return map(n, 1, x, y, [](T v) { return v > 0 ? v : T(0); });
    case UnaryOp::Exp:
      return map(n, tc, x, y, [](T v) { return fast_exp(v); });
    case UnaryOp::Log:
      return map(n, tc, x, y,
                 [](T v) { return v < kEpsInLog<T> ? kLogOfEpsInLog<T> : fast_log(v); });
    case UnaryOp::Sqrt:
      return map(n, 1, x, y, [](T v) { return std::sqrt(v > 0 ? v : T(0)); });
    case UnaryOp::Square:
      return map(n, 1, x, y, [](T v) { return v * v; });
    case UnaryOp::Abs:
      return map(n, 1, x, y, [](T v) { return std::abs(v); });
    case UnaryOp::Copy:
    case UnaryOp::StopGradient:
      return map(n, 1, x, y, [](T v) { return v; });
    case UnaryOp::Floor:
      return map(n, 1, x, y, [](T v) { return std::floor(v); });
    case UnaryOp::Ceil:
      return map(n, 1, x, y, [](T v) { return std::ceil(v); });
    case UnaryOp::Round:
      return map(n, 1, x, y, [](T v) { return std::floor(v + T(0.5)); });
    case UnaryOp::Reciprocal:
      return map(n, 1, x, y, [](T v) { return v == 0 ? T(0) : T(1) / v; });
    case UnaryOp::Sin:
      return trig([](T v) { return fast_sin(v); }, [](T v) { return std::sin(v); });
    case UnaryOp::Cos:
      return trig([](T v) { return fast_cos(v); }, [](T v) { return std::cos(v); });
    case UnaryOp::Tan:
      return trig([](T v) { return fast_tan(v); }, [](T v) { return std::tan(v); });
    case UnaryOp::Asin:
      return map(n, tc, x, y, [](T v) { return fast_asin(v); });
    case UnaryOp::Acos:
      return map(n, tc, x, y, [](T v) { return fast_acos(v); });
    case UnaryOp::Atan:
      return map(n, tc, x, y, [](T v) { return fast_atan(v); });
    case UnaryOp::Sinh:
      return map(n, tc, x, y, [](T v) { return fast_sinh(v); });
    case UnaryOp::Cosh:
      return map(n, tc, x, y, [](T v) { return fast_cosh(v); });
    case UnaryOp::Asinh:
      return map(n, tc, x, y, [](T v) { return fast_asinh(v); });
    case UnaryOp::Atanh:
      return map(n, tc, x, y, [](T v) { return fast_atanh(v); });
    case UnaryOp::Elu:
      return map(n, tc, x, y,
                 [=](T v) { return v >= 0 ? v : alpha * (fast_exp(v < 0 ? v : T(0)) - T(1)); });
    case UnaryOp::Selu:
      return map(n, tc, x, y, [=](T v) {
        return beta * (v >= 0 ? v : alpha * (fast_exp(v < 0 ? v : T(0)) - T(1)));
      });
    case UnaryOp::LeakyRelu:
      return map(n, 1, x, y, [=](T v) { return v >= 0 ? v : alpha * v; });
    case UnaryOp::Softplus:
      return map(n, tc, x, y, [=](T v) { return softplus(alpha * v) / alpha; });
    case UnaryOp::Softsign:
      return map(n, 1, x, y, [](T v) { return v / (T(1) + std::abs(v)); });
    case UnaryOp::HardSigmoid:
      return map(n, 1, x, y, [=](T v) {
        const T z = alpha * v + beta;
        return z < 0 ? T(0) : (z > 1 ? T(1) : z);
      });
    case UnaryOp::StraightThrough:
      return map(n, 1, x, y, [](T v) { return v > 0 ? T(1) : T(-1); });
    case UnaryOp::Not:
      return map(n, 1, x, y, [](T v) { return v > 0 ? T(0) : T(1); });
    case UnaryOp::ZerosLike:
      return map(n, 1, x, y, [](T) { return T(0); });
    case UnaryOp::OnesLike:
      return map(n, 1, x, y, [](T) { return T(1); });
  }
  throw ArgumentError("unary: unknown op");
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

template <typename T>
void unary_backward(UnaryOp op, size_t n, const T* x, const T* y, const T* dy, T* dx,
                    bool accumulate, const UnaryParams& params) {
  const T alpha = T(params.alpha), beta = T(params.beta);
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    auto grad = [&](auto g) { map_grad<A>(n, 1, dx, g); };
    auto trig_grad = [&](auto fast, auto exact) {
      by_trig_reduction(
          n, x, [&](size_t b, size_t e) { map_grad_range<A>(b, e, dx, fast); },
          [&](size_t b, size_t e) { map_grad_range<A>(b, e, dx, exact); });
    };
    switch (op) {
      case UnaryOp::Negate:
        return grad([=](size_t i) { return -dy[i]; });
      case UnaryOp::Tanh:
        return grad([=](size_t i) { return dy[i] * (T(1) - y[i] * y[i]); });
      case UnaryOp::Sigmoid:
        return grad([=](size_t i) { return dy[i] * y[i] * (T(1) - y[i]); });
      case UnaryOp::Relu:
        return grad([=](size_t i) {
          const T g = dy[i];
          return y[i] > 0 ? g : T(0);
        });
      case UnaryOp::Exp:
        return grad([=](size_t i) { return dy[i] * y[i]; });
      case UnaryOp::Log:
        return grad([=](size_t i) { return dy[i] * fast_exp(-y[i]); });
      case UnaryOp::Sqrt:
        return grad([=](size_t i) { return dy[i] * T(0.5) / y[i]; });
      case UnaryOp::Square:
        return grad([=](size_t i) { return T(2) * x[i] * dy[i]; });
      case UnaryOp::Abs:
        return grad([=](size_t i) {
          const T g = dy[i], v = x[i];
          return v > 0 ? g : (v < 0 ? -g : T(0));
        });
      case UnaryOp::Copy:
        return grad([=](size_t i) { return dy[i]; });
      case UnaryOp::Floor:
      case UnaryOp::Ceil:
      case UnaryOp::Round:
      case UnaryOp::StopGradient:
      case UnaryOp::Not:
      case UnaryOp::ZerosLike:
      case UnaryOp::OnesLike:
        return grad([](size_t) { return T(0); });
      case UnaryOp::Reciprocal:
        return grad([=](size_t i) { return -dy[i] * y[i] * y[i]; });
      case UnaryOp::Sin:
        return trig_grad([=](size_t i) { return dy[i] * fast_cos(x[i]); },
                         [=](size_t i) { return dy[i] * std::cos(x[i]); });
      case UnaryOp::Cos:
        return trig_grad([=](size_t i) { return -dy[i] * fast_sin(x[i]); },
                         [=](size_t i) { return -dy[i] * std::sin(x[i]); });
      case UnaryOp::Tan:
        return grad([=](size_t i) { return dy[i] * (T(1) + y[i] * y[i]); });
      case UnaryOp::Asin:
        return grad([=](size_t i) { return dy[i] / std::sqrt(T(1) - x[i] * x[i]); });
      case UnaryOp::Acos:
        return grad([=](size_t i) { return -dy[i] / std::sqrt(T(1) - x[i] * x[i]); });
      case UnaryOp::Atan:
        return grad([=](size_t i) { return dy[i] / (T(1) + x[i] * x[i]); });
      case UnaryOp::Sinh:
        return grad([=](size_t i) { return dy[i] * fast_cosh(x[i]); });
      case UnaryOp::Cosh:
        return grad([=](size_t i) { return dy[i] * fast_sinh(x[i]); });
      case UnaryOp::Asinh:
        return grad([=](size_t i) { return dy[i] / std::sqrt(T(1) + x[i] * x[i]); });
      case UnaryOp::Atanh:
        return grad([=](size_t i) { return dy[i] / (T(1) - x[i] * x[i]); });
      case UnaryOp::Elu:  // alpha e^x = y + alpha below 0
        return grad([=](size_t i) { return x[i] >= 0 ? dy[i] : dy[i] * (y[i] + alpha); });
      case UnaryOp::Selu:
        return grad(
            [=](size_t i) { return x[i] >= 0 ? beta * dy[i] : dy[i] * (y[i] + beta * alpha); });
      case UnaryOp::LeakyRelu:
        return grad([=](size_t i) { return x[i] >= 0 ? dy[i] : alpha * dy[i]; });
      case UnaryOp::Softplus:
        return grad([=](size_t i) { return dy[i] * sigmoid(alpha * x[i]); });
      case UnaryOp::Softsign:
        return grad([=](size_t i) {
          const T d = T(1) + std::abs(x[i]);
          return dy[i] / (d * d);
        });
      case UnaryOp::HardSigmoid:
        return grad([=](size_t i) {
          const T z = alpha * x[i] + beta;
          return z > 0 && z < 1 ? alpha * dy[i] : T(0);
        });
      case UnaryOp::StraightThrough:
        return grad([=](size_t i) { return std::abs(x[i]) <= 1 ? dy[i] : T(0); });
    }
    throw ArgumentError("unary_backward: unknown op");
  });
}

namespace {

// y[o] (+)= f(o, a at o, b at o) at each point o of p's space, operands 1 and 2 (a and b)
// broadcast along the axes where their stride is 0; y has the space's layout (operand 0).
template <bool Accumulate, typename T, typename F>
void broadcast_apply(const detail::Plan& p, const T* a, const T* b, T* y, F f) {
  if (p.size == 0) return;
  const bool wide = use_avx512();
  detail::with_inner_strides(p, [&](auto sa, auto sb) {
    constexpr size_t SA = decltype(sa)::value, SB = decltype(sb)::value;
    detail::parallel_for(p.size, p.size, [&](size_t begin, size_t end) {
      if (wide)
        avx512::apply_range<Accumulate, SA, SB>(p, begin, end, a, b, y, f);
      else
        baseline::apply_range<Accumulate, SA, SB>(p, begin, end, a, b, y, f);
    });
  });
}

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

// dx (+)= scale * src summed over the axes along which operand `target` of p (1 or 2) is
// broadcast; src has the layout of p's space (operand 0), dx that operand's.
template <bool Accumulate, typename T>
void reduce_to_operand(const detail::Plan& p, size_t target, const T* src, T scale, T* dx) {
  if (std::equal(p.stride[target], p.stride[target] + p.rank, p.stride[0]))
    return map_grad<Accumulate>(p.size, 1, dx, [=](size_t i) { return scale * src[i]; });
  // A bias [C] broadcast over rows [N, C]: a plain column sum.
  if (p.rank == 2 && p.stride[target][0] == 0 && p.stride[target][1] == 1 && p.stride[0][1] == 1)
    return column_sum<Accumulate>(p.dim[0], p.dim[1], src, dx, scale);
  detail::reduce_plan<detail::Combine::Sum, Accumulate>(
      p, target, dx, scale, [=](size_t o, size_t, size_t, size_t i) { return src[o + i]; });
}

// dx (+)= f(o, a at o, b at o) at each point o of p's space, summed over the axes along which
// operand `target` of `to` (a plan of the same space, dx that operand) is broadcast: written
// straight into dx where the operand has the space's shape, else into a buffer of the space's
// size (kept by the thread across calls: a shared parameter's gradient needs it every step)
// that is then summed.
template <bool Accumulate, typename T, typename F>
void gradient_apply(const detail::Plan& p, const detail::Plan& to, size_t target, const T* a,
                    const T* b, T* dx, F f) {
  if (std::equal(to.stride[target], to.stride[target] + to.rank, to.stride[0]))
    return broadcast_apply<Accumulate>(p, a, b, dx, f);
  thread_local std::vector<T> full;
  if (full.size() < p.size) full.resize(p.size);
  broadcast_apply<false>(p, a, b, full.data(), f);
  reduce_to_operand<Accumulate>(to, target, full.data(), T(1), dx);
}

}  // namespace

template <typename T>
void binary(BinaryOp op, const Dims& out_dims, const Dims& a_dims, const T* a, const Dims& b_dims,
            const T* b, T* y) {
  const detail::Plan p = detail::make_plan(out_dims, {&out_dims, &a_dims, &b_dims}, "binary");
  auto run = [&](auto f) {
    broadcast_apply<false>(p, a, b, y, [f](size_t, T u, T v) { return f(u, v); });
  };
  switch (op) {
    case BinaryOp::Plus:
      return run([](T u, T v) { return u + v; });
    case BinaryOp::Minus:
      return run([](T u, T v) { return u - v; });
    case BinaryOp::Times:
      return run([](T u, T v) { return u * v; });
    case BinaryOp::Divide:
      return run([](T u, T v) { return u / v; });
    case BinaryOp::Max:
      return run([](T u, T v) { return u >= v ? u : v; });
    case BinaryOp::Min:
      return run([](T u, T v) { return u <= v ? u : v; });
    case BinaryOp::Pow:
      return run([](T u, T v) { return safe_pow(u, v); });
    case BinaryOp::LogPlus:
      return run([](T u, T v) {
        const T hi = u >= v ? u : v, lo = u >= v ? v : u;
        return hi + fast_log1p(fast_exp(lo - hi));
      });
    case BinaryOp::Equal:
      return run([](T u, T v) { return T(u == v); });
    case BinaryOp::NotEqual:
      return run([](T u, T v) { return T(u != v); });
    case BinaryOp::Less:
      return run([](T u, T v) { return T(u < v); });
    case BinaryOp::LessEqual:
      return run([](T u, T v) { return T(u <= v); });
    case BinaryOp::Greater:
      return run([](T u, T v) { return T(u > v); });
    case BinaryOp::GreaterEqual:
      return run([](T u, T v) { return T(u >= v); });
    // Both conditions evaluated (a product and a max): with && and || the loops did not
    // vectorize, 8x Xor's time.
    case BinaryOp::And:
      return run([](T u, T v) { return T(u > 0) * T(v > 0); });
    case BinaryOp::Or:
      return run([](T u, T v) { return std::max(T(u > 0), T(v > 0)); });
    case BinaryOp::Xor:
      return run([](T u, T v) { return T((u > 0) != (v > 0)); });
    case BinaryOp::PRelu:
      return run([](T u, T v) { return v >= 0 ? v : u * v; });
  }
  throw ArgumentError("binary: unknown op");
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

template <typename T>
void binary_backward(BinaryOp op, int which, const Dims& out_dims, const Dims& a_dims, const T* a,
                     const Dims& b_dims, const T* b, const T* dy, T* dx, bool accumulate) {
  LOOM_CHECK(which == 0 || which == 1, ArgumentError,
             "binary_backward: which must be 0 (a) or 1 (b), got ", which);
  // Operands: 0 = dy (the output's shape), 1 = a, 2 = b; dx has the shape of operand which+1.
  const detail::Plan p =
      detail::make_plan(out_dims, {&out_dims, &a_dims, &b_dims}, "binary_backward");
  const size_t target = static_cast<size_t>(which) + 1;
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    if (op == BinaryOp::Plus || op == BinaryOp::Minus) {
      const T scale = op == BinaryOp::Minus && which == 1 ? T(-1) : T(1);
      return reduce_to_operand<A>(p, target, dy, scale, dx);
    }
    if (!binary_backward_reads_inputs(op)) {  // comparisons and logic: a zero gradient
      const Dims& dims = which == 0 ? a_dims : b_dims;
      const size_t n = std::accumulate(dims.begin(), dims.end(), size_t{1}, std::multiplies<>());
      if (!A) std::fill_n(dx, n, T(0));
      return;
    }
    // partial(dy, a, b) at one point of the output.
    auto grad = [&](auto partial) {
      gradient_apply<A>(p, p, target, a, b, dx,
                        [=](size_t o, T u, T v) { return partial(dy[o], u, v); });
    };
    const bool to_a = which == 0;
    switch (op) {
      case BinaryOp::Times:
        if (to_a) return grad([](T g, T, T v) { return g * v; });
        return grad([](T g, T u, T) { return g * u; });
      case BinaryOp::Divide:
        if (to_a) return grad([](T g, T, T v) { return g / v; });
        return grad([](T g, T u, T v) { return -g * u / (v * v); });
      case BinaryOp::Max:
        if (to_a) return grad([](T g, T u, T v) { return u >= v ? g : T(0); });
        return grad([](T g, T u, T v) { return v > u ? g : T(0); });
      case BinaryOp::Min:
        if (to_a) return grad([](T g, T u, T v) { return u <= v ? g : T(0); });
        return grad([](T g, T u, T v) { return v < u ? g : T(0); });
      case BinaryOp::Pow:
        if (to_a) return grad([](T g, T u, T v) { return g * v * safe_pow(u, v - 1); });
        return grad([](T g, T u, T v) {
          return u <= 0 ? T(0) : g * safe_pow(u, v) * static_cast<T>(log_wide(u));
        });
      case BinaryOp::LogPlus:
        if (to_a) return grad([](T g, T u, T v) { return g * sigmoid(u - v); });
        return grad([](T g, T u, T v) { return g * sigmoid(v - u); });
      case BinaryOp::PRelu:
        if (to_a) return grad([](T g, T, T v) { return v >= 0 ? T(0) : g * v; });
        return grad([](T g, T u, T v) { return v >= 0 ? g : g * u; });
      default:
        break;
    }
    throw ArgumentError("binary_backward: unknown op");
  });
}

template <typename T>
void ternary(TernaryOp op, const Dims& out_dims, const Dims& c_dims, const T* c, const Dims& a_dims,
             const T* a, const Dims& b_dims, const T* b, T* y) {
  // A plan walks at most two operands besides y: y = f(first at o, u, v) with first read where it
  // lies when it has the output's shape (clip's x, select's value if true), else first copied
  // into y, broadcast, in a pass of its own.
  const bool select = op == TernaryOp::Select;
  const Dims& first_dims = select ? a_dims : c_dims;
  const T* first = select ? a : c;
  if (first_dims != out_dims) {
    const detail::Plan copy =
        detail::make_plan(out_dims, {&out_dims, &first_dims, &first_dims}, "ternary");
    broadcast_apply<false>(copy, first, first, y, [](size_t, T u, T) { return u; });
    first = y;
  }
  auto update = [&](const Dims& u_dims, const T* u, const Dims& v_dims, const T* v, auto f) {
    const detail::Plan p = detail::make_plan(out_dims, {&out_dims, &u_dims, &v_dims}, "ternary");
    broadcast_apply<false>(p, u, v, y, [=](size_t o, T uu, T vv) { return f(first[o], uu, vv); });
  };
  if (select)
    update(c_dims, c, b_dims, b, [](T t, T cond, T f) { return cond != 0 ? t : f; });
  else
    update(a_dims, a, b_dims, b, [](T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); });
}

template <typename T>
void ternary_backward(TernaryOp op, int which, const Dims& out_dims, const Dims& cond_dims,
                      const T* cond, const T* y, const Dims& x_dims, const T* dy, T* dx,
                      bool accumulate) {
  const bool valid = op == TernaryOp::Select ? which == 1 || which == 2 : which == 0;
  LOOM_CHECK(valid, ArgumentError, "ternary_backward: no gradient for input ", which);
  // dy where keep(o, cond at o), else 0, over the output (operands: the output, cond, dy), then
  // summed into x's shape.
  const detail::Plan p =
      detail::make_plan(out_dims, {&out_dims, &cond_dims, &out_dims}, "ternary_backward");
  const detail::Plan to_x =
      detail::make_plan(out_dims, {&out_dims, &x_dims, &x_dims}, "ternary_backward");
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    auto masked = [&](auto keep) {
      gradient_apply<A>(p, to_x, 1, cond, dy, dx,
                        [=](size_t o, T k, T g) { return keep(o, k) ? g : T(0); });
    };
    if (op == TernaryOp::Clip) return masked([=](size_t o, T k) { return y[o] == k; });
    if (which == 1) return masked([](size_t, T k) { return k != 0; });
    masked([](size_t, T k) { return k == 0; });
  });
}

#define LOOM_INSTANTIATE(T)                                                                        \
  template void unary<T>(UnaryOp, size_t, const T*, T*, const UnaryParams&);                       \
  template void unary_backward<T>(UnaryOp, size_t, const T*, const T*, const T*, T*, bool,         \
                                  const UnaryParams&);                                             \
  template void ternary<T>(TernaryOp, const Dims&, const Dims&, const T*, const Dims&, const T*,   \
                           const Dims&, const T*, T*);                                             \
  template void ternary_backward<T>(TernaryOp, int, const Dims&, const Dims&, const T*, const T*,  \
                                    const Dims&, const T*, T*, bool);                              \
  template void binary<T>(BinaryOp, const Dims&, const Dims&, const T*, const Dims&, const T*,     \
                          T*);                                                                     \
  template void binary_backward<T>(BinaryOp, int, const Dims&, const Dims&, const T*, const Dims&, \
                                   const T*, const T*, T*, bool);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
