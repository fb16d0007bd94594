// numpy's legacy RandomState (np.random.seed(n); randint; permutation; randn), so the examples draw
// the very data points the seeds' Python scripts draw. MT19937 seeded with init_genrand(n), as
// numpy does for an integer seed; randn is numpy's polar Box-Muller with its cached pair.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace examples {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  // randint(low, high): values in [low, high), by masked rejection on 32-bit draws.
  int64_t randint(int64_t low, int64_t high) {
    uint32_t range = uint32_t(high - low - 1), mask = range;
    for (int s = 1; s < 32; s <<= 1) mask |= mask >> s;
    uint32_t v;
    while ((v = uint32_t(mt_()) & mask) > range) {
    }
    return low + int64_t(v);
  }

  // permutation(n): numpy's legacy shuffle of arange(n), Fisher-Yates from the last element.
  std::vector<size_t> permutation(size_t n) {
    std::vector<size_t> p(n);
    for (size_t i = 0; i < n; ++i) p[i] = i;
    for (size_t i = n; i-- > 1;) std::swap(p[i], p[size_t(randint(0, int64_t(i) + 1))]);
    return p;
  }

  double uniform() {
    uint32_t a = uint32_t(mt_()) >> 5, b = uint32_t(mt_()) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }

  double randn() {
    if (has_cached_) {
      has_cached_ = false;
      return cached_;
    }
    double x1, x2, r2;
    do {
      x1 = 2.0 * uniform() - 1.0;
      x2 = 2.0 * uniform() - 1.0;
      r2 = x1 * x1 + x2 * x2;
    } while (r2 >= 1.0 || r2 == 0.0);
    double f = std::sqrt(-2.0 * std::log(r2) / r2);
    cached_ = f * x1;
    has_cached_ = true;
    return f * x2;
  }

 private:
  std::mt19937 mt_;
  bool has_cached_ = false;
  double cached_ = 0;
};

}  // namespace examples
