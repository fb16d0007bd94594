// Ops over the sequence axis. Each takes a sequence tensor and gives one sample per sequence:
// the output has the batch axis only, and its sample b belongs to sequence b of the
// minibatch. An empty sequence gives zeros. Dense inputs only.
#pragma once

#include <string>

#include "loom/graph/function.h"

namespace loom::sequence {

// The first element of each sequence.
Function first(const Variable& x, const std::string& name = "");
// The last element of each sequence (each sequence's own last, whatever its length).
Function last(const Variable& x, const std::string& name = "");
// The sum of the elements of each sequence.
Function reduce_sum(const Variable& x, const std::string& name = "");

}  // namespace loom::sequence
