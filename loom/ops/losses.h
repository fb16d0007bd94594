// Losses and metrics. Each gives one value of shape [1] per sample (CNTK's convention); the
// Trainer sums them over the minibatch's samples. Both operands have the same sample shape; an
// operand without dynamic axes (a constant or parameter) applies to every sample, and its
// gradient is the sum over the samples.
#pragma once

#include "loom/graph/function.h"

namespace loom {

// Σ (output − target)² over the sample's elements.
Function squared_error(const Variable& output, const Variable& target,
                       const std::string& name = "");
// Σ(target)·logsumexp(z) − Σ target·z: cross entropy of softmax(z) against target (one-hot or
// soft, dense or sparse), taken over all elements of the sample (its only axis, usually).
Function cross_entropy_with_softmax(const Variable& z, const Variable& target,
                                    const std::string& name = "");
// −Σ [target·log(output) + (1 − target)·log(1 − output)].
Function binary_cross_entropy(const Variable& output, const Variable& target,
                              const std::string& name = "");
// 1 when target's class (its first largest entry) is not among the top_n largest entries of
// z, else 0; among equal scores the earlier entry ranks first. Not differentiable: Function::grad
// of a graph whose output depends on parameters only through it is an ArgumentError.
Function classification_error(const Variable& z, const Variable& target, size_t top_n = 1,
                              const std::string& name = "");

}  // namespace loom
