#include "loom/layers/sequential.h"

#include <algorithm>
#include <unordered_set>

#include "loom/layers/default_options.h"
#include "loom/ops/elementwise.h"

namespace loom {

Function inject_name(const Variable& y, const std::string& name) {
  return name.empty() ? combine({y}) : combine({alias(y, name)});
}

Function Sequential(const std::vector<Function>& layers, const std::string& name) {
  // CNTK composes the layers onto identity(keep), so a Sequential is a plain composite over
  // a placeholder named keep: it prints as "Composite(keep: Sequence[tensor]) -> ...".
  Variable r = placeholder("keep");
  for (const Function& layer : layers) r = layer(r);
  return combine({r}, name);
}

Function Identity(const std::string& name) {
  return as_layer({placeholder("x")}, "Identity", name);
}

Function identity() {
  return combine({placeholder("keep")});
}

Function ActivationLayer(const std::optional<Activation>& activation, const std::string& name) {
  const Activation f = activation.value_or(current_defaults().activation);
  Variable x = placeholder("x");
  return as_layer({f(x)}, "Activation", name, {x});
}

Function Label(const std::string& name) {
  return combine({alias(placeholder("x"), name)});
}

Function ResNetBlock(const Function& f, const std::string& name) {
  LOOM_CHECK(f.valid(), ArgumentError, "ResNetBlock: no function given");
  Variable x = placeholder("x");
  return inject_name(plus(f(x), x), name);
}

Function SequentialClique(const std::vector<Function>& functions, const std::string& name) {
  LOOM_CHECK(!functions.empty(), ArgumentError, "SequentialClique: no functions given");
  Variable x = placeholder("x");
  Variable sum = x, out;
  for (const Function& f : functions) {
    out = f(sum);
    sum = plus(sum, out);
  }
  return inject_name(out, name);
}

Variable ForwardDeclaration(const std::string& name) {
  return placeholder(name);
}

namespace {

// The type an untyped forward declaration must have for value to have it too (a loop's fixed
// point), as CNTK's deferred inference finds it: tried first from the operands that meet a value
// read from forward (plus(past_value(forward), x): x's type), then from every typed variable of
// value's graph. Invalid when none fits.
Variable loop_type(const Variable& forward, const Variable& value) {
  std::vector<Variable> near, far;
  std::unordered_set<std::string> seen;
  std::vector<Function> stack{value.owner()};
  while (!stack.empty()) {
    const Function f = stack.back();
    stack.pop_back();
    if (!seen.insert(f.uid()).second) continue;
    bool reads_forward = false;
    for (const Variable& in : f.inputs())
      if (in.is_output())
        for (const Variable& i : in.owner().inputs()) reads_forward = reads_forward || i == forward;
    for (const Variable& in : f.inputs()) {
      if (in.has_known_shape() && !in.dynamic_axes().empty())
        (reads_forward ? near : far).push_back(in);
      if (in.is_output()) stack.push_back(in.owner());
    }
  }
  near.insert(near.end(), far.begin(), far.end());
  const std::vector<Variable> outs = value.owner().outputs();
  const size_t k = size_t(std::find(outs.begin(), outs.end(), value) - outs.begin());
  for (const Variable& c : near) {
    Variable typed = placeholder(c.shape(), c.dtype(), c.dynamic_axes(), forward.name());
    try {
      const Variable v =
          value.owner().clone(ParameterCloneMethod::Share, {{forward, typed}}).outputs()[k];
      if (v.has_known_shape() && v.shape() == c.shape() && v.dtype() == c.dtype() &&
          v.dynamic_axes() == c.dynamic_axes())
        return typed;
    } catch (const Error&) {
      // not this type
    }
  }
  return {};
}

}  // namespace

void resolve_to(const Variable& forward, const Variable& value) {
  LOOM_CHECK(forward.is_placeholder(), ArgumentError, "resolve_to: ", forward.describe(),
             " is not a forward declaration (a placeholder)");
  LOOM_CHECK(value.is_output(), ArgumentError, "resolve_to: ", value.describe(),
             " is not the output of a function, so it cannot refer back to ", forward.describe());
  Variable target = forward;
  if (!forward.has_known_shape() && !value.has_known_shape()) {
    const Variable typed = loop_type(forward, value);
    LOOM_CHECK(typed.valid(), ShapeError, "resolve_to: no type of ", forward.describe(), " gives ",
               value.describe(),
               " the same type; declare it as placeholder(shape, dtype, dynamic_axes)");
    value.owner().replace_placeholders({{forward, typed}});
    target = typed;
  }
  value.owner().replace_placeholders({{target, value}});
}

}  // namespace loom
