// default_options: a scope that changes the defaults of the layers created inside it, as
// CNTK's `with default_options(activation=relu, pad=False):`. Scopes nest; the innermost
// setting wins; each layer option given explicitly wins over any default.
//
//   { auto scope = default_options({.activation = relu});
//     auto model = Sequential({Dense(96), Dense(10, {.activation = None})}); }
#pragma once

#include <optional>

#include "loom/graph/initializer.h"
#include "loom/layers/activation.h"

namespace loom {

struct LayerDefaults {
  std::optional<Activation> activation = {};
  std::optional<Initializer> init = {};
  std::optional<bool> bias = {};
  std::optional<Initializer> init_bias = {};
  std::optional<bool> pad = {};
};

class DefaultOptionsScope {
 public:
  explicit DefaultOptionsScope(const LayerDefaults& defaults);
  ~DefaultOptionsScope();
  DefaultOptionsScope(const DefaultOptionsScope&) = delete;
  DefaultOptionsScope& operator=(const DefaultOptionsScope&) = delete;
};

[[nodiscard]] inline DefaultOptionsScope default_options(const LayerDefaults& defaults) {
  return DefaultOptionsScope(defaults);
}

// The defaults in force: every field resolved through the open scopes to the innermost
// setting, or to the built-in default (no activation, glorot_uniform, bias with zeros, no pad).
struct ResolvedDefaults {
  Activation activation = {};
  Initializer init = {};
  bool bias = {};
  Initializer init_bias = {};
  bool pad = {};
};
ResolvedDefaults current_defaults();

}  // namespace loom
