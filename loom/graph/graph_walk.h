// Walking a graph as CNTK's cntk.logging.graph does: depth first from a function, each node once.
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "loom/graph/function.h"

namespace loom {

// A node as the walk meets it: a primitive function or a block, or a variable no function
// computes (an input, parameter, constant or placeholder). An output variable is met as its
// function.
using GraphNode = std::variant<Function, Variable>;

const std::string& name_of(const GraphNode& node);
const std::string& uid_of(const GraphNode& node);

// How many levels of blocks (as_block) a walk enters: at 0 a block is one node (its inputs
// next), at 1 the walk also meets the functions inside the outermost blocks, and so on;
// kAllDepths enters every block (CNTK's depth=-1); kBlocksAsNodes, CNTK's default, none.
inline constexpr int kAllDepths = -1;
inline constexpr int kBlocksAsNodes = 0;

// The nodes reachable from root for which keep is true, in CNTK's order: each function before
// its inputs, the inputs left to right, each node once (by uid). A block the walk enters is met
// before the functions inside it, which are those that compute it (its composite's functions
// applied to its arguments). Iterative: any depth.
std::vector<GraphNode> depth_first_search(const Function& root,
                                          const std::function<bool(const GraphNode&)>& keep,
                                          int depth = kBlocksAsNodes);
// The nodes named name.
std::vector<GraphNode> find_all_with_name(const Function& root, const std::string& name,
                                          int depth = kBlocksAsNodes);
// The outputs of every function reachable from root, in the walk's order.
std::vector<Variable> node_outputs(const Function& root, int depth = kBlocksAsNodes);

}  // namespace loom
