// Helpers shared by the kernels' unit tests (included by tests only; needs GoogleTest and
// OpenMP): random data, the tolerance of a float or double result against a double reference,
// broadcasting indices, the naive gemm reference, and the thread-count determinism check.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "loom/kernels/elementwise.h"

namespace loom::testing {

using kernels::Dims;

// The element types every typed kernel test runs with.
using RealTypes = ::testing::Types<float, double>;

// n values uniform in [lo, hi); the same seed gives the same values in either type.
template <typename T>
std::vector<T> random_vector(size_t n, unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(gen));
  return v;
}

// Relative tolerance of a kernel's result in T against a reference computed in double.
template <typename T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

inline size_t product(const Dims& d) {
  size_t n = 1;
  for (size_t v : d) n *= v;
  return n;
}

// Offset in `small` (broadcast against `full`: the same rank, each extent equal or 1) of the
// element at row-major position `flat` of `full`.
inline size_t broadcast_offset(const Dims& full, const Dims& small, size_t flat) {
  size_t off = 0, stride = 1;
  for (size_t k = full.size(); k-- > 0;) {
    const size_t idx = flat % full[k];
    flat /= full[k];
    if (small[k] != 1) off += idx * stride;
    stride *= small[k];
  }
  return off;
}

// Dims that keep d's extent where bit k of mask is set and are 1 elsewhere.
inline Dims masked(const Dims& d, unsigned mask) {
  Dims r = d;
  for (size_t k = 0; k < r.size(); ++k)
    if (!(mask >> k & 1)) r[k] = 1;
  return r;
}

// The output C of a gemm-like kernel under test: random values kept in `initial`, and `c`, the
// buffer handed to the kernel, holding them too, or NaN where beta == 0 (the kernel must then
// not read C).
template <typename T>
struct GemmOutput {
  GemmOutput(size_t n, T beta, unsigned seed) : initial(random_vector<T>(n, seed)), c(initial) {
    if (beta == T(0)) std::fill(c.begin(), c.end(), std::numeric_limits<T>::quiet_NaN());
  }
  std::vector<T> initial, c;
};

// One element of alpha * sum_k a(k) b(k) + beta * c0 in double (c0 counts as 0 where
// beta == 0), with mag = sum_k |a(k) b(k)| to scale the tolerance by.
struct GemmReference {
  double want, mag, c0;
};

template <typename T, typename A, typename B>
GemmReference gemm_reference(size_t K, const A& a, const B& b, T alpha, T beta, T c0) {
  double s = 0, mag = 0;
  for (size_t k = 0; k < K; ++k) {
    const double ak = a(k), bk = b(k);
    s += ak * bk;
    mag += std::abs(ak * bk);
  }
  const double c = beta == T(0) ? 0.0 : double(c0);
  return {double(alpha) * s + double(beta) * c, mag, c};
}

// Runs `run`, which returns all its results in one vector, with each of `threads` OpenMP
// threads (1, 3 and again 3 unless given) and expects the same results, to the bit, every time.
template <typename Run>
void expect_same_for_thread_counts(const Run& run, std::vector<int> threads = {1, 3, 3}) {
  const int saved = omp_get_max_threads();
  std::vector<decltype(run())> runs;
  for (int t : threads) {
    omp_set_num_threads(t);
    runs.push_back(run());
  }
  omp_set_num_threads(saved);
  for (size_t i = 1; i < runs.size(); ++i)
    EXPECT_EQ(runs[i - 1], runs[i])
        << "with " << threads[i - 1] << " and " << threads[i] << " threads";
}

}  // namespace loom::testing
