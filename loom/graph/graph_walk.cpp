#include "loom/graph/graph_walk.h"

#include <climits>
#include <deque>
#include <unordered_set>

#include "loom/graph/graph_impl.h"

namespace loom {

const std::string& name_of(const GraphNode& node) {
  return std::visit([](const auto& n) -> const std::string& { return n.name(); }, node);
}

const std::string& uid_of(const GraphNode& node) {
  return std::visit([](const auto& n) -> const std::string& { return n.uid(); }, node);
}

namespace {
// The function computing output o as seen inside block (one of o's blocks): the next block in,
// else o's primitive.
Function owner_inside(const Variable& o, const BlockInfo& block) {
  const auto& blocks = o.impl()->blocks;
  for (size_t i = blocks.size(); i-- > 0;)
    if (blocks[i].get() == &block) return i > 0 ? block_view(blocks[i - 1]) : o.producer();
  return o.owner();
}
}  // namespace

std::vector<GraphNode> depth_first_search(const Function& root,
                                          const std::function<bool(const GraphNode&)>& keep,
                                          int depth) {
  LOOM_CHECK(depth >= kAllDepths, ArgumentError, "depth_first_search: depth ", depth,
             " (0 and up, or -1 for every level)");
  struct Pending {
    GraphNode node;
    int depth;  // block levels the walk may still enter here
  };
  std::vector<GraphNode> kept;
  std::unordered_set<std::string> visited;
  std::deque<Pending> pending;
  const int levels = depth == kAllDepths ? INT_MAX : depth;
  if (root.is_composite()) {
    for (const Variable& o : root.outputs()) pending.push_back({o, levels});
  } else {
    pending.push_back({root, levels});
  }
  while (!pending.empty()) {
    auto [node, levels_left] = std::move(pending.front());
    pending.pop_front();
    if (visited.contains(uid_of(node))) continue;
    visited.insert(uid_of(node));
    if (const auto* v = std::get_if<Variable>(&node); v && v->is_output()) {
      pending.push_front({v->owner(), levels_left});
      continue;
    }
    if (const auto* f = std::get_if<Function>(&node)) {
      if (f->is_block() && levels_left > 0) {
        // Entered: the functions inside come next, and through them the block's inputs.
        const std::vector<Variable> outputs = f->outputs();
        for (auto it = outputs.rbegin(); it != outputs.rend(); ++it)
          pending.push_front({owner_inside(*it, *f->impl()->block), levels_left - 1});
      } else {
        const std::vector<Variable>& inputs = f->inputs();
        for (auto it = inputs.rbegin(); it != inputs.rend(); ++it)
          pending.push_front({*it, levels_left});
      }
    }
    if (keep(node)) kept.push_back(std::move(node));
  }
  return kept;
}

std::vector<GraphNode> find_all_with_name(const Function& root, const std::string& name,
                                          int depth) {
  return depth_first_search(
      root, [&](const GraphNode& n) { return name_of(n) == name; }, depth);
}

std::vector<Variable> node_outputs(const Function& root, int depth) {
  std::vector<Variable> outputs;
  for (const GraphNode& n : depth_first_search(
           root, [](const GraphNode& n) { return std::holds_alternative<Function>(n); }, depth))
    for (const Variable& o : std::get<Function>(n).outputs()) outputs.push_back(o);
  return outputs;
}

}  // namespace loom
