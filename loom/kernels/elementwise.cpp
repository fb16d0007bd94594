#include "loom/kernels/elementwise.h"

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"
#include "loom/kernels/detail.h"

namespace loom::kernels {
namespace {

// Transcendental functions cost about this many simple ops; it lowers the threading threshold.
constexpr size_t kTranscendentalCost = 8;

template <typename T, typename F>
void map(size_t n, size_t cost, const T* x, T* y, F f) {
  detail::parallel_for(n, n * cost, [&](size_t begin, size_t end) {
#pragma omp simd
    for (size_t i = begin; i < end; ++i) y[i] = f(x[i]);
  });
}

// dx[i] (+)= g(i). g captures its input pointers by value and loads them unconditionally
// (selects, not branches): the local copy then keeps them in registers and the loop vectorizes,
// where loads through captured references or behind a branch left it scalar and mispredicted.
template <bool Accumulate, typename T, typename G>
void map_grad(size_t n, size_t cost, T* dx, G g) {
  detail::parallel_for(n, n * cost, [&](size_t begin, size_t end) {
    const G f = g;
#pragma omp simd
    for (size_t i = begin; i < end; ++i) {
      const T v = f(i);
      dx[i] = Accumulate ? dx[i] + v : v;
    }
  });
}

// exp(-|v|) never overflows, so large negative inputs give 0 rather than 1/inf rounding issues.
template <typename T>
T sigmoid(T v) {
  const T e = std::exp(-std::abs(v));
  const T r = T(1) / (T(1) + e);
  return v >= 0 ? r : e * r;
}

}  // namespace

template <typename T>
void unary(UnaryOp op, size_t n, const T* x, T* y) {
  const size_t tc = kTranscendentalCost;
  switch (op) {
    case UnaryOp::Negate:
      return map(n, 1, x, y, [](T v) { return -v; });
    case UnaryOp::Tanh:
      return map(n, tc, x, y, [](T v) { return std::tanh(v); });
    case UnaryOp::Sigmoid:
      return map(n, tc, x, y, [](T v) { return sigmoid(v); });
    case UnaryOp::Relu:
      return map(n, 1, x, y, [](T v) { return v > 0 ? v : T(0); });
    case UnaryOp::Exp:
      return map(n, tc, x, y, [](T v) { return std::exp(v); });
    case UnaryOp::Log:
      return map(n, tc, x, y, [](T v) { return std::log(v); });
    case UnaryOp::Sqrt:
      return map(n, 1, x, y, [](T v) { return std::sqrt(v); });
    case UnaryOp::Square:
      return map(n, 1, x, y, [](T v) { return v * v; });
    case UnaryOp::Abs:
      return map(n, 1, x, y, [](T v) { return std::abs(v); });
    case UnaryOp::Copy:
      return map(n, 1, x, y, [](T v) { return v; });
  }
  throw ArgumentError("unary: unknown op");
}

template <typename T>
void unary_backward(UnaryOp op, size_t n, const T* x, const T* y, const T* dy, T* dx,
                    bool accumulate) {
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    switch (op) {
      case UnaryOp::Negate:
        return map_grad<A>(n, 1, dx, [=](size_t i) { return -dy[i]; });
      case UnaryOp::Tanh:
        return map_grad<A>(n, 1, dx, [=](size_t i) { return dy[i] * (T(1) - y[i] * y[i]); });
      case UnaryOp::Sigmoid:
        return map_grad<A>(n, 1, dx, [=](size_t i) { return dy[i] * y[i] * (T(1) - y[i]); });
      case UnaryOp::Relu:
        return map_grad<A>(n, 1, dx, [=](size_t i) {
          const T g = dy[i];
          return y[i] > 0 ? g : T(0);  // relu(x) > 0 exactly where x > 0
        });
      case UnaryOp::Exp:
        return map_grad<A>(n, 1, dx, [=](size_t i) { return dy[i] * y[i]; });
      case UnaryOp::Log:
        return map_grad<A>(n, 1, dx, [=](size_t i) { return dy[i] / x[i]; });
      case UnaryOp::Sqrt:
        return map_grad<A>(n, 1, dx, [=](size_t i) { return dy[i] * T(0.5) / y[i]; });
      case UnaryOp::Square:
        return map_grad<A>(n, 1, dx, [=](size_t i) { return T(2) * x[i] * dy[i]; });
      case UnaryOp::Abs:
        return map_grad<A>(n, 1, dx, [=](size_t i) {
          const T g = dy[i], v = x[i];
          return v > 0 ? g : (v < 0 ? -g : T(0));
        });
      case UnaryOp::Copy:
        return map_grad<A>(n, 1, dx, [=](size_t i) { return dy[i]; });
    }
    throw ArgumentError("unary_backward: unknown op");
  });
}

namespace {

template <typename T, typename F>
void broadcast_map(const Dims& out_dims, const Dims& a_dims, const T* a, const Dims& b_dims,
                   const T* b, T* y, F f) {
  const detail::Plan p = detail::make_plan(out_dims, {&out_dims, &a_dims, &b_dims}, "binary");
  if (p.size == 0) return;
  detail::with_inner_strides(p, [&](auto sa, auto sb) {
    constexpr size_t SA = decltype(sa)::value, SB = decltype(sb)::value;
    detail::parallel_for(p.size, p.size, [&](size_t begin, size_t end) {
      detail::walk(p, begin, end, [&](size_t oy, size_t oa, size_t ob, size_t len) {
        T* yy = y + oy;
        const T* aa = a + oa;
        const T* bb = b + ob;
#pragma omp simd
        for (size_t i = 0; i < len; ++i) yy[i] = f(aa[SA * i], bb[SB * i]);
      });
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

}  // namespace

template <typename T>
void binary(BinaryOp op, const Dims& out_dims, const Dims& a_dims, const T* a, const Dims& b_dims,
            const T* b, T* y) {
  auto run = [&](auto f) { broadcast_map(out_dims, a_dims, a, b_dims, b, y, f); };
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
  }
  throw ArgumentError("binary: unknown op");
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
    auto reduce = [&](T scale, auto load) {
      detail::reduce_plan<detail::Combine::Sum, A>(p, target, dx, scale, load);
    };
    if (op == BinaryOp::Plus || op == BinaryOp::Minus) {
      const T scale = op == BinaryOp::Minus && which == 1 ? T(-1) : T(1);
      // The two cases of a bias add: an operand of the output's shape (dx = dy, whatever the
      // other operand's shape), and a bias [C] broadcast over rows [N, C], whose gradient is a
      // plain column sum.
      if (std::equal(p.stride[target], p.stride[target] + p.rank, p.stride[0]))
        return map_grad<A>(p.size, 1, dx, [=](size_t i) { return scale * dy[i]; });
      if (p.rank == 2 && p.stride[target][0] == 0 && p.stride[target][1] == 1 &&
          p.stride[0][1] == 1)
        return column_sum<A>(p.dim[0], p.dim[1], dy, dx, scale);
      return reduce(scale, [&](size_t o, size_t, size_t, size_t i) { return dy[o + i]; });
    }
    detail::with_inner_strides(p, [&](auto sa, auto sb) {
      constexpr size_t SA = decltype(sa)::value, SB = decltype(sb)::value;
      // The load sees dy, a and b at one point of the output; each case picks the partial.
      auto grad = [&](auto partial) {
        reduce(T(1), [&](size_t o, size_t oa, size_t ob, size_t i) {
          return partial(dy[o + i], oa + SA * i, ob + SB * i);
        });
      };
      const bool to_a = which == 0;
      switch (op) {
        case BinaryOp::Times:
          if (to_a) return grad([&](T g, size_t, size_t j) { return g * b[j]; });
          return grad([&](T g, size_t i, size_t) { return g * a[i]; });
        case BinaryOp::Divide:
          if (to_a) return grad([&](T g, size_t, size_t j) { return g / b[j]; });
          return grad([&](T g, size_t i, size_t j) { return -g * a[i] / (b[j] * b[j]); });
        case BinaryOp::Max:
          if (to_a) return grad([&](T g, size_t i, size_t j) { return a[i] >= b[j] ? g : T(0); });
          return grad([&](T g, size_t i, size_t j) { return b[j] > a[i] ? g : T(0); });
        case BinaryOp::Min:
          if (to_a) return grad([&](T g, size_t i, size_t j) { return a[i] <= b[j] ? g : T(0); });
          return grad([&](T g, size_t i, size_t j) { return b[j] < a[i] ? g : T(0); });
        case BinaryOp::Plus:
        case BinaryOp::Minus:
          break;
      }
      throw ArgumentError("binary_backward: unknown op");
    });
  });
}

#define LOOM_INSTANTIATE(T)                                                                        \
  template void unary<T>(UnaryOp, size_t, const T*, T*);                                           \
  template void unary_backward<T>(UnaryOp, size_t, const T*, const T*, const T*, T*, bool);        \
  template void binary<T>(BinaryOp, const Dims&, const Dims&, const T*, const Dims&, const T*,     \
                          T*);                                                                     \
  template void binary_backward<T>(BinaryOp, int, const Dims&, const Dims&, const T*, const Dims&, \
                                   const T*, const T*, T*, bool);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
