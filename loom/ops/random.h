// Random ops: dropout, random tensors (CNTK's cntk.random) and weighted class sampling
// (random_sample). Each random primitive owns a counter-based generator (seeded at creation,
// saved with the model, checkpointed through loom/graph/random_state.h), so its draws are
// reproducible and continue exactly after a load or a restore. seed fixes the generator (the
// same seed gives the same draws); without it (CNTK's auto_select) the generator comes from
// next_default_generator() (set_fixed_random_seed, creation order); a copy of the op (calling a
// layer, Function::clone) gets its generator the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "loom/core/data_type.h"
#include "loom/graph/function.h"

namespace loom {

// Training mode: each element is zeroed with probability dropout_rate and the survivors are
// scaled by 1 / (1 - dropout_rate), so the expected value is unchanged (CNTK's scaling);
// inference mode: the identity. Every training forward draws a new mask; backward uses the
// same mask. ArgumentError unless 0 <= dropout_rate < 1.
Function dropout(const Variable& x, double dropout_rate, std::optional<uint64_t> seed = {},
                 const std::string& name = "");

// Random tensors, drawn anew at every evaluation (training or not), as CNTK's RandomDistribution:
// uniform_random* of shape `shape` and type dtype (float32 or float64), the *_like forms of x's
// shape, dtype and dynamic axes (batch, sequences), its values unused. No gradient flows to x
// (its gradient through the op is zero). The options are CNTK's keyword arguments.
struct UniformRandomOptions {
  double low = 0.0, high = 1.0;  // values in [low, high); ArgumentError unless low < high
  std::optional<uint64_t> seed = std::nullopt;
};
struct NormalRandomOptions {
  double mean = 0.0, scale = 1.0;  // scale: the standard deviation, >= 0
  std::optional<uint64_t> seed = std::nullopt;
};
struct GumbelRandomOptions {
  double loc = 0.0, scale = 1.0;  // mean loc + 0.5772 scale; scale >= 0
  std::optional<uint64_t> seed = std::nullopt;
};
struct BernoulliRandomOptions {
  double mean = 0.5;  // the probability of a 1 (else 0), in [0, 1]
  std::optional<uint64_t> seed = std::nullopt;
};
// shape: every dimension known (no inferred or free dimension), else an ArgumentError.
Function uniform_random(const NDShape& shape, DataType dtype = DataType::Float32,
                        const UniformRandomOptions& options = {}, const std::string& name = "");
Function normal_random(const NDShape& shape, DataType dtype = DataType::Float32,
                       const NormalRandomOptions& options = {}, const std::string& name = "");
Function gumbel_random(const NDShape& shape, DataType dtype = DataType::Float32,
                       const GumbelRandomOptions& options = {}, const std::string& name = "");
Function bernoulli_random(const NDShape& shape, DataType dtype = DataType::Float32,
                          const BernoulliRandomOptions& options = {}, const std::string& name = "");
Function uniform_random_like(const Variable& x, const UniformRandomOptions& options = {},
                             const std::string& name = "");
Function normal_random_like(const Variable& x, const NormalRandomOptions& options = {},
                            const std::string& name = "");
Function gumbel_random_like(const Variable& x, const GumbelRandomOptions& options = {},
                            const std::string& name = "");
Function bernoulli_random_like(const Variable& x, const BernoulliRandomOptions& options = {},
                               const std::string& name = "");

// num_samples classes drawn from weights [classes] (>= 0, not all 0; no dynamic axes) in
// proportion to the weights, with or without duplicates (CNTK's RandomSample: anew at every
// evaluation): [num_samples, classes], row i one-hot at the i-th class drawn, no dynamic axes,
// weights' dtype (dense, where CNTK's is sparse). Without duplicates num_samples must be below
// classes (CNTK's rule) and at most the number of nonzero weights. No gradient flows to
// weights. ArgumentError for num_samples 0, a weights that is not a vector, and (at evaluation)
// a negative or all-zero weights.
Function random_sample(const Variable& weights, size_t num_samples, bool allow_duplicates,
                       std::optional<uint64_t> seed = std::nullopt, const std::string& name = "");
// The expected number of times each class is in random_sample's draw, [classes] (CNTK's
// RandomSampleInclusionFrequency): num_samples * w / sum(w) with duplicates; without, CNTK's
// estimate 1 - (1 - p)^T, p = w / sum(w) and T the mean number of draws 10 trial samplings took
// (the draws of the op's generator). The same arguments and errors as random_sample.
Function random_sample_inclusion_frequency(const Variable& weights, size_t num_samples,
                                           bool allow_duplicates,
                                           std::optional<uint64_t> seed = std::nullopt,
                                           const std::string& name = "");

}  // namespace loom
