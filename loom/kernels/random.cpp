#include "loom/kernels/random.h"

#include <algorithm>
#include <cmath>

#include "loom/core/error.h"
#include "loom/kernels/detail.h"

namespace loom::kernels {
namespace {

// Ten Philox rounds and a logarithm or two per element.
constexpr size_t kElementCost = 40;

// The 53 random bits of two words.
uint64_t bits53(uint32_t high, uint32_t low) {
  return (uint64_t{high} << 21) ^ (low >> 11);
}

template <typename T>
T draw_one(Distribution distribution, double a, double b, const std::array<uint32_t, 4>& w) {
  const double u = double(bits53(w[0], w[1])) * 0x1.0p-53;
  switch (distribution) {
    case Distribution::Uniform: {
      const T v = T(a + (b - a) * u);
      return v < T(b) ? v : std::nextafter(T(b), T(a));
    }
    case Distribution::Normal: {
      const double v = double(bits53(w[2], w[3])) * 0x1.0p-53;
      return T(a + b * std::sqrt(-2.0 * std::log1p(-u)) * std::cos(2.0 * M_PI * v));
    }
    case Distribution::Gumbel: {
      const double open = (double(bits53(w[0], w[1]) >> 1) + 0.5) * 0x1.0p-52;
      return T(a - b * std::log(-std::log(open)));
    }
    case Distribution::Bernoulli:
      return T(u < a ? 1 : 0);
  }
  return T(0);
}

}  // namespace

template <typename T>
void random_fill(size_t n, T* dst, Distribution distribution, double a, double b,
                 std::array<uint32_t, 2> key) {
  detail::parallel_for(n, n * kElementCost, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      dst[i] = draw_one<T>(distribution, a, b,
                           philox4x32(key, {uint32_t(i), uint32_t(uint64_t(i) >> 32), 0, 0}));
  });
}

template void random_fill<float>(size_t, float*, Distribution, double, double,
                                 std::array<uint32_t, 2>);
template void random_fill<double>(size_t, double*, Distribution, double, double,
                                  std::array<uint32_t, 2>);

template <typename T>
ClassSampler::ClassSampler(const T* weights, size_t n, const char* op, const char* what)
    : op_(op), what_(what) {
  double total = 0;
  for (size_t c = 0; c < n; ++c) {
    LOOM_CHECK(weights[c] >= 0, ArgumentError, op, ": ", what, " has a negative weight ",
               weights[c], " at class ", c, "; weights must be >= 0");
    total += double(weights[c]);
    prefix_.push_back(total);
    nonzero_ += weights[c] > 0;
  }
  LOOM_CHECK(total > 0, ArgumentError, op, ": ", what,
             " is all zeros; at least one class needs a weight above 0");
  for (size_t c = 0; c < n; ++c) probability_.push_back(double(weights[c]) / total);
}

template ClassSampler::ClassSampler(const float*, size_t, const char*, const char*);
template ClassSampler::ClassSampler(const double*, size_t, const char*, const char*);

std::vector<size_t> ClassSampler::draw(size_t k, bool allow_duplicates,
                                       RandomGenerator& rng) const {
  size_t tries = 0;
  return draw(k, allow_duplicates, rng, tries);
}

std::vector<size_t> ClassSampler::draw(size_t k, bool allow_duplicates, RandomGenerator& rng,
                                       size_t& tries) const {
  LOOM_CHECK(allow_duplicates || k <= nonzero_, ArgumentError, op_, ": cannot draw ", k,
             " distinct classes from ", what_, " with ", nonzero_, " nonzero weights");
  std::vector<size_t> out;
  std::vector<bool> taken(classes(), false);
  tries = 0;
  while (out.size() < k) {
    const double u = rng.uniform() * prefix_.back();
    size_t c = size_t(std::upper_bound(prefix_.begin(), prefix_.end(), u) - prefix_.begin());
    c = std::min(c, classes() - 1);
    ++tries;
    if (!allow_duplicates) {
      if (taken[c]) continue;
      taken[c] = true;
    }
    out.push_back(c);
  }
  return out;
}

std::vector<double> ClassSampler::inclusion_frequencies(size_t k, bool allow_duplicates,
                                                        RandomGenerator& rng) const {
  constexpr int kTrials = 10;
  double mean_tries = 0;
  if (!allow_duplicates) {
    double sum = 0;
    for (int e = 0; e < kTrials; ++e) {
      size_t t = 0;
      draw(k, false, rng, t);
      sum += double(t);
    }
    mean_tries = sum / kTrials;
  }
  std::vector<double> out;
  for (double p : probability_)
    out.push_back(allow_duplicates ? p * double(k) : -std::expm1(mean_tries * std::log1p(-p)));
  return out;
}

}  // namespace loom::kernels
