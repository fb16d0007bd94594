// Random numbers for the random ops (loom/ops/random.cpp) and weighted class sampling (shared by
// random_sample, random_sample_inclusion_frequency and nce_loss). Like the dropout masks, the
// random tensors are counter-based: element i depends only on the draw's Philox key and i, so
// threads split the elements freely.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "loom/core/random.h"

namespace loom::kernels {

enum class Distribution { Uniform, Normal, Gumbel, Bernoulli };

// dst[i] for i < n, drawn from the distribution with parameters (a, b): Uniform in [a, b),
// Normal with mean a and standard deviation b, Gumbel with location a and scale b, Bernoulli 1
// with probability a and 0 otherwise (b unused). Element i takes the four words of
// philox4x32(key, {i, i >> 32, 0, 0}): u = (53 bits of words 0, 1) 2^-53 in [0, 1) and
// v = (53 bits of words 2, 3) 2^-53, from which Uniform is a + (b - a) u (below b after rounding
// too), Normal a + b sqrt(-2 ln(1 - u)) cos(2 pi v) (Box-Muller), Gumbel a - b ln(-ln(w)) with
// w = (52 bits of words 0, 1 + 1/2) 2^-52 in (0, 1), and Bernoulli u < a.
template <typename T>
void random_fill(size_t n, T* dst, Distribution distribution, double a, double b,
                 std::array<uint32_t, 2> key);

// Drawing classes in proportion to weights, as CNTK's RandomSampleNodeBase: each draw takes
// one uniform of the generator and the first class whose running sum of weights exceeds it; a
// draw without duplicates rejects a class drawn before and draws again.
class ClassSampler {
 public:
  // weights[c] for c < n; an ArgumentError "op: what ..." for a negative weight or all zero.
  template <typename T>
  ClassSampler(const T* weights, size_t n, const char* op, const char* what);
  // The same with its tables in table_size(n) doubles of the caller's (an op's scratch, kept
  // between minibatches): nce_loss builds a sampler of its vocabulary every minibatch, and
  // allocating its tables each time took as long as building them (the pages faulted in anew).
  template <typename T>
  ClassSampler(const T* weights, size_t n, const char* op, const char* what, double* tables);
  static size_t table_size(size_t n) { return 2 * n; }
  ClassSampler(const ClassSampler&) = delete;
  ClassSampler& operator=(const ClassSampler&) = delete;

  size_t classes() const { return classes_; }
  // The number of classes with a weight above 0 (the most a draw without duplicates can take).
  size_t nonzero() const { return nonzero_; }
  // weight[c] / the sum of the weights.
  double probability(size_t c) const { return probability_[c]; }

  // k classes in the order drawn; an ArgumentError when !allow_duplicates and k > nonzero().
  std::vector<size_t> draw(size_t k, bool allow_duplicates, RandomGenerator& rng) const;
  // The expected number of times each class is in a draw of k (CNTK's
  // RandomSampleInclusionFrequency): k p_c with duplicates; without, 1 - (1 - p_c)^T, T the
  // mean number of draws 10 trial draws of k took (which advance rng; CNTK's estimate).
  std::vector<double> inclusion_frequencies(size_t k, bool allow_duplicates,
                                            RandomGenerator& rng) const;
  // The same for the classes `of` alone (a draw's), where the others are not needed.
  std::vector<double> inclusion_frequencies(size_t k, bool allow_duplicates, RandomGenerator& rng,
                                            const std::vector<size_t>& of) const;

 private:
  // Checks the weights and fills tables (table_size(n)) with the running sums and the
  // probabilities.
  template <typename T>
  void build(const T* weights, size_t n, double* tables);
  // draw(), also counting the generator's draws it took.
  std::vector<size_t> draw(size_t k, bool allow_duplicates, RandomGenerator& rng,
                           size_t& tries) const;

  std::vector<double> own_;              // the tables, unless the caller's
  const double* prefix_ = nullptr;       // [classes] running sums of the weights
  const double* probability_ = nullptr;  // [classes]
  size_t classes_ = 0, nonzero_ = 0;
  const char* op_;
  const char* what_;
};

}  // namespace loom::kernels
