#include "loom/graph/graph_walk.h"

#include <deque>
#include <unordered_set>

namespace loom {

const std::string& name_of(const GraphNode& node) {
  return std::visit([](const auto& n) -> const std::string& { return n.name(); }, node);
}

const std::string& uid_of(const GraphNode& node) {
  return std::visit([](const auto& n) -> const std::string& { return n.uid(); }, node);
}

std::vector<GraphNode> depth_first_search(const Function& root,
                                          const std::function<bool(const GraphNode&)>& keep) {
  std::vector<GraphNode> kept;
  std::unordered_set<std::string> visited;
  std::deque<GraphNode> pending;
  for (const Variable& o : root.outputs()) pending.emplace_back(o);
  while (!pending.empty()) {
    GraphNode node = std::move(pending.front());
    pending.pop_front();
    if (visited.contains(uid_of(node))) continue;
    if (const auto* v = std::get_if<Variable>(&node); v && v->is_output()) {
      visited.insert(v->uid());
      pending.emplace_front(v->owner());
      continue;
    }
    if (const auto* f = std::get_if<Function>(&node)) {
      const std::vector<Variable>& inputs = f->inputs();
      for (auto it = inputs.rbegin(); it != inputs.rend(); ++it) pending.emplace_front(*it);
    }
    visited.insert(uid_of(node));
    if (keep(node)) kept.push_back(std::move(node));
  }
  return kept;
}

std::vector<GraphNode> find_all_with_name(const Function& root, const std::string& name) {
  return depth_first_search(root, [&](const GraphNode& n) { return name_of(n) == name; });
}

std::vector<Variable> node_outputs(const Function& root) {
  std::vector<Variable> outputs;
  for (const GraphNode& n : depth_first_search(
           root, [](const GraphNode& n) { return std::holds_alternative<Function>(n); }))
    for (const Variable& o : std::get<Function>(n).outputs()) outputs.push_back(o);
  return outputs;
}

}  // namespace loom
