// Random ops: dropout. Each random primitive owns a counter-based generator (seeded at
// creation, saved with the model, checkpointed through loom/graph/random_state.h), so its
// masks are reproducible and continue exactly after a load or a restore.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "loom/graph/function.h"

namespace loom {

// Training mode: each element is zeroed with probability dropout_rate and the survivors are
// scaled by 1 / (1 - dropout_rate), so the expected value is unchanged (CNTK's scaling);
// inference mode: the identity. Every training forward draws a new mask; backward uses the
// same mask. seed fixes the generator (the same seed gives the same masks); without it the
// generator comes from next_default_generator() (set_fixed_random_seed); a copy of the op
// (calling a Dropout layer, Function::clone) gets its generator the same way. ArgumentError
// unless 0 <= dropout_rate < 1.
Function dropout(const Variable& x, double dropout_rate, std::optional<uint64_t> seed = {},
                 const std::string& name = "");

}  // namespace loom
