// Sequential composes layers: Sequential({f, g, h})(x) = h(g(f(x))), a composite (it prints as
// "Composite(...)", as CNTK's does; its parameters keep their layers' paths, "Dense2.W").
// Identity passes its input through.
#pragma once

#include <vector>

#include "loom/graph/function.h"

namespace loom {

Function Sequential(const std::vector<Function>& layers, const std::string& name = "");
Function Identity(const std::string& name = "");

}  // namespace loom
