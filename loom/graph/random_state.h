// The random state of a graph: the generators of its random ops (dropout), so a checkpoint
// can resume training with exactly the masks an uninterrupted run would have drawn.
#pragma once

#include <memory>
#include <vector>
#include "loom/core/dictionary.h"

#include "loom/graph/function.h"

namespace loom {

// The random primitives of f's graph in topological order (the same program builds them in
// the same order, which is how a Trainer checkpoint matches them).
std::vector<std::shared_ptr<FunctionImpl>> random_functions(const Function& f);

// Every random primitive of f's graph: uid -> its generator's checkpoint (seed, stream,
// offset). Empty for a graph without random ops.
Dictionary random_state(const Function& f);

// Sets the generators of f's random primitives from a random_state() dictionary. The uids
// must match exactly: a random primitive missing from state, or an entry of state that names
// no random primitive of f, is an ArgumentError naming the first such uid; nothing is changed
// then.
void restore_random_state(const Function& f, const Dictionary& state);

}  // namespace loom
