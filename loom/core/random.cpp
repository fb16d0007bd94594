#include "loom/core/random.h"

#include <cmath>
#include <mutex>

namespace loom {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 2> key, std::array<uint32_t, 4> c) {
  constexpr uint32_t M0 = 0xD2511F53, M1 = 0xCD9E8D57, W0 = 0x9E3779B9, W1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t{M0} * c[0], p1 = uint64_t{M1} * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ key[1],
         uint32_t(p0)};
    key[0] += W0;
    key[1] += W1;
  }
  return c;
}

std::array<uint32_t, 4> RandomGenerator::next_block() {
  uint64_t n = offset_++;
  return philox4x32({uint32_t(seed_), uint32_t(seed_ >> 32)},
                    {uint32_t(n), uint32_t(n >> 32), uint32_t(stream_), uint32_t(stream_ >> 32)});
}

uint32_t RandomGenerator::next_u32() {
  return next_block()[0];
}

double RandomGenerator::uniform() {
  auto b = next_block();
  uint64_t bits = (uint64_t{b[0]} << 21) ^ (b[1] >> 11);
  return double(bits & ((uint64_t{1} << 53) - 1)) * 0x1.0p-53;
}

double RandomGenerator::normal() {
  auto b = next_block();
  double u1 = (double(b[0]) + 1.0) * 0x1.0p-32;  // (0, 1]
  double u2 = double(b[1]) * 0x1.0p-32;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

Dictionary RandomGenerator::checkpoint() const {
  Dictionary d;
  d["seed"] = seed_;
  d["stream"] = stream_;
  d["offset"] = offset_;
  return d;
}

void RandomGenerator::restore(const Dictionary& state) {
  seed_ = state.get<uint64_t>("seed");
  stream_ = state.get<uint64_t>("stream");
  offset_ = state.get<uint64_t>("offset");
}

namespace {
std::mutex g_mutex;
uint64_t g_seed = 0;
uint64_t g_next_stream = 0;
}  // namespace

void set_fixed_random_seed(uint64_t seed) {
  std::lock_guard lock(g_mutex);
  g_seed = seed;
  g_next_stream = 0;
}

RandomGenerator next_default_generator() {
  std::lock_guard lock(g_mutex);
  return RandomGenerator(g_seed, g_next_stream++);
}

}  // namespace loom
