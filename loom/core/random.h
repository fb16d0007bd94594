// Counter-based random numbers (Philox4x32-10): the whole state of a generator is its seed,
// its stream and a counter, so it checkpoints as three integers and element i of draw n can
// be computed independently (parallel dropout masks, reproducible after restore).
#pragma once

#include <array>
#include <cstdint>

#include "loom/core/dictionary.h"

namespace loom {

// One Philox4x32-10 block: four independent 32-bit words for (key, counter).
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 2> key, std::array<uint32_t, 4> counter);

class RandomGenerator {
 public:
  explicit RandomGenerator(uint64_t seed = 0, uint64_t stream = 0) : seed_(seed), stream_(stream) {}

  uint32_t next_u32();
  // Uniform in [0, 1), 53 random bits.
  double uniform();
  // Standard normal (Box-Muller on one block).
  double normal();
  // Counter of blocks drawn so far.
  uint64_t offset() const { return offset_; }
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

  Dictionary checkpoint() const;
  void restore(const Dictionary& state);

 private:
  std::array<uint32_t, 4> next_block();
  uint64_t seed_, stream_, offset_ = 0;
};

// Fixes the seed every default-seeded initializer and random op derives its own from, so a
// program builds the same model every run (CNTK's set_fixed_random_seed).
void set_fixed_random_seed(uint64_t seed);
// A fresh generator for the next object that asked for a default seed: same seed, a new
// stream per request, in creation order.
RandomGenerator next_default_generator();

}  // namespace loom
