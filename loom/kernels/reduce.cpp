#include "loom/kernels/reduce.h"

#include <algorithm>

#include "loom/core/error.h"
#include "loom/kernels/detail.h"

namespace loom::kernels {

template <typename T>
void reduce(ReduceOp op, const Dims& in_dims, const T* x, const Dims& out_dims, T* y,
            bool accumulate) {
  // Operands: 0 = x (the whole space), 1 = y (1 on the reduced axes).
  const detail::Plan p = detail::make_plan(in_dims, {&in_dims, &out_dims}, "reduce");
  size_t out_size = 1;
  for (size_t d : out_dims) out_size *= d;
  if (out_size == 0) return;
  auto load = [x](size_t o, size_t, size_t, size_t i) { return x[o + i]; };
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    switch (op) {
      case ReduceOp::Sum:
        return detail::reduce_plan<detail::Combine::Sum, A>(p, 1, y, T(1), load);
      case ReduceOp::Mean: {
        // Over zero elements 1/0 = inf times a zero sum gives NaN, as numpy's mean does.
        const T inv_count = T(1) / static_cast<T>(p.size / out_size);
        return detail::reduce_plan<detail::Combine::Sum, A>(p, 1, y, inv_count, load);
      }
      case ReduceOp::Max:
        return detail::reduce_plan<detail::Combine::Max, A>(p, 1, y, T(1), load);
    }
    throw ArgumentError("reduce: unknown op");
  });
}

template <typename T>
void reduce_backward(ReduceOp op, const Dims& in_dims, const T* x, const Dims& out_dims, const T* y,
                     const T* dy, T* dx, bool accumulate) {
  // Operands: 0 = x and dx (the whole space), 1 = y and dy.
  const detail::Plan p = detail::make_plan(in_dims, {&in_dims, &out_dims}, "reduce_backward");
  if (p.size == 0) return;
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    if (op == ReduceOp::Sum || op == ReduceOp::Mean) {
      size_t out_size = 1;
      for (size_t d : out_dims) out_size *= d;
      const T s = op == ReduceOp::Sum ? T(1) : T(1) / static_cast<T>(p.size / out_size);
      detail::with_inner_strides(p, [&](auto stride, auto) {
        constexpr size_t S = decltype(stride)::value;
        detail::parallel_for(p.size, p.size, [&](size_t begin, size_t end) {
          detail::walk(p, begin, end, [&](size_t o, size_t og, size_t, size_t len) {
            T* d = dx + o;
            const T* g = dy + og;
#pragma omp simd
            for (size_t i = 0; i < len; ++i) d[i] = A ? d[i] + s * g[S * i] : s * g[S * i];
          });
        });
      });
      return;
    }
    LOOM_CHECK(op == ReduceOp::Max, ArgumentError, "reduce_backward: unknown op");
    if (!A) {
      detail::parallel_for(
          p.size, p.size, [&](size_t begin, size_t end) { std::fill(dx + begin, dx + end, T(0)); });
    }
    const detail::Plan kept = detail::sub_plan(p, 1, false);
    const detail::Plan red = detail::sub_plan(p, 1, true);
    const size_t ks0 = kept.stride[0][kept.rank - 1], ks1 = kept.stride[1][kept.rank - 1];
    const size_t rs0 = red.stride[0][red.rank - 1];
    // Each output scans its own group, so threads write disjoint parts of dx.
    detail::parallel_for(kept.size, p.size, [&](size_t j0, size_t j1) {
      detail::walk(kept, j0, j1, [&](size_t k0, size_t k1, size_t, size_t len) {
        for (size_t m = 0; m < len; ++m) {
          const size_t xo = k0 + m * ks0, yo = k1 + m * ks1;
          bool found = false;
          detail::walk(red, 0, red.size, [&](size_t r0, size_t, size_t, size_t rlen) {
            for (size_t q = 0; q < rlen && !found; ++q) {
              const size_t at = xo + r0 + q * rs0;
              if (x[at] == y[yo]) {
                dx[at] += dy[yo];
                found = true;
              }
            }
          });
        }
      });
    });
  });
}

template <typename T>
void scale(size_t n, T alpha, T* x) {
  detail::parallel_for(n, n, [&](size_t begin, size_t end) {
#pragma omp simd
    for (size_t i = begin; i < end; ++i) x[i] *= alpha;
  });
}

template <typename T>
void axpy(size_t n, T alpha, const T* x, T* y) {
  detail::parallel_for(n, 2 * n, [&](size_t begin, size_t end) {
#pragma omp simd
    for (size_t i = begin; i < end; ++i) y[i] += alpha * x[i];
  });
}

#define LOOM_INSTANTIATE(T)                                                                \
  template void reduce<T>(ReduceOp, const Dims&, const T*, const Dims&, T*, bool);         \
  template void reduce_backward<T>(ReduceOp, const Dims&, const T*, const Dims&, const T*, \
                                   const T*, T*, bool);                                    \
  template void scale<T>(size_t, T, T*);                                                   \
  template void axpy<T>(size_t, T, const T*, T*);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
