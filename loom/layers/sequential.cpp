#include "loom/layers/sequential.h"

namespace loom {

Function Sequential(const std::vector<Function>& layers, const std::string& name) {
  // CNTK composes the layers onto identity(keep), so a Sequential is a plain composite over
  // a placeholder named keep: it prints as "Composite(keep: Sequence[tensor]) -> ...".
  Variable r = placeholder("keep");
  for (const Function& layer : layers) r = layer(r);
  return combine({r}, name);
}

Function Identity(const std::string& name) {
  return as_block({placeholder("x")}, "Identity", name);
}

}  // namespace loom
