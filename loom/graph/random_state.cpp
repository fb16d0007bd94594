#include "loom/graph/random_state.h"

#include <unordered_set>

#include "loom/graph/graph_impl.h"
#include "loom/graph/op.h"

namespace loom {

std::vector<std::shared_ptr<FunctionImpl>> random_functions(const Function& f) {
  std::vector<std::shared_ptr<FunctionImpl>> out;
  for (auto& fn : topological_order(f.outputs()))
    if (fn->random) out.push_back(fn);
  return out;
}

Dictionary random_state(const Function& f) {
  Dictionary d;
  for (auto& fn : random_functions(f)) d[fn->uid] = fn->random->checkpoint();
  return d;
}

void restore_random_state(const Function& f, const Dictionary& state) {
  auto fns = random_functions(f);
  std::unordered_set<std::string> uids;
  for (auto& fn : fns) {
    LOOM_CHECK(state.contains(fn->uid), ArgumentError, "random state does not match ",
               f.to_string(), ": it has no entry for the random op ", fn->op->name(), " '", fn->uid,
               "'");
    uids.insert(fn->uid);
  }
  for (auto& [uid, value] : state.map())
    LOOM_CHECK(uids.count(uid), ArgumentError, "random state does not match ", f.to_string(),
               ": its entry '", uid, "' names no random op of the graph");
  // Validate every entry before changing any generator.
  std::vector<RandomGenerator> restored;
  for (auto& fn : fns) {
    RandomGenerator g;
    try {
      g.restore(state.get_dictionary(fn->uid));
    } catch (const Error& e) {
      throw ArgumentError(detail::concat("random state entry '", fn->uid, "': ", e.what()));
    }
    restored.push_back(g);
  }
  for (size_t i = 0; i < fns.size(); ++i) fns[i]->random = restored[i];
}

}  // namespace loom
