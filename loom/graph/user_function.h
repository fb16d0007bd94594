// CNTK's user-defined functions: a primitive whose outputs' types, forward and backward are the
// user's code (a Python UserFunction, or C++ through this interface), usable anywhere an op is:
// evaluation, gradients, training, clone, save and load.
//
// The user's code sees whole minibatches as Values in their variables' forms (padded sequences
// with a mask, or [batch, sample...]), as CNTK's Function::Forward/Backward give them; the
// executor packs and unpacks. A user function has one or several outputs (CNTK's
// infer_outputs), all on its inputs' dynamic axes: one forward call computes them all, and one
// backward call per minibatch gets the gradients of them all (zeros for an output no gradient
// reached; CNTK passed that output's buffer as it found it), as CNTK's UserDefinedV2FunctionNode
// did: the executor runs it as one node of several outputs. Outputs are named and need
// gradients as infer_outputs says (OutputSpec::name, needs_gradient): an output that needs none
// gets zeros in backward (Python: None, as CNTK's), and where no output needs one, backward is
// not called and the inputs' gradients are zeros. It does not run inside a recurrent loop (it
// sees whole sequences, not steps). Any output may have free dimensions (CNTK's FreeDimension):
// each takes them from the first input of its rank whose other dimensions agree.
#pragma once

#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/core/value.h"
#include "loom/graph/function.h"
#include "loom/graph/op.h"

namespace loom {

// Made with std::make_shared (the default clone shares this one).
class UserFunction : public std::enable_shared_from_this<UserFunction> {
 public:
  virtual ~UserFunction() = default;
  // CNTK's op_name: how the function prints, and the key its deserializer is found by when a
  // model holding it is loaded.
  virtual std::string op_name() const = 0;
  // The outputs' types from the inputs' (CNTK's InferOutputs), at least one. By default one
  // output of input 0's type. As CNTK's, also called when the function is made on inputs of
  // unknown shape (placeholders, whose shape() is empty), for how many outputs there are, their
  // names and needs_gradient; their types are asked again once the placeholders are bound.
  virtual std::vector<OutputSpec> infer_outputs(const std::vector<Variable>& inputs) const;
  // The outputs' values for the inputs' values, one per output in infer_outputs' order.
  // outputs are the function's output variables (the keys of CNTK's outputs map); state is what
  // backward of this minibatch receives.
  virtual std::vector<Value> forward(const std::vector<Value>& inputs,
                                     const std::vector<Variable>& outputs, bool is_training,
                                     std::any& state) const = 0;
  // The gradients of the inputs that wanted[i] asks for (others may be left empty), from the
  // outputs' gradients (one per output), each a Value of its input's form. A wanted input left
  // empty gets zeros, as CNTK's.
  virtual std::vector<std::optional<Value>> backward(const std::any& state,
                                                     const std::vector<Value>& output_gradients,
                                                     const std::vector<bool>& wanted) const = 0;
  // What a model file keeps of this function besides its inputs (CNTK's serialize); the
  // deserializer registered for op_name() gets it back.
  virtual Dictionary serialize() const { return {}; }
  // The same function for a clone of the graph whose inputs are cloned_inputs (CNTK's clone);
  // by default this one, shared (it must then keep no per-graph state).
  virtual std::shared_ptr<UserFunction> clone(const std::vector<Variable>& cloned_inputs) const;
};

// The Function applying user to inputs (CNTK's user_function / Function(UserFunction)).
// A ShapeError naming the op when infer_outputs fails or gives no output, a sparse one or one off
// the inputs' dynamic axes.
Function user_function(std::shared_ptr<UserFunction> user, std::vector<Variable> inputs,
                       const std::string& name = "");

// The user function behind a primitive, or null for a built-in op.
std::shared_ptr<UserFunction> user_function_of(const FunctionImpl& f);
// The op name a primitive prints as: the user function's op_name(), else the op's name.
std::string op_name_of(const FunctionImpl& f);

// Makes a user function back from a model file: its inputs, name and what serialize() gave.
using UserFunctionDeserializer = std::function<std::shared_ptr<UserFunction>(
    const std::vector<Variable>& inputs, const std::string& name, const Dictionary& state)>;
// CNTK's register_udf_deserialize_callback: the deserializer for user functions of op_name.
// A second registration for the same op_name is an ArgumentError.
void register_user_function_deserializer(const std::string& op_name,
                                         UserFunctionDeserializer deserializer);
// Where no deserializer is registered for an op_name: one that may know how (Python's imports
// the class the file names and calls its deserialize); it returns null when it does not.
void set_fallback_user_function_deserializer(UserFunctionDeserializer deserializer);

// The attributes a model file stores for a user function's primitive ("op_name" and "state"
// among them), and the primitive they describe back (an ArgumentError when no deserializer
// knows its op_name).
Dictionary user_function_attributes(const FunctionImpl& f);
Function user_function_from_attributes(const std::vector<Variable>& inputs,
                                       const Dictionary& attributes, const std::string& name);

// The name model files give every user function's op ("UserFunction").
inline constexpr const char* kUserFunctionOp = "UserFunction";

}  // namespace loom
