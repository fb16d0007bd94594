#include "loom/layers/default_options.h"

#include <vector>

namespace loom {

namespace {
thread_local std::vector<LayerDefaults> g_scopes;
}

DefaultOptionsScope::DefaultOptionsScope(const LayerDefaults& defaults) {
  g_scopes.push_back(defaults);
}
DefaultOptionsScope::~DefaultOptionsScope() {
  g_scopes.pop_back();
}

ResolvedDefaults current_defaults() {
  ResolvedDefaults r{Activation(), glorot_uniform(), true, zeros(), false};
  for (const auto& s : g_scopes) {  // outermost first, so inner scopes overwrite
    if (s.activation) r.activation = *s.activation;
    if (s.init) r.init = *s.init;
    if (s.bias) r.bias = *s.bias;
    if (s.init_bias) r.init_bias = *s.init_bias;
    if (s.pad) r.pad = *s.pad;
  }
  return r;
}

}  // namespace loom
