// Helpers shared by the tests of graphs and what runs them.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/core/random.h"

namespace loom {

// n values uniform in [-1, 1), the same for the same seed.
inline std::vector<float> random_floats(size_t n, uint64_t seed) {
  RandomGenerator g(seed, 0);
  std::vector<float> v(n);
  for (float& x : v) x = float(g.uniform() * 2 - 1);
  return v;
}

}  // namespace loom
