// Dense: a fully connected layer, activation(x · W + b). W's input axes are inferred at the
// first call (all of the input's axes, or input_rank / map_rank of them).
#pragma once

#include <optional>

#include "loom/layers/default_options.h"

namespace loom {

struct DenseOptions {
  std::optional<Activation> activation = {};  // unset: default_options, else none
  std::optional<Initializer> init = {};       // unset: default_options, else glorot_uniform
  std::optional<size_t> input_rank = {};      // number of trailing input axes W contracts
  std::optional<size_t> map_rank = {};        // or: number of leading input axes kept
  std::optional<bool> bias = {};
  std::optional<Initializer> init_bias = {};
  DataType dtype = DataType::Float32;
  std::string name = {};
};

Function Dense(const NDShape& shape, const DenseOptions& options = {});
inline Function Dense(size_t dim, const DenseOptions& options = {}) {
  return Dense(NDShape{dim}, options);
}

}  // namespace loom
