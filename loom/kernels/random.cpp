#include "loom/kernels/random.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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
    : own_(table_size(n)), op_(op), what_(what) {
  build(weights, n, own_.data());
}

template <typename T>
ClassSampler::ClassSampler(const T* weights, size_t n, const char* op, const char* what,
                           double* tables)
    : op_(op), what_(what) {
  build(weights, n, tables);
}

template <typename T>
void ClassSampler::build(const T* weights, size_t n, double* tables) {
  // The checks, the count and the probabilities in loops of their own, which vectorize: nce_loss
  // builds a sampler of its whole vocabulary every minibatch.
  size_t invalid = 0, nonzero = 0;  // negative or NaN; above 0
  LOOM_OMP_SIMD(reduction(+ : invalid, nonzero))
  for (size_t c = 0; c < n; ++c) {
    invalid += !(weights[c] >= 0);
    nonzero += weights[c] > 0;
  }
  nonzero_ = nonzero;
  const size_t bad =
      invalid ? size_t(std::find_if(weights, weights + n, [](T w) { return !(w >= 0); }) - weights)
              : n;
  LOOM_CHECK(!invalid, ArgumentError, op_, ": ", what_, " has a negative weight ", weights[bad],
             " at class ", bad, "; weights must be >= 0");
  classes_ = n;
  double *prefix = tables, *probability = tables + n;
  double total = 0;
  for (size_t c = 0; c < n; ++c) prefix[c] = total += double(weights[c]);
  LOOM_CHECK(total > 0, ArgumentError, op_, ": ", what_,
             " is all zeros; at least one class needs a weight above 0");
  LOOM_OMP_SIMD()
  for (size_t c = 0; c < n; ++c) probability[c] = double(weights[c]) / total;
  prefix_ = prefix;
  probability_ = probability;
}

template ClassSampler::ClassSampler(const float*, size_t, const char*, const char*);
template ClassSampler::ClassSampler(const double*, size_t, const char*, const char*);
template ClassSampler::ClassSampler(const float*, size_t, const char*, const char*, double*);
template ClassSampler::ClassSampler(const double*, size_t, const char*, const char*, double*);

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
    const double u = rng.uniform() * prefix_[classes_ - 1];
    size_t c = size_t(std::upper_bound(prefix_, prefix_ + classes_, u) - prefix_);
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
  std::vector<size_t> all(classes());
  std::iota(all.begin(), all.end(), size_t{0});
  return inclusion_frequencies(k, allow_duplicates, rng, all);
}

std::vector<double> ClassSampler::inclusion_frequencies(size_t k, bool allow_duplicates,
                                                        RandomGenerator& rng,
                                                        const std::vector<size_t>& of) const {
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
  out.reserve(of.size());
  for (size_t c : of) {
    const double p = probability_[c];
    out.push_back(allow_duplicates ? p * double(k) : -std::expm1(mean_tries * std::log1p(-p)));
  }
  return out;
}

}  // namespace loom::kernels
