// Variables: the typed edges of a graph. An input receives data, a parameter holds learnable
// state, a constant holds fixed state, an output is produced by a primitive function, and a
// placeholder stands for an input a function object receives when it is called.
// A Variable is a handle: copies refer to the same variable; an output's handle keeps the
// graph that computes it alive.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/axis.h"
#include "loom/core/ndarray_view.h"
#include "loom/core/value.h"
#include "loom/graph/initializer.h"

namespace loom {

enum class VariableKind { Input, Output, Parameter, Constant, Placeholder };

class Function;
class FunctionImpl;
struct VariableImpl;

class Variable {
 public:
  Variable() = default;
  // The single output of f (ShapeError when f has several); keeps f's graph alive.
  Variable(const Function& f);

  VariableKind kind() const;
  bool is_input() const { return kind() == VariableKind::Input; }
  bool is_output() const { return kind() == VariableKind::Output; }
  bool is_parameter() const { return kind() == VariableKind::Parameter; }
  bool is_constant() const { return kind() == VariableKind::Constant; }
  bool is_placeholder() const { return kind() == VariableKind::Placeholder; }

  // Static shape of one sample (or of the whole tensor when there are no dynamic axes).
  const NDShape& shape() const;
  // False for placeholders and for outputs computed from them, until they are bound.
  bool has_known_shape() const;
  DataType dtype() const;
  // Outermost first: {} (a plain tensor), {batch}, or {batch, sequence axis}.
  const std::vector<Axis>& dynamic_axes() const;
  bool has_batch_axis() const { return !dynamic_axes().empty(); }
  bool has_sequence_axis() const { return dynamic_axes().size() > 1; }
  bool is_sparse() const;
  bool needs_gradient() const;
  const std::string& name() const;
  const std::string& uid() const;

  // Parameters and constants: the stored tensor itself. Writes through it change the
  // variable (learners update parameters in place); to replace the values use set_value,
  // which checks the shape, never assignment to this reference.
  NDArrayView& value() const;
  void set_value(const NDArrayView& value) const;

  // Outputs: the function computing it as the graph shows it (CNTK's Owner): the outermost
  // block it is an output of (as_block), else the primitive producing it.
  Function owner() const;
  // Outputs: the primitive function producing it, inside any blocks.
  Function producer() const;

  // As CNTK's Python API prints types: "Tensor[2]", "SparseTensor[2]", "Sequence[Tensor[2]]",
  // "SequenceOver[axis][Tensor[2]]", "ParameterTensor[2,5]", "Sequence[tensor]" (a placeholder,
  // or an output computed from one: shape and axes not known yet).
  std::string type_string() const;
  // How messages name a variable: "images: Tensor[28,28]", "Dense.W: ParameterTensor[784,96]"
  // (a layer's parameter: the layer's name, or its block name, then the parameter's), the uid
  // where there is no name ("Input3: Tensor[2]").
  std::string describe() const;

  bool valid() const { return impl_ != nullptr; }
  bool operator==(const Variable& o) const { return impl_ == o.impl_; }
  bool operator<(const Variable& o) const { return impl_ < o.impl_; }
  const std::shared_ptr<VariableImpl>& impl() const { return impl_; }

  explicit Variable(std::shared_ptr<VariableImpl> impl,
                    std::shared_ptr<FunctionImpl> keep_alive = {})
      : impl_(std::move(impl)), keep_alive_(std::move(keep_alive)) {}

 private:
  friend class FunctionImpl;  // frees deep graphs without recursion (~FunctionImpl)
  std::shared_ptr<FunctionImpl> release_keep_alive() { return std::move(keep_alive_); }

  std::shared_ptr<VariableImpl> impl_;
  std::shared_ptr<FunctionImpl> keep_alive_;
};

// A learnable tensor. Its shape may have dimensions of NDShape::kInferred until the first
// call of the layer that owns it; its initializer runs when the shape becomes known.
class Parameter : public Variable {
 public:
  Parameter() = default;
  explicit Parameter(const Variable& v);
};

// A fixed tensor.
class Constant : public Variable {
 public:
  Constant() = default;
  explicit Constant(const Variable& v);
};

struct InputOptions {
  DataType dtype = DataType::Float32;
  bool is_sparse = false;
  std::string name = {};
  bool needs_gradient = false;
  std::vector<Axis> dynamic_axes = default_batch_axes();
};

Variable input_variable(const NDShape& shape, const InputOptions& options = {});
namespace sequence {
// An input whose samples are sequences along the default sequence axis.
Variable input_variable(const NDShape& shape, InputOptions options = {});
// An input whose samples are sequences along sequence_axis (CNTK's sequence_axis argument, e.g.
// Axis::dynamic_axis_named("m")): inputs on one axis have equal lengths per sequence; inputs on
// different axes cannot meet in an elementwise op.
Variable input_variable(const NDShape& shape, const Axis& sequence_axis, InputOptions options = {});
}  // namespace sequence

// Checks a Value bound to input v, before its data is read: a sequence Value for an input
// without a sequence axis must have sequences of exactly one step (CNTK accepts that extra
// axis), and a sequence input needs a sequence Value. A ShapeError names v, the value's shape
// and its sequence counts otherwise. (For the executor's binding.)
void check_value_form(const Variable& v, const Value& value);
// A ShapeError naming both inputs and their sequence lengths unless the values have equal
// lengths, as two inputs on one sequence axis must.
void check_same_sequence_lengths(const Variable& a, const Value& a_value, const Variable& b,
                                 const Value& b_value);

Parameter parameter(const NDShape& shape, const Initializer& init = glorot_uniform(),
                    DataType dtype = DataType::Float32, const std::string& name = "");
Parameter parameter(const NDArrayView& value, const std::string& name = "");
Constant constant(const NDArrayView& value, const std::string& name = "");
Constant constant(double scalar, DataType dtype = DataType::Float32, const std::string& name = "");
Variable placeholder(const std::string& name = "");
// A placeholder of known type, for a recurrence's state before its loop closes
// (Function::replace_placeholders).
Variable placeholder(const NDShape& shape, DataType dtype, const std::vector<Axis>& dynamic_axes,
                     const std::string& name = "");
// CNTK's output_variable: the type of a user function's output (UserFunction::infer_outputs,
// loom/graph/user_function.h), an output of no function.
Variable output_variable(const NDShape& shape, DataType dtype,
                         const std::vector<Axis>& dynamic_axes, bool needs_gradient = true,
                         const std::string& name = "");

}  // namespace loom

template <>
struct std::hash<loom::Variable> {
  size_t operator()(const loom::Variable& v) const noexcept {
    return std::hash<const void*>()(v.impl().get());
  }
};
