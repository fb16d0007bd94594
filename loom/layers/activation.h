// Activation: the function a layer applies to its output. Built from an op such as
// loom::tanh or loom::relu (`.activation = relu`), from any callable on a Variable, or
// None for none (the identity), as CNTK's `activation=None`: `Dense(10, {.activation = None})`.
#pragma once

#include <functional>
#include <type_traits>

#include "loom/graph/function.h"

namespace loom {

class Activation {
 public:
  Activation() = default;
  // An op: Function op(const Variable&, const std::string& name).
  Activation(Function (*op)(const Variable&, const std::string&))
      : fn_([op](const Variable& x) { return Variable(op(x, "")); }) {}
  template <typename F>
  requires std::is_invocable_r_v<Function, F, const Variable&> Activation(F f)
      : fn_([f](const Variable& x) { return Variable(f(x)); }) {}

  bool is_identity() const { return !fn_; }
  Variable operator()(const Variable& x) const { return fn_ ? fn_(x) : x; }

 private:
  std::function<Variable(const Variable&)> fn_;
};

// No activation; given explicitly it also overrides a default_options activation.
inline const Activation None;

}  // namespace loom
