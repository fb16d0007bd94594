// Sequential composes layers: Sequential({f, g, h})(x) = h(g(f(x))), a composite (it prints as
// "Composite(...)", as CNTK's does; its parameters keep their layers' paths, "Dense2.W").
// Identity passes its input through. The other higher-order layers of CNTK's
// cntk.layers.higher_order_layers and blocks are here too: ResNetBlock, SequentialClique,
// Label, ActivationLayer (CNTK's Activation), identity and ForwardDeclaration.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loom/layers/activation.h"

namespace loom {

Function Sequential(const std::vector<Function>& layers, const std::string& name = "");
Function Identity(const std::string& name = "");

// CNTK's _inject_name for a layer's result y: a composite of y, or of an alias named name.
Function inject_name(const Variable& y, const std::string& name);

// CNTK's identity: a composite whose argument "keep" is its output (no block, no op).
Function identity();

// CNTK's Activation layer: a block "Activation" applying activation (unset: default_options'
// activation, else none). The C++ name differs from CNTK's because Activation is the type.
Function ActivationLayer(const std::optional<Activation>& activation = {},
                         const std::string& name = "");

// CNTK's Label: x passed through an alias named name, so the value can be found by that name.
Function Label(const std::string& name);

// x -> f(x) + x (CNTK's ResNetBlock). With a name, the result is an alias of that name.
Function ResNetBlock(const Function& f, const std::string& name = "");

// x -> the last function's output, where each function gets the sum of x and all previous
// outputs: x_0 = x, out_k = f_k(x_{k-1}), x_k = x_{k-1} + out_k (CNTK's SequentialClique).
// ArgumentError for no functions.
Function SequentialClique(const std::vector<Function>& functions, const std::string& name = "");

// CNTK's ForwardDeclaration: a placeholder for a value defined later in terms of itself, and
// resolve_to(forward, value), which closes the loop: forward becomes value in value's graph.
//
//   Variable fwd = ForwardDeclaration();
//   Variable len = plus(sequence::past_value(fwd, constant(0.0)), sequence::broadcast_as(1, x));
//   resolve_to(fwd, len);
Variable ForwardDeclaration(const std::string& name = "forward_declaration");
void resolve_to(const Variable& forward, const Variable& value);

}  // namespace loom
