// Internal to the kernels layer (not part of its API): the deterministic thread split and the
// collapsed iteration space behind broadcasting and reductions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/threads.h"

// OpenMP's simd hint (vectorize, reordering a reduction) on the loops below: the kernels
// compile with OpenMP; a translation unit without it gets plain loops and no unknown-pragma
// warnings.
#ifdef _OPENMP
#define LOOM_OMP_SIMD(clauses) _Pragma(LOOM_OMP_PRAGMA_TEXT(omp simd clauses))
#define LOOM_OMP_PRAGMA_TEXT(text) #text
#else
#define LOOM_OMP_SIMD(clauses)
#endif

namespace loom::kernels::detail {

// The one threshold of the kernels' single-threaded path: the work (elements a simple loop
// touches) each thread should get at least. Waking a team costs microseconds (more when its
// threads sleep, and a whole time slice when another process holds the core), about what a
// loop spends on 16k elements, so below twice this a loop stays on the calling thread.
// Chosen on the small training steps of bench/README.md (logistic regression, MLP): their
// elementwise ops, softmax and bias gradients stay on one thread up to minibatch 64. Other
// kernels state their work in these units (kMacsPerElement for products).
inline constexpr size_t kGrain = 16384;
// A multiply-add of a matrix product (oneDNN's sgemm, ~100 GFLOP/s per core here) costs about
// 1/128 of an element of a simple loop: a product runs on one thread per 2M multiply-adds.
inline constexpr size_t kMacsPerElement = 128;

// Calls body(begin, end) on contiguous, disjoint pieces of [0, n), one per thread, statically
// split. Callers make each output depend on one piece only, so results do not depend on timing.
template <class Body>
void parallel_for(size_t n, size_t work, Body&& body) {
  if (n == 0) return;
  size_t threads = 1;
  if (work >= 2 * kGrain && !in_parallel_region())
    threads = std::min({static_cast<size_t>(get_max_num_cpu_threads()), n, work / kGrain});
  if (threads <= 1) {
    body(size_t{0}, n);
    return;
  }
  for_each_piece(n, threads, [&](size_t, size_t begin, size_t end) {
    if (begin < end) body(begin, end);
  });
}

// Calls f(std::true_type{}) or f(std::false_type{}), so loops get `accumulate` as a constant.
template <class F>
void with_accumulate(bool accumulate, F&& f) {
  if (accumulate)
    f(std::true_type{});
  else
    f(std::false_type{});
}

inline constexpr size_t kMaxRank = 16;
inline constexpr size_t kMaxOperands = 3;

// An iteration space (the largest shape of a broadcast or reduction) and, per operand, its
// element strides in that space (0 on axes where the operand has extent 1). Axes of extent 1 are
// dropped and neighbours that every operand walks alike are merged, so a same-shape op becomes
// one flat axis, a bias add [N,C] + [1,C] two axes, whatever the original rank.
struct Plan {
  size_t rank = 0;
  size_t size = 1;
  size_t dim[kMaxRank] = {};
  size_t stride[kMaxOperands][kMaxRank] = {};
};

// Plans the space `space` for up to three operands whose dims have its rank and, per axis,
// either its extent or 1. `what` names the kernel in error messages.
inline Plan make_plan(const std::vector<size_t>& space,
                      std::initializer_list<const std::vector<size_t>*> operands,
                      const char* what) {
  const size_t rank = space.size();
  size_t full[kMaxOperands][64];
  LOOM_CHECK(rank <= 64, ShapeError, what, ": rank ", rank, " exceeds 64");
  size_t op = 0;
  for (const std::vector<size_t>* dims : operands) {
    LOOM_CHECK(dims->size() == rank, ShapeError, what, ": operand ", op, " has rank ", dims->size(),
               ", expected ", rank);
    size_t s = 1;
    for (size_t k = rank; k-- > 0;) {
      const size_t d = (*dims)[k];
      LOOM_CHECK(d == space[k] || d == 1, ShapeError, what, ": operand ", op, " has extent ", d,
                 " on axis ", k, ", expected ", space[k], " or 1");
      full[op][k] = d == 1 ? 0 : s;
      s *= d;
    }
    ++op;
  }
  const size_t nops = op;

  // Build innermost first, then reverse.
  Plan p;
  for (size_t k = rank; k-- > 0;) {
    p.size *= space[k];
    if (space[k] == 1) continue;
    bool merge = p.rank > 0;
    for (size_t o = 0; o < nops && merge; ++o)
      merge = full[o][k] == p.stride[o][p.rank - 1] * p.dim[p.rank - 1];
    if (merge) {
      p.dim[p.rank - 1] *= space[k];
      continue;
    }
    LOOM_CHECK(p.rank < kMaxRank, ShapeError, what, ": broadcast pattern needs more than ",
               kMaxRank, " axes");
    p.dim[p.rank] = space[k];
    for (size_t o = 0; o < nops; ++o) p.stride[o][p.rank] = full[o][k];
    ++p.rank;
  }
  if (p.rank == 0) {
    p.dim[0] = 1;
    p.rank = 1;
  }
  std::reverse(p.dim, p.dim + p.rank);
  for (size_t o = 0; o < nops; ++o) std::reverse(p.stride[o], p.stride[o] + p.rank);
  return p;
}

// The axes of p where operand `target` is broadcast (reduced = true) or not; a space of one
// element when there are none.
inline Plan sub_plan(const Plan& p, size_t target, bool reduced) {
  Plan s;
  for (size_t k = 0; k < p.rank; ++k) {
    if ((p.stride[target][k] == 0) != reduced) continue;
    s.dim[s.rank] = p.dim[k];
    for (size_t o = 0; o < kMaxOperands; ++o) s.stride[o][s.rank] = p.stride[o][k];
    s.size *= p.dim[k];
    ++s.rank;
  }
  if (s.rank == 0) {
    s.dim[0] = 1;
    s.rank = 1;
  }
  return s;
}

// Calls f(off0, off1, off2, len) for each run along the innermost axis that covers the flat
// positions [begin, end) of p's space, in order; offN is operand N's offset at the run's start.
template <class F>
void walk(const Plan& p, size_t begin, size_t end, F&& f) {
  if (begin >= end) return;
  const size_t r = p.rank;
  size_t idx[kMaxRank];
  size_t rem = begin;
  for (size_t k = r; k-- > 0;) {
    idx[k] = rem % p.dim[k];
    rem /= p.dim[k];
  }
  while (begin < end) {
    size_t off[kMaxOperands] = {};
    for (size_t k = 0; k < r; ++k)
      for (size_t o = 0; o < kMaxOperands; ++o) off[o] += idx[k] * p.stride[o][k];
    const size_t len = std::min(p.dim[r - 1] - idx[r - 1], end - begin);
    f(off[0], off[1], off[2], len);
    begin += len;
    idx[r - 1] = 0;
    for (size_t k = r - 1; k-- > 0;) {
      if (++idx[k] < p.dim[k]) break;
      idx[k] = 0;
    }
  }
}

// Calls f(integral_constant<SA>, integral_constant<SB>) with the strides (0 or 1) of operands 1
// and 2 along p's innermost axis, so inner loops read them as contiguous or as one repeated value.
template <class F>
void with_inner_strides(const Plan& p, F&& f) {
  using One = std::integral_constant<size_t, 1>;
  using Zero = std::integral_constant<size_t, 0>;
  const bool sa = p.stride[1][p.rank - 1] != 0, sb = p.stride[2][p.rank - 1] != 0;
  if (sa && sb)
    f(One{}, One{});
  else if (sa)
    f(One{}, Zero{});
  else if (sb)
    f(Zero{}, One{});
  else
    f(Zero{}, Zero{});
}

enum class Combine { Sum, Max, Prod };

// The accumulator of a combine (sums and products in double) and its identity.
template <Combine C, class T>
using CombineAccumulator = std::conditional_t<C == Combine::Max, T, double>;
template <Combine C, class A>
constexpr A combine_identity() {
  return C == Combine::Sum ? A(0)
                           : (C == Combine::Prod ? A(1) : -std::numeric_limits<A>::infinity());
}
// acc combined with v (Max ignores NaN: a NaN is never larger).
template <Combine C, class A>
A combine(A acc, A v) {
  if constexpr (C == Combine::Sum)
    return acc + v;
  else if constexpr (C == Combine::Prod)
    return acc * v;
  else
    return v > acc ? v : acc;
}

// Partial results of a combine kept in kLanes interleaved lanes, so that the loop over a run
// vectorizes and pipelines (one running accumulator stayed scalar, bound by the operation's
// latency; a max's compare and select did not vectorize at all): lane j takes steps j,
// j + kLanes, ... of each run, so the order is fixed by the shapes alone.
//
// A sum of values narrower than its lanes (float into double) first adds four steps of a lane
// in their own type, pairwise ((j + (j + kLanes)) + ((j + 2 kLanes) + (j + 3 kLanes))), and
// converts that: converting each float to double bound the loop at a third of a float sum's
// speed, and two float roundings per four values keep the error within 2^-23 of the sum of
// magnitudes (docs/decisions.md, "Sums in float, four at a time").
template <Combine C, class A>
struct Lanes {
  static constexpr size_t kLanes = 16;
  A lane[kLanes];
  Lanes() { std::fill_n(lane, kLanes, combine_identity<C, A>()); }
  // Combines f(i) for i < len, f(i) of a type convertible to A. f should capture by value:
  // what it reads through references the loop may reload per element, and not vectorize.
  template <class F>
  void add(size_t len, F f) {
    const F g = f;
    size_t i = 0;
    using V = decltype(g(size_t{0}));
    if constexpr (C == Combine::Sum && sizeof(V) < sizeof(A)) {
      constexpr size_t kStep = 4 * kLanes;
      for (; i + kStep <= len; i += kStep) {
        LOOM_OMP_SIMD()
        for (size_t j = 0; j < kLanes; ++j) {
          const size_t k = i + j;
          const V pair0 = g(k) + g(k + kLanes), pair1 = g(k + 2 * kLanes) + g(k + 3 * kLanes);
          lane[j] += static_cast<A>(pair0 + pair1);
        }
      }
    }
    for (; i + kLanes <= len; i += kLanes) {
      LOOM_OMP_SIMD()
      for (size_t j = 0; j < kLanes; ++j) lane[j] = combine<C>(lane[j], static_cast<A>(g(i + j)));
    }
    for (size_t j = 0; i + j < len; ++j) lane[j] = combine<C>(lane[j], static_cast<A>(g(i + j)));
  }
  // The lanes combined in order.
  A result() const {
    A acc = combine_identity<C, A>();
    for (const A v : lane) acc = combine<C>(acc, v);
    return acc;
  }
};

// Reduces the space of p into operand `target` (stride 0 on its reduced axes):
// out[t] = scale * combine(load(off0, off1, off2, i)) (+ out[t] when Accumulate), where
// load(off0, off1, off2, i) is the value at step i of a run along p's innermost axis. Sums and
// products accumulate in double. Each output is combined by one thread in an order fixed by the
// shape alone (kLanes interleaved partial results along the innermost axis, then those in
// order), and a single output splits into blocks fixed by the size alone, so results do not
// depend on the thread count.
template <Combine C, bool Accumulate, class T, class Load>
void reduce_plan(const Plan& p, size_t target, T* out, T scale, Load load) {
  using A = CombineAccumulator<C, T>;
  constexpr A identity = combine_identity<C, A>();
  const Plan kept = sub_plan(p, target, false);
  const Plan red = sub_plan(p, target, true);
  const size_t inner = p.rank - 1;
  auto finish = [&](T& o, A acc) {
    const T v = scale * static_cast<T>(acc);
    o = Accumulate ? o + v : v;
  };

  if (p.stride[target][inner] == 0) {
    // Innermost axis reduced: each output combines runs that are contiguous in the source, in
    // Lanes (a convolution's bias gradient, [N,C,H,W] -> [C], is this case).
    auto combine_range = [&](size_t k0, size_t k1, size_t k2, size_t begin, size_t end) {
      // A local copy keeps the pointers load captured in registers: read through the reference
      // the loop reloaded them per element, and a load of two of them (log_sum_exp's) stayed
      // scalar.
      const Load f = load;
      Lanes<C, A> lanes;
      walk(red, begin, end, [&](size_t r0, size_t r1, size_t r2, size_t len) {
        lanes.add(len, [f, o0 = k0 + r0, o1 = k1 + r1, o2 = k2 + r2](size_t i) {
          return f(o0, o1, o2, i);
        });
      });
      return lanes.result();
    };
    if (kept.size == 1 && red.size >= 2 * kGrain) {
      constexpr size_t kMaxBlocks = 64;
      const size_t blocks = std::min(kMaxBlocks, red.size / kGrain);
      A partial[kMaxBlocks];
      parallel_for(blocks, red.size, [&](size_t b0, size_t b1) {
        for (size_t b = b0; b < b1; ++b)
          partial[b] = combine_range(0, 0, 0, red.size * b / blocks, red.size * (b + 1) / blocks);
      });
      A acc = partial[0];
      for (size_t b = 1; b < blocks; ++b) acc = combine<C>(acc, partial[b]);
      finish(out[0], acc);
      return;
    }
    parallel_for(kept.size, p.size, [&](size_t j0, size_t j1) {
      walk(kept, j0, j1, [&](size_t k0, size_t k1, size_t k2, size_t len) {
        const size_t s0 = kept.stride[0][kept.rank - 1], s1 = kept.stride[1][kept.rank - 1],
                     s2 = kept.stride[2][kept.rank - 1];
        for (size_t m = 0; m < len; ++m) {
          const size_t o[kMaxOperands] = {k0 + m * s0, k1 + m * s1, k2 + m * s2};
          finish(out[o[target]], combine_range(o[0], o[1], o[2], 0, red.size));
        }
      });
    });
    return;
  }

  // Innermost axis kept: combine whole rows into a stack buffer, one chunk of a row at a time.
  parallel_for(kept.size, p.size, [&](size_t j0, size_t j1) {
    const Load f = load;  // as in combine_range
    constexpr size_t kChunk = 256;
    A buf[kChunk];
    walk(kept, j0, j1, [&](size_t k0, size_t k1, size_t k2, size_t len) {
      for (size_t c = 0; c < len; c += kChunk) {
        const size_t n = std::min(kChunk, len - c);
        std::fill(buf, buf + n, identity);
        walk(red, 0, red.size, [&](size_t r0, size_t r1, size_t r2, size_t rlen) {
          for (size_t m = 0; m < rlen; ++m) {
            const size_t o0 = k0 + r0 + m * red.stride[0][red.rank - 1];
            const size_t o1 = k1 + r1 + m * red.stride[1][red.rank - 1];
            const size_t o2 = k2 + r2 + m * red.stride[2][red.rank - 1];
            LOOM_OMP_SIMD()
            for (size_t i = 0; i < n; ++i)
              buf[i] = combine<C>(buf[i], static_cast<A>(f(o0, o1, o2, c + i)));
          }
        });
        const size_t o[kMaxOperands] = {k0, k1, k2};
        T* dst = out + o[target] + c;
        LOOM_OMP_SIMD()
        for (size_t i = 0; i < n; ++i) finish(dst[i], buf[i]);
      }
    });
  });
}

}  // namespace loom::kernels::detail
