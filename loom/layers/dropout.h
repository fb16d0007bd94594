// Dropout layer (CNTK's Dropout): the dropout op of loom/ops/random.h as a layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "loom/graph/function.h"

namespace loom {

struct DropoutOptions {
  // Exactly one of the two: the probability of dropping an element, or of keeping it.
  std::optional<double> dropout_rate{};
  std::optional<double> keep_prob{};
  std::optional<uint64_t> seed{};  // unset: next_default_generator()
  std::string name{};
};

// ArgumentError unless exactly one of dropout_rate (in [0, 1)) and keep_prob (in (0, 1]) is
// given.
Function Dropout(const DropoutOptions& options);
inline Function Dropout(double dropout_rate) {
  return Dropout(DropoutOptions{.dropout_rate = dropout_rate});
}

}  // namespace loom
