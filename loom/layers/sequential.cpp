#include "loom/layers/sequential.h"

namespace loom {

Function Sequential(const std::vector<Function>& layers, const std::string& name) {
  Variable x = placeholder("x");
  Variable r = x;
  for (const Function& layer : layers) r = layer(r);
  return as_block({r}, "Sequential", name);
}

Function Identity(const std::string& name) {
  return as_block({placeholder("x")}, "Identity", name);
}

}  // namespace loom
