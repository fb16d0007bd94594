// Walking a graph as CNTK's cntk.logging.graph does: depth first from a function, each node once.
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "loom/graph/function.h"

namespace loom {

// A node as the walk meets it: a primitive function, or a variable no function computes (an
// input, parameter, constant or placeholder). An output variable is met as its function.
using GraphNode = std::variant<Function, Variable>;

const std::string& name_of(const GraphNode& node);
const std::string& uid_of(const GraphNode& node);

// The nodes reachable from root for which keep is true, in CNTK's order: each function before
// its inputs, the inputs left to right, each node once (by uid). Iterative: any depth.
std::vector<GraphNode> depth_first_search(const Function& root,
                                          const std::function<bool(const GraphNode&)>& keep);
// The nodes named name.
std::vector<GraphNode> find_all_with_name(const Function& root, const std::string& name);
// The outputs of every function reachable from root, in the walk's order.
std::vector<Variable> node_outputs(const Function& root);

}  // namespace loom
