#include "loom/kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "loom/core/error.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/fast_math.h"

namespace loom::kernels {

namespace {

using detail::Combine;
using detail::Plan;

// The plans below have operand 0 = x and dx (the whole space), 1 = y and dy (stride 0 on the
// reduced axes).

// The outputs of a plan, each with its group: for the gradients that reduce_plan cannot express
// (Max/Min's first match, Prod's zeros), which visit each group on its own (in row-major order,
// so the result depends on the shape alone).
struct Groups {
  explicit Groups(const Plan& p)
      : kept(detail::sub_plan(p, 1, false)),
        red(detail::sub_plan(p, 1, true)),
        work(p.size),
        step(red.stride[0][red.rank - 1]) {}

  // Calls group(xo, yo) for each output, with xo the offset in x of its group's first element
  // and yo its offset in y; threads take disjoint outputs.
  template <class Group>
  void each(Group&& group) const {
    const size_t s0 = kept.stride[0][kept.rank - 1], s1 = kept.stride[1][kept.rank - 1];
    detail::parallel_for(kept.size, work, [&](size_t j0, size_t j1) {
      detail::walk(kept, j0, j1, [&](size_t k0, size_t k1, size_t, size_t len) {
        for (size_t m = 0; m < len; ++m) group(k0 + m * s0, k1 + m * s1);
      });
    });
  }

  // Calls run(at, len) for contiguous runs [at, at + len) of x that make up the group starting at
  // xo, in row-major order: the innermost axis's runs where it is reduced, single elements where
  // it is kept (so the callers' loops are contiguous, and vectorize).
  template <class Run>
  void runs(size_t xo, Run&& run) const {
    detail::walk(red, 0, red.size, [&](size_t r0, size_t, size_t, size_t len) {
      if (step == 1) return run(xo + r0, len);
      for (size_t q = 0; q < len; ++q) run(xo + r0 + q * step, size_t{1});
    });
  }

  Plan kept, red;
  size_t work, step;
};

template <typename T>
void write(T& out, T v, bool accumulate) {
  out = accumulate ? out + v : v;
}

// y[i] = f(y[i]) for the n outputs.
template <typename T, class F>
void map_outputs(size_t n, T* y, F f) {
  detail::parallel_for(n, n, [&](size_t begin, size_t end) {
    LOOM_OMP_SIMD()
    for (size_t i = begin; i < end; ++i) y[i] = f(y[i]);
  });
}

// y (+)= log(sum(exp(x))) of each group, through reduce_plan's max and sum (vectorized; a loop
// per group on one thread was 0.09x PyTorch): shifted by the group's max so that exp() cannot
// overflow, by 0 where the max is not finite (a group of -inf gives log(0) = -inf, not
// exp(-inf - -inf) = NaN); the sum in double. NaN propagates.
template <bool A, typename T>
void log_sum_exp(const Plan& p, size_t out_size, const T* x, T* y) {
  thread_local std::vector<T> shift, sum;
  shift.resize(out_size);
  sum.resize(out_size);
  detail::reduce_plan<Combine::Max, false>(
      p, 1, shift.data(), T(1), [x](size_t o, size_t, size_t, size_t i) { return x[o + i]; });
  map_outputs(out_size, shift.data(), [](T m) { return std::isfinite(m) ? m : T(0); });
  detail::with_inner_strides(p, [&](auto y_stride, auto) {
    constexpr size_t SY = decltype(y_stride)::value;
    detail::reduce_plan<Combine::Sum, false>(
        p, 1, sum.data(), T(1), [x, m = shift.data()](size_t o, size_t oy, size_t, size_t i) {
          return fast_exp(x[o + i] - m[oy + SY * i]);
        });
  });
  const T *m = shift.data(), *s = sum.data();
  detail::parallel_for(out_size, out_size, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) write(y[i], m[i] + static_cast<T>(std::log(s[i])), A);
  });
}

// ArgMax and ArgMin, from y holding each group's max (min): y = the position of its first
// occurrence within the group. reduce_plan writes each output only once its whole group is
// combined (by one thread), so this pass reads the max from y while it replaces it.
template <typename T>
void first_position(Plan p, const T* x, T* y) {
  // Operand 2: the position within the group, row-major over the reduced axes. No tensor backs
  // it; its strides are what a tensor of the reduced axes alone would have.
  size_t s = 1;
  for (size_t k = p.rank; k-- > 0;) {
    p.stride[2][k] = p.stride[1][k] == 0 ? s : 0;
    if (p.stride[1][k] == 0) s *= p.dim[k];
  }
  detail::with_inner_strides(p, [&](auto y_stride, auto position_stride) {
    constexpr size_t SY = decltype(y_stride)::value, SP = decltype(position_stride)::value;
    // The max of -position over the matches is minus the first position.
    detail::reduce_plan<Combine::Max, false>(
        p, 1, y, T(-1), [x, y](size_t o, size_t oy, size_t position, size_t i) {
          return x[o + i] == y[oy + SY * i] ? -static_cast<T>(position + SP * i)
                                            : -std::numeric_limits<T>::infinity();
        });
  });
}

// dx = grad(i, j) at each x offset i, j the offset of its output (accumulate: dx += ...).
template <bool A, typename T, class Grad>
void broadcast_gradient(const Plan& p, T* dx, Grad grad) {
  detail::with_inner_strides(p, [&](auto stride, auto) {
    constexpr size_t S = decltype(stride)::value;
    detail::parallel_for(p.size, p.size, [&](size_t begin, size_t end) {
      detail::walk(p, begin, end, [&](size_t o, size_t og, size_t, size_t len) {
        T* d = dx + o;
        LOOM_OMP_SIMD()
        for (size_t i = 0; i < len; ++i) {
          const T g = grad(o + i, og + S * i);
          d[i] = A ? d[i] + g : g;
        }
      });
    });
  });
}

// Max and Min: each dy to the first position of its group where x equals y.
template <bool A, typename T>
void first_match_gradient(const Plan& p, const T* x, const T* y, const T* dy, T* dx) {
  if (!A) {
    detail::parallel_for(p.size, p.size,
                         [&](size_t begin, size_t end) { std::fill(dx + begin, dx + end, T(0)); });
  }
  const Groups g(p);
  g.each([&](size_t xo, size_t yo) {
    bool found = false;
    g.runs(xo, [&](size_t at, size_t len) {
      for (size_t i = 0; i < len && !found; ++i) {
        if (x[at + i] == y[yo]) {
          dx[at + i] += dy[yo];
          found = true;
        }
      }
    });
  });
}

// Prod: dy times the product of the others of the group. With no zero in the group that is
// prod / x; with one, the zero's is the product of the rest and the others' 0; with more, all 0.
template <bool A, typename T>
void prod_gradient(const Plan& p, const T* x, const T* dy, T* dx) {
  const Groups g(p);
  g.each([&](size_t xo, size_t yo) {
    size_t zeros = 0;
    double nonzero = 1;  // the product of the group's nonzero elements
    g.runs(xo, [&](size_t at, size_t len) {
      LOOM_OMP_SIMD(reduction(+ : zeros) reduction(* : nonzero))
      for (size_t i = 0; i < len; ++i) {
        zeros += x[at + i] == 0;
        nonzero *= x[at + i] == 0 ? T(1) : x[at + i];
      }
    });
    const double d = dy[yo] * nonzero;
    g.runs(xo, [&](size_t at, size_t len) {
      LOOM_OMP_SIMD()
      for (size_t i = 0; i < len; ++i) {
        const T v = x[at + i];
        const double others = zeros == 0 ? d / v : (zeros == 1 && v == 0 ? d : 0.0);
        write(dx[at + i], static_cast<T>(others), A);
      }
    });
  });
}

}  // namespace

template <typename T>
void reduce(ReduceOp op, const Dims& in_dims, const T* x, const Dims& out_dims, T* y,
            bool accumulate) {
  const Plan p = detail::make_plan(in_dims, {&in_dims, &out_dims}, "reduce");
  size_t out_size = 1;
  for (size_t d : out_dims) out_size *= d;
  if (out_size == 0) return;
  auto value = [x](size_t o, size_t, size_t, size_t i) { return x[o + i]; };
  // Min is minus the max of -x.
  auto negated = [x](size_t o, size_t, size_t, size_t i) { return -x[o + i]; };
  auto square = [x](size_t o, size_t, size_t, size_t i) { return x[o + i] * x[o + i]; };
  if (op == ReduceOp::L2 || op == ReduceOp::ArgMax || op == ReduceOp::ArgMin) {
    LOOM_CHECK(!accumulate, ArgumentError,
               "reduce: L2, ArgMax and ArgMin cannot accumulate (they finish their results in y)");
    if (op == ReduceOp::L2) {
      detail::reduce_plan<Combine::Sum, false>(p, 1, y, T(1), square);
      return map_outputs(out_size, y, [](T v) { return std::sqrt(v); });
    }
    if (op == ReduceOp::ArgMax) {
      detail::reduce_plan<Combine::Max, false>(p, 1, y, T(1), value);
    } else {
      detail::reduce_plan<Combine::Max, false>(p, 1, y, T(-1), negated);
    }
    return first_position(p, x, y);
  }
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    switch (op) {
      case ReduceOp::Sum:
        return detail::reduce_plan<Combine::Sum, A>(p, 1, y, T(1), value);
      case ReduceOp::Mean: {
        // Over zero elements 1/0 = inf times a zero sum gives NaN, as numpy's mean does.
        const T inv_count = T(1) / static_cast<T>(p.size / out_size);
        return detail::reduce_plan<Combine::Sum, A>(p, 1, y, inv_count, value);
      }
      case ReduceOp::SumSquare:
        return detail::reduce_plan<Combine::Sum, A>(p, 1, y, T(1), square);
      case ReduceOp::L1:
        return detail::reduce_plan<Combine::Sum, A>(
            p, 1, y, T(1), [x](size_t o, size_t, size_t, size_t i) { return std::abs(x[o + i]); });
      case ReduceOp::Max:
        return detail::reduce_plan<Combine::Max, A>(p, 1, y, T(1), value);
      case ReduceOp::Min:
        return detail::reduce_plan<Combine::Max, A>(p, 1, y, T(-1), negated);
      case ReduceOp::Prod:
        return detail::reduce_plan<Combine::Prod, A>(p, 1, y, T(1), value);
      case ReduceOp::LogSumExp:
        return log_sum_exp<A>(p, out_size, x, y);
      case ReduceOp::L2:
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin:
        break;
    }
    throw ArgumentError("reduce: unknown op");
  });
}

template <typename T>
void reduce_backward(ReduceOp op, const Dims& in_dims, const T* x, const Dims& out_dims, const T* y,
                     const T* dy, T* dx, bool accumulate) {
  LOOM_CHECK(op != ReduceOp::ArgMax && op != ReduceOp::ArgMin, ArgumentError,
             "reduce_backward: ArgMax and ArgMin have no gradient");
  const Plan p = detail::make_plan(in_dims, {&in_dims, &out_dims}, "reduce_backward");
  if (p.size == 0) return;
  detail::with_accumulate(accumulate, [&](auto acc) {
    constexpr bool A = decltype(acc)::value;
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Mean: {
        size_t out_size = 1;
        for (size_t d : out_dims) out_size *= d;
        const T s = op == ReduceOp::Sum ? T(1) : T(1) / static_cast<T>(p.size / out_size);
        return broadcast_gradient<A>(p, dx, [dy, s](size_t, size_t j) { return s * dy[j]; });
      }
      case ReduceOp::SumSquare:
        return broadcast_gradient<A>(p, dx,
                                     [x, dy](size_t i, size_t j) { return T(2) * x[i] * dy[j]; });
      case ReduceOp::L1:  // sign(x), 0 at 0 (CNTK's gradient of abs)
        return broadcast_gradient<A>(p, dx, [x, dy](size_t i, size_t j) {
          return static_cast<T>((x[i] > 0) - (x[i] < 0)) * dy[j];
        });
      case ReduceOp::L2:  // 0 where the norm is 0 (x is 0 there), rather than 0/0
        return broadcast_gradient<A>(p, dx, [x, y, dy](size_t i, size_t j) {
          return y[j] == 0 ? T(0) : x[i] / y[j] * dy[j];
        });
      case ReduceOp::LogSumExp:
        return broadcast_gradient<A>(
            p, dx, [x, y, dy](size_t i, size_t j) { return fast_exp(x[i] - y[j]) * dy[j]; });
      case ReduceOp::Max:
      case ReduceOp::Min:
        return first_match_gradient<A>(p, x, y, dy, dx);
      case ReduceOp::Prod:
        return prod_gradient<A>(p, x, dy, dx);
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin:
        break;
    }
    throw ArgumentError("reduce_backward: unknown op");
  });
}

namespace {

void check_sequence_op(const char* what, ReduceOp op) {
  LOOM_CHECK(op == ReduceOp::Sum || op == ReduceOp::Max, ArgumentError, what,
             ": only Sum and Max reduce over sequences, got op ", static_cast<int>(op));
}

// Calls body(row, seq, first, c0, c1) for each row of l in memory order (so x streams once, and
// the rows of y stay in the cache), seq its sequence, first whether it is step 0, on the columns
// [c0, c1) of rows of n elements that the thread running it owns: threads split the columns in
// whole cache lines.
template <typename T, class Body>
void each_sequence_row(const SequenceLayout& l, size_t n, Body&& body) {
  constexpr size_t kLine = 64 / sizeof(T);
  detail::parallel_for((n + kLine - 1) / kLine, l.rows() * n, [&](size_t begin, size_t end) {
    const size_t c0 = begin * kLine, c1 = std::min(n, end * kLine);
    for (size_t t = 0; t < l.max_length(); ++t)
      for (size_t k = 0; k < l.active(t); ++k)
        body(l.step_offsets[t] + k, l.order[k], t == 0, c0, c1);
  });
}

}  // namespace

template <typename T>
void reduce_sequences(ReduceOp op, const SequenceLayout& l, size_t n, const T* x, T* y) {
  check_sequence_op("reduce_sequences", op);
  for (size_t b = 0; b < l.num_sequences(); ++b)
    if (l.lengths[b] == 0) std::fill_n(y + b * n, n, T(0));
  const bool max = op == ReduceOp::Max;
  each_sequence_row<T>(l, n, [&](size_t row, size_t seq, bool first, size_t c0, size_t c1) {
    const T* from = x + row * n;
    T* to = y + seq * n;
    if (first) {
      std::copy(from + c0, from + c1, to + c0);
    } else if (max) {
      LOOM_OMP_SIMD()
      for (size_t j = c0; j < c1; ++j) to[j] = to[j] < from[j] ? from[j] : to[j];
    } else {
      LOOM_OMP_SIMD()
      for (size_t j = c0; j < c1; ++j) to[j] += from[j];
    }
  });
}

template <typename T>
void reduce_sequences_backward(ReduceOp op, const SequenceLayout& l, size_t n, const T* x,
                               const T* y, const T* dy, T* dx, bool accumulate) {
  check_sequence_op("reduce_sequences_backward", op);
  // Max: y's elements not matched yet; a match sets its element to NaN, which matches nothing.
  thread_local std::vector<T> unmatched;
  if (op == ReduceOp::Max) unmatched.resize(l.num_sequences() * n);
  T* pending = unmatched.data();
  detail::with_accumulate(accumulate, [&](auto acc) {
    each_sequence_row<T>(l, n, [&](size_t row, size_t seq, bool first, size_t c0, size_t c1) {
      const T* g = dy + seq * n;
      T* to = dx + row * n;
      if (op == ReduceOp::Sum) {
        LOOM_OMP_SIMD()
        for (size_t j = c0; j < c1; ++j) to[j] = acc ? to[j] + g[j] : g[j];
        return;
      }
      T* u = pending + seq * n;
      if (first) std::copy(y + seq * n + c0, y + seq * n + c1, u + c0);
      const T* v = x + row * n;
      LOOM_OMP_SIMD()
      for (size_t j = c0; j < c1; ++j) {
        const bool hit = v[j] == u[j];
        const T d = hit ? g[j] : T(0);
        to[j] = acc ? to[j] + d : d;
        u[j] = hit ? std::numeric_limits<T>::quiet_NaN() : u[j];
      }
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

#define LOOM_INSTANTIATE(T)                                                                     \
  template void reduce<T>(ReduceOp, const Dims&, const T*, const Dims&, T*, bool);              \
  template void reduce_backward<T>(ReduceOp, const Dims&, const T*, const Dims&, const T*,      \
                                   const T*, T*, bool);                                         \
  template void reduce_sequences<T>(ReduceOp, const SequenceLayout&, size_t, const T*, T*);     \
  template void reduce_sequences_backward<T>(ReduceOp, const SequenceLayout&, size_t, const T*, \
                                             const T*, const T*, T*, bool);                     \
  template void scale<T>(size_t, T, T*);                                                        \
  template void axpy<T>(size_t, T, const T*, T*);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
